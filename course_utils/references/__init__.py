"""The graded references: the readable implementations the chapters build and test against.

One module per idea; each docstring names the chapter and the exercises it backs:
``attention`` (01-03), ``multihead`` (04), ``positional`` (05), ``masking`` and ``decoding``
(06), ``vit`` (07), ``schedules``, ``regularization``, ``diagnosis`` and ``comparison`` (08), and ``stats``
(Student's t, which ``comparison`` uses; not graded).

Pure tensor code: no files, no printing, no training.  May import torch, einops and other
modules of this package only (never ``models``, ``training``, ``grading`` or ``cli``), so a
hidden test's pristine copy of a reference depends on nothing a notebook can reach.
"""
