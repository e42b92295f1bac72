"""Train a named CIFAR-10 recipe (chapter 07): resumes from the run folder's checkpoint when restarted.

    python -m course_utils.cli.train --recipe cpu --out runs/cpu            # train, resume if interrupted
    python -m course_utils.cli.train --recipe cpu --set lr=1e-3 policy=trivial epochs=5
    python -m course_utils.cli.train --recipe laptop --train-images 10000 --result ch07_vit_laptop
    python -m course_utils.cli.train --recipe gpu --stop-after-minutes 9   # again and again until done
    torchrun --nproc_per_node 2 -m course_utils.cli.train --recipe cpu ...  # DistributedDataParallel

``--set KEY=VALUE`` changes any field of the recipe, type-checked (``training.recipes.apply_overrides``;
``model_kwargs.dim=96`` changes one key of the model's arguments).  The recipes and their notes:
``python -m course_utils.experiments.recipes``; the loop: ``training/trainer.py``.  The chapters'
campaigns of runs (seeds, tables, cuts to a GPU's time) are ``course_utils.experiments``'.
"""

from __future__ import annotations

import argparse
import sys

from ..experiments.recipes import RECIPES
from ..training.data import load_cifar10, split_validation, subset
from ..training.recipes import apply_overrides
from ..training.trainer import train


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_utils.cli.train",
        description=__doc__.split("\n")[0],
    )
    parser.add_argument("--recipe", default="cpu", choices=sorted(RECIPES))
    parser.add_argument(
        "--out",
        default=None,
        help="run folder (checkpoint, history); default runs/<recipe>",
    )
    parser.add_argument(
        "--fast",
        action="store_true",
        help="subset and few epochs (CI, grading)",
    )
    parser.add_argument(
        "--result", default=None, help="also write results/<RESULT>.json"
    )
    parser.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="override recipe fields, e.g. --set lr=1e-3 policy=trivial epochs=5 model=resnet",
    )
    parser.add_argument(
        "--train-images",
        type=int,
        default=None,
        metavar="N",
        help="cut the training split to N images (seeded; validation and test stay whole)",
    )
    parser.add_argument("--device", default=None)
    parser.add_argument(
        "--stop-after",
        type=int,
        default=None,
        help="train at most this many epochs now",
    )
    parser.add_argument(
        "--stop-after-minutes",
        type=float,
        default=None,
        metavar="M",
        help="stop after the last epoch that ends within M minutes (run again to continue)",
    )
    args = parser.parse_args(argv)
    try:
        recipe = apply_overrides(RECIPES[args.recipe], args.set)
    except ValueError as exc:
        parser.error(str(exc))
    data = None
    if args.train_images:
        raw = load_cifar10(allow_synthetic=args.fast)
        data = subset(
            split_validation(
                raw, val_size=recipe.val_size, seed=recipe.seed
            ),
            args.train_images,
            None,
            seed=recipe.seed,
        )
    train(
        recipe,
        args.out or f"runs/{recipe.name}",
        fast=args.fast,
        data=data,
        result_name=args.result,
        device=args.device,
        max_epochs_this_call=args.stop_after,
        stop_after_s=None
        if args.stop_after_minutes is None
        else 60 * args.stop_after_minutes,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
