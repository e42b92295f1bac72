"""Pristine copies of the course's checks and references, for hidden tests.

A learner's notebook runs in the same kernel as the hidden tests, so it could rebind
``course_utils.checks.assert_close`` or replace a reference with its own function.
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
    """Attribute access loads ``course_utils.<name>`` fresh: ``P.checks``, ``P.attention``."""

    def __init__(self, package: types.ModuleType):
        self._package = package

    def __getattr__(self, name: str) -> types.ModuleType:
        if name.startswith("_"):
            raise AttributeError(name)
        module = importlib.import_module(f"{self._package.__name__}.{name}")
        setattr(self, name, module)
        return module


def pristine() -> Pristine:
    """A fresh, private copy of the ``course_utils`` package (its modules load on first use).

    Fails first if the notebook has rebound a function of torch, ``Tensor`` or builtins that
    the checks rely on (``integrity.assert_untampered``).
    """
    from . import integrity

    integrity.assert_untampered()
    name = f"_course_utils_pristine_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(
        name, _PACKAGE_DIR / "__init__.py", submodule_search_locations=[str(_PACKAGE_DIR)]
    )
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package  # relative imports inside the copy resolve to the copy
    spec.loader.exec_module(package)
    return Pristine(package)
