"""The package layout keeps its promises (course_utils/__init__.py): tiers import only the tiers
above them, no import cycles, one module runs backward passes, every ``P.<name>`` a hidden test
uses resolves, every command-line program and every experiment has the same shape, and every
stored result's command still names a program that exists."""

from __future__ import annotations

import ast
import importlib
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "course_utils"
# tier -> the tiers it may import ("" is the top level: settings, runtime, files, results, plots, diagrams, analysis)
ALLOWED = {
    "": {""},
    "references": {"references"},
    "models": {"references", "models"},
    "training": {"", "references", "models", "training"},
    # the numbers of particular runs: mechanism (the tiers above) never imports them
    "experiments": {"", "references", "models", "training", "experiments"},
    "grading": {"", "references", "models", "training", "grading"},
    "cli": {
        "",
        "references",
        "models",
        "training",
        "grading",
        "experiments",
        "cli",
    },
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every course_utils module ``path`` imports, at any depth of the file (function-level too)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(
                    base + ([node.module] if node.module else [])
                )
            else:
                target = node.module or ""
            if not target.startswith("course_utils"):
                continue
            # ``from . import files`` imports a module, not a name
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                found.add(
                    candidate
                    if (
                        ROOT / (candidate.replace(".", "/") + ".py")
                    ).exists()
                    else target
                )
        elif isinstance(node, ast.Import):
            found |= {
                a.name
                for a in node.names
                if a.name.startswith("course_utils")
            }
    return found - {name}


def _tier(module: str) -> str:
    parts = module.split(".")
    return (
        parts[1]
        if len(parts) > 2 or (len(parts) == 2 and (PKG / parts[1]).is_dir())
        else ""
    )


MODULES = {_module_name(p): p for p in PKG.rglob("*.py")}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_tiers_import_only_the_tiers_above_them(module):
    if module == "course_utils":
        return  # the package imports grading.integrity first of all, to snapshot torch (see its docstring)
    tier = _tier(module)
    wrong = sorted(
        t
        for t in _imports(MODULES[module])
        if t != "course_utils" and _tier(t) not in ALLOWED[tier]
    )
    assert not wrong, (
        f"{module} ({tier or 'top level'}) imports {wrong}; allowed tiers: {sorted(ALLOWED[tier])}"
    )


def test_no_import_cycles():
    graph = {
        m: {
            t
            for t in _imports(p)
            if t in MODULES and not t == "course_utils"
        }
        for m, p in MODULES.items()
    }
    state: dict[str, int] = {}

    def visit(node, path):
        state[node] = 1
        for nxt in graph[node]:
            if state.get(nxt) == 1:
                raise AssertionError(
                    "import cycle: "
                    + " -> ".join(path[path.index(nxt) :] + [nxt])
                )
            if nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for m in graph:
        if m not in state:
            visit(m, [m])


def test_one_module_runs_backward_passes():
    def calls_backward(path: Path) -> bool:
        return any(
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "backward"
            for n in ast.walk(ast.parse(path.read_text()))
        )

    calling = sorted(
        _module_name(p) for p in PKG.rglob("*.py") if calls_backward(p)
    )
    assert calling == ["course_utils.training.trainer"], (
        f"{calling} call .backward(); train through training.trainer.Trainer.step instead"
    )


def _hidden_test_uses() -> set[tuple[str, str | None]]:
    uses = set()
    for nb_path in ROOT.glob("solutions/*/*.ipynb"):
        for cell in json.loads(nb_path.read_text())["cells"]:
            if cell["cell_type"] != "code":
                continue
            src = "".join(cell["source"])
            uses |= {
                (m, a or None)
                for m, a in re.findall(r"\bP\.(\w+)(?:\.(\w+))?", src)
            }
    return uses


def test_every_name_a_hidden_test_reaches_through_pristine_resolves():
    from course_utils.grading import pristine

    P = pristine()
    uses = _hidden_test_uses()
    assert len({m for m, _ in uses}) >= 10, (
        "expected the hidden tests to use many P.<module> names"
    )
    missing = []
    for module, attr in sorted(uses, key=str):
        try:
            mod = getattr(P, module)
        except AttributeError:
            missing.append(f"P.{module}")
            continue
        if attr and not hasattr(mod, attr):
            missing.append(f"P.{module}.{attr}")
    assert not missing, (
        f"hidden tests use names that no longer resolve: {missing}"
    )


@pytest.mark.parametrize(
    "name",
    sorted(
        p.stem for p in (PKG / "cli").glob("*.py") if p.stem != "__init__"
    ),
)
def test_every_program_has_the_same_shape(name, capsys):
    module = importlib.import_module(f"course_utils.cli.{name}")
    source = Path(module.__file__).read_text()
    assert (
        module.__doc__
        and f"python -m course_utils.cli.{name}" in module.__doc__
    ), "usage in the docstring"
    assert 'if __name__ == "__main__":\n    sys.exit(main())' in source
    with pytest.raises(SystemExit) as exit_:
        module.main(["--help"])
    assert exit_.value.code == 0
    assert f"python -m course_utils.cli.{name}" in capsys.readouterr().out


@pytest.mark.parametrize(
    "name",
    sorted(
        p.stem
        for p in (PKG / "experiments").glob("*.py")
        if p.stem != "__init__"
    ),
)
def test_every_experiment_runs_as_a_program_of_the_same_shape(name, capsys):
    """``python -m course_utils.experiments.<name> --help`` works, and the docstring says how to run it."""
    module = importlib.import_module(f"course_utils.experiments.{name}")
    source = Path(module.__file__).read_text()
    assert (
        module.__doc__
        and f"python -m course_utils.experiments.{name}" in module.__doc__
    ), "usage in the docstring"
    assert 'if __name__ == "__main__":\n    sys.exit(main())' in source
    with pytest.raises(SystemExit) as exit_:
        module.main(["--help"])
    assert exit_.value.code == 0
    assert (
        f"python -m course_utils.experiments.{name}"
        in capsys.readouterr().out
    )


def test_every_stored_result_names_a_program_that_runs_today():
    """A result's provenance keeps the command that made it, as it was typed then; the modules that
    moved into ``course_utils.experiments`` are found through ``experiments.MOVED``, so that the
    command can be run again (``experiments.rerun_command``)."""
    import importlib.util

    from course_utils.experiments import MOVED, rerun_command

    assert all(importlib.util.find_spec(new) for new in MOVED.values())
    missing = []
    for path in sorted((ROOT / "results").glob("*.json")):
        command = (
            json.loads(path.read_text()).get("provenance", {}).get("command")
            or ""
        )
        words = rerun_command(command).split()
        module = words[words.index("-m") + 1] if "-m" in words[:-1] else None
        if module is not None and importlib.util.find_spec(module) is None:
            missing.append(f"{path.name}: {command}")
    assert not missing, (
        f"stored results whose program no longer exists (add it to experiments.MOVED): {missing}"
    )


def test_the_package_finds_its_checkout_in_one_place():
    """A module that walks up from its own file (``parents[1]``) breaks when it moves to another
    tier or is installed: ``results.checkout_root()`` is the one place that knows."""
    walkers = sorted(
        _module_name(p)
        for p in PKG.rglob("*.py")
        if re.search(r"parents\[\d\]|parent\.parent", p.read_text())
    )
    assert walkers == [
        "course_utils.grading.pristine",
        "course_utils.results",
    ], walkers


def test_tests_are_grouped_by_tier():
    """Each test module sits in the folder of the tier it tests (tests/<tier>/), or in
    tests/benchmarks/ or tests/e2e/ (whole-product runs: grading, the book, the release)."""
    tests = ROOT / "tests"
    folders = {"top", *ALLOWED, "benchmarks", "e2e"} - {""}
    loose = sorted(p.name for p in tests.glob("test_*.py"))
    assert not loose, (
        f"{loose} sit in tests/ itself: move each to tests/<tier>/"
    )
    for path in tests.glob("*/test_*.py"):
        assert path.parent.name in folders, (
            f"{path.relative_to(ROOT)}: tests/{path.parent.name}/ is not a tier; "
            f"choose one of {sorted(folders)}"
        )
        assert (path.parent / "__init__.py").is_file(), path.parent
