"""Chapter 08's sweeps: its budgets, ladder, levers, method and search space, and the runs they make.

    python -m course_utils.experiments.sweep list --budget mini                 # the variants of a budget
    python -m course_utils.experiments.sweep lr-range --budget mini
    python -m course_utils.experiments.sweep ablation --budget mini --seeds 0 1 2 --only baseline noam
    python -m course_utils.experiments.sweep search --budget mini --trials 30
    python -m course_utils.experiments.sweep ablation --budget half_hour --seeds 0 1 2   # the method
    python -m course_utils.experiments.sweep method-test --budget half_hour --seeds 0 1 2

Each writes ``results/ch08_<what>_<budget>.json`` (``--result`` names another file).  The
machinery (resumable runs, collecting them, the range test, the search) is
``course_utils.training.sweep``; this module holds what chapter 08 runs through it:

- ``BUDGETS``: ``mini`` (minutes per run on 2 CPU cores: enough to show over-fitting and each
  lever's direction), ``small-data`` (few images, many epochs: the lab report's over-fitting in
  minutes) and ``cpu`` (chapter 07's budget: the whole training split and the cpu recipe's width,
  at the 22 epochs, batch size, learning rate and single-view evaluation the recipe had when these
  runs were made, pinned so that runs added later stay comparable with the stored ones; the
  ablation reads validation only, so the recipe's shifted test views do not apply either);
- ``LADDER``: a bare plain ViT (the lab report's architecture with no augmentation, no
  regularisation and a constant learning rate) improved one change at a time;
- ``LEVERS``: single changes to the ladder's top; ``MODEL_LEVERS``: two more on how the model is
  built (stochastic depth, initialisation), measured later against the top run again beside them;
- ``METHOD``: chapter 08's method (section 8.2) as a learner would apply it to the lab report's
  run.  The report's settings are its Figure 9 (a listing of its code's constants) and the code it
  links: a plain ViT with 4x4 patches, width 192, 6 layers, 3 heads, MLP ratio 4, dropout 0.2, AdamW
  at lr 1e-3 with weight decay 1e-3 and batch 128; random crop and flip, then RandomRotation(15)
  and ColorJitter(0.2, 0.2, 0.2); no gradient clipping; a cosine scheduler that is created but never
  stepped, so the rate stays constant.  The budget (images, epochs) is the mini one.  The order is
  the method's answer to the diagnosis "under-fitting": take the regulariser away first, then add
  inductive bias (the schedule, the method's step in between, stays inside the noise at this budget
  on the ladder, so the demonstration spends no seeds on it);
- ``METHOD_HALF_HOUR``: the method at the ``half_hour`` budget (chapter 7's half hour as compute:
  each step trains the epochs that spend the cpu recipe's training FLOPs), with the schedule step
  the mini demonstration leaves out, diagnosed on clean training accuracy, and read once on the
  test set at its end (``method-test``);
- ``SEARCH``: what the Optuna search draws, starting from the ladder's top.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

from ..results import code_version, write_result
from ..training import data as cdata
from ..training import final_reading, sweep
from ..training.compute import flops_per_image
from ..training.recipes import Recipe, Scale, apply_overrides
from ..training.sweep import Budget, Change, Param
from .recipes import EARLIER_CPU_BATCH, RECIPES

__all__ = [
    "BUDGETS",
    "LADDER",
    "LEVERS",
    "MODEL_LEVERS",
    "METHOD",
    "METHOD_HALF_HOUR",
    "REPORT_RUN",
    "SEARCH",
    "variants",
    "top",
    "describe",
    "result_name",
]


def _model(**kwargs) -> dict:
    """Overrides of some of the model's keyword arguments, keeping the others."""
    return {f"model_kwargs.{k}": v for k, v in kwargs.items()}


# The lab report's model in small: a plain ViT (Conv2d patch embedding, kernel = stride = 4).
_LAB_VIT = dict(
    img_size=32,
    num_classes=10,
    patch_size=4,
    dim=128,
    depth=4,
    num_heads=4,
    mlp_dim=256,
    dropout=0.0,
)
# What every budget's ladder starts from: that model, bare (the cpu recipe's other settings stay).
_BARE = dict(
    model_kwargs=_LAB_VIT,
    eval_flip=False,
    weight_decay=0.0,
    warmup_epochs=0,
    label_smoothing=0.0,
    augment=False,
    schedule="constant",
)


def _budget(
    name: str,
    train_images: int | None,
    recipe_name: str | None = None,
    **changes,
) -> Budget:
    base = apply_overrides(
        RECIPES["cpu"], {**_BARE, **changes}, name=recipe_name or name
    )
    return Budget(name, base, train_images)


def _half_hour_flops() -> float:
    """The training FLOPs of chapter 7's half hour: the cpu recipe's epochs over the whole split."""
    cpu = RECIPES["cpu"]
    return (
        cpu.epochs
        * (sweep.CIFAR10_TRAIN - sweep.VAL_SIZE)
        * flops_per_image(cpu)
    )


