"""Four scoring functions side by side (chapter 01): what each costs per call, and what each can learn.

Run from the repository root (about a minute on 2 CPU cores)::

    python -m course_utils.experiments.score_functions                              # writes results/ch01_score_functions.json
    python -m course_utils.experiments.score_functions --quick --out-dir /tmp/ch01  # tiny sizes: a smoke test

The scores a(q, k) of ``m`` queries against ``n`` keys, as an ``(m, n)`` matrix:

- ``dot``: ``q . k`` (needs ``d_q = d_k``);
- ``scaled_dot``: ``q . k / sqrt(d)`` (chapter 03's subject);
- ``bilinear``: ``q^T W k`` with ``W`` of shape ``(d_q, d_k)`` (Luong et al., 2015, "general");
- ``additive``: ``w_v . tanh(W_q q + W_k k)`` with ``h`` hidden units (Bahdanau et al., 2015),
  ``course_utils.references.attention.additive_scores``.

**(a) Time per call.**  For each size ``(n, d, h)``: ``m = n`` queries and ``n`` keys of size
``d`` (float32, standard normal, one seed), the bilinear ``W`` of shape ``(d, d)``, the additive
``W_q``, ``W_k`` of shape ``(h, d)`` and ``w_v`` of shape ``(h,)``.  Every method gets two
warm-up calls; then the methods are called in rounds, one call each per round, the order
rotating from round to round (so no method always follows the same one), until each has
``MIN_REPEATS`` calls and the size's time budget is spent (at most ``MAX_REPEATS``).  The json
holds each method's median time per call, its quartiles, minimum and maximum, and per round the
ratio to the dot product's time in the same round (median and quartiles).  PyTorch uses a fixed
number of threads (``--threads``, default 1), recorded in the json.

**(b) What each can learn.**  A retrieval task where queries and keys live in different spaces
(``D_Q != D_K``): every example is one query and ``N_KEYS`` candidate keys, all standard normal,
and the right key is the one a hidden *teacher* score ranks first.  Two teachers:

- ``bilinear_teacher``: ``q^T M k`` for a random ``M`` of shape ``(D_Q, D_K)``;
- ``additive_teacher``: ``w . tanh(A q + B k)`` with ``TEACHER_H`` random hidden units.

Four learned scores (students) are trained on it, each with a softmax over the candidates and
the cross-entropy against the right key (the attention weights themselves are trained to point
at it).  A plain dot product cannot compare a ``D_Q``-vector with a ``D_K``-vector, so the two dot
products get chapter 02's learned projections to ``H`` dimensions, ``(W_q q) . (W_k k)``, with and
without the ``1 / sqrt(H)`` scale; the bilinear score learns ``W``, the additive score ``W_q``,
``W_k`` and ``w_v`` with ``H`` hidden units.  Each trains for ``STEPS`` Adam steps on fresh batches
(nothing to overfit) through the course's ``Trainer``, and is evaluated once, after the last
step, on ``EVAL_EXAMPLES`` held-out examples: the accuracy is the fraction whose highest weight
falls on the right key (chance: ``1 / N_KEYS``).  No model or step is selected.  Each seed
draws its own teacher, data and initial weights; the json holds each seed's accuracy, the mean,
the sample standard deviation, the minimum and the maximum.

The additive scores have no bias, as the papers write them, so they change sign when the query
and the key both do, while bilinear scores (the projected dot products included) do not.  An
example is as likely as its negative here, so a student of the one kind picks the right key of
a teacher of the other kind exactly as often as it ranks it last: its accuracy is at most 1/2,
however it is trained.  The task shows this limit of each form; the chapter explains it.

The machine is shared with whatever else runs on it: the json records the load average before
and after.
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
from torch import Tensor, nn

from ..references import attention
from ..results import checkout_root, write_result
from ..training.trainer import Trainer

ROOT = checkout_root()  # None for an installed copy
COMMAND = "python -m course_utils.experiments.score_functions"
RESULT = "ch01_score_functions"
METHODS = ("dot", "scaled_dot", "bilinear", "additive")

# (a) time per call
# (n, d, h), m = n
TIME_SIZES = (
    (64, 64, 64),
    (256, 64, 64),
    (512, 64, 64),
    (256, 64, 16),
    (256, 64, 256),
)
MIN_REPEATS = 7
MAX_REPEATS = 61
BUDGET_S = 3.0  # per size, after the warm-up
TIME_SEED = 0

# (b) what each can learn
D_Q, D_K = 6, 10
N_KEYS = 8
H = 16
TEACHER_H = 8
STEPS = 400
BATCH = 128
LR = 1e-2
EVAL_EXAMPLES = 2000
SEEDS = (0, 1, 2)
TASKS = {
    "bilinear_teacher": f"the right key maximises q^T M k, M random ({D_Q}, {D_K})",
    "additive_teacher": f"the right key maximises w . tanh(A q + B k), {TEACHER_H} random hidden units",
}
STUDENTS = {
    "dot": f"(W_q q) . (W_k k), W_q ({H}, {D_Q}), W_k ({H}, {D_K}): the dot product of learned projections",
    "scaled_dot": f"(W_q q) . (W_k k) / sqrt({H}), the same projections",
    "bilinear": f"q^T W k, W ({D_Q}, {D_K})",
    "additive": f"w_v . tanh(W_q q + W_k k), W_q ({H}, {D_Q}), W_k ({H}, {D_K}), w_v ({H},)",
}


# --------------------------------------------------------------------------- the four scores
def dot_scores(q: Tensor, k: Tensor) -> Tensor:
    """``(..., m, d)``, ``(..., n, d)`` -> ``(..., m, n)``: one matrix product."""
    return q @ k.transpose(-2, -1)


def scaled_dot_scores(q: Tensor, k: Tensor) -> Tensor:
    """The dot product divided by ``sqrt(d)``: one matrix product and one division per score."""
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])


def bilinear_scores(q: Tensor, k: Tensor, W: Tensor) -> Tensor:
    """``q^T W k`` for every pair, ``W`` of shape ``(d_q, d_k)``: ``(Q W) K^T``, two matrix products."""
    return (q @ W) @ k.transpose(-2, -1)


def additive_scores(
    q: Tensor, k: Tensor, W_q: Tensor, W_k: Tensor, w_v: Tensor
) -> Tensor:
    """``w_v . tanh(W_q q + W_k k)`` for every pair: the course's reference (an ``(m, n, h)`` tensor inside)."""
    return attention.additive_scores(q, k, W_q, W_k, w_v)


