"""Training: data, typed configs and the one trainer, with what trains through it.

- ``data``: CIFAR-10 loading, caching, the validation split, seeded subsets, batch loading with crop and flip;
- ``augment``: TrivialAugment per image on whole batches (the ``policy="trivial"`` of a recipe);
- ``recipes``: ``Recipe`` (one typed config per run, its choices checked when made), ``build_model``,
  and ``apply_overrides``, the one override path; the course's named recipes are ``experiments.recipes``;
- ``trainer``: ``Trainer`` (the step: backward, clipping, optimiser, schedule; an epoch; save and
  resume) and ``train`` (a CIFAR-10 run: targets, epochs, DDP, resume); the only module that calls
  ``.backward()``;
- what ``train`` puts together: ``optim`` (optimiser, parameter groups, learning-rate schedules),
  ``precision`` (the autocast dtype, timed on the CPU for ``amp="auto"``), ``evaluation``
  (loss, accuracy and confusion over one or several views per image), ``checkpoint`` (the run's
  state in the checkpoint, the history files, the result file);
- ``toy_task`` (chapter 04), ``seq2seq_task`` (chapter 06), ``sweep`` (the machinery of chapter
  08's ablations and search, whose tables are ``experiments.sweep``): each trains through ``Trainer``;
- ``evidence``: the rules that read runs against runs (paired seeds, intervals, families).

May import the top level, ``references`` and ``models``; never ``experiments``, ``grading`` or ``cli``.
"""
