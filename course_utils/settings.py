"""Every environment variable the course reads, in one place.

    python -m course_utils.cli.settings      # prints the table below with the current values

| variable | default | what it does |
|---|---|---|
| ``COURSE_FAST`` | unset | ``1``: expensive cells run their small version; ``0``: full runs even under CI or grading; unset: small under ``nbgrader`` (``NBGRADER_EXECUTION``) and ``CI=true`` |
| ``COURSE_DEVICE`` | unset | ``cpu``, ``cuda``, ``mps``: the device ``runtime.pick_device`` returns instead of the best available |
| ``COURSE_CACHE`` | ``~/.cache/attention-course`` | where CIFAR-10 is downloaded and cached as tensors |
| ``COURSE_CIFAR10`` | unset | a CIFAR-10 copy to use: torchvision's format, an image folder, or a ``.tar.gz`` of one |
| ``COURSE_RESULTS_DIR`` | the checkout's ``results/``, else the installed copy | where result files are read and written |
| ``COURSE_CELL_TIMEOUT`` | ``60`` | seconds a notebook cell may run while graded |
| ``COURSE_KERNEL_STARTUP_TIMEOUT`` | ``120`` | seconds a grading kernel may take to start before the grader starts it once more |
| ``COURSE_DB_URL`` | SQLite in ``autograde/`` | the gradebook's database URL (e.g. PostgreSQL for parallel graders) |
| ``COURSE_KERNEL_MEM_LIMIT`` | set by the grader | bytes of memory a grading kernel may use (the grader sets it per kernel) |
| ``COURSE_FORKSERVER`` | set by the grader | the socket of the grading worker's fork server (warm kernels); unset: plain kernels |
| ``COURSE_SANDBOXED`` | set by the grader | ``1``: the fork server runs in the grading sandbox, and a kernel's launcher never starts a kernel outside it |
| ``COURSE_PACKAGE`` | the repository in ``_config.yml`` | what a notebook's setup cell installs when ``course_utils`` is missing (a git URL, a path, a wheel) |

Modules read these through ``get``, so each name, default and meaning lives here only.
"""

from __future__ import annotations

import dataclasses
import os


@dataclasses.dataclass(frozen=True)
class Setting:
    name: str
    default: str | None
    about: str


SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in [
        Setting(
            "COURSE_FAST",
            None,
            "1: small versions of expensive cells; 0: full runs; unset: small under nbgrader and CI",
        ),
        Setting(
            "COURSE_DEVICE",
            None,
            "device to use instead of the best available (cpu, cuda, mps)",
        ),
        Setting(
            "COURSE_CACHE",
            os.path.join("~", ".cache", "attention-course"),
            "CIFAR-10 download and tensor cache",
        ),
        Setting(
            "COURSE_CIFAR10",
            None,
            "a CIFAR-10 copy: torchvision format, image folder, or .tar.gz",
        ),
        Setting(
            "COURSE_RESULTS_DIR",
            None,
            "result files (default: the checkout's results/, else the installed copy)",
        ),
        Setting(
            "COURSE_CELL_TIMEOUT",
            "60",
            "seconds a notebook cell may run while graded",
        ),
        Setting(
            "COURSE_KERNEL_STARTUP_TIMEOUT",
            "120",
            "seconds a grading kernel may take to start (then one retry)",
        ),
        Setting(
            "COURSE_DB_URL",
            None,
            "gradebook database URL (default: SQLite in autograde/)",
        ),
        Setting(
            "COURSE_KERNEL_MEM_LIMIT",
            None,
            "bytes a grading kernel may use (set by the grader)",
        ),
        Setting(
            "COURSE_FORKSERVER",
            None,
            "socket of a grading worker's fork server (set by the grader)",
        ),
        Setting(
            "COURSE_SANDBOXED",
            None,
            "1: the fork server is sandboxed; no kernel starts outside it (set by the grader)",
        ),
        Setting(
            "COURSE_PACKAGE",
            None,
            "what a notebook's setup cell installs when course_utils is missing",
        ),
    ]
}


def get(name: str) -> str | None:
    """The variable's value, or its default; an empty value counts as unset."""
    # a KeyError here means a variable not documented above
    setting = SETTINGS[name]
    value = os.environ.get(name, "").strip()
    if value:
        return value
    return os.path.expanduser(setting.default) if setting.default else None
