"""Time and memory of the course's attention kernels next to PyTorch's fused attention.

Run from the repository root (two to three minutes on a 2-core laptop CPU)::

    python -m benchmarks.attention_kernels           # writes results/bench_attention.json
    python -m benchmarks.attention_kernels --quick   # small sizes, prints only (a smoke test)
    python -m benchmarks.attention_kernels --threads 1   # one thread: steadier on a busy machine

It measures, in one run on one machine:

(a) **Time per call** of four ways to compute softmax(Q K^T / sqrt(d)) V on float32 inputs
    of shape ``(1, HEADS, n, 64)`` for n = 256 ... 4096: the readable reference that returns
    the weights (``course_utils.references.attention.scaled_dot_product_attention``), its fast path
    (``need_weights=False``), PyTorch's ``torch.nn.functional.scaled_dot_product_attention``
    called directly, and ``chunked_attention``.  Every method gets one warm-up call.  Then the
    fast path and PyTorch are called alternately (A B, B A, ...; so neither always runs right
    after the other, and never right after the memory-hungry reference) until each has at least
    ``MIN_REPEATS`` calls and half the size's time budget is spent; then the reference and the
    chunked version, the same way.  The table shows the **median** time per call and the
    ratios fast/PyTorch (target: at most 1.1) and reference/PyTorch; the result file also holds
    each method's quartiles and the quartiles of the fast/PyTorch ratio taken round by round.

(b) **Peak memory** of the naive reference (it stores the whole ``(n, n)`` weight matrix and its
    intermediates), of ``chunked_attention`` (chunk_size 128) and of PyTorch's fused kernel, for
    one head, d = 64, float32, n = 4096, 8192, 16384.  Python's ``tracemalloc`` does not see
    tensor memory (PyTorch allocates it outside Python's allocator), so the benchmark measures
    what the operating system sees: the resident set size (RSS).  Each (method, n) runs in a
    **fresh subprocess**, which builds its inputs from a fixed seed, makes a tiny warm-up call
    (loads the kernels, starts the thread pool), then resets the kernel's peak-RSS counter
    (``echo 5 > /proc/self/clear_refs``, Linux >= 4.0), records the current RSS as the baseline,
    runs the method once and reads the peak RSS (``VmHWM`` in ``/proc/self/status``, which the
    reset also clears; ``resource.getrusage``'s ``ru_maxrss`` would not do: after a fork it
    still counts the parent's pages).  Peak growth = peak - baseline: every page the call
    touched at its worst moment, including its own ``(n, 64)`` output.  Where the reset is
    unavailable the baseline is the peak before the call (recorded in the json as
    ``rss_method``), which can hide growth below an earlier peak.  The subprocesses save their outputs, and the parent reports the largest
    absolute difference between chunked and naive (target: at most 1e-5) and the ratio of
    peak memory naive/chunked (target: at least 8 at n = 16384).

The machine is shared with whatever else runs on it: the json records the load average
before and after, and the number of threads PyTorch used.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from course_utils.references import attention
from course_utils.results import write_result

ROOT = Path(__file__).resolve().parents[1]
COMMAND = "python -m benchmarks.attention_kernels"
D = 64
HEADS = 4
TIME_SIZES = [256, 512, 1024, 2048, 4096]
MEMORY_SIZES = [4096, 8192, 16384]
CHUNK = 128
MIN_REPEATS = 5
MAX_REPEATS = 41  # reference and chunked
MAX_REPEATS_FAST = 401  # fast path and PyTorch: cheap at small n, and their ratio has a target
BUDGET_S = 8.0  # per size, after the warm-up: half for fast/PyTorch, half for reference/chunked
SEED = 0


def _inputs(
    shape: tuple[int, ...], seed: int = SEED
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(*shape, generator=g) for _ in range(3))  # type: ignore[return-value]


METHODS = {
    "reference": lambda q, k, v: attention.scaled_dot_product_attention(
        q, k, v
    )[0],
    "fast": lambda q, k, v: attention.scaled_dot_product_attention(
        q, k, v, need_weights=False
    )[0],
    "pytorch": lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
    "chunked": lambda q, k, v: attention.chunked_attention(
        q, k, v, chunk_size=CHUNK
    ),
}


# --------------------------------------------------------------------------- (a) time
def _interleaved(
    names: list[str], q, k, v, *, budget_s: float, max_repeats: int
) -> dict[str, list[float]]:
    """Call the methods alternately (A B, then B A, ...) so that each one runs as often right after
    the other as before it, until each has MIN_REPEATS calls and the budget is spent."""
    times: dict[str, list[float]] = {name: [] for name in names}
    start = time.perf_counter()
    rounds = 0
    while rounds < max_repeats and (
        rounds < MIN_REPEATS or time.perf_counter() - start < budget_s
    ):
        for name in names if rounds % 2 == 0 else names[::-1]:
            t0 = time.perf_counter()
            METHODS[name](q, k, v)
            times[name].append(time.perf_counter() - t0)
        rounds += 1
    return times


def time_one_size(n: int, *, budget_s: float = BUDGET_S) -> dict:
    q, k, v = _inputs((1, HEADS, n, D))
    with torch.inference_mode():
        # warm-up: first calls pay for allocation and kernel selection
        for name in METHODS:
            METHODS[name](q, k, v)
        # The ratio that has a target is measured on its own: fast path against PyTorch, alternately.
        times = _interleaved(
            ["fast", "pytorch"],
            q,
            k,
            v,
            budget_s=budget_s / 2,
            max_repeats=MAX_REPEATS_FAST,
        )
        times.update(
            _interleaved(
                ["reference", "chunked"],
                q,
                k,
                v,
                budget_s=budget_s / 2,
                max_repeats=MAX_REPEATS,
            )
        )
    ms = {name: 1e3 * statistics.median(ts) for name, ts in times.items()}
    # The spread: quartiles of each method's calls, and of the fast/PyTorch ratio round by round
    # (the two alternate, so round i's pair ran under the same conditions).
    quartiles = {
        name: [round(1e3 * q, 4) for q in _quartiles(ts)]
        for name, ts in times.items()
    }
    ratios = [f / p for f, p in zip(times["fast"], times["pytorch"])]
    return {
        "n": n,
        "reference_ms": round(ms["reference"], 4),
        "fast_ms": round(ms["fast"], 4),
        "pytorch_ms": round(ms["pytorch"], 4),
        "chunked_ms": round(ms["chunked"], 4),
        "fast_over_pytorch": round(ms["fast"] / ms["pytorch"], 4),
        "reference_over_pytorch": round(ms["reference"] / ms["pytorch"], 4),
        "chunked_over_pytorch": round(ms["chunked"] / ms["pytorch"], 4),
        "repeats": {name: len(ts) for name, ts in times.items()},
        "quartiles_ms": quartiles,
        "fast_over_pytorch_quartiles": [
            round(q, 4) for q in _quartiles(ratios)
        ],
    }


def _quartiles(values: list[float]) -> tuple[float, float]:
    """The first and third quartiles (inclusive method: defined for any number of values >= 1)."""
    if len(values) == 1:
        return values[0], values[0]
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q3


# --------------------------------------------------------------------------- (b) memory
def _rss_kib() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return _peak_kib()


def _peak_kib() -> int:
    # VmHWM, not getrusage: ru_maxrss also keeps the peak of the process before exec(), and a
    # child forked from this (large) benchmark process starts with the parent's pages counted.
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # macOS reports bytes, Linux KiB
    return peak // 1024 if sys.platform == "darwin" else peak


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def memory_case(method: str, n: int, out_path: str) -> dict:
    """Runs inside a fresh subprocess: peak RSS growth of one call of ``method`` at size ``n``."""
    fn = {
        "naive": METHODS["reference"],
        "chunked": METHODS["chunked"],
        "fused": METHODS["pytorch"],
    }[method]
    q, k, v = _inputs((1, n, D))
    with torch.inference_mode():
        fn(*(t[:, :256] for t in (q, k, v)))  # warm-up on a small slice
        if _reset_peak():
            rss_method, baseline = (
                "VmRSS before, peak reset via /proc/self/clear_refs",
                _rss_kib(),
            )
        else:
            rss_method, baseline = (
                "peak before the call (no reset available)",
                _peak_kib(),
            )
        t0 = time.perf_counter()
        out = fn(q, k, v)
        seconds = time.perf_counter() - t0
        peak = _peak_kib()
    torch.save(out.contiguous(), out_path)
    return {
        "method": method,
        "n": n,
        "peak_growth_mib": round((peak - baseline) / 1024, 2),
        "baseline_mib": round(baseline / 1024, 2),
        "seconds": round(seconds, 3),
        "rss_method": rss_method,
    }


def _run_case(method: str, n: int, tmp: Path) -> tuple[dict, torch.Tensor]:
    out_path = tmp / f"{method}-{n}.pt"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.attention_kernels",
            "--threads",
            str(torch.get_num_threads()),
            "--memory-case",
            method,
            str(n),
            str(out_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"memory case {method} n={n} failed:\n{proc.stdout}\n{proc.stderr}"
        )
    record = json.loads(proc.stdout.strip().splitlines()[-1])
    return record, torch.load(out_path)


def memory_table(sizes: list[int]) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            runs = {
                m: _run_case(m, n, Path(tmp))
                for m in ("naive", "chunked", "fused")
            }
            naive, chunked, fused = (
                runs[m][0] for m in ("naive", "chunked", "fused")
            )
            # one float32 (n, n) matrix, for scale
            rows.append(
                {
                    "n": n,
                    "naive_mib": naive["peak_growth_mib"],
                    "chunked_mib": chunked["peak_growth_mib"],
                    "fused_mib": fused["peak_growth_mib"],
                    "naive_over_chunked": round(
                        naive["peak_growth_mib"]
                        / max(chunked["peak_growth_mib"], 1e-3),
                        2,
                    ),
                    "max_abs_diff_chunked_vs_naive": float(
                        (runs["chunked"][1] - runs["naive"][1]).abs().max()
                    ),
                    "max_abs_diff_fused_vs_naive": float(
                        (runs["fused"][1] - runs["naive"][1]).abs().max()
                    ),
                    "score_matrix_mib": round(n * n * 4 / 2**20, 2),
                    "seconds": {m: runs[m][0]["seconds"] for m in runs},
                    "rss_method": naive["rss_method"],
                }
            )
    return rows


# --------------------------------------------------------------------------- report
def _print_time(rows: list[dict]) -> None:
    print(
        f"(a) time per call, q/k/v of shape (1, {HEADS}, n, {D}), float32, {torch.get_num_threads()} threads, "
        "median over rounds"
    )
    print(
        f"{'n':>6} {'reference':>11} {'fast path':>11} {'PyTorch':>11} {'chunked':>11} "
        f"{'fast/PyTorch':>13} {'ref/PyTorch':>12} {'calls (fast, ref)':>18}"
    )
    for r in rows:
        print(
            f"{r['n']:>6} {r['reference_ms']:>9.2f}ms {r['fast_ms']:>9.2f}ms {r['pytorch_ms']:>9.2f}ms "
            f"{r['chunked_ms']:>9.2f}ms {r['fast_over_pytorch']:>13.3f} {r['reference_over_pytorch']:>12.2f} "
            f"{r['repeats']['fast']:>11}, {r['repeats']['reference']:>4}"
        )


def _print_memory(rows: list[dict]) -> None:
    print(
        f"(b) peak memory growth of one call (fresh process each), q/k/v of shape (1, n, {D}), float32, "
        f"chunk_size {CHUNK}"
    )
    print(
        f"{'n':>6} {'naive':>11} {'chunked':>11} {'PyTorch':>11} {'naive/chunked':>14} "
        f"{'max|chunked-naive|':>19} {'one (n,n) matrix':>17}"
    )
    for r in rows:
        print(
            f"{r['n']:>6} {r['naive_mib']:>8.1f}MiB {r['chunked_mib']:>8.1f}MiB {r['fused_mib']:>8.1f}MiB "
            f"{r['naive_over_chunked']:>14.1f} {r['max_abs_diff_chunked_vs_naive']:>19.2e} "
            f"{r['score_matrix_mib']:>14.1f}MiB"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small sizes, print only (no results file)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads (default: PyTorch's choice, usually one per core); on a busy machine "
        "--threads 1 avoids stalls of the thread team",
    )
    parser.add_argument(
        "--memory-case",
        nargs=3,
        metavar=("METHOD", "N", "OUT"),
        help=argparse.SUPPRESS,
    )
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.memory_case:
        method, n, out_path = args.memory_case
        print(json.dumps(memory_case(method, int(n), out_path)))
        return 0

    start = time.perf_counter()
    load_before = os.getloadavg()
    time_sizes = [128, 256] if args.quick else TIME_SIZES
    memory_sizes = [1024, 2048] if args.quick else MEMORY_SIZES
    time_rows = [
        time_one_size(n, budget_s=0.5 if args.quick else BUDGET_S)
        for n in time_sizes
    ]
    _print_time(time_rows)
    print()
    memory_rows = memory_table(memory_sizes)
    _print_memory(memory_rows)
    load_after = os.getloadavg()

    largest = memory_rows[-1]
    targets = {
        "fast_over_pytorch_max": 1.1,
        "fast_over_pytorch_met": all(
            r["fast_over_pytorch"] <= 1.1 for r in time_rows
        ),
        "chunked_max_abs_diff_max": 1e-5,
        "chunked_max_abs_diff_met": all(
            r["max_abs_diff_chunked_vs_naive"] <= 1e-5 for r in memory_rows
        ),
        "naive_over_chunked_min_at_largest_n": 8.0,
        "naive_over_chunked_met": largest["naive_over_chunked"] >= 8.0,
    }
    print()
    print(
        f"targets: fast/PyTorch <= 1.1 at every n: {targets['fast_over_pytorch_met']}; "
        f"max|chunked - naive| <= 1e-5: {targets['chunked_max_abs_diff_met']}; "
        f"naive/chunked peak memory >= 8 at n = {largest['n']}: {targets['naive_over_chunked_met']}"
    )
    wall = time.perf_counter() - start
    print(
        f"wall time {wall:.0f} s; load average before {load_before[0]:.2f}, after {load_after[0]:.2f}"
    )
    if args.quick:
        return 0
    data = {
        "time": {
            "shape": f"(1, {HEADS}, n, {D})",
            "batch": 1,
            "heads": HEADS,
            "d": D,
            "dtype": "float32",
            "threads": torch.get_num_threads(),
            "min_repeats": MIN_REPEATS,
            "statistic": "median",
            "rows": time_rows,
        },
        "memory": {
            "shape": f"(1, n, {D})",
            "d": D,
            "dtype": "float32",
            "chunk_size": CHUNK,
            "measure": "peak RSS growth of one call in a fresh subprocess (see module docstring)",
            "rows": memory_rows,
        },
        "targets": targets,
        "load_average_1min": {
            "before": round(load_before[0], 2),
            "after": round(load_after[0], 2),
        },
    }
    command = COMMAND + (
        f" --threads {args.threads}" if args.threads else ""
    )
    path = write_result(
        "bench_attention",
        data,
        dataset="synthetic random tensors (standard normal, seed 0)",
        wall_time_s=wall,
        command=command,
    )
    print(
        f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
