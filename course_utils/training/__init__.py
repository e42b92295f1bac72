"""Training: data, typed configs and the one trainer, with what trains through it.

- ``data``: CIFAR-10 loading, caching, the validation split, batch loading with crop and flip;
- ``augment``: TrivialAugment per image on whole batches (the ``policy="trivial"`` of a recipe);
- ``recipes``: ``Recipe`` (one typed config per run), ``RECIPES``, checked ``--set`` overrides;
- ``trainer``: ``Trainer`` (step, epoch, evaluation, checkpoint, resume) and ``train`` (a
  CIFAR-10 run); the only module that calls ``.backward()``;
- ``toy_task`` (chapter 04), ``seq2seq_task`` (chapter 06), ``sweep`` (chapter 08): each
  trains through ``Trainer``.

May import the top level, ``references`` and ``models``; never ``grading`` or ``cli``.
"""
