"""How much of the course's environment is PyTorch's GPU support (the Setup page quotes it).

    python -m benchmarks.install_size        # writes results/install_size.json

Sums the installed files of each distribution in this environment.  PyPI's default Linux
PyTorch wheel depends on the CUDA libraries (the ``nvidia-*`` distributions) and ``triton``;
the CPU wheel (``--index-url https://download.pytorch.org/whl/cpu``) needs neither, so their
size is what a laptop learner saves, besides the smaller ``torch`` itself.
"""

from __future__ import annotations

import importlib.metadata as md
import time

from course_utils.results import write_result

GPU_ONLY_PREFIXES = ("nvidia-", "nvidia_", "triton", "cuda-")


def _size(dist: md.Distribution) -> int:
    total = 0
    for f in dist.files or ():
        try:
            total += dist.locate_file(f).stat().st_size
        except OSError:
            continue
    return total


def measure() -> dict:
    seen, sizes = set(), {}
    for dist in md.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name and name not in seen:
            seen.add(name)
            sizes[name] = _size(dist)
    gpu_only = {
        n: s for n, s in sizes.items() if n.startswith(GPU_ONLY_PREFIXES)
    }
    return {
        "environment_bytes": sum(sizes.values()),
        "torch_bytes": sizes.get("torch", 0),
        "torch_version": md.version("torch"),
        "gpu_only_bytes": sum(gpu_only.values()),
        "gpu_only_distributions": sorted(gpu_only),
        "distributions": len(sizes),
    }


def main() -> None:
    start = time.perf_counter()
    data = measure()
    path = write_result(
        "install_size",
        data,
        dataset="none (installed files)",
        wall_time_s=time.perf_counter() - start,
    )
    gb = 1e9
    print(
        f"environment {data['environment_bytes'] / gb:.2f} GB, torch {data['torch_bytes'] / gb:.2f} GB, "
        f"GPU-only packages {data['gpu_only_bytes'] / gb:.2f} GB -> {path}"
    )


if __name__ == "__main__":
    main()
