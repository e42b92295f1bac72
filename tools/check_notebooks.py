"""The notebook check: every solution notebook runs, and every output that nbval compares
comes out as stored.

    python tools/check_notebooks.py                  with this machine's kernels and threads
    python tools/check_notebooks.py --other-kernels  with kernels another CPU would use
    python tools/check_notebooks.py --perturb        every kernel's result moved a few units in the
                                                     last place (an author's audit: tools/perturb_kernels.py)
    python tools/check_notebooks.py [--other-kernels] PATH ...   only these notebooks

The stored outputs must not depend on the CPU (x86-64 with or without AVX-512 or native bf16,
ARM), nor on the thread count.  PyTorch picks its kernels when it starts; ``--other-kernels``
makes it pick others on this machine, so that a printed number which a laptop's CPU would
print differently fails here:

* ATen's vectorised kernels (softmax, exp, random normals, reductions...): the portable
  ``default`` ones, through ``ATEN_CPU_CAPABILITY`` (on a CPU whose own choice is already
  ``default``, that choice stays and the other two changes still apply);
* oneDNN's convolutions and matrix products: limited to SSE4.1 (``ONEDNN_MAX_CPU_ISA``, x86 only);
* one thread instead of all (``OMP_NUM_THREADS``), which changes how reductions are split;
* fast mode (``COURSE_FAST=1``), as CI runs the notebooks.

Outputs that cannot be compared (timings, and training runs, whose fast mode trains less) are
listed with their reasons in tests/stored_outputs.py, the one place for them.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

NBVAL = [
    "-m",
    "pytest",
    "--nbval",
    "--nbval-current-env",
    "--nbval-cell-timeout=600",
    "-p",
    "tests.stored_outputs",
    "-q",
    "--rootdir",
    str(ROOT),
    "-c",
    str(ROOT / "pyproject.toml"),
]


def own_capability(env: dict | None = None) -> str:
    """The ATen kernel set PyTorch picks under ``env`` ('AVX2', 'AVX512', 'DEFAULT', ...)."""
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import torch; print(torch.backends.cpu.get_cpu_capability())",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip().splitlines()[-1]


def other_kernels_env(base: dict) -> tuple[dict, str]:
    """``base`` with the variables that make PyTorch use other kernels, and a line that says which."""
    env = dict(
        base, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", COURSE_FAST="1"
    )
    env.pop("ATEN_CPU_CAPABILITY", None)
    own = own_capability(env)
    said = []
    if own.upper() != "DEFAULT":
        env["ATEN_CPU_CAPABILITY"] = "default"
        said.append(f"ATen's default kernels instead of this CPU's {own}")
    else:
        said.append("ATen's default kernels (this CPU's own choice already)")
    if platform.machine().lower() in ("x86_64", "amd64"):
        env["ONEDNN_MAX_CPU_ISA"] = "SSE41"
        said.append("oneDNN limited to SSE4.1")
    said.append("1 thread, fast mode")
    used = own_capability(env)
    if own.upper() != "DEFAULT" and used.upper() != "DEFAULT":
        raise SystemExit(
            f"check_notebooks: ATEN_CPU_CAPABILITY=default was ignored (PyTorch chose {used}); "
            "the check with other kernels would prove nothing"
        )
    return env, ", ".join(said)


def parallel(env: dict) -> list[str]:
    """pytest-xdist's options for ``env``: notebooks side by side (each whole on one worker, its
    cells in order) when their kernels run on one thread each, as with ``--other-kernels``; one
    notebook at a time when a kernel spreads over every core (kernels side by side would then
    wait on one another's threads)."""
    from course_utils.runtime import usable_cores

    cores = usable_cores()
    if env.get("OMP_NUM_THREADS") == "1" and cores > 1:
        return ["-n", str(cores), "--dist", "loadfile"]
    return ["-p", "no:xdist"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--other-kernels",
        action="store_true",
        help="run with the kernels another CPU would pick (see the module's docstring)",
    )
    ap.add_argument(
        "--perturb",
        action="store_true",
        help="move every kernel-dependent result by a few units in the last place (tools/perturb_kernels.py)",
    )
    ap.add_argument(
        "paths",
        nargs="*",
        default=["solutions"],
        help="notebooks or folders (default: solutions)",
    )
    args = ap.parse_args(argv)
    env = dict(os.environ)
    if args.other_kernels:
        env, said = other_kernels_env(env)
    else:
        said = f"this machine's kernels ({own_capability(env)}), its threads"
    with tempfile.TemporaryDirectory() as ipython_dir:
        if args.perturb:  # IPython runs the startup folder's files in every kernel before its first cell
            startup = Path(ipython_dir) / "profile_default" / "startup"
            startup.mkdir(parents=True)
            shutil.copy(
                ROOT / "tools" / "perturb_kernels.py",
                startup / "00-perturb_kernels.py",
            )
            env["IPYTHONDIR"] = ipython_dir
            said += ", every kernel-dependent result moved a few units in the last place"
        print(
            f"check_notebooks: {' '.join(args.paths)} with {said}",
            flush=True,
        )
        return subprocess.call(
            [sys.executable, *NBVAL, *parallel(env), *args.paths],
            cwd=ROOT,
            env=env,
        )


if __name__ == "__main__":
    sys.exit(main())
