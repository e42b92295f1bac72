"""Speed benchmarks whose results the book renders (``python -m benchmarks.<name>`` from the repository root).

Each times something (kernels, steps, pipelines, decoding, grading, notebooks, the install) and
writes ``results/bench_<name>.json`` (or ``notebook_times.json``, ``install_size.json``) through
``course_utils.results.write_result``, with the command, git commit, date, hardware and library
versions; results/README.md lists them.  The chapters' experiments (``results/ch*``, and the
time-to-accuracy tables of chapter 07's CPU runs) are ``course_utils.experiments``; ``timing``
holds the step timing that several benchmarks share.
"""
