"""Greedy decoding with and without a key-value cache, side by side (chapter 06).

Run from the repository root (under a minute on a 2-core laptop CPU)::

    python -m benchmarks.kv_cache                  # writes results/bench_kv_cache.json
    python -m benchmarks.kv_cache --quick          # small sizes, prints only (a smoke test)
    python -m benchmarks.kv_cache --threads 2      # torch threads (default 1, as chapter 06 runs)
    python -m benchmarks.kv_cache --out-dir DIR    # write DIR/bench_kv_cache.json instead

It measures, in one run on one machine, the time of one call of
``course_utils.references.decoding.greedy_decode`` (the decoder runs on the whole prefix at
every step) and of ``greedy_decode_cached`` (``Seq2SeqTransformer.decode_step``: the newest
position only, with each layer's self-attention keys and values cached), for outputs of
``LENGTHS`` tokens.  The model has the sizes of chapter 06's trained model
(``seq2seq_task.TrainConfig``'s defaults) with random weights (seed 0) and room for the longest
output (``max_len``); no token counts as end-of-sequence, so every call takes exactly T steps.
The batch is ``BATCH`` random digit strings of 12 tokens.

Each length gets one warm-up call of each decoder, then ``REPEATS`` rounds that call both,
alternately first (A B, then B A, ...).  The json holds, per length, the median time of each
decoder, the smallest and largest, and the ratio cached/uncached of the medians with the range of
the per-round ratios; and whether the two decoders produced the same tokens.  The machine is
shared with whatever else runs on it: the json records the load average before and after, and
the number of threads PyTorch used.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

from course_utils.models.transformer import Seq2SeqTransformer
from course_utils.references.decoding import (
    greedy_decode,
    greedy_decode_cached,
)
from course_utils.results import write_result
from course_utils.training import seq2seq_task

ROOT = Path(__file__).resolve().parents[1]
COMMAND = "python -m benchmarks.kv_cache"
LENGTHS = [16, 32, 64, 128, 256]
QUICK_LENGTHS = [4, 8]
BATCH = 4
SOURCE_LEN = 12
REPEATS = 5
SEED = 0
NO_EOS = -1  # no token id is -1: every output runs for max_new_tokens steps

DECODERS = {"uncached": greedy_decode, "cached": greedy_decode_cached}


def build(
    max_new_tokens: int, batch: int = BATCH
) -> tuple[Seq2SeqTransformer, torch.Tensor]:
    """The model (chapter 06's sizes, random weights, eval mode) and a batch of random sources."""
    cfg = seq2seq_task.TrainConfig()
    torch.manual_seed(SEED)
    model = Seq2SeqTransformer(
        seq2seq_task.VOCAB_SIZE,
        seq2seq_task.VOCAB_SIZE,
        d_model=cfg.d_model,
        num_heads=cfg.num_heads,
        num_encoder_layers=cfg.num_encoder_layers,
        num_decoder_layers=cfg.num_decoder_layers,
        d_ff=cfg.d_ff,
        dropout=0.0,
        max_len=max(max_new_tokens + 1, SOURCE_LEN),
        pad_id=seq2seq_task.PAD,
        norm_first=cfg.norm_first,
    ).eval()
    g = torch.Generator().manual_seed(SEED)
    src = torch.randint(
        seq2seq_task.FIRST_DIGIT,
        seq2seq_task.VOCAB_SIZE,
        (batch, SOURCE_LEN),
        generator=g,
    )
    return model, src


def time_one_length(
    model: Seq2SeqTransformer,
    src: torch.Tensor,
    new_tokens: int,
    repeats: int = REPEATS,
) -> dict:
    """Both decoders on ``src`` for ``new_tokens`` steps: medians, ranges and the ratio (see the docstring)."""

    def call(name: str) -> torch.Tensor:
        return DECODERS[name](
            model,
            src,
            new_tokens,
            seq2seq_task.BOS,
            NO_EOS,
            seq2seq_task.PAD,
        )

    with torch.inference_mode():
        # warm-up, and the tokens to compare
        outputs = {name: call(name) for name in DECODERS}
        times: dict[str, list[float]] = {name: [] for name in DECODERS}
        for r in range(repeats):
            for name in (
                list(DECODERS) if r % 2 == 0 else list(DECODERS)[::-1]
            ):
                start = time.perf_counter()
                call(name)
                times[name].append(time.perf_counter() - start)
    ms = {name: 1e3 * statistics.median(ts) for name, ts in times.items()}
    ratios = [c / u for c, u in zip(times["cached"], times["uncached"])]
    return {
        "new_tokens": new_tokens,
        "uncached_ms": round(ms["uncached"], 3),
        "uncached_ms_range": [
            round(1e3 * min(times["uncached"]), 3),
            round(1e3 * max(times["uncached"]), 3),
        ],
        "cached_ms": round(ms["cached"], 3),
        "cached_ms_range": [
            round(1e3 * min(times["cached"]), 3),
            round(1e3 * max(times["cached"]), 3),
        ],
        "cached_over_uncached": round(ms["cached"] / ms["uncached"], 4),
        "cached_over_uncached_range": [
            round(min(ratios), 4),
            round(max(ratios), 4),
        ],
        "speedup": round(ms["uncached"] / ms["cached"], 3),
        "same_tokens": bool(
            torch.equal(outputs["cached"], outputs["uncached"])
        ),
        "repeats": repeats,
    }


def _print(rows: list[dict], batch: int) -> None:
    print(
        f"greedy decoding of {batch} sources, one call, median over rounds [min - max], "
        f"{torch.get_num_threads()} threads"
    )
    print(
        f"{'T':>5} {'uncached':>24} {'cached':>24} {'cached/uncached':>22} {'speed-up':>9} {'same tokens':>12}"
    )
    for r in rows:
        lo, hi = r["cached_over_uncached_range"]
        print(
            f"{r['new_tokens']:>5} "
            f"{r['uncached_ms']:>9.2f} [{r['uncached_ms_range'][0]:.2f}-{r['uncached_ms_range'][1]:.2f}] ms "
            f"{r['cached_ms']:>9.2f} [{r['cached_ms_range'][0]:.2f}-{r['cached_ms_range'][1]:.2f}] ms "
            f"{r['cached_over_uncached']:>8.3f} [{lo:.3f}-{hi:.3f}] {r['speedup']:>9.2f} {str(r['same_tokens']):>12}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=COMMAND, description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small sizes, print only (writes only with --out-dir)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (default 1, as chapter 06 runs; 0 = PyTorch's choice)",
    )
    parser.add_argument(
        "--batch",
        type=int,
        default=BATCH,
        help=f"sources per call (default {BATCH})",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=None,
        help=f"rounds per length (default {REPEATS})",
    )
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=None,
        help="write bench_kv_cache.json here, not in results/",
    )
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    repeats = args.repeats or (2 if args.quick else REPEATS)
    lengths = QUICK_LENGTHS if args.quick else LENGTHS

    start = time.perf_counter()
    load_before = os.getloadavg()
    model, src = build(max(lengths), args.batch)
    rows = [time_one_length(model, src, n, repeats) for n in lengths]
    load_after = os.getloadavg()
    wall = time.perf_counter() - start
    _print(rows, args.batch)
    print(
        f"wall time {wall:.0f} s; load average before {load_before[0]:.2f}, after {load_after[0]:.2f}"
    )
    if args.quick and args.out_dir is None:
        return 0
    data = {
        "model": {
            **model.config,
            "num_params": sum(p.numel() for p in model.parameters()),
            "weights": f"random (torch.manual_seed({SEED})), chapter 06's trained sizes, eval mode",
        },
        "decoders": {
            "uncached": "references.decoding.greedy_decode",
            "cached": "references.decoding.greedy_decode_cached",
        },
        "batch": args.batch,
        "source_len": SOURCE_LEN,
        "dtype": "float32",
        "eos": "none: every call decodes exactly new_tokens tokens",
        "threads": torch.get_num_threads(),
        "statistic": "median over rounds, [min, max] as range",
        "quick": args.quick,
        "rows": rows,
        "load_average_1min": {
            "before": round(load_before[0], 2),
            "after": round(load_after[0], 2),
        },
    }
    command = COMMAND + "".join(
        f" {a}" for a in (argv if argv is not None else sys.argv[1:])
    )
    path = write_result(
        "bench_kv_cache",
        data,
        wall_time_s=wall,
        command=command,
        directory=args.out_dir,
        dataset=f"synthetic random digit strings ({args.batch} of {SOURCE_LEN} tokens, seed {SEED})",
    )
    print(
        f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
