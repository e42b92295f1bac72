"""The class edition: what a learner in a graded class gets, made from the one source.

    python tools/class_edition.py --out DIR [--url URL] [--chapters 01_qkv_retrieval ...] [--html]
    python tools/class_edition.py --check DIR

The reader's edition (this repository, the public book) shows every solution.  The class edition
is a folder laid out like a repository a learner may clone, open in Colab or pull onto a
JupyterHub, and it holds no answer to a graded exercise:

- ``notebooks/``: the student release (``make release``), with a setup cell that installs the
  class edition's own package from ``URL`` (``course.class_edition_url`` in ``_config.yml``);
- ``course_utils/``: the learner's package: the modules the notebooks import, and what those
  import, with ``references/`` replaced by stand-ins that replay the course's functions on the
  arguments the notebooks give them (``course_utils/replay.py``; the stored calls are
  ``course_utils/fixtures/*.pt``, recorded here by running each chapter's student notebook with
  the solutions pasted in, in fast and in full mode);
- ``results/``: the stored results the chapters read;
- ``book/``, ``_config.yml``, ``_toc.yml``: the book without solutions (``--html`` builds it into
  ``_build/html``), whose chapter pages link to the class edition's notebooks.

``--check`` proves the folder holds no answer: no definition anywhere (Python files, notebooks,
Markdown code blocks) equal, up to names and formatting, to a graded reference or to a solution
the reader's edition shows (``grading.copies``, every size of definition); no nbgrader solution
or hidden-test marker; no stored output in a notebook but the setup cell's; no output on a book
page that a solution made.  The build runs the check and fails on any finding.

A graded *class* cannot be replayed (a layer is trained, or its weights are copied): where
cells that are not exercises build one, the class edition builds its twin instead, made of
PyTorch's own computation (``TWINS``, ``course_utils/models/twins.py``): chapter 04's multi-head
attention and chapter 07's ViT and its parts.  A graded class without a twin cannot be built in
the class edition; ``EDITION_CHAPTERS`` lists the chapters it holds (all of them).
"""

from __future__ import annotations

import argparse
import ast
import copy
import functools
import hashlib
import inspect
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from a checkout

from course_utils.grading import copies  # noqa: E402
from course_utils.grading.markers import MARKERS, strip_solution_markers  # noqa: E402
from course_utils.replay import pack  # noqa: E402
from course_utils.runtime import thread_share_env, usable_cores  # noqa: E402

# Chapters whose every non-graded cell and visible test runs on replayed calls (see the docstring).
EDITION_CHAPTERS = (
    "01_qkv_retrieval",
    "02_self_attention",
    "03_scaling",
    "04_multi_head",
    "05_positional_encoding",
    "06_masking",
    "07_vit_cifar10",
    "08_tuning",
)
REFERENCES = "course_utils.references"
# Graded classes the class edition builds with PyTorch's own computation instead (same constructor,
# parameters and returns; see the module each names): {(references module, class): module}.
TWINS = {
    ("multihead", "MultiHeadAttention"): "course_utils.models.twins",
    ("vit", "PatchEmbedding"): "course_utils.models.twins",
    ("vit", "EncoderBlock"): "course_utils.models.twins",
    ("vit", "ViT"): "course_utils.models.twins",
}
SETUP_TAG = "course-setup"


# =========================================================================== recording
# Runs inside a notebook's kernel: start_recording() in a first cell, save_recording() in a last.

_calls: dict[str, dict[str, list]] = {}
_depth = 0
_unsupported: set[str] = set()


