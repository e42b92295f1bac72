"""Longer inputs than in training (chapter 05): three kinds of position information on sequences
longer than any a model was trained on.

Run from the repository root (about half a minute of CPU time on one thread; the json records the
wall time)::

    python -m course_utils.experiments.position_extrapolation            # writes results/ch05_position_extrapolation.json
    python -m course_utils.experiments.position_extrapolation --quick --out-dir /tmp/ch05   # tiny sizes: a smoke test

**The task.** Random sequences of tokens drawn uniformly from ``VOCAB`` symbols; at every
position ``p >= K`` the model must output the token ``K`` places to the left, ``tokens[p - K]``
(positions ``0 .. K-1`` have no such token and are left out of the loss and of the accuracy).
The model is one attention layer with a linear readout and no residual connection, so the
readout sees only what attention gathered: the head must find "the key ``K`` places back" from
the position information alone, since the tokens are random.

**The variants.** Each seed trains two models on sequences of ``TRAIN_LENGTH`` tokens:

- ``sinusoidal``: the fixed encoding added to the token embeddings; at any length the model gets
  ``sinusoidal_encoding(n, d)``, defined for every position;
- a learned table of ``TRAIN_LENGTH`` rows (``LearnedPositionalEmbedding``), evaluated two ways
  on a longer sequence of ``n`` tokens:
  ``learned_interpolated``, the table resampled to ``n`` rows (``interpolate_positions``), and
  ``learned_new_rows``, the table extended by ``n - TRAIN_LENGTH`` rows that were never trained
  (drawn as the embedding initialises its rows: what a table of ``n`` rows holds there after
  training on shorter sequences, since no gradient ever reaches them).
  At the training length both are the trained model itself.

Each model is evaluated on ``EVAL_SEQUENCES`` fresh sequences of each length in ``EVAL_LENGTHS``
(the same sequences for every model and seed: paired comparisons).  The accuracy is reported
over all positions ``p >= K``, and separately over the positions the model has seen in training
(``p < TRAIN_LENGTH``) and the new ones.

**Fine-tuning.** The ViT and DeiT resample their position embeddings to *fine-tune* at a higher
resolution, not to use them as they are.  So each trained model is also fine-tuned (every
parameter, Adam) on sequences of the longest length, starting from each way of extending its
positions, and evaluated at that length after each of ``FINETUNE_CHECKPOINTS`` steps.

Everything is repeated for ``SEEDS`` (initialisation and training data); the json holds each
seed's numbers, their mean, sample standard deviation, minimum and maximum.  The machine is
shared with whatever else runs on it: the json records the load average before and after.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import Tensor, nn

from ..references import multihead, positional
from ..results import checkout_root, write_result
from ..training.trainer import Trainer

ROOT = checkout_root()  # None for an installed copy
COMMAND = "python -m course_utils.experiments.position_extrapolation"
RESULT = "ch05_position_extrapolation"
K = 2  # copy the token K places to the left
VOCAB = 16
D_MODEL = 32
HEADS = 1
TRAIN_LENGTH = 16
EVAL_LENGTHS = (16, 24, 32)
STEPS = 500
BATCH = 64
LR = 1e-2
FINETUNE_LR = 3e-3
FINETUNE_CHECKPOINTS = (0, 25, 50, 100, 200)
EVAL_SEQUENCES = 2000
EVAL_SEED = 12345
SEEDS = (0, 1, 2)
VARIANTS = {
    "sinusoidal": "sinusoidal encoding, defined for every position",
    "learned_interpolated": f"learned table of {TRAIN_LENGTH} rows, linearly interpolated to the new length",
    "learned_new_rows": f"learned table of {TRAIN_LENGTH} rows, extended by rows never trained",
}


# --------------------------------------------------------------------------- task and model
def copy_batch(
    batch_size: int, length: int, *, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """tokens ``(B, n)`` and targets ``(B, n)``: ``targets[:, p] = tokens[:, p - K]``, and -100 (ignored) for p < K."""
    tokens = torch.randint(VOCAB, (batch_size, length), generator=generator)
    targets = torch.full_like(tokens, -100)
    targets[:, K:] = tokens[:, :-K]
    return tokens, targets


class CopyModel(nn.Module):
    """Token embedding plus positions, one attention layer, a linear readout: ``(B, n) -> (B, n, VOCAB)``.

    ``learned_rows=None`` adds the sinusoidal encoding of whatever length comes in; otherwise
    a ``LearnedPositionalEmbedding`` of that many rows, which refuses longer sequences.
    """

    def __init__(self, learned_rows: int | None = None):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        self.pos = (
            None
            if learned_rows is None
            else positional.LearnedPositionalEmbedding(learned_rows, D_MODEL)
        )
        self.attention = multihead.MultiHeadAttention(D_MODEL, HEADS)
        self.readout = nn.Linear(D_MODEL, VOCAB)

    def forward(self, tokens: Tensor) -> Tensor:
        x = self.embed(tokens)
        if self.pos is None:
            x = x + positional.sinusoidal_encoding(
                tokens.shape[-1], D_MODEL, device=x.device
            )
        else:
            x = self.pos(x)
        out, _ = self.attention(x, x, x)
        return self.readout(out)


def extended(
    model: CopyModel, variant: str, length: int, *, seed: int
) -> CopyModel:
    """A copy of ``model`` that accepts ``length`` tokens, its positions extended as ``variant`` says."""
    out = copy.deepcopy(model)
    if variant == "sinusoidal" or length <= model.pos.weight.shape[0]:
        return out
    trained = model.pos.weight.detach()
    if variant == "learned_interpolated":
        table = positional.interpolate_positions(trained, length)
    elif variant == "learned_new_rows":
        # the untrained rows, drawn as LearnedPositionalEmbedding draws them
        torch.manual_seed(seed)
        fresh = positional.LearnedPositionalEmbedding(
            length - trained.shape[0], D_MODEL
        ).weight.detach()
        table = torch.cat([trained, fresh])
    else:
        raise ValueError(f"unknown variant {variant!r}")
    out.pos = positional.LearnedPositionalEmbedding(length, D_MODEL)
    with torch.no_grad():
        out.pos.weight.copy_(table)
    return out


def train(
    model: CopyModel, *, length: int, steps: int, lr: float, seed: int
) -> list[float]:
    """Adam on fresh batches of ``length`` tokens (nothing to overfit); returns every step's loss."""
    generator = torch.Generator().manual_seed(seed)
    trainer = Trainer(model, torch.optim.Adam(model.parameters(), lr=lr))
    model.train()
    losses = []
    for _ in range(steps):
        tokens, targets = copy_batch(BATCH, length, generator=generator)
        logits = model(tokens)
        losses.append(
            trainer.step(
                nn.functional.cross_entropy(
                    logits.flatten(0, 1), targets.flatten()
                )
            )
        )
    model.eval()
    return losses


