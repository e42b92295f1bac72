"""Isolation helpers: one mistake costs one exercise.

``reference_heads`` runs a learner's ``MultiHeadAttention`` (chapter 04) with the course's own
``split_heads``/``merge_heads``, so a mistake in those two exercises is not counted again in
the module's tests.
"""

from __future__ import annotations

import contextlib
from typing import Iterator, MutableMapping

from ..references.multihead import merge_heads, split_heads

__all__ = ["reference_heads"]

# The functions as imported here, kept under private names: ``reference_heads`` must use these
# even if a notebook rebinds ``references.multihead.split_heads``.
_SPLIT_HEADS, _MERGE_HEADS = split_heads, merge_heads


@contextlib.contextmanager
def reference_heads(
    namespace: MutableMapping[str, object],
) -> Iterator[None]:
    """Inside the ``with`` block, ``namespace['split_heads']`` and ``['merge_heads']`` are the course's.

    A learner's ``MultiHeadAttention`` may call their own ``split_heads``/``merge_heads``; a test
    of the module runs it with ``reference_heads(globals())`` so that a mistake in those two
    exercises is not counted again.  The previous bindings are restored afterwards.
    """
    saved = {
        name: namespace[name]
        for name in ("split_heads", "merge_heads")
        if name in namespace
    }
    namespace["split_heads"], namespace["merge_heads"] = (
        _SPLIT_HEADS,
        _MERGE_HEADS,
    )
    try:
        yield
    finally:
        for name in ("split_heads", "merge_heads"):
            if name in saved:
                namespace[name] = saved[name]
            else:
                namespace.pop(name, None)