def _wrap(module: str, name: str, fn):
    import functools

    import torch

    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def recorded(*args, **kwargs):
        global _depth
        if _depth:  # a reference calling another: only the outermost call is replayed
            return fn(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        try:
            arguments = pack(dict(bound.arguments))
        except TypeError as e:
            _unsupported.add(f"{module}.{name}: {e}")
            arguments = None
        rng_before = torch.get_rng_state()
        _depth += 1
        try:
            result = fn(*args, **kwargs)
        finally:
            _depth -= 1
        if arguments is not None:
            try:
                call = {"arguments": arguments, "result": pack(result)}
            except TypeError as e:
                _unsupported.add(f"{module}.{name}: {e}")
            else:
                rng_after = torch.get_rng_state()
                if not torch.equal(rng_before, rng_after):
                    call["rng_before"], call["rng_after"] = (
                        rng_before,
                        rng_after,
                    )
                _calls.setdefault(module, {}).setdefault(name, []).append(
                    call
                )
        return result

    return recorded


def _reference_modules():
    import importlib
    import pkgutil

    package = importlib.import_module(REFERENCES)
    return {
        info.name: importlib.import_module(f"{REFERENCES}.{info.name}")
        for info in pkgutil.iter_modules(package.__path__)
    }


def start_recording() -> None:
    """Wrap every public function of ``course_utils.references`` (before anything else imports
    them) so that each outermost call is stored, and put the twins in place of their classes (the
    calls recorded are those the class edition makes); a class it does not hold is noted when built."""
    modules = _reference_modules()
    wrapped = {}
    for short, module in modules.items():
        _, replayed, missing = stand_in_module(short)
        for name, obj in list(vars(module).items()):
            if (
                name.startswith("_")
                or getattr(obj, "__module__", None) != module.__name__
            ):
                continue
            # what the class edition keeps as source runs
            if inspect.isfunction(obj) and name in replayed:
                wrapped[id(obj)] = _wrap(short, name, obj)
            # a class the edition lacks
            elif inspect.isclass(obj) and name in missing:
                original_init = obj.__init__

                def noted(
                    self,
                    *args,
                    __init=original_init,
                    __name=f"{short}.{name}",
                    **kwargs,
                ):
                    _unsupported.add(
                        f"{__name}: a class of the course's was built"
                    )
                    __init(self, *args, **kwargs)

                obj.__init__ = noted
    import importlib

    for (
        (short, name),
        where,
    ) in TWINS.items():  # record what the class edition computes: the twins
        wrapped[id(getattr(modules[short], name))] = getattr(
            importlib.import_module(where), name
        )
    # re-exports too: ``from .masking import masked_softmax``
    for module in modules.values():
        for name, obj in list(vars(module).items()):
            if id(obj) in wrapped:
                setattr(module, name, wrapped[id(obj)])
    _record_pristine_copies()


def _record_pristine_copies() -> None:
    """Visible tests may compare with ``pristine()``'s private copy of the package (its
    references too): wrap each references module of a copy when it loads, as the originals are."""
    import importlib

    # the module, not the function
    pristine_module = importlib.import_module(
        "course_utils.grading.pristine"
    )

    original = pristine_module.Pristine.__getattr__

    def loaded(self, name, __original=original):
        module = __original(self, name)
        parts = module.__name__.split(".")
        if (
            len(parts) == 3
            and parts[1] == "references"
            and not getattr(module, "_recorded", False)
        ):
            for attr, obj in list(vars(module).items()):
                home = getattr(obj, "__module__", "") or ""
                if inspect.isfunction(obj) and home.startswith(
                    f"{parts[0]}.references."
                ):
                    short = home.rsplit(".", 1)[1]
                    if attr in stand_in_module(short)[1]:
                        setattr(module, attr, _wrap(short, attr, obj))
            module._recorded = True
        return module

    pristine_module.Pristine.__getattr__ = loaded


def save_recording(path: str) -> None:
    import torch

    torch.save({"calls": _calls, "unsupported": sorted(_unsupported)}, path)


def _fingerprint_call(call: dict) -> str:
    """A hash of a stored call's arguments and random state (equal calls are stored once)."""
    import torch

    digest = hashlib.sha256()

    def feed(value):
        if isinstance(value, torch.Tensor):
            digest.update(f"T{tuple(value.shape)}{value.dtype}".encode())
            digest.update(
                value.contiguous().view(torch.uint8).numpy().tobytes()
                if value.numel()
                else b""
            )
        elif isinstance(value, dict):
            digest.update(b"{")
            for k in sorted(value, key=str):
                digest.update(str(k).encode())
                feed(value[k])
            digest.update(b"}")
        elif isinstance(value, (list, tuple)):
            digest.update(b"[")
            for v in value:
                feed(v)
            digest.update(b"]")
        else:
            digest.update(repr(value).encode())

    feed(call["arguments"])
    feed(call.get("rng_before"))
    return digest.hexdigest()


# The run that takes longest by far (chapter 07 in full mode trains the learner's ViT): started first,
# so that the runs in parallel end at about the same time.
_LONG_RUNS = ("07_vit_cifar10", "0")


def _record_one(
    cid: str, mode: str, work: Path, timeout: int, threads: int | None
) -> Path:
    """Run ``cid``'s student notebook with the solutions pasted in, in fast (``mode`` "1") or full
    ("0") mode, with the recorder on, on ``threads`` threads (None: PyTorch's default); returns
    the file the calls were saved to."""
    from nbclient import NotebookClient

    nb = pasted_solutions(cid)
    out = work / f"{cid}-fast{mode}.pt"
    nb.cells.insert(
        0,
        nbformat.v4.new_code_cell(
            f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
            "from tools.class_edition import start_recording; start_recording()"
        ),
    )
    nb.cells.append(
        nbformat.v4.new_code_cell(
            f"from tools.class_edition import save_recording; save_recording({str(out)!r})"
        )
    )
    run_dir = work / f"{cid}-fast{mode}"
    shutil.copytree(ROOT / "notebooks" / cid, run_dir, dirs_exist_ok=True)
    # The kernel gets its own environment (not this process's, which the other runs share).
    env = {**os.environ, "COURSE_FAST": mode}
    if threads:
        env.update(thread_share_env(threads))
    NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(run_dir)}},
    ).execute(env=env)
    return out