# --------------------------------------------------------------------------- (a) time
def _quantile(values: list[float], p: float) -> float:
    """The ``p``-quantile of ``values`` with linear interpolation (p = 0.5 is the median)."""
    s = sorted(values)
    x = p * (len(s) - 1)
    lo = math.floor(x)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (x - lo)


def _summary(values: list[float], digits: int = 4) -> dict:
    return {
        "median": round(_quantile(values, 0.5), digits),
        "p25": round(_quantile(values, 0.25), digits),
        "p75": round(_quantile(values, 0.75), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
    }


def time_inputs(
    n: int, d: int, h: int, seed: int = TIME_SEED
) -> dict[str, tuple[Tensor, ...]]:
    """The arguments of each method at size ``(n, d, h)``: float32, standard normal, scaled weights."""
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(n, d, generator=g), torch.randn(n, d, generator=g)
    W = torch.randn(d, d, generator=g) / math.sqrt(d)
    W_q, W_k = (
        torch.randn(h, d, generator=g) / math.sqrt(d),
        torch.randn(h, d, generator=g) / math.sqrt(d),
    )
    w_v = torch.randn(h, generator=g) / math.sqrt(h)
    return {
        "dot": (q, k),
        "scaled_dot": (q, k),
        "bilinear": (q, k, W),
        "additive": (q, k, W_q, W_k, w_v),
    }


FUNCTIONS: dict[str, Callable[..., Tensor]] = {
    "dot": dot_scores,
    "scaled_dot": scaled_dot_scores,
    "bilinear": bilinear_scores,
    "additive": additive_scores,
}


def time_one_size(
    n: int,
    d: int,
    h: int,
    *,
    budget_s: float = BUDGET_S,
    min_repeats: int = MIN_REPEATS,
    max_repeats: int = MAX_REPEATS,
) -> dict:
    """Time every method at one size, in rotating rounds (see the module docstring)."""
    args = time_inputs(n, d, h)
    times: dict[str, list[float]] = {name: [] for name in METHODS}
    with torch.inference_mode():
        # warm-up: the first calls pay for allocation and kernel selection
        for _ in range(2):
            for name in METHODS:
                FUNCTIONS[name](*args[name])
        start = time.perf_counter()
        rounds = 0
        while rounds < max_repeats and (
            rounds < min_repeats or time.perf_counter() - start < budget_s
        ):
            order = (
                METHODS[rounds % len(METHODS) :]
                + METHODS[: rounds % len(METHODS)]
            )
            for name in order:
                t0 = time.perf_counter()
                FUNCTIONS[name](*args[name])
                times[name].append(time.perf_counter() - t0)
            rounds += 1
    row: dict = {
        "n": n,
        "m": n,
        "d": d,
        "h": h,
        "repeats": rounds,
        "additive_intermediate_mib": round(n * n * h * 4 / 2**20, 2),
        "scores_mib": round(n * n * 4 / 2**20, 3),
    }
    for name in METHODS:
        row[name] = {
            "ms": _summary([1e3 * t for t in times[name]]),
            "over_dot": _summary(
                [t / b for t, b in zip(times[name], times["dot"])], digits=3
            ),
        }
    return row


# --------------------------------------------------------------------------- (b) what each can learn
class Teacher:
    """The hidden score that decides which key is right; drawn from ``generator``."""

    def __init__(self, task: str, generator: torch.Generator):
        if task not in TASKS:
            raise ValueError(
                f"unknown task {task!r}; choose one of {sorted(TASKS)}"
            )
        self.task = task
        if task == "bilinear_teacher":
            self.M = torch.randn(D_Q, D_K, generator=generator)
        else:
            self.A = torch.randn(
                TEACHER_H, D_Q, generator=generator
            ) / math.sqrt(D_Q)
            self.B = torch.randn(
                TEACHER_H, D_K, generator=generator
            ) / math.sqrt(D_K)
            self.w = torch.randn(TEACHER_H, generator=generator)

    def scores(self, q: Tensor, k: Tensor) -> Tensor:
        """q ``(B, 1, D_Q)``, k ``(B, N_KEYS, D_K)`` -> ``(B, 1, N_KEYS)``."""
        if self.task == "bilinear_teacher":
            return bilinear_scores(q, k, self.M)
        return attention.additive_scores(q, k, self.A, self.B, self.w)


def retrieval_batch(
    teacher: Teacher, size: int, *, generator: torch.Generator
) -> tuple[Tensor, Tensor, Tensor]:
    """``size`` examples: queries ``(size, 1, D_Q)``, keys ``(size, N_KEYS, D_K)``, the right key's index ``(size,)``."""
    q = torch.randn(size, 1, D_Q, generator=generator)
    k = torch.randn(size, N_KEYS, D_K, generator=generator)
    return q, k, teacher.scores(q, k).squeeze(-2).argmax(-1)


class LearnedScore(nn.Module):
    """One of the four students: ``forward(q (B, m, D_Q), k (B, n, D_K)) -> scores (B, m, n)``."""

    def __init__(self, kind: str):
        super().__init__()
        if kind not in STUDENTS:
            raise ValueError(
                f"unknown score {kind!r}; choose one of {sorted(STUDENTS)}"
            )
        self.kind = kind
        if kind == "bilinear":
            self.W = nn.Parameter(torch.randn(D_Q, D_K) / math.sqrt(D_Q))
        else:
            self.W_q = nn.Linear(D_Q, H, bias=False)
            self.W_k = nn.Linear(D_K, H, bias=False)
            if kind == "additive":
                self.w_v = nn.Linear(H, 1, bias=False)

    def forward(self, q: Tensor, k: Tensor) -> Tensor:
        if self.kind == "bilinear":
            return bilinear_scores(q, k, self.W)
        if self.kind == "additive":
            return attention.additive_scores(
                q, k, self.W_q.weight, self.W_k.weight, self.w_v.weight[0]
            )
        scores = dot_scores(self.W_q(q), self.W_k(k))
        return scores / math.sqrt(H) if self.kind == "scaled_dot" else scores


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def train_student(
    kind: str, teacher: Teacher, *, seed: int, steps: int = STEPS
) -> tuple[LearnedScore, list[float]]:
    """Adam on fresh batches: the softmax over the candidates against the right key (cross-entropy)."""
    torch.manual_seed(seed)
    model = LearnedScore(kind)
    # the same training data for every student
    generator = torch.Generator().manual_seed(10_000 + seed)
    trainer = Trainer(model, torch.optim.Adam(model.parameters(), lr=LR))
    losses = []
    for _ in range(steps):
        q, k, target = retrieval_batch(teacher, BATCH, generator=generator)
        # (B, N_KEYS): the scores the attention softmax turns into weights
        logits = model(q, k).squeeze(-2)
        losses.append(
            trainer.step(nn.functional.cross_entropy(logits, target))
        )
    return model, losses


@torch.no_grad()
def accuracy(
    model: LearnedScore, q: Tensor, k: Tensor, target: Tensor
) -> float:
    """The fraction of examples whose highest attention weight falls on the right key."""
    return float(
        (model(q, k).squeeze(-2).argmax(-1) == target).double().mean()
    )


def run_seed(seed: int, *, steps: int, eval_examples: int) -> dict:
    """Every teacher and every student of one seed: final accuracy, last losses, parameter counts."""
    out: dict = {"accuracy": {}, "final_train_loss": {}}
    for t, task in enumerate(TASKS):
        teacher = Teacher(
            task, torch.Generator().manual_seed(1000 * (t + 1) + seed)
        )
        test = retrieval_batch(
            teacher,
            eval_examples,
            generator=torch.Generator().manual_seed(20_000 + 100 * t + seed),
        )
        out["accuracy"][task], out["final_train_loss"][task] = {}, {}
        for kind in STUDENTS:
            model, losses = train_student(
                kind, teacher, seed=seed, steps=steps
            )
            out["accuracy"][task][kind] = accuracy(model, *test)
            out["final_train_loss"][task][kind] = statistics.fmean(
                losses[-20:]
            )
    return out


def _spread(values: list[float]) -> dict:
    return {
        "per_seed": [round(v, 4) for v in values],
        "mean": round(statistics.fmean(values), 4),
        "std": round(statistics.stdev(values), 4)
        if len(values) > 1
        else 0.0,
        "min": round(min(values), 4),
        "max": round(max(values), 4),
    }


def summarise(per_seed: list[dict]) -> dict:
    return {
        part: {
            task: {
                kind: _spread([s[part][task][kind] for s in per_seed])
                for kind in STUDENTS
            }
            for task in TASKS
        }
        for part in ("accuracy", "final_train_loss")
    }


# --------------------------------------------------------------------------- report
def _print_time(rows: list[dict]) -> None:
    print(
        f"time per call (median and quartiles, ms) and the per-round ratio to dot; threads {torch.get_num_threads()}"
    )
    print(
        f"{'(n, d, h)':>14} {'rounds':>6} {'score':>11} {'median ms':>10} {'quartiles ms':>18} {'x dot':>7}"
    )
    for r in rows:
        for i, name in enumerate(METHODS):
            ms = r[name]["ms"]
            size, rounds = (
                (str((r["n"], r["d"], r["h"])), str(r["repeats"]))
                if i == 0
                else ("", "")
            )
            print(
                f"{size:>14} {rounds:>6} {name:>11} {ms['median']:>10.3f} "
                f"{'[' + format(ms['p25'], '.3f') + ', ' + format(ms['p75'], '.3f') + ']':>18} "
                f"{r[name]['over_dot']['median']:>7.2f}"
            )


def _print_learning(summary: dict, seeds: tuple[int, ...]) -> None:
    print(
        f"accuracy after training, mean [min, max] over {len(seeds)} seed(s); chance {1 / N_KEYS:.3f}"
    )
    print(f"{'task':>18} " + " ".join(f"{kind:>22}" for kind in STUDENTS))
    for task in TASKS:
        cells = [summary["accuracy"][task][kind] for kind in STUDENTS]
        print(
            f"{task:>18} "
            + " ".join(
                f"{c['mean']:>8.3f} [{c['min']:.3f}, {c['max']:.3f}]"
                for c in cells
            )
        )


def run(argv: list[str] | None = None) -> dict:
    """Measure, print and (unless a --quick run has no --out-dir) write the result; returns its data."""
    parser = argparse.ArgumentParser(
        prog=COMMAND, description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="tiny run (small sizes, one seed, few steps): checks that it works, proves nothing",
    )
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=None,
        help="write the json here instead of results/ (e.g. a temporary directory); "
        "--quick writes nothing without it",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (default 1: steadier timings on a shared machine)",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    sizes = ((32, 16, 16), (64, 16, 8)) if args.quick else TIME_SIZES
    seeds = SEEDS[:1] if args.quick else SEEDS
    steps = 20 if args.quick else STEPS
    eval_examples = 200 if args.quick else EVAL_EXAMPLES

    start, load_before = time.perf_counter(), os.getloadavg()
    time_rows = [
        time_one_size(
            n,
            d,
            h,
            budget_s=0.05 if args.quick else BUDGET_S,
            min_repeats=3 if args.quick else MIN_REPEATS,
        )
        for n, d, h in sizes
    ]
    _print_time(time_rows)
    print()
    per_seed = []
    for seed in seeds:
        t0 = time.perf_counter()
        per_seed.append(
            run_seed(seed, steps=steps, eval_examples=eval_examples)
        )
        print(f"seed {seed}: {time.perf_counter() - t0:.1f} s")
    summary = summarise(per_seed)
    _print_learning(summary, seeds)
    wall, load_after = time.perf_counter() - start, os.getloadavg()
    print(
        f"wall time {wall:.0f} s; load average before {load_before[0]:.2f}, after {load_after[0]:.2f}"
    )

    data = {
        "time": {
            "description": "time per call of the (m, n) score matrix, m = n queries against n keys of size d",
            "dtype": "float32",
            "threads": torch.get_num_threads(),
            "min_repeats": MIN_REPEATS,
            "budget_s_per_size": BUDGET_S,
            "statistic": "median and quartiles of the calls; per-round ratio to dot",
            "rows": time_rows,
        },
        "learning": {
            "description": f"retrieval with queries of size {D_Q} and keys of size {D_K}: pick the right key among "
            f"{N_KEYS} candidates, as a hidden teacher score ranks them",
            "d_q": D_Q,
            "d_k": D_K,
            "n_keys": N_KEYS,
            "chance": 1 / N_KEYS,
            "hidden": H,
            "teacher_hidden": TEACHER_H,
            "tasks": TASKS,
            "students": STUDENTS,
            "parameters": {
                kind: count_parameters(LearnedScore(kind))
                for kind in STUDENTS
            },
            "training": {
                "steps": steps,
                "batch_size": BATCH,
                "optimizer": "Adam",
                "lr": LR,
                "loss": "cross-entropy of the softmax over the candidates",
                "eval_examples": eval_examples,
                "evaluated": "once, after the last step (no selection)",
            },
            "seeds": list(seeds),
            "accuracy": summary["accuracy"],
            "final_train_loss": summary["final_train_loss"],
        },
        "quick": args.quick,
        "load_average_1min": {
            "before": round(load_before[0], 2),
            "after": round(load_after[0], 2),
        },
    }
    if args.quick and args.out_dir is None:
        return data  # a smoke test never replaces the stored result
    command = (
        COMMAND
        + (" --quick" if args.quick else "")
        + (f" --threads {args.threads}" if args.threads != 1 else "")
    )
    path = write_result(
        RESULT,
        data,
        dataset="synthetic random tensors (standard normal, seeded)",
        split="none: each student is evaluated once, after its last step, on held-out examples",
        wall_time_s=wall,
        command=command,
        directory=args.out_dir,
    )
    print(
        f"wrote {path.relative_to(ROOT) if ROOT and path.is_relative_to(ROOT) else path}"
    )
    return data


def main(argv: list[str] | None = None) -> int:
    run(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