@torch.no_grad()
def accuracy(
    model: CopyModel, tokens: Tensor, targets: Tensor
) -> dict[str, float | None]:
    """Accuracy over positions ``p >= K``: all of them, those seen in training, the new ones (None if none)."""
    model.eval()
    correct = (model(tokens).argmax(-1) == targets).double()  # (B, n)
    n = tokens.shape[-1]
    seen = slice(K, min(n, TRAIN_LENGTH))
    return {
        "all": float(correct[:, K:].mean()),
        "seen_positions": float(correct[:, seen].mean()),
        "new_positions": float(correct[:, TRAIN_LENGTH:].mean())
        if n > TRAIN_LENGTH
        else None,
    }


# --------------------------------------------------------------------------- one seed
def run_seed(
    seed: int,
    eval_sets: dict[int, tuple[Tensor, Tensor]],
    *,
    steps: int,
    checkpoints: tuple[int, ...],
) -> dict:
    """Train the two models of one seed; evaluate the three variants at every length; fine-tune at the longest."""
    longest = max(eval_sets)
    models, losses = {}, {}
    for kind, rows in (("sinusoidal", None), ("learned", TRAIN_LENGTH)):
        torch.manual_seed(seed)
        models[kind] = CopyModel(rows)
        losses[kind] = train(
            models[kind], length=TRAIN_LENGTH, steps=steps, lr=LR, seed=seed
        )
    out: dict = {
        "final_train_loss": {
            kind: round(statistics.fmean(curve[-20:]), 4)
            for kind, curve in losses.items()
        },
        "accuracy": {},
        "finetune": {},
    }
    for variant in VARIANTS:
        base = models["sinusoidal" if variant == "sinusoidal" else "learned"]
        out["accuracy"][variant] = {
            n: accuracy(
                extended(base, variant, n, seed=1000 + seed), *eval_sets[n]
            )
            for n in sorted(eval_sets)
        }
        # fine-tune at the longest length, from this way of extending the positions
        model = extended(base, variant, longest, seed=1000 + seed)
        curve, done = [], 0
        for step in checkpoints:
            if step > done:
                train(
                    model,
                    length=longest,
                    steps=step - done,
                    lr=FINETUNE_LR,
                    seed=2000 + seed + done,
                )
                done = step
            curve.append(accuracy(model, *eval_sets[longest])["all"])
        out["finetune"][variant] = curve
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


def summarise(
    per_seed: list[dict], lengths: list[int], checkpoints: tuple[int, ...]
) -> dict:
    """Per variant and length: each seed's accuracy, the mean, the spread; the fine-tuning curves alike."""
    table = {}
    for variant in VARIANTS:
        table[variant] = {}
        for n in lengths:
            row = {}
            for part in ("all", "seen_positions", "new_positions"):
                values = [s["accuracy"][variant][n][part] for s in per_seed]
                row[part] = None if values[0] is None else _spread(values)
            table[variant][str(n)] = row
    finetune = {
        variant: [
            _spread([s["finetune"][variant][i] for s in per_seed])
            for i in range(len(checkpoints))
        ]
        for variant in VARIANTS
    }
    return {"accuracy": table, "finetune": finetune}


