"""The kernel that grades a submission: IPython with a memory limit.

``write_kernelspec(folder, mem_limit)`` writes a Jupyter kernel spec named ``python3`` into
``folder/kernels/``; with ``folder`` first on ``JUPYTER_PATH`` (the grading driver,
``course_utils.grading.autograde``, sets it for its workers only), every kernel nbgrader
starts runs this file, which limits the kernel's data segment (``RLIMIT_DATA``) and then starts
IPython exactly as ``python -m ipykernel_launcher`` does.

Why ``RLIMIT_DATA`` and not ``RLIMIT_AS``: a CUDA build of torch reserves gigabytes of address
space it never touches, so an address-space limit stops ``import torch`` itself.  The data
limit counts what a process can actually write (heap and anonymous mappings): an allocation
past it fails at once with ``MemoryError`` (or torch's "not enough memory"), the kernel
survives, and only the cell that asked for too much fails.

With ``COURSE_FORKSERVER`` in its environment (a grading worker with a fork server, see
``forkserver.py``), this file only asks that server for a kernel forked from a process that has
imported torch and the course already, and stands in for it; without it, or when the server
cannot, it starts the kernel itself as above.

This file is run by path, so it imports nothing heavy and nothing from ``course_utils``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

# bytes, set in the kernel spec's env
MEM_LIMIT_ENV = "COURSE_KERNEL_MEM_LIMIT"
# The grading kernel's hooks (course_utils/grading/cell_hooks.py: graded test cells in their own
# namespace; after a failed cell, let go of what its frames held): an option for IPKernelApp, whose exec_lines run in the notebook's namespace at start-up and leave
# no name there.
RELEASE_FRAMES = (
    "--IPKernelApp.exec_lines=__import__('course_utils.grading.cell_hooks', "
    "fromlist=['install']).install(get_ipython())"
)


def write_kernelspec(
    folder: str | os.PathLike, mem_limit: int | None
) -> Path:
    """Write ``folder/kernels/python3/kernel.json`` launching this file; return ``folder``."""
    spec_dir = Path(folder) / "kernels" / "python3"
    spec_dir.mkdir(parents=True, exist_ok=True)
    spec = {
        "argv": [
            sys.executable,
            str(Path(__file__).resolve()),
            "-f",
            "{connection_file}",
        ],
        "display_name": "Python 3 (course grading)",
        "language": "python",
        "interrupt_mode": "signal",  # the per-cell timeout interrupts with SIGINT, as usual
        "env": {MEM_LIMIT_ENV: str(int(mem_limit)) if mem_limit else ""},
        "metadata": {"debugger": False},
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec, indent=1))
    return Path(folder)


def _limit_memory() -> None:
    value = os.environ.pop(MEM_LIMIT_ENV, "")
    if not value:
        return
    import resource

    limit = int(value)
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


# What the grader knows and a submission must not: the gradebook's address and password.
PRIVATE_ENV = ("COURSE_DB_URL", "PGPASSWORD", "PGPASSFILE")


def contain() -> None:
    """In the kernel's process, before any learner code: the memory limit, and no secrets."""
    _limit_memory()
    for name in PRIVATE_ENV:
        os.environ.pop(name, None)


def main() -> None:
    # forkserver.py's two variables
    if os.environ.get("COURSE_FORKSERVER") or os.environ.get(
        "COURSE_SANDBOXED"
    ):
        import forkserver  # next to this file (sys.path[0]); standard library only

        code = forkserver.run_forked_kernel(sys.argv[1:])
        if code is not None:
            forkserver.exit_like(code)
    os.environ.pop("COURSE_FORKSERVER", None)
    contain()
    # Run as a script, sys.path[0] is this folder; python -m ipykernel_launcher would have ''
    # there, which ipykernel_launcher removes (IPython adds the working directory back).
    del sys.path[0]
    sys.argv.append(RELEASE_FRAMES)
    from ipykernel import kernelapp

    kernelapp.launch_new_instance()


if __name__ == "__main__":
    main()
