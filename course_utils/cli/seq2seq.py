"""Chapter 06's training run: a small Transformer learns to reverse digit strings.

    python -m course_utils.cli.seq2seq                               # the full run: writes results/ch06_seq2seq.json
                                                                      # and the weights results/ch06_seq2seq_model.pth
    python -m course_utils.cli.seq2seq --steps 200 --no-write        # a short trial

One thread by default (``--threads``): the model is tiny, and on a machine whose cores are busy
with other work, PyTorch's threads wait for each other.  The task and the run are in
``training/seq2seq_task.py``.
"""
from __future__ import annotations

import argparse
import sys

import torch

from ..training.recipes import apply_overrides
from ..training.seq2seq_task import TrainConfig, run

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_utils.cli.seq2seq", description=__doc__.split("\n")[0])
    defaults = TrainConfig()
    parser.add_argument("--task", choices=("reverse", "sort"), default=defaults.task)
    parser.add_argument("--steps", type=int, default=defaults.steps)
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
    parser.add_argument("--lr", type=float, default=defaults.lr)
    parser.add_argument("--d-model", type=int, default=defaults.d_model)
    parser.add_argument("--d-ff", type=int, default=defaults.d_ff)
    parser.add_argument("--layers", type=int, default=defaults.num_encoder_layers,
                        help="encoder layers = decoder layers")
    parser.add_argument("--post-norm", action="store_true", help="post-norm layers (the paper's) instead of pre-norm")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1: it does not stall when other processes share the "
                             "cores; 0 = PyTorch's choice)")
    parser.add_argument("--no-write", action="store_true", help="do not write results/ (for trials)")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="any other TrainConfig field, type-checked as the train program's --set, e.g. "
                             "--set warmup_steps=50 dropout=0.1")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = TrainConfig(task=args.task, steps=args.steps, batch_size=args.batch_size, lr=args.lr, d_model=args.d_model,
                      d_ff=args.d_ff, num_encoder_layers=args.layers, num_decoder_layers=args.layers,
                      norm_first=not args.post_norm, seed=args.seed)
    try:
        cfg = apply_overrides(cfg, args.set)
    except ValueError as exc:
        parser.error(str(exc))
    argv = sys.argv[1:] if argv is None else argv
    run(cfg, write=not args.no_write, command=" ".join(["python -m course_utils.cli.seq2seq", *argv]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
