"""Benchmarks whose results the book renders (``python -m benchmarks.<name>`` from the repository root).

Each benchmark writes ``results/<file>.json`` through ``course_utils.results.write_result``, with
the command, git commit, date, hardware and library versions; results/README.md lists them.
"""
