"""Where and how the course's code runs: device choice, seeding, fast mode.

Fast mode exists because some cells (training, benchmarks) take minutes on a laptop
CPU.  Under ``nbgrader autograde``/``validate`` (nbgrader sets ``NBGRADER_EXECUTION``),
under CI (``CI=true``) or when a learner asks for it (``COURSE_FAST=1``), those cells
shrink their work so that a notebook runs in seconds.  ``COURSE_FAST=0`` forces full
runs even under CI.
"""

from __future__ import annotations

import os
import random

import torch

from . import settings

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def fast_mode() -> bool:
    """True when expensive cells should run their small version (see module docstring)."""
    forced = (settings.get("COURSE_FAST") or "").lower()
    if forced in _TRUE:
        return True
    if forced in _FALSE:
        return False
    if os.environ.get("NBGRADER_EXECUTION"):
        return True
    return os.environ.get("CI", "").strip().lower() in _TRUE


def being_graded() -> bool:
    """True while nbgrader is executing the notebook (autograde or validate)."""
    return bool(os.environ.get("NBGRADER_EXECUTION"))


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system reports one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def thread_share_env(threads: int) -> dict[str, str]:
    """Environment variables that keep a process started with them to ``threads`` threads, for
    processes that run side by side on one machine's cores.  Each spreading over every core would
    make OpenMP's threads wait on one another; passive waiting makes a process that asks for more
    threads anyway (a notebook's training cell) sleep, rather than spin, while it waits for a
    core another process holds."""
    return {
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "OMP_WAIT_POLICY": "PASSIVE",
    }


def pick_device(prefer: str | None = None) -> torch.device:
    """The best available device: CUDA, else Apple's MPS, else CPU.

    ``prefer`` (or the environment variable ``COURSE_DEVICE``) overrides the choice,
    e.g. ``"cpu"`` to debug on the CPU of a GPU machine.
    """
    choice = prefer or settings.get("COURSE_DEVICE")
    if choice:
        device = torch.device(choice)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError(
                f"device {choice!r} was asked for but CUDA is not available here; "
                "unset COURSE_DEVICE or pass prefer='cpu'"
            )
        return device
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def seed_everything(seed: int = 0) -> None:
    """Seed Python, NumPy (if present) and PyTorch (all devices) for reproducible cells."""
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % 2**32)
    except ImportError:  # NumPy is optional for the course's own code
        pass
    torch.manual_seed(seed)


def generator(seed: int) -> torch.Generator:
    """A CPU generator seeded with ``seed``: ``torch.randn(..., generator=generator(0))`` draws
    the same numbers whatever earlier cells drew."""
    return torch.Generator().manual_seed(seed)
