"""Honest numbers: every figure the book states about a run is read from ``results/*.json``.

A result file holds ``{"provenance": {...}, "data": {...}}``.  The provenance records the
command, git commit, date, hardware (CPU model and cores, GPU if any), library versions,
dataset, the split used for model selection and the wall time, as the course specification
requires.  Chapters read results with ``read_result(name)``; scripts write them with
``write_result``.
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from . import settings
from .files import atomic_path

# pyproject.toml's data-files
INSTALLED_RESULTS = Path("share") / "attention-course" / "results"


def checkout_root() -> Path | None:
    """The course repository this package runs from (itself or an editable install of it), or
    None for an installed copy: the one place that knows where the package sits in a checkout."""
    root = Path(__file__).resolve().parent.parent
    return (
        root
        if (root / "pyproject.toml").is_file()
        and (root / "course_utils").is_dir()
        else None
    )


def find_results_dir() -> Path:
    """Where result files live, looked up without assuming how the package was installed:

    1. ``COURSE_RESULTS_DIR``, when set;
    2. ``results/`` of the course checkout this package runs from (the repository, or an
       editable install of it);
    3. the copy a wheel installs beside the package: ``<prefix>/share/attention-course/results``
       for the prefixes ``sysconfig`` knows (a virtual environment, the system, ``--user``).

    The repository holds the one copy; building a wheel copies it (pyproject.toml).
    """
    if settings.get("COURSE_RESULTS_DIR"):
        return Path(settings.get("COURSE_RESULTS_DIR"))
    checkout = checkout_root()
    if checkout is not None and (checkout / "results").is_dir():
        return checkout / "results"
    import site
    import sysconfig

    prefixes = [sysconfig.get_path("data")]
    for scheme in (f"{os.name}_user", "posix_prefix", "posix_local"):
        if scheme in sysconfig.get_scheme_names():
            prefixes.append(sysconfig.get_path("data", scheme))
    prefixes += [sys.prefix, getattr(site, "USER_BASE", None) or ""]
    for prefix in prefixes:
        if prefix and (Path(prefix) / INSTALLED_RESULTS).is_dir():
            return Path(prefix) / INSTALLED_RESULTS
    # nothing found: read_result's error names this path
    return (checkout or Path(__file__).resolve().parent.parent) / "results"


RESULTS_DIR = find_results_dir()


_CODE_PATHS = ("course_utils", "benchmarks", "pyproject.toml")


STAMP_FILE = ".code-stamp.json"  # written by code_stamp(); travels with a copy of the checkout


def code_digest(root: Path) -> str:
    """sha256 of the code a run executes under ``root`` (every file below ``_CODE_PATHS`` but
    bytecode caches, by path and content): the same bytes give the same digest on any machine."""
    import hashlib

    h = hashlib.sha256()
    for top in _CODE_PATHS:
        base = root / top
        files = (
            [base]
            if base.is_file()
            else sorted(p for p in base.rglob("*") if p.is_file())
        )
        for path in files:
            if "__pycache__" in path.parts or path.suffix == ".pyc":
                continue
            h.update(
                str(path.relative_to(root)).encode()
                + b"\0"
                + path.read_bytes()
                + b"\0"
            )
    return h.hexdigest()


def code_stamp() -> Path:
    """Write ``.code-stamp.json`` (this clean checkout's commit and ``code_digest``) at the checkout's
    root, for a copy of the tree whose git metadata may be older (a machine lent for minutes, sent
    the working tree): ``code_version`` there names the commit when the code's bytes are that
    commit's.  Raises RuntimeError when the code differs from the commit (commit first)."""
    root = checkout_root()
    version = code_version()
    if (
        root is None
        or not version
        or "+" in version
        or version.startswith("unknown")
    ):
        raise RuntimeError(
            f"code_stamp: the code is not a clean commit ({version}); commit it first"
        )
    path = root / STAMP_FILE
    path.write_text(
        json.dumps({"commit": version, "digest": code_digest(root)}) + "\n"
    )
    return path


def _stamped(root: Path) -> str | None:
    """The stamp's commit when the code here is byte for byte the code it was written for."""
    try:
        stamp = json.loads((root / STAMP_FILE).read_text())
    except (OSError, ValueError):
        return None
    return (
        stamp.get("commit")
        if stamp.get("digest") == code_digest(root)
        else None
    )


@functools.cache
def code_version() -> str:
    """The git commit of this checkout, marked ``+uncommitted-changes`` if tracked code differs.

    Code means what a run executes (``course_utils/``, ``benchmarks/``, ``pyproject.toml``): an
    edited chapter or README does not change what a training run computes.

    A copy of the checkout whose git metadata lags its files (a lent machine) names the commit in
    its ``.code-stamp.json`` when the code's bytes match it (``code_stamp``).

    Asked once per process (the first call's answer is kept): a process runs the code it loaded,
    so a command that trains several seeds names the same commit for all of them even if the
    checkout changes while it runs.
    """
    root = checkout_root()
    if root is None:
        return "unknown (an installed copy, not a git checkout)"
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            [
                "git",
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                *_CODE_PATHS,
            ],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if dirty:  # the git metadata may be older than the files (a copy of the tree): a stamp knows
            return _stamped(root) or commit + "+uncommitted-changes"
        return commit
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# The CPU's widest vector extension decides which kernels PyTorch runs and how fast: the first of
# these flags present names it (``amx_bf16`` and ``avx512_bf16`` are native bf16; ``avx2`` alone
# means float32 is the fast precision).  Two machines both called "AMD EPYC" can differ here.
VECTOR_FLAGS = ("amx_bf16", "avx512_bf16", "avx512f", "avx2")
NATIVE_BF16_FLAGS = ("amx_bf16", "avx512_bf16")


def cpu_flags() -> set[str]:
    """The CPU's feature flags (Linux ``/proc/cpuinfo``; empty elsewhere)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    line = next(
        (ln for ln in text.splitlines() if ln.startswith("flags")), ""
    )
    return set(line.partition(":")[2].split())


def cpu_vector() -> str | None:
    """The widest of ``VECTOR_FLAGS`` this CPU has (None where none is, or the flags are unknown)."""
    flags = cpu_flags()
    return next((f for f in VECTOR_FLAGS if f in flags), None)


# Variables that hold PyTorch's own kernels, oneDNN's and MKL's to a narrower instruction set than
# the CPU has: a run made under them stands for a CPU that has only that set (its arithmetic, and
# its speed where the wider units are no faster), and its record says so.
KERNEL_LIMIT_VARS = (
    "ATEN_CPU_CAPABILITY",
    "ONEDNN_MAX_CPU_ISA",
    "MKL_ENABLE_INSTRUCTIONS",
)


def cpu_kernel_limits() -> dict[str, str]:
    """The ``KERNEL_LIMIT_VARS`` set in this process's environment, with their values."""
    return {v: os.environ[v] for v in KERNEL_LIMIT_VARS if os.environ.get(v)}


def hardware() -> dict[str, Any]:
    """The machine a result was made on; ``cpu_kernel_limits`` only where some were set."""
    import torch

    info: dict[str, Any] = {
        "cpu": _cpu_model(),
        "cpu_vector": cpu_vector(),
        "cpu_cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "gpu": None,
    }
    if limits := cpu_kernel_limits():
        info["cpu_kernel_limits"] = limits
    if torch.cuda.is_available():
        info["gpu"] = {
            "name": torch.cuda.get_device_name(0),
            "count": torch.cuda.device_count(),
        }
    return info


def machine(info: dict[str, Any] | None = None) -> dict[str, Any]:
    """The part of ``hardware()`` (or of a stored copy, ``info``) that names a machine: cpu, its vector
    extension (where recorded), cores, gpu."""
    info = hardware() if info is None else info
    return {
        k: v
        for k, v in info.items()
        if k in ("cpu", "cpu_vector", "cpu_cores", "gpu")
    }


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in (
        "torch",
        "torchvision",
        "numpy",
        "timm",
        "vit_pytorch",
        "einops",
    ):
        module = sys.modules.get(name)
        if module is None:
            try:
                module = __import__(name)
            except ImportError:
                continue
        out[name] = getattr(module, "__version__", "unknown")
    from . import __version__

    out["course_utils"] = __version__
    return out


def _invocation() -> list[str]:
    """The command line as typed: ``python -m pkg.mod ...`` rather than the module's file path."""
    argv = list(getattr(sys, "orig_argv", [sys.executable, *sys.argv]))
    return [Path(argv[0]).name, *argv[1:]]


def provenance(
    *,
    dataset: str,
    split: str | None = None,
    wall_time_s: float | None = None,
    command: str | None = None,
    git_commit: str | None = None,
) -> dict[str, Any]:
    """The record a result file carries (see the module docstring)."""
    return {
        "command": command
        or " ".join(shlex.quote(a) for a in _invocation()),
        "git_commit": git_commit or code_version(),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(
            timespec="seconds"
        ),
        "hardware": hardware(),
        "versions": versions(),
        "dataset": dataset,
        "selection_split": split,
        "wall_time_s": None
        if wall_time_s is None
        else round(float(wall_time_s), 2),
    }


def write_result(
    name: str,
    data: dict[str, Any],
    *,
    dataset: str,
    split: str | None = None,
    wall_time_s: float | None = None,
    command: str | None = None,
    directory: Path | None = None,
    git_commit: str | None = None,
) -> Path:
    """Write ``results/<name>.json`` atomically (a killed writer never leaves half a file)."""
    directory = Path(directory or RESULTS_DIR)
    directory.mkdir(parents=True, exist_ok=True)
    record = {
        "provenance": provenance(
            dataset=dataset,
            split=split,
            wall_time_s=wall_time_s,
            command=command,
            git_commit=git_commit,
        ),
        "data": data,
    }
    path = directory / f"{name}.json"
    with atomic_path(path) as tmp:
        tmp.write_text(
            json.dumps(record, indent=1, sort_keys=False, default=float)
            + "\n"
        )
    return path


def commit_label(provenance: dict[str, Any]) -> str:
    """A result's commit for a printed line: 12 hex digits, and the ``+uncommitted-changes`` mark
    when the run's code differed from that commit (cutting the string would hide the mark)."""
    commit = str(provenance.get("git_commit") or "unknown")
    head, plus, rest = commit.partition("+")
    short = head[:12] if all(c in "0123456789abcdef" for c in head) else head
    return short + plus + rest


def read_result(
    name: str, *, directory: Path | None = None
) -> dict[str, Any]:
    """Load ``results/<name>.json``; a missing file raises an error that says how to make it."""
    path = Path(directory or RESULTS_DIR) / f"{name}.json"
    if not path.exists():
        raise FileNotFoundError(
            f"{path} is missing: the book reads its numbers from results/. Install the course package "
            f"from the repository (it ships results/ as data), set COURSE_RESULTS_DIR to a copy of the "
            f"repository's results/ folder, or re-run the script that writes it (results/README.md "
            f"lists the command behind each file)."
        )
    return json.loads(path.read_text())