BUDGETS: dict[str, Budget] = {
    "mini": _budget(
        "mini",
        10_000,
        epochs=10,
        batch_size=EARLIER_CPU_BATCH["batch_size"],
        lr=1e-3,
    ),
    "small-data": _budget(
        "small-data",
        2_500,
        epochs=30,
        batch_size=EARLIER_CPU_BATCH["batch_size"],
        lr=1e-3,
    ),
    "cpu": _budget(
        "cpu",
        None,
        "cpu-ablation",
        epochs=22,
        test_shifts=(),
        **EARLIER_CPU_BATCH,
        **_model(dim=192, num_heads=3, mlp_dim=384),
    ),
    # the method's budget: chapter 7's half hour as compute, each step at the epochs that spend it,
    # diagnosed on 5,000 training images as they are (its batches are rotated and colour-jittered)
    "half_hour": dataclasses.replace(
        _budget(
            "half_hour",
            None,
            batch_size=EARLIER_CPU_BATCH["batch_size"],
            lr=1e-3,
            test_shifts=(),
            clean_train_eval=5_000,
        ),
        flops=_half_hour_flops(),
        flops_about="the cpu recipe's half hour on 2 cores with native bf16",
    ),
}

LADDER: list[Change] = [
    (
        "baseline",
        "a bare plain ViT: constant lr, no augmentation or regularisation",
        {},
    ),
    (
        "schedule",
        "+ 1 epoch linear warmup, then cosine decay",
        {"schedule": "cosine", "warmup_epochs": 1},
    ),
    (
        "augment",
        "+ random crop (padding 4) and horizontal flip",
        {"augment": True},
    ),
    ("smoothing", "+ label smoothing 0.1", {"label_smoothing": 0.1}),
    ("decay", "+ weight decay 0.05 (AdamW)", {"weight_decay": 0.05}),
    (
        "conv_tokenizer",
        "+ convolutional tokenizer (3x3 convs 32-64-128, pooled to a 4x4 grid) instead of 4x4 patches",
        _model(patch_size=8, stem_channels=[32, 64, 128]),
    ),
]
LEVERS: list[Change] = [
    ("lr_half", "learning rate / 2", {"lr": Scale(0.5)}),
    ("lr_x2", "learning rate x 2", {"lr": Scale(2)}),
    # the paper's shape (linear warmup, then 1/sqrt(step)); its peak is rescaled to the recipe's lr,
    # since the paper's d_model^-0.5 * warmup^-0.5 belongs to its model and batch, not to this one
    (
        "noam",
        "Noam's shape (warmup, then 1/sqrt(step)) at the recipe's peak lr, instead of warmup + cosine",
        {"schedule": "noam"},
    ),
    (
        "mixup_cutmix",
        "+ MixUp (alpha 0.8) / CutMix (alpha 1.0)",
        {"mixup_alpha": 0.8, "cutmix_alpha": 1.0},
    ),
    ("dropout", "dropout 0.1 in attention and MLP", _model(dropout=0.1)),
    ("trivial_augment", "+ TrivialAugment", {"policy": "trivial"}),
    (
        "batch_256",
        "batch 256 with the learning rate x 2 (linear scaling)",
        {"batch_size": 256, "lr": Scale(2)},
    ),
    (
        "deep_narrow",
        "depth 8, dim 96 (fewer parameters, twice the layers)",
        _model(depth=8, dim=96, num_heads=4, mlp_dim=192),
    ),
    (
        "no_augment",
        "- random crop and flip (the ladder's top without augmentation)",
        {"augment": False},
    ),
    (
        "lr_range_test",
        "learning rate / 10: the range test's suggestion (a tenth of the lr at its lowest loss)",
        {"lr": Scale(0.1)},
    ),
]
# levers on how the model is built, measured after the others (on another machine, against the
# ladder's top run again there: ``make levers-model``), so they are a family of their own
MODEL_LEVERS: list[Change] = [
    (
        "drop_path",
        "stochastic depth 0.1 (each block's residual branches dropped per sample, rising to 0.1)",
        _model(drop_path=0.1),
    ),
    (
        "init_pytorch",
        "PyTorch's default initialisation of each layer instead of the course's truncated normal",
        _model(init="pytorch"),
    ),
]
METHOD: list[Change] = [
    (
        "report",
        "the lab report's configuration (its Figure 9 and code)",
        {
            "augment": True,
            "policy": "report",
            "weight_decay": 1e-3,
            "grad_clip": None,
            **_model(
                dim=192, depth=6, num_heads=3, mlp_dim=768, dropout=0.2
            ),
        },
    ),
    (
        "report_no_dropout",
        "- dropout: a regulariser has nothing to do for a model that under-fits",
        _model(dropout=0.0),
    ),
    (
        "report_conv_tokenizer",
        "+ convolutional tokenizer (inductive bias: more learned per epoch)",
        _model(patch_size=8, stem_channels=[32, 64, 128]),
    ),
]
# The lab report's own run (its Figure 9, its printed summary and the code it links): the whole
# training set for 100 epochs, "validated" on CIFAR-10's test split, whose best epoch (83) it reports
# at 0.8309, so the test set chose that epoch; what the method's one test reading is read against.
REPORT_RUN = dict(
    epochs=100, train_images=50_000, best_val_acc=0.8309, best_epoch=83
)
# The method at chapter 7's budget (``half_hour``), as taught: the learning rate's schedule first (the
# report's code creates a cosine schedule and never steps it), then, for a model that under-fits on
# its clean training images, the regulariser out and the inductive bias in.
METHOD_HALF_HOUR: list[Change] = [
    METHOD[0],
    (
        "report_schedule",
        "+ the cosine decay the report's code creates but never steps (no warm-up, as in its code)",
        {"schedule": "cosine"},
    ),
    *METHOD[1:],
]
# what each budget runs: (ladder, levers, method); the half hour runs the method alone
_TABLES: dict[str, tuple[list[Change], list[Change], list[Change]]] = {
    "half_hour": ([], [], METHOD_HALF_HOUR)
}
SEARCH: list[Param] = [
    Param("lr", 2e-4, 5e-3, log=True),
    Param("weight_decay", 1e-3, 0.3, log=True),
    Param("label_smoothing", 0.0, 0.2),
    Param("dropout", 0.0, 0.2, key="model_kwargs.dropout"),
]


