"""Seeded submissions for the end-to-end grading test: one module per chapter.

A module ``m<chapter id>.py`` defines ``CHAPTER`` (the id) and two lists of ``Mutation``s:

- ``MUTATIONS``: mistakes.  A submission carrying one must lose points in that exercise's test
  cells (grade ids ``test_<exercise>...``: all of them, or the parts that check what the
  mistake breaks) and keep every other point.  At
  least one per graded exercise; write them as the mistakes learners really make, including
  nearly-right ones.
- ``VARIANTS``: correct answers written differently from the reference (another formula,
  float64 inside, einsum, loops, other containers, prints and warnings).  A submission
  carrying one must keep full marks.

Each edits the reference solution of one exercise: ``old`` is replaced by ``new`` inside that
exercise's solution cell (``old`` must occur exactly once), or, when ``old`` is None, ``new``
replaces the whole cell.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass


@dataclass(frozen=True)
class Mutation:
    exercise: str  # grade id of the solution cell to edit
    name: str  # short label, used as the student id (letters, digits, '-' and '_')
    old: str | None
    new: str


def _collect(attr: str) -> dict[str, list[Mutation]]:
    found: dict[str, list[Mutation]] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        found[module.CHAPTER] = list(getattr(module, attr, []))
    return found


MUTATIONS: dict[str, list[Mutation]] = _collect("MUTATIONS")
VARIANTS: dict[str, list[Mutation]] = _collect("VARIANTS")
