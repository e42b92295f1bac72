"""Self-attention, recurrence and convolution side by side: Table 1 of "Attention Is All You Need", measured.

Run from the repository root (well under a minute and a half on 2 CPU cores)::

    python -m course_utils.experiments.layer_comparison                       # writes results/ch02_layer_comparison.json
    python -m course_utils.experiments.layer_comparison --quick --out /tmp/lc  # tiny sizes, writes /tmp/lc/ch02_layer_comparison.json

Chapter 02 reads the result.  The paper compares three kinds of layer that map a sequence of n
vectors of size d to another one; here they are, randomly initialised with PyTorch's defaults:

- **self-attention**: the course's ``SelfAttentionHead(d, d, d)``
  (``course_utils.references.attention``, unscaled scores as in chapter 02);
- **recurrence**: ``nn.RNN(d, d)`` with tanh, ``h_t = tanh(x_t W_ih + b_ih + h_(t-1) W_hh + b_hh)``;
- **convolution**: ``nn.Conv1d(d, d, kernel_size=K)`` made causal by padding ``K - 1`` zeros on the
  left (output t reads inputs t-K+1 .. t, as the RNN's output t reads inputs up to t), a tanh after
  each layer; a **dilated** stack gives layer l the dilation ``K**l`` (layers 0, 1, 2, ...).

It measures, in one run on one machine:

(a) **Path length.**  *Reach*: the input positions j with a non-zero gradient of output n-1,
    ``|| d y_(n-1) / d x_j ||``, computed exactly (the full Jacobian of that one output, by autograd,
    in float64), and the smallest number of layers after which output n-1 depends on input 0, for
    each n in ``REACH_SIZES`` and each seed in ``SEEDS`` (the answer must not depend on the seed; the
    json records whether it does).  *Receptive field growth*: how many inputs reach output n-1
    after 1, 2, ... convolution layers.  *Gradient decay*: for the RNN and for attention, the
    gradient norm from output n-1 to input j against the distance n-1-j, over ``GRAD_SEEDS``
    random initialisations and inputs: median, quartiles and range per distance, and per seed the
    factor per step of distance (``exp`` of the least-squares slope of the log norm against the
    distance, over distances 1 .. n-1: distance 0 is special for both layers, the RNN's input
    enters there without a recurrent step and attention's query is that token).

(b) **Sequential operations.**  *Depth*: the longest chain of dependent operations in one layer's
    autograd graph (what must run one after another however many processors there are), against n.
    *Time*: one layer's forward pass (batch 1, float32, ``torch.inference_mode``, the threads set
    by ``--threads``) for n in ``TIME_SIZES`` at d = ``TIME_D``; the layers are called in rotation, one
    call each per round, until each has ``MIN_REPEATS`` calls and the size's budget is spent;
    median and quartiles, with the layer's FLOPs (from (c)) and the FLOP rate that gives.

(c) **FLOPs per layer**, counted by ``torch.utils.flop_counter.FlopCounterMode`` on the ``meta``
    device (shapes only, nothing is computed): 2 per multiply-add of the matrix products and
    convolutions; softmax, tanh and bias additions are not counted.  Attention is split as in the
    paper's table: the *core* (scores ``Q K^T`` and the weighted sum of values, Table 1's entry) and
    the three *projections* ``W_q, W_k, W_v``.

The machine is shared with whatever else runs on it: the json records the load average before and after.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.flop_counter import FlopCounterMode

from ..references.attention import SelfAttentionHead, attend
from ..results import checkout_root, write_result

ROOT = checkout_root()  # None for an installed copy
NAME = "ch02_layer_comparison"
COMMAND = "python -m course_utils.experiments.layer_comparison"
K = 3  # convolution kernel size
# reach and depth: structural answers, checked on several initialisations
SEEDS = [
    0,
    1,
    2,
]
REACH_SIZES = [8, 16, 32, 64]
REACH_D = 8
# receptive field of output n-1 after 1..GROWTH_LAYERS convolutions
GROWTH_N, GROWTH_LAYERS = (
    64,
    8,
)
GRAD_N, GRAD_D, GRAD_SEEDS = 64, 32, 10
DEPTH_SIZES = [16, 32, 64, 128, 256]
TIME_SIZES = [16, 32, 64, 128, 256, 512]
TIME_D = 64
MIN_REPEATS = 15
BUDGET_S = 1.5  # per size, after the warm-up
FLOP_GRID = [(n, d) for d in (64, 256) for n in (16, 64, 256, 1024)]
LAYERS = ("attention", "rnn", "conv")


# --------------------------------------------------------------------------- the layers
class CausalConvStack(nn.Module):
    """``layers`` causal convolutions ``d -> d`` with kernel ``kernel``, a tanh after each.

    Layer l has dilation ``kernel**l`` when ``dilated`` (else 1) and pads ``(kernel - 1) * dilation``
    zeros on the left, so output t reads inputs up to t only and the length stays n.
    ``forward``: ``(B, n, d) -> (B, n, d)``.
    """

    def __init__(
        self, d: int, layers: int, kernel: int = K, dilated: bool = False
    ):
        super().__init__()
        self.convs = nn.ModuleList(
            nn.Conv1d(d, d, kernel, dilation=kernel**i if dilated else 1)
            for i in range(layers)
        )

    def forward(self, x: Tensor) -> Tensor:
        h = x.transpose(-2, -1)  # Conv1d wants (batch, channels, length)
        for conv in self.convs:
            h = torch.tanh(
                conv(
                    F.pad(
                        h, ((conv.kernel_size[0] - 1) * conv.dilation[0], 0)
                    )
                )
            )
        return h.transpose(-2, -1)


def build(
    kind: str,
    d: int,
    *,
    layers: int = 1,
    dilated: bool = False,
    seed: int | None = None,
) -> Callable[[Tensor], Tensor]:
    """A randomly initialised layer as a function ``(B, n, d) -> (B, n, d)``: ``attention``, ``rnn`` or ``conv``
    (a stack of ``layers`` causal convolutions)."""
    if seed is not None:
        torch.manual_seed(seed)
    if kind == "attention":
        head = SelfAttentionHead(d, d, d)
        return lambda x: head(x)[0]
    if kind == "rnn":
        rnn = nn.RNN(d, d, batch_first=True)
        return lambda x: rnn(x)[0]
    if kind == "conv":
        return CausalConvStack(d, layers, dilated=dilated)
    raise ValueError(
        f"unknown layer kind {kind!r}; expected one of {LAYERS}"
    )


def _double(fn: Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    """The same layer in float64 (its modules converted in place)."""
    for cell in getattr(fn, "__closure__", None) or ():
        if isinstance(cell.cell_contents, nn.Module):
            cell.cell_contents.double()
    if isinstance(fn, nn.Module):
        fn.double()
    return fn


# --------------------------------------------------------------------------- (a) path length
def last_output_gradient_norms(
    fn: Callable[[Tensor], Tensor], x: Tensor
) -> Tensor:
    """``g[j] = || d fn(x)[n-1] / d x[j] ||`` (Frobenius norm of that block of the Jacobian), for one
    sequence ``x`` of shape ``(n, d)``; exact zeros where output n-1 does not depend on input j."""
    # (d_out, n, d)
    jac = torch.autograd.functional.jacobian(
        lambda inp: fn(inp.unsqueeze(0))[0, -1], x
    )
    return jac.pow(2).sum(dim=(0, 2)).sqrt()


def reach(
    fn: Callable[[Tensor], Tensor], n: int, d: int, *, seed: int = 0
) -> list[int]:
    """The input positions j on which output n-1 depends (non-zero gradient), in float64."""
    x = torch.randn(
        n,
        d,
        dtype=torch.float64,
        generator=torch.Generator().manual_seed(seed),
    )
    g = last_output_gradient_norms(_double(fn), x)
    return [j for j in range(n) if g[j] != 0]


def layers_to_connect(
    kind: str,
    n: int,
    d: int = REACH_D,
    *,
    dilated: bool = False,
    seed: int = 0,
    max_layers: int = 256,
) -> int:
    """The smallest number of layers after which output n-1 depends on input 0."""
    for layers in range(1, max_layers + 1):
        if kind != "conv" and layers > 1:
            raise AssertionError(
                f"one {kind} layer should already connect output {n - 1} to input 0"
            )
        if 0 in reach(
            build(kind, d, layers=layers, dilated=dilated, seed=seed),
            n,
            d,
            seed=seed,
        ):
            return layers
    raise AssertionError(
        f"{kind}: output {n - 1} does not reach input 0 after {max_layers} layers"
    )


def reach_table(
    sizes: list[int], seeds: list[int], d: int = REACH_D
) -> list[dict]:
    rows = []
    for n in sizes:
        layers = {"attention": [], "rnn": [], "conv": [], "dilated_conv": []}
        for seed in seeds:
            layers["attention"].append(
                layers_to_connect("attention", n, d, seed=seed)
            )
            layers["rnn"].append(layers_to_connect("rnn", n, d, seed=seed))
            layers["conv"].append(layers_to_connect("conv", n, d, seed=seed))
            layers["dilated_conv"].append(
                layers_to_connect("conv", n, d, dilated=True, seed=seed)
            )
        rows.append(
            {
                "n": n,
                "layers_needed": {
                    name: values[0] for name, values in layers.items()
                },
                "same_for_every_seed": all(
                    len(set(values)) == 1 for values in layers.values()
                ),
                "formula": {
                    "conv": math.ceil((n - 1) / (K - 1)),
                    "dilated_conv": _ceil_log(n, K),
                },
            }
        )
    return rows


def _ceil_log(n: int, base: int) -> int:
    """The smallest L with base**L >= n (exact, no floating-point logarithm)."""
    layers = 0
    while base**layers < n:
        layers += 1
    return layers


def growth_table(
    n: int, max_layers: int, seeds: list[int], d: int = REACH_D
) -> dict:
    """How many inputs reach output n-1 after 1..max_layers layers (median over seeds; the json records the range)."""
    out: dict = {
        "n": n,
        "layers": list(range(1, max_layers + 1)),
        "conv": [],
        "dilated_conv": [],
        "conv_formula": [
            min(n, 1 + L * (K - 1)) for L in range(1, max_layers + 1)
        ],
        "dilated_conv_formula": [
            min(n, K**L) for L in range(1, max_layers + 1)
        ],
    }
    agree = True
    for L in out["layers"]:
        for key, dilated in (("conv", False), ("dilated_conv", True)):
            counts = [
                len(
                    reach(
                        build("conv", d, layers=L, dilated=dilated, seed=s),
                        n,
                        d,
                        seed=s,
                    )
                )
                for s in seeds
            ]
            agree &= len(set(counts)) == 1
            out[key].append(int(statistics.median(counts)))
    out["attention_one_layer"] = int(
        statistics.median(
            len(reach(build("attention", d, seed=s), n, d, seed=s))
            for s in seeds
        )
    )
    out["rnn_one_layer"] = int(
        statistics.median(
            len(reach(build("rnn", d, seed=s), n, d, seed=s)) for s in seeds
        )
    )
    out["same_for_every_seed"] = agree
    return out


def _spread(values: list[float]) -> dict:
    q = (
        statistics.quantiles(values, n=4, method="inclusive")
        if len(values) > 1
        else [values[0]] * 3
    )
    return {
        "median": statistics.median(values),
        "q25": q[0],
        "q75": q[2],
        "min": min(values),
        "max": max(values),
    }


def decay_per_step(norms: Tensor) -> float:
    """``exp`` of the least-squares slope of ``log norms[distance]`` against the distance, over distances
    1 .. n-1: the factor by which the gradient norm shrinks (below 1) or grows (above 1) per step."""
    dist = torch.arange(1, len(norms), dtype=torch.float64)
    logs = norms[1:].double().log()
    slope = ((dist - dist.mean()) * (logs - logs.mean())).sum() / (
        dist - dist.mean()
    ).pow(2).sum()
    return float(slope.exp())


def gradient_decay(n: int, d: int, seeds: list[int]) -> dict:
    """Gradient norm from output n-1 to input j against the distance n-1-j, for the RNN and for attention."""
    out: dict = {
        "n": n,
        "d": d,
        "seeds": list(seeds),
        "distance": list(range(n)),
        "dtype": "float64",
    }
    for kind in ("rnn", "attention"):
        per_seed = []
        for seed in seeds:
            x = torch.randn(
                n,
                d,
                dtype=torch.float64,
                generator=torch.Generator().manual_seed(1000 + seed),
            )
            g = last_output_gradient_norms(
                _double(build(kind, d, seed=seed)), x
            )
            per_seed.append(g.flip(0))  # index = distance n-1-j
        stacked = torch.stack(per_seed)  # (seeds, n)
        columns = [_spread(stacked[:, k].tolist()) for k in range(n)]
        out[kind] = {
            stat: [c[stat] for c in columns]
            for stat in ("median", "q25", "q75", "min", "max")
        }
        out[kind]["decay_per_step"] = _spread(
            [decay_per_step(g) for g in per_seed]
        )
        out[kind]["farthest_over_distance_1"] = _spread(
            [float(g[-1] / g[1]) for g in per_seed]
        )
    return out


# --------------------------------------------------------------------------- (b) sequential operations
def graph_depth(out: Tensor) -> int:
    """The longest chain of operations in the autograd graph that produced ``out``: operations that
    must run one after another, each waiting for the one before."""
    order, seen, stack = [], set(), [(out.grad_fn, False)]
    while stack:  # iterative post-order: long RNN graphs are deep
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if node is None or node in seen:
            continue
        seen.add(node)
        stack.append((node, True))
        stack.extend(
            (child, False)
            for child, _ in node.next_functions
            if child is not None and child not in seen
        )
    depth: dict = {}
    for node in order:  # children come before their parents
        depth[node] = 1 + max(
            (depth[c] for c, _ in node.next_functions if c is not None),
            default=0,
        )
    return depth[out.grad_fn]


def layer_depth(
    kind: str, n: int, d: int = REACH_D, *, seed: int = 0
) -> int:
    x = torch.randn(
        1,
        n,
        d,
        generator=torch.Generator().manual_seed(seed),
        requires_grad=True,
    )
    return graph_depth(build(kind, d, seed=seed)(x))


def depth_table(
    sizes: list[int], seeds: list[int], d: int = REACH_D
) -> list[dict]:
    rows = []
    for n in sizes:
        per_kind = {
            kind: [layer_depth(kind, n, d, seed=s) for s in seeds]
            for kind in LAYERS
        }
        rows.append(
            {
                "n": n,
                **{kind: values[0] for kind, values in per_kind.items()},
                "same_for_every_seed": all(
                    len(set(v)) == 1 for v in per_kind.values()
                ),
            }
        )
    return rows


def time_one_size(
    n: int, d: int, *, budget_s: float, min_repeats: int = MIN_REPEATS
) -> dict:
    """Forward time of one layer of each kind at (n, d), batch 1, called in rotation."""
    layers = {kind: build(kind, d, seed=0) for kind in LAYERS}
    x = torch.randn(1, n, d, generator=torch.Generator().manual_seed(0))
    times: dict[str, list[float]] = {kind: [] for kind in LAYERS}
    with torch.inference_mode():
        for fn in layers.values():  # warm-up: allocation, kernel selection
            fn(x)
        start, rounds = time.perf_counter(), 0
        while rounds < min_repeats or time.perf_counter() - start < budget_s:
            # each kind leads in turn
            order = (
                LAYERS[rounds % len(LAYERS) :]
                + LAYERS[: rounds % len(LAYERS)]
            )
            for kind in order:
                t0 = time.perf_counter()
                layers[kind](x)
                times[kind].append(time.perf_counter() - t0)
            rounds += 1
    row: dict = {"n": n, "d": d, "calls": rounds}
    for kind in LAYERS:
        s = _spread([1e3 * t for t in times[kind]])
        flops = count_flops(kind, n, d)
        row[kind] = {
            "ms": s["median"],
            "ms_q25": s["q25"],
            "ms_q75": s["q75"],
            "flops": flops,
            "gflop_per_s": flops / (s["median"] * 1e-3) / 1e9,
        }
    row["rnn_over_attention_time"] = (
        row["rnn"]["ms"] / row["attention"]["ms"]
    )
    row["rnn_over_attention_flops"] = (
        row["rnn"]["flops"] / row["attention"]["flops"]
    )
    return row


# --------------------------------------------------------------------------- (c) FLOPs
def count_flops(kind: str, n: int, d: int) -> int:
    """FLOPs of one layer's forward pass on one sequence of shape ``(n, d)`` (meta device: shapes only).

    ``kind``: ``attention`` (the whole head), ``attention_core`` (``softmax(Q K^T) V`` from given Q, K,
    V: Table 1's entry), ``projections`` (``W_q``, ``W_k``, ``W_v``), ``rnn`` or ``conv`` (one layer)."""
    with torch.device("meta"):
        x = torch.empty(1, n, d)
        if kind == "attention_core":
            run = lambda: attend(x, x, x)  # noqa: E731
        elif kind == "projections":
            head = SelfAttentionHead(d, d, d)
            run = lambda: (head.W_q(x), head.W_k(x), head.W_v(x))  # noqa: E731
        else:
            fn = build(kind, d)
            run = lambda: fn(x)  # noqa: E731
        with FlopCounterMode(display=False) as counter:
            run()
    return int(counter.get_total_flops())


def flop_table(grid: list[tuple[int, int]]) -> list[dict]:
    rows = []
    for n, d in grid:
        f = {
            kind: count_flops(kind, n, d)
            for kind in (
                "attention_core",
                "projections",
                "attention",
                "rnn",
                "conv",
            )
        }
        rows.append(
            {
                "n": n,
                "d": d,
                **f,
                "core_over_rnn": f["attention_core"] / f["rnn"],
                "head_over_rnn": f["attention"] / f["rnn"],
                "core_over_conv": f["attention_core"] / f["conv"],
                "core_per_n2d": f["attention_core"] / (n * n * d),
                "rnn_per_nd2": f["rnn"] / (n * d * d),
                "conv_per_knd2": f["conv"] / (K * n * d * d),
                "projections_per_nd2": f["projections"] / (n * d * d),
            }
        )
    return rows


# --------------------------------------------------------------------------- report
def _print(data: dict) -> None:
    print(
        f"(a) layers until output n-1 depends on input 0 (kernel {K}); in brackets the formula"
    )
    print(
        f"{'n':>5} {'attention':>10} {'RNN':>5} {'conv':>10} {'dilated conv':>13}"
    )
    for r in data["reach"]["rows"]:
        L, f = r["layers_needed"], r["formula"]
        print(
            f"{r['n']:>5} {L['attention']:>10} {L['rnn']:>5} {L['conv']:>5} ({f['conv']:>2}) "
            f"{L['dilated_conv']:>7} ({f['dilated_conv']:>2})"
        )
    g = data["reach"]["growth"]
    print(
        f"inputs reaching output {g['n'] - 1} after L layers: conv {g['conv']}, dilated {g['dilated_conv']}; "
        f"one attention layer {g['attention_one_layer']}, one RNN layer {g['rnn_one_layer']}"
    )
    gd = data["rnn_gradient"]
    for kind in ("rnn", "attention"):
        dec = gd[kind]["decay_per_step"]
        print(
            f"{kind:>9}: gradient norm, distance {gd['n'] - 1} over distance 1: median "
            f"{gd[kind]['farthest_over_distance_1']['median']:.2e}; factor per step: median {dec['median']:.3f} "
            f"(range {dec['min']:.3f} .. {dec['max']:.3f}) over {len(gd['seeds'])} seeds"
        )
    print()
    print(
        "(b) longest chain of dependent operations in one layer's autograd graph"
    )
    print(f"{'n':>5} {'attention':>10} {'RNN':>6} {'conv':>6}")
    for r in data["sequential"]["depth"]:
        print(
            f"{r['n']:>5} {r['attention']:>10} {r['rnn']:>6} {r['conv']:>6}"
        )
    t = data["sequential"]["time"]
    print(
        f"forward time of one layer, batch 1, d = {t['d']}, {t['threads']} thread(s), median of at least "
        f"{t['min_repeats']} calls"
    )
    print(
        f"{'n':>5} {'attention':>10} {'RNN':>10} {'conv':>10} | GFLOP/s: {'attention':>9} {'RNN':>6} {'conv':>6} | "
        f"{'RNN/attention time':>18} {'FLOPs':>6}"
    )
    for r in t["rows"]:
        print(
            f"{r['n']:>5} {r['attention']['ms']:>8.3f}ms {r['rnn']['ms']:>8.3f}ms {r['conv']['ms']:>8.3f}ms | "
            f"{'':>9}{r['attention']['gflop_per_s']:>9.2f} {r['rnn']['gflop_per_s']:>6.2f} "
            f"{r['conv']['gflop_per_s']:>6.2f} | {r['rnn_over_attention_time']:>18.2f} "
            f"{r['rnn_over_attention_flops']:>6.2f}"
        )
    print()
    print(
        "(c) FLOPs per layer (FlopCounterMode; matrix products and convolutions)"
    )
    print(
        f"{'n':>5} {'d':>4} {'attn core':>11} {'projections':>12} {'RNN':>11} {'conv':>11} {'core/RNN':>9}"
    )
    for r in data["flops"]["rows"]:
        print(
            f"{r['n']:>5} {r['d']:>4} {r['attention_core']:>11,} {r['projections']:>12,} {r['rnn']:>11,} "
            f"{r['conv']:>11,} {r['core_over_rnn']:>9.3g}"
        )


def run(*, quick: bool = False) -> dict:
    """Every measurement of the module docstring; ``quick``: tiny sizes, a smoke test."""
    seeds = SEEDS[:2] if quick else SEEDS
    reach_sizes = [4, 8] if quick else REACH_SIZES
    growth_n, growth_layers = (16, 3) if quick else (GROWTH_N, GROWTH_LAYERS)
    grad_n, grad_d, grad_seeds = (
        (12, 4, 3) if quick else (GRAD_N, GRAD_D, GRAD_SEEDS)
    )
    depth_sizes = [8, 16] if quick else DEPTH_SIZES
    time_sizes = [16, 32] if quick else TIME_SIZES
    time_d = 16 if quick else TIME_D
    budget, min_repeats = (0.05, 3) if quick else (BUDGET_S, MIN_REPEATS)
    grid = [(8, 16), (16, 16), (32, 16)] if quick else FLOP_GRID
    return {
        "kernel": K,
        "init": "PyTorch's default initialisation of SelfAttentionHead (nn.Linear), nn.RNN and nn.Conv1d",
        "reach": {
            "d": REACH_D,
            "seeds": seeds,
            "rows": reach_table(reach_sizes, seeds),
            "growth": growth_table(growth_n, growth_layers, seeds),
        },
        "rnn_gradient": gradient_decay(
            grad_n, grad_d, list(range(grad_seeds))
        ),
        "sequential": {
            "depth": depth_table(depth_sizes, seeds),
            "time": {
                "d": time_d,
                "batch": 1,
                "dtype": "float32",
                "threads": torch.get_num_threads(),
                "min_repeats": min_repeats,
                "budget_s": budget,
                "statistic": "median, quartiles",
                "rows": [
                    time_one_size(
                        n, time_d, budget_s=budget, min_repeats=min_repeats
                    )
                    for n in time_sizes
                ],
            },
        },
        "flops": {
            "counter": "torch.utils.flop_counter.FlopCounterMode, 2 FLOPs per multiply-add",
            "rows": flop_table(grid),
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=COMMAND, description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="tiny sizes, a smoke test: prints only, unless --out names a folder",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="write the json into this folder instead of results/",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (default 1: steady on a busy machine)",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    load_before = os.getloadavg()
    data = run(quick=args.quick)
    load_after = os.getloadavg()
    data["load_average_1min"] = {
        "before": round(load_before[0], 2),
        "after": round(load_after[0], 2),
    }
    _print(data)
    wall = time.perf_counter() - start
    print(
        f"wall time {wall:.0f} s; load average before {load_before[0]:.2f}, after {load_after[0]:.2f}"
    )
    if args.quick and args.out is None:
        return 0
    command = (
        COMMAND
        + (" --quick" if args.quick else "")
        + (f" --threads {args.threads}" if args.threads != 1 else "")
    )
    path = write_result(
        NAME,
        data,
        dataset="synthetic random tensors (standard normal, fixed seeds)",
        wall_time_s=wall,
        command=command,
        directory=args.out,
    )
    print(
        f"wrote {path.relative_to(ROOT) if ROOT and path.is_relative_to(ROOT) else path}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
