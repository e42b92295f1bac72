"""The test set, read once, at the end of a path chosen on validation.

A sweep (``training.sweep``) chooses on the validation split and never touches the test set; this
module is the one place that ends such a path with the test set's reading, kept apart so that the
code that chooses names no test data (a test scans it).  The reading is refused a second time for
the same run: reading again after a change would let the test set choose.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import torch

from ..results import read_result, write_result
from . import data as cdata
from .precision import choose_amp
from .recipes import build_model
from .sweep import (
    SPLIT_ABOUT,
    SWEEP_DIR,
    Budget,
    Variants,
    run_record,
    flops_of,
    load_budget_data,
)

__all__ = ["read_test_once"]


def read_test_once(
    budget: Budget,
    table: Variants,
    name: str,
    seeds: list[int],
    result: str,
    *,
    root: Path = SWEEP_DIR,
    split: cdata.Split | None = None,
    log: Callable[[str], None] = print,
) -> dict:
    """The test set, read once, for the end of a path the sweep chose on validation: each seed's
    best-validation weights of variant ``name`` (kept in its run's checkpoint) on the test images,
    one view and with the mirror image, into ``results/<result>.json`` with the compute each run spent.

    Raises FileExistsError when that file already holds a reading of one of ``seeds`` (the test set
    is read once: a second reading after a change would be a choice made on it), and
    FileNotFoundError for a run that has not finished here."""
    from ..runtime import pick_device
    from .evaluation import final_test

    try:
        done = read_result(result)["data"]["runs"]
    except FileNotFoundError:
        done = {}
    again = sorted(set(done) & {str(s) for s in seeds})
    if again:
        raise FileExistsError(
            f"results/{result}.json already holds the test reading of seed(s) {again}: the test set is "
            "read once per run; read other seeds, or remove the file only if those runs are void"
        )
    part, about, recipe = table[name]
    root = Path(root) / budget.name
    missing = [
        s
        for s in seeds
        if not (root / name / f"seed{s}" / "summary.json").exists()
    ]
    if missing:
        raise FileNotFoundError(
            f"{name}: no finished run of seed(s) {missing} under {root / name}; run the ablation "
            f"(--only {name} --seeds {' '.join(map(str, missing))}) on this checkout first"
        )
    split = split if split is not None else load_budget_data(budget)
    device = pick_device()
    per_image = flops_of(recipe)
    runs = dict(done)
    for seed in seeds:
        run_dir = root / name / f"seed{seed}"
        summary = json.loads((run_dir / "summary.json").read_text())
        ckpt = torch.load(
            run_dir / "checkpoint.pt", map_location="cpu", weights_only=False
        )
        model = build_model(recipe).to(device)
        model.load_state_dict(ckpt["best_state"])
        amp = choose_amp(recipe, model, device, log)
        loader = cdata.evaluation_loader(
            split.test_images, split.test_labels, recipe, device
        )
        test = final_test(model, loader, None, amp, flip=True, shifts=())
        record = run_record(summary, about, part)
        runs[str(seed)] = {
            "test_acc_single_view": test["test_acc_single_view"],
            "test_acc_two_views": test["test_acc"],
            "best_val_acc": record["best_val_acc"],
            "best_epoch": record["best_epoch"],
            "epochs": summary["epochs"],
            "flops_per_image": per_image,
            "train_flops": per_image
            * summary["train_images"]
            * summary["epochs"],
            "train_time_s": summary["train_time_s"],
            "amp": summary["amp"],
            "hardware": summary.get("hardware"),
        }
        log(
            f"{name} (seed {seed}): test accuracy {test['test_acc_single_view']:.4f} one view, "
            f"{test['test_acc']:.4f} with the mirror image (best validation {record['best_val_acc']:.4f})"
        )
    out = {
        "budget": budget.name,
        "budget_about": budget.about,
        "variant": name,
        "about": about,
        "runs": {k: runs[k] for k in sorted(runs, key=int)},
        "selection": f"the variant and each run's epoch chosen on validation ({SPLIT_ABOUT}); the "
        "test set read once per run, after",
    }
    write_result(
        result,
        out,
        dataset=split.source,
        split="test (10,000 images), read once per run",
        wall_time_s=sum(r["train_time_s"] for r in runs.values()),
    )
    return out
