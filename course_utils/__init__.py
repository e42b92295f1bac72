"""Shared code of the attention course: reference implementations, checks, plots, runtime.

Modules (import the one you need, e.g. ``from course_utils import attention``):

- ``runtime``   device choice, seeding, fast-mode detection
- ``attention`` reference attention functions (ch. 01-03)
- ``masking``   masks and the masked softmax (ch. 06, used by every reference)
- ``multihead`` split/merge heads and multi-head attention (ch. 04)
- ``positional`` sinusoidal, learned, 2-D and relative/rotary position encodings (ch. 05)
- ``transformer`` encoder-decoder Transformer and decoding (ch. 06); ``seq2seq_task`` its toy task
- ``vit``, ``resnet`` the Vision Transformer and the CNN baseline (ch. 07)
- ``data``, ``train`` CIFAR-10 loading/augmentation and the trainer (ch. 07-08)
- ``schedules``, ``regularization`` learning-rate schedules, label smoothing, MixUp/CutMix (ch. 08)
- ``results``   provenance-stamped result files (every number the book states)
- ``checks``    helpers for visible and hidden tests
- ``grading``   pristine copies of checks and references for hidden tests
- ``plots``     heatmaps and other figures

Internal imports are relative so that ``grading.pristine()`` can load a private copy.
"""
__version__ = "0.1.0"

# Snapshot PyTorch's and Python's functions before any learner code runs: hidden tests check
# that nothing has rebound them since (see grading/integrity.py).
from .grading import integrity as _integrity  # noqa: E402,F401