def _print(
    summary: dict,
    lengths: list[int],
    checkpoints: tuple[int, ...],
    longest: int,
    seeds: int,
) -> None:
    print(
        f"accuracy (copy the token {K} places to the left), trained on length {TRAIN_LENGTH}; "
        f"mean [min, max] over {seeds} seed(s); chance {1 / VOCAB:.3f}"
    )
    print(
        f"{'variant':>22} "
        + " ".join(f"{'n = ' + str(n):>22}" for n in lengths)
        + f" {'new positions, n = ' + str(longest):>26}"
    )
    for variant in VARIANTS:
        cells = [
            summary["accuracy"][variant][str(n)]["all"] for n in lengths
        ]
        new = summary["accuracy"][variant][str(longest)]["new_positions"]
        print(
            f"{variant:>22} "
            + " ".join(
                f"{c['mean']:>8.3f} [{c['min']:.3f}, {c['max']:.3f}]"
                for c in cells
            )
            + (
                f" {new['mean']:>12.3f} [{new['min']:.3f}, {new['max']:.3f}]"
                if new
                else ""
            )
        )
    print(
        f"after fine-tuning at length {longest}: accuracy at steps {list(checkpoints)} (mean over seeds)"
    )
    for variant in VARIANTS:
        print(
            f"{variant:>22} "
            + " ".join(
                f"{c['mean']:.3f}" for c in summary["finetune"][variant]
            )
        )


def run(argv: list[str] | None = None) -> dict:
    """Parse ``argv`` and ``measure``; returns the result's data."""
    parser = argparse.ArgumentParser(
        prog=COMMAND, description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="tiny run (1 seed, few steps, small evaluation sets): "
        "checks that it works, proves nothing",
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
        help="torch threads (default 1: the matrices are tiny, more threads only add waiting)",
    )
    args = parser.parse_args(argv)
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        return measure(args)
    finally:
        # as it was: a caller (a test) keeps its own setting
        torch.set_num_threads(threads)


def measure(args: argparse.Namespace) -> dict:
    """Train, evaluate, print and (unless a --quick run has no --out-dir) write the result; returns its data."""
    seeds = SEEDS[:1] if args.quick else SEEDS
    steps = 30 if args.quick else STEPS
    checkpoints = (0, 5) if args.quick else FINETUNE_CHECKPOINTS
    sequences = 64 if args.quick else EVAL_SEQUENCES
    lengths = list(EVAL_LENGTHS)
    longest = max(lengths)

    start, load_before = time.perf_counter(), os.getloadavg()
    eval_sets = {
        n: copy_batch(
            sequences,
            n,
            generator=torch.Generator().manual_seed(EVAL_SEED + n),
        )
        for n in lengths
    }
    per_seed = []
    for seed in seeds:
        t0 = time.perf_counter()
        per_seed.append(
            run_seed(seed, eval_sets, steps=steps, checkpoints=checkpoints)
        )
        print(f"seed {seed}: {time.perf_counter() - t0:.1f} s")
    summary = summarise(per_seed, lengths, checkpoints)
    wall, load_after = time.perf_counter() - start, os.getloadavg()
    _print(summary, lengths, checkpoints, longest, len(seeds))
    print(
        f"wall time {wall:.0f} s; load average before {load_before[0]:.2f}, after {load_after[0]:.2f}"
    )

    data = {
        "task": {
            "description": f"copy the token {K} places to the left (positions p >= {K}; "
            f"tokens uniform over {VOCAB} symbols)",
            "k": K,
            "vocab": VOCAB,
            "chance": 1 / VOCAB,
            "train_length": TRAIN_LENGTH,
            "eval_lengths": lengths,
            "eval_sequences": sequences,
        },
        "model": {
            "description": "token embedding + positions, one attention layer, linear readout, no residual",
            "d_model": D_MODEL,
            "heads": HEADS,
        },
        "training": {
            "steps": steps,
            "batch_size": BATCH,
            "optimizer": "Adam",
            "lr": LR,
            "finetune_length": longest,
            "finetune_lr": FINETUNE_LR,
            "finetune_checkpoints": list(checkpoints),
            "threads": torch.get_num_threads(),
        },
        "seeds": list(seeds),
        "variants": VARIANTS,
        "accuracy": summary["accuracy"],
        "finetune": summary["finetune"],
        "final_train_loss": {
            kind: _spread([s["final_train_loss"][kind] for s in per_seed])
            for kind in ("sinusoidal", "learned")
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
        dataset="synthetic token sequences (uniform random tokens, seeded)",
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
