"""Shared code of the attention course: reference implementations, checks, plots, runtime.

Modules (import the one you need, e.g. ``from course_utils import attention``):

- ``runtime``   device choice, seeding, fast-mode detection
- ``attention`` reference attention functions (ch. 01, 03)
- ``masking``   masks and the masked softmax (ch. 06, used by every reference)
- ``multihead`` split/merge heads and multi-head attention (ch. 04)
- ``positional`` sinusoidal and learned position encodings (ch. 05)
- ``checks``    helpers for visible and hidden tests
- ``grading``   pristine copies of checks and references for hidden tests
- ``plots``     heatmaps and other figures

Internal imports are relative so that ``grading.pristine()`` can load a private copy.
"""
__version__ = "0.1.0"
