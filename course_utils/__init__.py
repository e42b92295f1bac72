"""Shared code of the attention course, in tiers (each tier may import only the tiers above it):

- top level: ``settings`` (every ``COURSE_*`` variable), ``runtime`` (device, seeds, fast
  mode), ``files`` (atomic writes), ``results`` (provenance-stamped result files: every number
  the book states), ``plots`` (figures), ``diagrams`` (schematics drawn from code),
  ``analysis`` (looking inside models for figures), ``replay`` (the class edition's stored calls);
- ``references/``: the graded references, pure tensor code, one module per idea, each naming
  the chapter and exercises it backs (attention, masking, multihead, positional, decoding, vit,
  schedules, regularization, diagnosis, comparison; ``stats``: Student's t, which they use);
- ``models/``: networks the chapters build from the references (the encoder-decoder
  ``transformer``, the ``resnet`` baseline, ``torch_interop`` with PyTorch's attention layer,
  ``twins``: graded layers computed by PyTorch's own functions, for the class edition);
- ``training/``: CIFAR-10 ``data``, ``recipes`` (the ``Recipe`` type and its one override
  path), the ``trainer`` (the one optimisation loop), and what trains through it: chapter 04's
  ``toy_task``, chapter 06's ``seq2seq_task``, the ``sweep`` machinery; ``evidence``: reading
  runs against runs.  Mechanism only: sizes, seeds and budgets come in as arguments;
- ``grading/``: ``checks`` (visible and hidden tests), ``pristine`` copies, ``isolation``
  helpers, test ``doubles``, and the instructor's class-grading machinery;
- ``experiments/``: every number of a particular run, one module per ``results/ch*`` family
  (the named recipes, chapter 01's score functions ... chapter 08's budgets and ladder, the GPU
  runs), each runnable as ``python -m course_utils.experiments.<name>``; it imports no ``grading``, and
  only ``cli`` imports it;
- ``cli/``: thin command-line programs (``python -m course_utils.cli.<name> --help``).

Internal imports are relative so that ``grading.pristine()`` can load a private copy.
"""

__version__ = "0.1.0"

import sys as _sys

# Snapshot PyTorch's and Python's functions before any learner code runs: graded tests check that
# nothing has rebound them since (grading/integrity.py).  A notebook imports torch before the
# course, so the snapshot costs nothing more there; a process that has not imported torch (the
# grading driver and its workers) runs no learner code and is spared the import.  Grading kernels
# take the snapshot at start-up in any case (grading/cell_hooks.py).
if "torch" in _sys.modules:
    from .grading import integrity as _integrity  # noqa: F401