def variants(budget: Budget) -> sweep.Variants:
    """Every variant of chapter 08's ablation at ``budget``: ``name -> (part, description, recipe)``."""
    ladder, levers, method = _TABLES.get(
        budget.name, (LADDER, LEVERS + MODEL_LEVERS, METHOD)
    )
    return sweep.variants(budget, ladder, levers, method)


def top(budget: Budget) -> Recipe:
    """The ladder's top at ``budget``: what the levers change and the search starts from."""
    if budget.name in _TABLES and not _TABLES[budget.name][0]:
        raise ValueError(
            f"the {budget.name} budget runs chapter 08's method only, without a ladder to search "
            "from: choose another --budget (mini) for lr-range or search"
        )
    return variants(budget)[LADDER[-1][0]][2]


def describe(name: str, stored: str) -> str:
    """What a rung, lever or method step changes, in today's words (a stored run keeps the words of
    the day it ran; the overrides behind a name do not change)."""
    return next(
        (
            about
            for n, about, _ in LADDER
            + LEVERS
            + MODEL_LEVERS
            + METHOD
            + METHOD_HALF_HOUR
            if n == name
        ),
        stored,
    )


def result_name(what: str, budget: Budget) -> str:
    """``ch08_<what>_<budget>``: ``ch08_ablation_mini``, ``ch08_lr_range_mini``, ``ch08_search_mini``."""
    return f"ch08_{what.replace('-', '_')}_{budget.name}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_utils.experiments.sweep",
        description=__doc__.split("\n")[0],
    )
    parser.add_argument(
        "what",
        choices=["ablation", "lr-range", "search", "list", "method-test"],
        help="method-test: the method's last step read once on the test set (after its ablation runs)",
    )
    parser.add_argument("--budget", default="mini", choices=sorted(BUDGETS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument(
        "--only",
        nargs="+",
        default=None,
        help="ablation: these variants only",
    )
    parser.add_argument(
        "--adopt",
        nargs="+",
        default=[],
        metavar="VARIANT=RUN_DIR",
        help="ablation: count a finished run with the same recipe as this variant's",
    )
    parser.add_argument(
        "--trials",
        type=int,
        default=30,
        help="search: total number of trials",
    )
    parser.add_argument(
        "--rerun-seeds",
        type=int,
        nargs="*",
        default=[1, 2, 3],
        help="search: train the best trial again with these seeds (fresh, unpruned)",
    )
    parser.add_argument(
        "--result",
        default=None,
        help="result name (default ch08_<what>_<budget>)",
    )
    args = parser.parse_args(argv)
    budget = BUDGETS[args.budget]
    result = args.result or result_name(args.what, budget)
    start, commit = time.perf_counter(), code_version()
    if args.what == "list":
        for name, (part, about, _) in variants(budget).items():
            print(f"{part:6s} {name:16s} {about}")
        return 0
    if args.what == "method-test":
        table = variants(budget)
        last = [n for n, (part, _, _) in table.items() if part == "method"][
            -1
        ]
        final_reading.read_test_once(budget, table, last, args.seeds, result)
    elif args.what == "ablation":
        adopted = dict(item.split("=", 1) for item in args.adopt)
        sweep.ablation(
            budget,
            variants(budget),
            args.seeds,
            args.only,
            result,
            adopted=adopted,
        )
    elif args.what == "search":
        sweep.search(
            budget,
            top(budget),
            SEARCH,
            args.trials,
            result,
            rerun_seeds=tuple(args.rerun_seeds),
        )
    else:
        recipe = top(budget)
        out = sweep.lr_range_test(recipe, sweep.load_budget_data(budget))
        out["recipe"] = recipe.to_dict()
        write_result(
            result,
            out,
            dataset=cdata.load_cifar10().source,
            split="training batches (no selection)",
            wall_time_s=time.perf_counter() - start,
            git_commit=commit,
        )
        print(
            f"lr at the lowest smoothed loss {out['lr_at_min_loss']:.2e}; suggested {out['suggested_lr']:.2e}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