def record(
    chapters,
    work: Path,
    *,
    modes=("1", "0"),
    timeout: int = 1800,
    jobs: int | None = None,
) -> tuple[dict, list[str]]:
    """Run each chapter's student notebook with the solutions pasted in (fast and full mode),
    ``jobs`` kernels at a time (default: one per core), and return the outermost calls of the
    course's references, merged: {module: {name: [call]}}.

    Kernels that run side by side share the cores between them (``runtime.thread_share_env``).
    The calls are matched up to a tolerance when replayed (``replay.RTOL``), which another thread
    count's last bits stay within."""
    from concurrent.futures import ThreadPoolExecutor

    import torch

    runs = [(cid, mode) for cid in chapters for mode in modes]
    cores = usable_cores()
    jobs = max(1, min(jobs or cores, len(runs)))
    threads = max(1, cores // jobs) if jobs > 1 else None
    # longest first; the merge below follows the chapters' order whatever order the runs end in
    order = sorted(runs, key=lambda run: run != _LONG_RUNS)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {
            run: pool.submit(_record_one, *run, work, timeout, threads)
            for run in order
        }
        saved = {run: future.result() for run, future in futures.items()}
    merged: dict[str, dict[str, dict[str, dict]]] = {}
    unsupported: list[str] = []
    for cid, mode in runs:
        stored = torch.load(saved[cid, mode], weights_only=True)
        unsupported += [f"{cid}: {u}" for u in stored["unsupported"]]
        for module, functions in stored["calls"].items():
            for name, calls in functions.items():
                bucket = merged.setdefault(module, {}).setdefault(name, {})
                for call in calls:
                    bucket.setdefault(_fingerprint_call(call), call)
    calls = {
        m: {n: list(c.values()) for n, c in fs.items()}
        for m, fs in merged.items()
    }
    return _share_models(calls), sorted(set(unsupported))


def _share_models(value, seen: dict | None = None):
    """``value`` with every stored model (``replay.pack`` of an nn.Module) that equals an earlier one
    replaced by that one: a decoder given the same trained model in many calls stores it once
    (``torch.save`` writes an object it meets again as a reference)."""
    seen = {} if seen is None else seen
    if isinstance(value, dict) and "__module__" in value:
        key = (
            f"{value['__module__']} {value['training']} "
            + _fingerprint_call({"arguments": value["state"]})
        )
        return seen.setdefault(key, value)
    if isinstance(value, dict):
        return {k: _share_models(v, seen) for k, v in value.items()}
    if isinstance(value, list):
        return [_share_models(v, seen) for v in value]
    return value


def pasted_solutions(cid: str) -> nbformat.NotebookNode:
    """The student release of ``cid`` with every answer cell holding the course's solution."""
    nb = nbformat.read(
        ROOT / "notebooks" / cid / f"{cid}.ipynb", as_version=4
    )
    source = nbformat.read(
        ROOT / "solutions" / cid / f"{cid}.ipynb", as_version=4
    )
    answers = {
        c.metadata["nbgrader"]["grade_id"]: strip_solution_markers(c.source)
        for c in source.cells
        if c.metadata.get("nbgrader", {}).get("solution")
    }
    for cell in nb.cells:
        grader = cell.metadata.get("nbgrader", {})
        if grader.get("solution"):
            cell.source = answers[grader["grade_id"]]
    return nb


# =========================================================================== the learner's package


def _module_file(module: str) -> Path | None:
    base = ROOT / Path(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imports_of(module: str, source: str) -> set[str]:
    """The course_utils modules ``source`` (module ``module``, or a notebook cell when it is
    empty) imports, at any depth (imports inside functions too)."""
    try:
        tree = ast.parse(
            "\n".join(
                "" if ln.lstrip().startswith(("%", "!")) else ln
                for ln in source.splitlines()
            )
        )
    except SyntaxError:
        return set()
    path = _module_file(module) if module else None
    package = (
        module
        if path and path.name == "__init__.py"
        else module.rpartition(".")[0]
    )
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[
                    : len(package.split(".")) - node.level + 1
                ]
                target = ".".join(
                    base + ([node.module] if node.module else [])
                )
            else:
                target = node.module or ""
            if target.split(".")[0] != "course_utils":
                continue
            found.add(target)
            found |= {
                f"{target}.{a.name}"
                for a in node.names
                if _module_file(f"{target}.{a.name}")
            }
        elif isinstance(node, ast.Import):
            found |= {
                a.name
                for a in node.names
                if a.name.split(".")[0] == "course_utils"
            }
    # a module's parents are imported with it
    return {
        ".".join(m.split(".")[:i])
        for m in found
        for i in range(1, m.count(".") + 2)
    }


def package_closure(chapters) -> set[str]:
    """The course_utils modules the chapters' notebooks import, and everything those import."""
    todo = {"course_utils", "course_utils.replay"}
    for cid in chapters:
        nb = nbformat.read(
            ROOT / "notebooks" / cid / f"{cid}.ipynb", as_version=4
        )
        for cell in nb.cells:
            if cell.cell_type == "code":
                todo |= _imports_of("", cell.source)
    done: set[str] = set()
    while todo:
        module = todo.pop()
        if module in done or _module_file(module) is None:
            continue
        done.add(module)
        imported = _imports_of(
            module, _module_file(module).read_text(encoding="utf-8")
        )
        # a stand-in imports the sibling stand-ins it re-exports, and twins
        if module.startswith(REFERENCES + "."):
            short = module.rsplit(".", 1)[1]
            imported = {
                m for m in imported if m.startswith(REFERENCES + ".")
            }
            imported |= {
                twin for (where, _), twin in TWINS.items() if where == short
            }
            imported |= {
                ".".join(t.split(".")[:i])
                for t in list(imported)
                for i in range(2, t.count(".") + 1)
            }
        todo |= imported - done
    return done


@functools.lru_cache(maxsize=None)
def graded_names() -> frozenset[str]:
    """Every graded function's and class's name, over all chapters."""
    return frozenset(
        name
        for path in (ROOT / "solutions").glob("*/*.ipynb")
        for name in copies.graded_names(nbformat.read(path, as_version=4))
    )


@functools.lru_cache(maxsize=None)
def stand_in_module(short: str) -> tuple[str, set[str], set[str]]:
    """The class edition's ``course_utils/references/<short>.py``, the names in it that replay, and
    the classes it does not hold.

    A graded class becomes its twin (``TWINS``) or a class that says it is not here; a graded
    function, and any other definition that uses another of the module's definitions, a stand-in
    with the original's signature that replays stored calls; a definition that is not graded and
    needs nothing of the module's is kept as it is (it answers no exercise, and ``check`` proves it).
    """
    path = ROOT / "course_utils" / "references" / f"{short}.py"
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    doc = (ast.get_docstring(tree) or "").split("\n\n")[0]
    lines = [
        f'"""{doc}',
        "",
        "Class edition: the course's graded functions here replay the calls this course's notebooks",
        "make (course_utils/replay.py); the reader's edition holds their source.",
        '"""',
        "from __future__ import annotations",
        "",
        "import math  # noqa: F401",
        "",
        "import torch  # noqa: F401",
        "import torch.nn.functional as F  # noqa: F401",
        "from torch import Tensor, nn  # noqa: F401",
        "",
        "from ..replay import replay",
        "",
    ]
    # what a kept definition may not use: the module's other names
    own: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            own.add(node.name)
        elif isinstance(node, ast.ImportFrom) and node.level == 1:
            own |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Assign):
            own |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    for node in tree.body:
        if (
            isinstance(node, ast.ImportFrom)
            and node.level == 1
            and node.module
        ):
            names = [a for a in node.names if not a.name.startswith("_")]
            if names:
                lines.append(
                    f"from .{node.module} import {', '.join(a.name for a in names)}  # noqa: F401"
                )
        elif isinstance(node, ast.Assign) and all(
            isinstance(t, ast.Name) and t.id.isupper() for t in node.targets
        ):
            try:
                ast.literal_eval(node.value)
            except ValueError:
                continue
            lines.append(ast.unparse(node))
            own -= {t.id for t in node.targets}
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__"
            for t in node.targets
        ):
            lines.append(ast.unparse(node))
    defs = {
        n.name: n
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.ClassDef))
    }
    uses_of = {
        name: {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        - {name}
        for name, node in defs.items()
    }
    # what a graded definition uses of the module is part of its answer: never kept as source (a
    # twin is PyTorch's computation: what the course's class uses is not needed by it)
    part_of_answer, todo = (
        set(),
        [
            name
            for name in defs
            if name in graded_names() and (short, name) not in TWINS
        ],
    )
    while todo:
        for used in uses_of[todo.pop()] & set(defs):
            if used not in part_of_answer:
                part_of_answer.add(used)
                todo.append(used)
    # kept as source: not graded, not part of an answer, and using only what is kept too
    keep = {
        name for name in defs if name not in graded_names() | part_of_answer
    }
    while True:
        dropped = {name for name in keep if uses_of[name] & own - keep}
        if not dropped:
            break
        keep -= dropped
    replayed: set[str] = set()
    missing: set[str] = set()
    for node in tree.body:
        if (
            isinstance(node, (ast.FunctionDef, ast.ClassDef))
            and node.name.startswith("_")
            and node.name in keep
        ):
            lines += ["", "", ast.get_source_segment(source, node)]
        if not isinstance(
            node, (ast.FunctionDef, ast.ClassDef)
        ) or node.name.startswith("_"):
            continue
        first = (
            (ast.get_docstring(node) or "")
            .strip()
            .split("\n")[0]
            .replace('"""', "'''")
        )
        if isinstance(node, ast.ClassDef) and (short, node.name) in TWINS:
            twin = TWINS[short, node.name].removeprefix("course_utils.")
            lines += [
                "",
                "",
                f"from ..{twin} import {node.name}  # noqa: E402,F401  PyTorch's own computation",
            ]
        elif node.name in keep:
            lines += ["", "", ast.get_source_segment(source, node)]
        elif isinstance(node, ast.ClassDef):
            missing.add(node.name)
            lines += [
                "",
                "",
                f"class {node.name}(nn.Module):",
                f'    """{first}"""',
                "",
                "    def __init__(self, *args, **kwargs):",
                "        raise NotImplementedError(",
                f'            "the class edition does not hold the course\'s {node.name}: use your own, "',
                '            "or the reader\'s edition (see Setting up)")',
            ]
        else:
            args = copy.deepcopy(node.args)
            if args.vararg:
                raise SystemExit(
                    f"{short}.{node.name}: *args cannot be replayed by name"
                )
            for a in (
                args.posonlyargs
                + args.args
                + args.kwonlyargs
                + ([args.kwarg] if args.kwarg else [])
            ):
                a.annotation = None
            names = [
                a.arg for a in args.posonlyargs + args.args + args.kwonlyargs
            ]
            call = ", ".join(
                [f'"{short}.{node.name}"']
                + [f"{n}={n}" for n in names]
                + ([f"**{args.kwarg.arg}"] if args.kwarg else [])
            )
            lines += [
                "",
                "",
                f"def {node.name}({ast.unparse(args)}):",
                f'    """{first}"""',
                f"    return replay({call})",
            ]
            replayed.add(node.name)
    return "\n".join(lines) + "\n", replayed, missing


PYPROJECT = """\
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "course-utils"
version = "{version}"
description = "Attention, from query-key-value to a Vision Transformer: the class edition's package"
requires-python = ">=3.10"
dependencies = {dependencies}

[tool.setuptools.packages.find]
include = ["course_utils*"]

[tool.setuptools.package-data]
"course_utils" = ["fixtures/*.pt"]

[tool.setuptools.data-files]
"share/attention-course/results" = ["results/*.json", "results/*.pth", "results/README.md"]
"""


def write_package(out: Path, chapters, calls: dict) -> list[str]:
    """The learner's course_utils (and pyproject.toml, results/) under ``out``."""
    modules = package_closure(chapters)
    for module in sorted(modules):
        source = _module_file(module)
        target = out / source.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        if module.startswith(REFERENCES + "."):
            short = module.rsplit(".", 1)[1]
            text, replayed, _ = stand_in_module(short)
            target.write_text(text, encoding="utf-8")
            calls = {
                **calls,
                short: {
                    n: c
                    for n, c in calls.get(short, {}).items()
                    if n in replayed
                },
            }
        elif module == REFERENCES:
            target.write_text(
                '"""The course\'s references, as stand-ins that replay stored calls (class edition)."""\n'
            )
        else:
            shutil.copy2(source, target)
    import torch

    fixtures = out / "course_utils" / "fixtures"
    fixtures.mkdir(parents=True, exist_ok=True)
    for module, functions in sorted(calls.items()):
        if functions:
            torch.save(functions, fixtures / f"{module}.pt")
    project = _toml_dependencies()
    (out / "pyproject.toml").write_text(
        PYPROJECT.format(**project), encoding="utf-8"
    )
    (out / "results").mkdir(exist_ok=True)
    for pattern in ("*.json", "*.pth", "README.md"):
        for path in (ROOT / "results").glob(pattern):
            shutil.copy2(path, out / "results" / path.name)
    return sorted(modules)


def _toml_dependencies() -> dict:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {
        "version": project["version"],
        "dependencies": json.dumps(project["dependencies"]),
    }


# =========================================================================== notebooks and book


def setup_source(url: str) -> str:
    from tools.setup_cell import cell_source

    return cell_source({"course": {"repository_url": url, "branch": "main"}})


def write_notebooks(out: Path, chapters, url: str) -> None:
    for cid in chapters:
        nb = nbformat.read(
            ROOT / "notebooks" / cid / f"{cid}.ipynb", as_version=4
        )
        for cell in nb.cells:
            if SETUP_TAG in cell.metadata.get("tags", []):
                cell.source = setup_source(url)
        folder = out / "notebooks" / cid
        shutil.copytree(
            ROOT / "notebooks" / cid,
            folder,
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns(
                ".ipynb_checkpoints", "__pycache__"
            ),
        )
        nbformat.write(nb, folder / f"{cid}.ipynb")


def write_book(out: Path, chapters, url: str, hub: str) -> None:
    from tools.book_pages import course_links, page_from_solution

    shutil.copytree(
        ROOT / "book",
        out / "book",
        ignore=shutil.ignore_patterns("chapters", "__pycache__"),
    )
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config.setdefault("course", {}).update(
        repository_url=url,
        jupyterhub_url=hub,
        branch="main",
        class_edition_url=url,
    )
    (out / "_config.yml").write_text(
        "# The class edition's book (tools/class_edition.py): no solutions.\n"
        + yaml.safe_dump(config, sort_keys=False)
    )
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    for part in toc["parts"]:
        part["chapters"] = [
            c
            for c in part["chapters"]
            if not c["file"].startswith("book/chapters/")
            or c["file"].rsplit("/", 1)[1] in chapters
        ]
    (out / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False))
    pages = out / "book" / "chapters"
    pages.mkdir(parents=True, exist_ok=True)
    for cid in chapters:
        nb = nbformat.read(
            ROOT / "solutions" / cid / f"{cid}.ipynb", as_version=4
        )
        nbformat.write(
            page_from_solution(
                nb, solutions=False, header=course_links(cid, config)
            ),
            pages / f"{cid}.ipynb",
        )


