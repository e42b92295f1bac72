"""A GPU lent for a few minutes, used in one command: check it, measure the step, train, bring back.

    python -m course_utils.experiments.gpu_window --minutes 9.3 --out-dir "$OUT"     # on the GPU machine (make gpu-window)
    python -m course_utils.experiments.gpu_window --minutes 2 --device cpu --fast    # the same path on a CPU (tests)

In order, each printed as it ends:

1. the device: its name, PyTorch's version, and the rate of a large bf16 matrix product (what this
   GPU really does, beside its data-sheet peak);
2. the recipe's arithmetic: FLOPs per training image (forward and backward, counted by
   ``torch.utils.flop_counter`` on the model itself, attention included);
3. the training step alone (compiled as the recipe compiles it, bf16, fused AdamW, one batch already
   on the device): images per second, TFLOP/s and the share of the data-sheet peak;
4. the run: the recipe (``gpu_fast`` by default) with its epochs when they fit before the deadline,
   else cut to the epochs that fit (warm-up in proportion, every other ingredient the recipe's),
   and a hard stop that keeps the checkpoint when the time runs out;
5. ``results/ch08_<recipe>[_cut][_seed<s>].json`` (the trainer's summary, with the time to 94% and
   95% validation accuracy and a ``window`` block holding steps 1-3) and, with ``--out-dir``, copies
   of it, the run's history and curve, and the checkpoint when the run did not finish (at most
   ``MAX_CHECKPOINT_MB``: small enough to travel back with the working tree, so that the next
   window resumes it with the same command).

The GPU machine runs it with its own ``python3`` (no virtual environment there).  Here, first, on
a clean commit: ``make gpu-window-prep`` (the data copy in ``.data/`` and ``.code-stamp.json``,
both ignored by git, to carry along: the stamp lets the results name the commit even where the
copy's git metadata is older); there: ``COURSE_CIFAR10=$PWD/.data/cifar10-jpeg.tar.gz make
gpu-window OUT=<folder brought back>``.

Each window runs the next seed of the recipe (``next_seed``): a run an earlier window stopped,
when its folder under ``runs/`` travels along (copy the brought-back ``runs/<name>`` into
``runs/`` here and carry it too), else the first of seeds 0, 1, 2 without a finished result in
``results/``.  ``--seed`` picks one.  ``--no-cut`` never cuts the schedule: a run that does not fit
stops at the deadline and the next window continues it (``make gpu-lease``, which gives the window's
first minutes to chapter 08's method, ``experiments.gpu_method``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shutil
import sys
import time
from pathlib import Path

import torch

from ..results import RESULTS_DIR, read_result, write_result
from ..training import data as cdata
from ..training.compute import flops_per_image
from ..training.optim import make_optimizer
from ..training.precision import choose_amp
from ..training.recipes import (
    Recipe,
    apply_overrides,
    build_model,
    from_stored,
)
from ..training.trainer import Trainer, train
from .recipes import RECIPES

RESERVE_S = 50  # after the planned epochs: the trainer's own compile, the test views, the result written
# An epoch against its steps timed alone: its batches are also fetched, augmented and mixed, and the
# validation pass follows (the ratio of an epoch's time to steps x step_s in results/ch08_gpu_fast_cut.json,
# rounded up)
STEP_OVERHEAD = 1.2
MAX_CHECKPOINT_MB = 60
# bf16 dense tensor-core peaks from the vendors' data sheets (TFLOP/s), by a part of the device's name
PEAK_BF16_TFLOPS = {
    "H200": 989.4,
    "H100 PCIe": 756.0,
    "H100": 989.4,
    "A100": 312.0,
    "L4": 121.0,
    "4090": 165.2,
}


def peak_tflops(name: str) -> float | None:
    """The data-sheet bf16 peak for a device name (``"NVIDIA H100 80GB HBM3"``), None when unknown."""
    for part, peak in PEAK_BF16_TFLOPS.items():
        if part in name:
            return peak
    return None


def matmul_tflops(
    device: torch.device, n: int = 8192, reps: int = 10
) -> float | None:
    """TFLOP/s of an ``n x n x n`` bf16 matrix product on ``device`` (None off CUDA)."""
    if device.type != "cuda":
        return None
    a, b = (
        torch.randn(n, n, device=device, dtype=torch.bfloat16)
        for _ in range(2)
    )
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(reps):
        a @ b
    torch.cuda.synchronize()
    return 2 * n**3 * reps / (time.perf_counter() - start) / 1e12


def step_rate(recipe: Recipe, device: torch.device, steps: int) -> dict:
    """Images per second of the training step alone: forward, loss, backward and AdamW on one batch
    already on ``device``, compiled and in the precision the recipe trains with, after warm-up steps."""
    model = build_model(recipe).to(device)
    net = (
        torch.compile(model, mode=recipe.compile_mode)
        if recipe.compile
        else model
    )
    amp = choose_amp(recipe, model, device, log=lambda *_: None)
    # the step training takes
    trainer = Trainer(
        model, make_optimizer(recipe, model), amp_dtype=amp, net=net
    )
    x = torch.randn(recipe.batch_size, 3, 32, 32, device=device)
    y = torch.randint(0, 10, (recipe.batch_size,), device=device)

    def step():
        with trainer.autocast():
            loss = torch.nn.functional.cross_entropy(net(x).float(), y)
        # backward, the optimiser's step; no read-back, so nothing waits for the device
        trainer.update(loss)

    sync = (
        torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    )
    start = time.perf_counter()
    for _ in range(3):  # the first compiles
        step()
    sync()
    warm_s = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    step_s = (time.perf_counter() - start) / steps
    return {
        "batch": recipe.batch_size,
        "steps_timed": steps,
        "step_s": step_s,
        "warmup_s": round(warm_s, 1),
        "images_per_s": recipe.batch_size / step_s,
        "amp": str(amp).replace("torch.", ""),
    }


def plan(
    recipe: Recipe, seconds: float, step_s: float, steps_per_epoch: int
) -> Recipe:
    """The recipe, or the recipe cut to the epochs that fit ``seconds`` at ``step_s`` per step (warm-up
    and every fraction-of-the-run setting in proportion); ValueError when not even two fit."""
    epoch_s = steps_per_epoch * step_s * STEP_OVERHEAD
    fit = math.floor((seconds - RESERVE_S) / epoch_s)
    if fit < 2:
        raise ValueError(
            f"gpu_window: {seconds:.0f} s at {epoch_s:.1f} s per epoch fits fewer than 2 epochs "
            "(and the reserve); give more --minutes"
        )
    if fit >= recipe.epochs:
        return recipe
    return dataclasses.replace(
        recipe,
        name=f"{recipe.name}_cut",
        epochs=fit,
        warmup_epochs=max(
            1.0, round(recipe.warmup_epochs * fit / recipe.epochs, 1)
        ),
    )


def next_seed(recipe: str, runs: Path, results: Path, seeds: int = 3) -> int:
    """The seed a window should run: an earlier window's unfinished run first (``runs/<recipe>[_cut]
    [_seed<s>]/checkpoint.pt`` with no ``summary.json``), else the first of ``seeds`` with no finished
    result (``results/ch08_<recipe>[_seed<s>].json``; a cut run's ``_cut`` file does not count),
    else the last one (its run repeated)."""
    parts = {s: "" if s == 0 else f"_seed{s}" for s in range(seeds)}
    for s, part in parts.items():
        for name in (f"{recipe}{part}", f"{recipe}_cut{part}"):
            if (runs / name / "checkpoint.pt").exists() and not (
                runs / name / "summary.json"
            ).exists():
                return s
    return next(
        (
            s
            for s, part in parts.items()
            if not (results / f"ch08_{recipe}{part}.json").exists()
        ),
        seeds - 1,
    )


def time_to(history: list[dict], accuracy: float) -> float | None:
    """Seconds of training until validation accuracy first reached ``accuracy`` (None: never)."""
    return next(
        (h["elapsed_s"] for h in history if h["val_acc"] >= accuracy), None
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_utils.experiments.gpu_window",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--minutes",
        type=float,
        required=True,
        help="time for the whole command",
    )
    parser.add_argument(
        "--recipe", default="gpu_fast", choices=sorted(RECIPES)
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="default: the next one (an unfinished run's, else the first of 0, 1, 2 "
        "without a finished result)",
    )
    parser.add_argument(
        "--device",
        default=None,
        help="default: cuda (a stand-in such as cpu for tests)",
    )
    parser.add_argument(
        "--fast",
        action="store_true",
        help="the recipe's fast mode (tests: a subset, no real data)",
    )
    parser.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="override recipe fields (tests: a smaller model and batch)",
    )
    parser.add_argument(
        "--no-cut",
        action="store_true",
        help="train the recipe's whole schedule even when it does not fit: the hard stop keeps its "
        "checkpoint for the next window (a lease that spent minutes on something else first)",
    )
    parser.add_argument("--bench-steps", type=int, default=30)
    parser.add_argument(
        "--out-dir",
        default=None,
        help="copy the result, history, curve (and checkpoint) here",
    )
    args = parser.parse_args(argv)
    if args.seed is None:
        args.seed = next_seed(args.recipe, Path("runs"), RESULTS_DIR)
        print(f"[window] seed {args.seed}", flush=True)
    start = time.time()
    deadline = start + 60 * args.minutes
    device = torch.device(args.device or "cuda")
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error(
            "no CUDA device here: this command is for a GPU machine (--device cpu runs it as a test)"
        )
    try:
        base = apply_overrides(
            dataclasses.replace(RECIPES[args.recipe], seed=args.seed),
            args.set,
        )
    except ValueError as exc:
        parser.error(str(exc))
    if device.type != "cuda":
        # a stand-in device: the path, not the speed
        base = dataclasses.replace(base, compile=False)

    name = (
        torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else f"{device.type} (stand-in)"
    )
    window = {
        "device": name,
        "torch": torch.__version__,
        "peak_bf16_tflops": peak_tflops(name),
        "matmul_bf16_tflops": matmul_tflops(device),
    }
    print(
        f"[window] {name}, torch {torch.__version__}; bf16 8192^3 product "
        f"{window['matmul_bf16_tflops'] or float('nan'):.0f} TFLOP/s (data sheet {window['peak_bf16_tflops']})",
        flush=True,
    )
    window["flops_per_image"] = flops_per_image(base)
    rate = step_rate(base, device, args.bench_steps)
    window["step"] = rate
    tflops = window["flops_per_image"] * rate["images_per_s"] / 1e12
    window["step"]["tflops"] = tflops
    window["step"]["share_of_peak"] = (
        tflops / window["peak_bf16_tflops"]
        if window["peak_bf16_tflops"]
        else None
    )
    print(
        f"[window] {window['flops_per_image'] / 1e9:.2f} GFLOP per training image; step alone "
        f"{rate['images_per_s']:.0f} images/s = {tflops:.1f} TFLOP/s (compile and warm-up {rate['warmup_s']} s)",
        flush=True,
    )

    data = (
        cdata.split_validation(
            cdata.load_cifar10(allow_synthetic=args.fast),
            val_size=base.val_size,
            seed=base.seed,
        )
        if not args.fast
        else None
    )
    train_images = base.fast_train if args.fast else len(data.train_images)
    seed_part = "" if args.seed == 0 else f"_seed{args.seed}"
    unfinished = [
        p
        for p in (
            Path("runs") / f"{base.name}{seed_part}",
            Path("runs") / f"{base.name}_cut{seed_part}",
        )
        if (p / "checkpoint.pt").exists()
        and not (p / "summary.json").exists()
    ]
    if unfinished:  # an earlier window's run: continue it as it was planned
        stored = torch.load(
            unfinished[0] / "checkpoint.pt",
            map_location="cpu",
            weights_only=False,
        )["recipe"]
        recipe = from_stored(stored)
        print(f"[window] continuing {unfinished[0]}", flush=True)
    elif args.no_cut:
        recipe = base
    else:
        recipe = plan(
            base,
            deadline - time.time(),
            rate["step_s"],
            train_images // base.batch_size,
        )
    if args.fast:
        recipe = dataclasses.replace(
            recipe, fast_epochs=min(recipe.fast_epochs, recipe.epochs)
        )
    window["planned_epochs"], window["recipe_epochs"] = (
        recipe.epochs,
        base.epochs,
    )
    print(
        f"[window] training {recipe.name}: {recipe.epochs} of {base.epochs} epochs, "
        f"{deadline - time.time():.0f} s left",
        flush=True,
    )

    result = f"ch08_{recipe.name}{seed_part}"
    out = Path("runs") / f"{recipe.name}{seed_part}"
    summary = train(
        recipe,
        out,
        fast=args.fast,
        data=data,
        device=device,
        result_name=None if args.fast else result,
        stop_after_s=max(deadline - time.time() - RESERVE_S / 2, 1.0),
    )
    window["script_s"] = round(time.time() - start, 1)
    window["time_to_val_acc_s"] = {
        str(a): time_to(summary["history"], a) for a in (0.94, 0.95)
    }
    finished = summary["epochs_done"] == summary["epochs"]
    print(
        f"[window] {summary['epochs_done']}/{summary['epochs']} epochs, best validation "
        f"{summary['best_val_acc']:.4f}; time to 94%/95% validation {window['time_to_val_acc_s']}; "
        f"{'finished' if finished else 'stopped: run the same command again to continue'}",
        flush=True,
    )
    if finished and not args.fast:
        # the trainer's copy of the weights: not kept
        (RESULTS_DIR / f"{result}_model.pth").unlink(missing_ok=True)
        stored = read_result(result)
        stored["data"]["window"] = window
        write_result(
            result,
            stored["data"],
            dataset=stored["provenance"]["dataset"],
            split=stored["provenance"].get("split"),
            wall_time_s=stored["provenance"].get("wall_time_s"),
            git_commit=stored["provenance"].get("git_commit"),
        )
    (out / "window.json").write_text(json.dumps(window, indent=1))
    if args.out_dir:
        target = Path(args.out_dir)
        (target / "results").mkdir(parents=True, exist_ok=True)
        (target / "runs" / out.name).mkdir(parents=True, exist_ok=True)
        for path in RESULTS_DIR.glob(f"{result}*"):
            shutil.copy2(path, target / "results" / path.name)
        for path in out.iterdir():
            small = path.stat().st_size <= MAX_CHECKPOINT_MB * 2**20
            if path.name != "checkpoint.pt" or (not finished and small):
                shutil.copy2(path, target / "runs" / out.name / path.name)
        print(f"[window] copied to {target}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
