"""Seeded mistakes for the end-to-end grading test: one module per chapter, at least one
mistake per graded exercise.

A module ``m<chapter id>.py`` defines ``CHAPTER`` (the id) and ``MUTATIONS``, a list of
``Mutation``s.  Each edits the reference solution of one exercise (a text replacement inside
that exercise's solution cell, which must match exactly once).  A submission carrying it
must lose exactly the points of that exercise's test cells (grade ids ``test_<exercise>...``)
and keep every other point.  Write them as the mistakes learners really make.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass


@dataclass(frozen=True)
class Mutation:
    exercise: str  # grade id of the solution cell to edit
    name: str  # short label, used as the student id
    old: str
    new: str


def _collect() -> dict[str, list[Mutation]]:
    found: dict[str, list[Mutation]] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        found[module.CHAPTER] = list(module.MUTATIONS)
    return found


MUTATIONS: dict[str, list[Mutation]] = _collect()