README = """\
# Attention, from queries and keys to a Vision Transformer: the class edition

The edition for a graded class: the exercise notebooks (`notebooks/`), the package they need
(`course_utils/`) and the book without solutions (`book/`). It holds no solution and no hidden
test; where a notebook compares your answer with the course's, it compares with stored outputs.

- **Open a chapter**: from the book's chapter page (download, Colab, JupyterHub), or
  `pip install .` here and `jupyter lab notebooks`.
- **Submit** what your instructor asks for; they grade it against the hidden tests.
- **Working alone, not in a graded class?** The reader's edition (the public book with its
  solutions) is the one to use.

Chapters in this edition: {chapters}.
"""


# =========================================================================== the check


def all_answers() -> dict[str, set[str]]:
    """{graded name: fingerprints} of every chapter's answers (solutions and references), at any size."""
    answers: dict[str, set[str]] = {}
    for path in sorted((ROOT / "solutions").glob("*/*.ipynb")):
        for name, fps in copies.course_answers(
            nbformat.read(path, as_version=4),
            ROOT / "course_utils" / "references",
            min_nodes=1,
        ).items():
            answers.setdefault(name, set()).update(fps)
    return answers


def check(out: Path) -> list[str]:
    """Every way ``out`` could give away an answer (empty when it gives none)."""
    problems = copies.answers_in(out, all_answers(), min_nodes=1)
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        if path.suffix in {
            ".py",
            ".ipynb",
            ".md",
            ".txt",
            ".yml",
            ".toml",
            ".json",
            ".cfg",
            ".html",
            ".js",
        }:
            text = path.read_text(encoding="utf-8", errors="replace")
            for marker in MARKERS:
                if marker in text:
                    problems.append(
                        f"{path.relative_to(out)}: holds the nbgrader marker {marker!r}"
                    )
    for path in sorted((out / "notebooks").rglob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for i, cell in enumerate(nb.cells, 1):
            if (
                cell.cell_type == "code"
                and cell.outputs
                and SETUP_TAG not in cell.metadata.get("tags", [])
            ):
                problems.append(
                    f"{path.relative_to(out)}: cell {i} carries stored outputs"
                )
    from tools.book_pages import answer_outputs

    for cid in [p.stem for p in (out / "book" / "chapters").glob("*.ipynb")]:
        source = nbformat.read(
            ROOT / "solutions" / cid / f"{cid}.ipynb", as_version=4
        )
        page = nbformat.read(
            out / "book" / "chapters" / f"{cid}.ipynb", as_version=4
        )
        made = {
            strip_solution_markers(source.cells[i].source)
            for i in answer_outputs(source)
        }
        outputs = {
            json.dumps(o, sort_keys=True)
            for i in answer_outputs(source)
            for o in source.cells[i].outputs
        }
        for i, cell in enumerate(page.cells, 1):
            if (
                cell.cell_type == "code"
                and cell.outputs
                and (
                    cell.source in made
                    or any(
                        json.dumps(o, sort_keys=True) in outputs
                        for o in cell.outputs
                    )
                )
            ):
                problems.append(
                    f"book/chapters/{cid}.ipynb: cell {i} shows an output a solution made"
                )
    return problems


# =========================================================================== the command


def build(
    out: Path,
    *,
    chapters=EDITION_CHAPTERS,
    url: str = "",
    hub: str = "",
    html: bool = False,
    work: Path | None = None,
    log=print,
) -> Path:
    """Make the class edition in ``out`` (emptied first) and check it; returns ``out``."""
    unknown = set(chapters) - set(EDITION_CHAPTERS)
    if unknown:
        raise SystemExit(
            f"not in the class edition yet: {', '.join(sorted(unknown))} (their notebooks train or "
            f"build a graded class of the course's; the chapters it holds: {', '.join(EDITION_CHAPTERS)})"
        )
    if out.exists():
        if any(out.iterdir()) and not (out / "CLASS_EDITION").exists():
            raise SystemExit(
                f"{out} is not empty and is not a class edition: give an empty or new folder"
            )
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / "CLASS_EDITION").write_text(
        "made by tools/class_edition.py; rebuilt from scratch on every build\n"
    )
    with tempfile.TemporaryDirectory(prefix="class-edition-") as tmp:
        log(
            f"recording the course's calls: {', '.join(chapters)} (fast and full mode)"
        )
        calls, unsupported = record(chapters, Path(work or tmp))
    if unsupported:
        raise SystemExit(
            "the class edition cannot replay:\n  " + "\n  ".join(unsupported)
        )
    modules = write_package(out, chapters, calls)
    log(
        f"package: {len(modules)} modules, stored calls of {sum(len(f) for f in calls.values())} functions"
    )
    write_notebooks(out, chapters, url)
    write_book(out, chapters, url, hub)
    (out / "README.md").write_text(
        README.format(chapters=", ".join(chapters)), encoding="utf-8"
    )
    problems = check(out)
    if problems:
        raise SystemExit(
            "the class edition gives answers away:\n  "
            + "\n  ".join(problems)
        )
    if html:
        subprocess.run(
            [
                str(Path(sys.executable).parent / "jupyter-book"),
                "build",
                str(out),
                "-W",
                "--keep-going",
                "--all",
            ],
            check=True,
            cwd=out,
        )
    log(f"class edition written to {out} and checked: no answer in it")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, help="the folder to write (emptied first)"
    )
    parser.add_argument(
        "--check",
        type=Path,
        metavar="DIR",
        help="only check an existing edition",
    )
    parser.add_argument(
        "--url",
        default=None,
        help="where the class edition will live (default: course.class_edition_url in _config.yml)",
    )
    parser.add_argument(
        "--chapters", nargs="+", default=list(EDITION_CHAPTERS)
    )
    parser.add_argument(
        "--html",
        action="store_true",
        help="also build its book into _build/html",
    )
    args = parser.parse_args(argv)
    if args.check:
        problems = check(args.check)
        print("\n".join(problems) or f"{args.check}: no answer found")
        return 1 if problems else 0
    if not args.out:
        parser.error("give --out DIR (or --check DIR)")
    course = (
        yaml.safe_load((ROOT / "_config.yml").read_text()).get("course")
        or {}
    )
    url = (
        course.get("class_edition_url") or ""
        if args.url is None
        else args.url
    )
    build(
        args.out.resolve(),
        chapters=args.chapters,
        url=url,
        hub=course.get("jupyterhub_url") or "",
        html=args.html,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
