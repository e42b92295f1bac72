"""Thin command-line programs, all of one shape: ``main(argv) -> exit status``, argparse, and a
call into the tier that does the work.  ``python -m course_utils.cli.<name> --help``:

``train`` (a CIFAR-10 recipe), ``sweep`` (chapter 08's ablations, range test, search),
``seq2seq`` (chapter 06's run), ``data`` (fetch/cache CIFAR-10), ``collect``, ``autograde``,
``feedback``, ``export`` (grading a class), ``settings`` (the ``COURSE_*`` variables).

May import every tier; nothing imports this package.
"""
