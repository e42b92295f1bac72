"""Pristine copies of the course's checks and references, for hidden tests.

A learner's notebook runs in the same kernel as the hidden tests, so it could rebind
``course_utils.grading.checks.assert_close`` or replace a reference with its own function.
``pristine()`` executes the package's files again under a private name, so the hidden
tests compare against code that nothing in the notebook has touched.  (A guard against
accidents and casual tampering, not a sandbox: see book/grading.md.)
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import sys
import types
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parents[1]  # course_utils/
_counter = itertools.count()


class Pristine:
    """Attribute access loads a module of the private copy by its name, whatever its tier:
    ``P.checks`` (grading), ``P.attention`` (references), ``P.transformer`` (models),
    ``P.seq2seq_task`` (training), ``P.results`` (the package itself)."""

    TIERS = ("references", "models", "training", "grading", "")

    def __init__(self, package: types.ModuleType):
        self._package = package

    def __getattr__(self, name: str) -> types.ModuleType:
        if name.startswith("_"):
            raise AttributeError(name)
        root = self._package.__name__
        for tier in self.TIERS:
            dotted = f"{root}.{tier}.{name}" if tier else f"{root}.{name}"
            if importlib.util.find_spec(dotted.rsplit(".", 1)[0]) is None:
                continue
            try:
                module = importlib.import_module(dotted)
            except ModuleNotFoundError as err:
                if err.name != dotted:
                    raise  # the module exists but one of its imports is missing
                continue
            setattr(self, name, module)
            return module
        raise AttributeError(
            f"course_utils has no module {name!r} in any tier ({', '.join(t or '.' for t in self.TIERS)})"
        )


def pristine() -> Pristine:
    """A fresh, private copy of the ``course_utils`` package (its modules load on first use).

    Fails first if the notebook has rebound a function of torch, ``Tensor`` or builtins that
    the checks rely on (``integrity.assert_untampered``).
    """
    from . import integrity

    integrity.assert_untampered()
    name = f"_course_utils_pristine_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(
        name,
        _PACKAGE_DIR / "__init__.py",
        submodule_search_locations=[str(_PACKAGE_DIR)],
    )
    package = importlib.util.module_from_spec(spec)
    # relative imports inside the copy resolve to the copy
    sys.modules[name] = package
    spec.loader.exec_module(package)
    return Pristine(package)
