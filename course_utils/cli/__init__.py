"""Thin command-line programs, all of one shape: ``main(argv) -> exit status``, argparse, and a
call into the tier that does the work.  ``python -m course_utils.cli.<name> --help``:

``train`` (a named CIFAR-10 recipe, ``--set`` overrides), ``data`` (fetch/cache CIFAR-10),
``collect``, ``autograde``, ``feedback``, ``export`` (grading a class), ``settings`` (the
``COURSE_*`` variables).  The chapters' experiments run as ``python -m
course_utils.experiments.<name>`` (``course_utils/experiments/__init__.py`` lists them).

May import every tier; nothing imports this package.
"""
