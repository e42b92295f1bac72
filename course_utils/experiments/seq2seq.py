"""Chapter 06's training run: a small Transformer learns to reverse digit strings.

    python -m course_utils.experiments.seq2seq                             # the full run: writes results/ch06_seq2seq.json
                                                                            # and the weights results/ch06_seq2seq_model.pth
    python -m course_utils.experiments.seq2seq --set steps=200 --no-write  # a short trial
    python -m course_utils.experiments.seq2seq --set task=sort num_encoder_layers=3 num_decoder_layers=3

The run's settings are ``TrainConfig``'s defaults (the model chapter 06 also trains live, in
fast mode); ``--set`` changes any of its fields, type-checked (``training.recipes.apply_overrides``).
The run trains on fresh batches for a fixed number of steps, watches a validation set (never
used to choose), and evaluates the test set once, with greedy decoding, beam search and sampling
at several temperatures.  One thread by default (``--threads``): the model is tiny, and on a
machine whose cores are busy with other work, PyTorch's threads wait for each other.  The task,
the model and the training loop are ``training/seq2seq_task.py``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch

from .. import results
from ..training.recipes import apply_overrides
from ..training.seq2seq_task import (
    BOS,
    EOS,
    FIRST_DIGIT,
    MODEL_FILE,
    PAD,
    VOCAB_SIZE,
    HeldOut,
    TrainConfig,
    decode,
    evaluate_decoding,
    make_heldout,
    to_text,
    train_seq2seq,
)

__all__ = ["RESULT", "run", "main"]

RESULT = "ch06_seq2seq"
COMMAND = "python -m course_utils.experiments.seq2seq"


def _examples(
    model, data: HeldOut, cfg: TrainConfig, count: int = 6
) -> list[dict[str, str]]:
    src, tgt = data.src[:count], data.tgt[:count]
    n = tgt.shape[1] - 1
    rows = {
        "source": [to_text(s) for s in src],
        "target": [to_text(t) for t in tgt],
        "greedy": [to_text(p) for p in decode(model, src, "greedy", n)],
        "beam": [
            to_text(p)
            for p in decode(model, src, "beam", n, beam_size=cfg.beam_size)
        ],
    }
    generator = torch.Generator().manual_seed(cfg.seed + 3)
    for temp in cfg.temperatures:
        rows[f"sample_T{temp:g}"] = [
            to_text(p)
            for p in decode(
                model,
                src,
                "sample",
                n,
                temperature=temp,
                generator=generator,
            )
        ]
    return [{key: rows[key][i] for key in rows} for i in range(len(src))]


def run(
    cfg: TrainConfig,
    *,
    write: bool = True,
    log: Callable[[str], None] | None = print,
    directory: Path | None = None,
    command: str | None = None,
) -> dict[str, Any]:
    """Train, evaluate on the test set once, and (with ``write``) save the result file and the weights."""
    # the code that runs, even if the checkout changes meanwhile
    code_at_start = results.code_version()
    load_before = os.getloadavg()
    wall_start = time.perf_counter()
    task = cfg.task_config
    test = make_heldout(cfg.test_size, task, seed=10_000 + cfg.seed)
    val = make_heldout(
        cfg.val_size, task, seed=20_000 + cfg.seed, exclude=test.keys
    )
    exclude = torch.cat([test.keys, val.keys])
    model, history = train_seq2seq(cfg, log=log, val=val, exclude=exclude)

    tick = time.perf_counter()
    test_results: dict[str, Any] = {"size": len(test)}
    greedy_acc, greedy_hit, _ = evaluate_decoding(model, test, "greedy")
    beam_acc, beam_hit, _ = evaluate_decoding(
        model, test, "beam", beam_size=cfg.beam_size
    )
    test_results["greedy"] = {"exact_match": greedy_acc}
    test_results["beam"] = {
        "exact_match": beam_acc,
        "beam_size": cfg.beam_size,
        "disagreements_with_greedy": int((greedy_hit != beam_hit).sum()),
    }
    test_results["sampling"] = []
    for temp in cfg.temperatures:
        generator = torch.Generator().manual_seed(cfg.seed + 2)
        acc, hit, outputs = evaluate_decoding(
            model, test, "sample", temperature=temp, generator=generator
        )
        # the first few mistakes, in test-set order
        wrong = (~hit).nonzero().flatten()[:4].tolist()
        test_results["sampling"].append(
            {
                "temperature": temp,
                "exact_match": acc,
                "first_mistakes": [
                    {
                        "source": to_text(test.src[i]),
                        "target": to_text(test.tgt[i]),
                        "sampled": to_text(outputs[i]),
                    }
                    for i in wrong
                ],
            }
        )
    lengths = (test.src != PAD).sum(dim=1)
    test_results["greedy_by_length"] = {
        int(n): float(greedy_hit[lengths == n].double().mean())
        for n in lengths.unique()
    }
    test_time = time.perf_counter() - tick
    wall = time.perf_counter() - wall_start
    load_after = os.getloadavg()

    num_params = sum(p.numel() for p in model.parameters())
    data = {
        "task": dataclasses.asdict(task),
        "vocab": {
            "PAD": PAD,
            "BOS": BOS,
            "EOS": EOS,
            "digits": f"{FIRST_DIGIT}..{VOCAB_SIZE - 1}",
            "size": VOCAB_SIZE,
        },
        "model": {**model.config, "num_params": num_params},
        "training": {
            key: value
            for key, value in dataclasses.asdict(cfg).items()
            if key
            in (
                "steps",
                "batch_size",
                "lr",
                "warmup_steps",
                "grad_clip",
                "seed",
                "eval_every",
            )
        },
        "training_curve": {
            k: history[k]
            for k in ("step", "train_loss", "val_exact_match", "elapsed_s")
        },
        "train_time_s": history["train_time_s"],
        "val_eval_time_s": history["eval_time_s"],
        "test_eval_time_s": round(test_time, 2),
        "val_size": len(val),
        "test": test_results,
        "examples": _examples(model, test, cfg),
        "load_average_1min": {
            "start": round(load_before[0], 2),
            "end": round(load_after[0], 2),
        },
        "model_file": MODEL_FILE if write else None,
    }
    if log:
        log(
            f"test exact match: greedy {greedy_acc:.4f}, beam({cfg.beam_size}) {beam_acc:.4f}, "
            + ", ".join(
                f"sampling T={s['temperature']:g} {s['exact_match']:.4f}"
                for s in test_results["sampling"]
            )
        )
        log(
            f"training {history['train_time_s']:.1f} s, whole run {wall:.1f} s, {num_params} parameters, "
            f"load average {load_before[0]:.2f} -> {load_after[0]:.2f} on {os.cpu_count()} cores"
        )
    if write:
        path = results.write_result(
            RESULT,
            data,
            dataset=f"synthetic: {task.task} digit strings of length "
            f"{task.min_len}-{task.max_len}, fresh training batches, held-out val/test",
            split="none (fixed step budget); validation curve for monitoring only",
            wall_time_s=wall,
            directory=directory,
            command=command,
            git_commit=code_at_start,
        )
        directory = Path(directory or results.RESULTS_DIR)
        torch.save(
            {"config": model.config, "state_dict": model.state_dict()},
            directory / MODEL_FILE,
        )
        if log:
            log(f"wrote {path} and {directory / MODEL_FILE}")
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=COMMAND, description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="change TrainConfig fields (type-checked), e.g. --set steps=200 task=sort norm_first=false; "
        f"the fields: {', '.join(f.name for f in dataclasses.fields(TrainConfig))}",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (default 1: it does not stall when other processes share the "
        "cores; 0 = PyTorch's choice)",
    )
    parser.add_argument(
        "--no-write",
        action="store_true",
        help="do not write results/ (for trials)",
    )
    args = parser.parse_args(argv)
    try:
        cfg = apply_overrides(TrainConfig(), args.set)
    except ValueError as exc:
        parser.error(str(exc))
    if args.threads:
        torch.set_num_threads(args.threads)
    argv = sys.argv[1:] if argv is None else argv
    run(cfg, write=not args.no_write, command=" ".join([COMMAND, *argv]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
