"""Shared code of the attention course: reference implementations, checks, plots, runtime.

Modules (import the one you need, e.g. ``from course_utils import attention``):

- ``runtime``   device choice, seeding, fast-mode detection
- ``attention`` reference attention functions (one home for each idea)
- ``checks``    helpers for visible and hidden tests
- ``grading``   pristine copies of checks and references for hidden tests
- ``plots``     heatmaps and other figures

Internal imports are relative so that ``grading.pristine()`` can load a private copy.
"""
__version__ = "0.1.0"
