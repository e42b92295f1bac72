"""Where one training step's time goes, part by part, on this machine's device (the GPU where there is one).

    python -m benchmarks.gpu_pipeline                              # the gpu recipe, 50 rounds
    python -m benchmarks.gpu_pipeline --recipe smoke --rounds 3    # a check that runs on any CPU

The ``gpu`` recipe's short runs on an H200 trained about ten thousand images a second, far below
what the GPU's arithmetic allows for this model; this says where the rest goes.  Each round times
every part once, in this order, each to its end (``torch.cuda.synchronize`` before and after):

- ``batch``: the loader's next batch (index, copy to the device, crop and flip, the recipe's
  augmentation policy, normalise), as ``data.BatchLoader`` makes it;
- ``batch, no policy``: the same loader without the policy (the policy's share is the difference);
- ``mix``: MixUp/CutMix and label smoothing on a batch;
- ``step``: forward, loss, backward, clipping, AdamW and the schedule on one fixed batch;
- ``whole``: one step as ``Trainer.train_epoch`` runs it (batch, mix, step, the loss and accuracy
  summed on the device), timed alone;
- ``in a row``: ``--window`` such steps queued back to back with one synchronisation at the end,
  per step, as an epoch runs them: nothing in a step reads a value back from the device, so the host
  prepares the next steps while the device computes.  Shorter than ``whole``: the host and the
  device overlap; the same: one of them waits for the other at every step.

Per part: the median seconds over the rounds and its share of ``whole``'s median, the ratios taken
within one run on one machine; the images per second are ``in a row``'s.  Writes
``results/bench_gpu_pipeline[_<recipe>].json`` (the recipe named when it is not ``gpu``;
``..._compile[_<mode>].json`` with
``--compile``/``--compile-mode``; ``--out-dir`` elsewhere).

``--profile`` also runs one ``in a row`` window under ``torch.profiler`` and records, per step, the
wall time, the time the device spent in kernels and copies (``device_busy``: near 1, the device is
the limit and its kernels must get faster or fewer; well below 1, the host cannot queue work fast
enough and fewer, larger launches help: ``torch.compile``, CUDA graphs), the number of kernels
launched, and the operations that took the most device (on a CPU, host) time.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from pathlib import Path

import torch

from course_utils.references.regularization import soft_cross_entropy
from course_utils.results import write_result
from course_utils.runtime import pick_device
from course_utils.experiments.recipes import RECIPES
from course_utils.training import data as cdata
from course_utils.training.optim import lr_factor, make_optimizer
from course_utils.training.precision import choose_amp
from course_utils.training.recipes import build_model
from course_utils.training.trainer import Trainer, mixer

PARTS = ("batch", "batch, no policy", "mix", "step", "whole", "in a row")


def _endless(loader: cdata.BatchLoader):
    epoch = 0
    while True:
        loader.set_epoch(epoch)
        yield from loader
        epoch += 1


def _profile(
    window, sync, steps: int, device: torch.device, top: int = 10
) -> dict:
    """One call of ``window`` (``steps`` steps in a row) under torch.profiler: per step, the wall time,
    the device's busy share (its kernels' and copies' own time over the wall time; None on a CPU),
    the kernels launched (both None where the profiler sees no device events), and the ``top`` host
    operations by their own device (on a CPU, host) time."""
    from torch.profiler import ProfilerActivity, profile

    on_gpu = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + (
        [ProfilerActivity.CUDA] if on_gpu else []
    )
    sync()
    with profile(activities=activities) as prof:
        start = time.perf_counter()
        window()
        sync()
        wall = time.perf_counter() - start
    events = prof.key_averages()

    def own(
        e,
    ) -> float:  # microseconds of the operation's own time where it ran
        if on_gpu:
            return getattr(e, "self_device_time_total", None) or getattr(
                e, "self_cuda_time_total", 0.0
            )
        return e.self_cpu_time_total

    # the device's own time of every kernel and copy (each appears once among the events, under its own name)
    device_events = [
        e
        for e in events
        if on_gpu and str(getattr(e, "device_type", "")).endswith("CUDA")
    ]
    device_us = sum(own(e) for e in device_events)
    # the host's operations, ranked by their own device time on a GPU (the kernels each launched
    # directly): readable names where the kernels' own are a library's
    ranked = sorted(
        (e for e in events if e not in device_events), key=own, reverse=True
    )[:top]
    # without CUPTI the profiler sees no device events: say so, not 0
    seen = bool(device_events)
    return {
        "steps": steps,
        "wall_ms_per_step": round(1000 * wall / steps, 3),
        "device_busy": round(device_us / 1e6 / wall, 3) if seen else None,
        "kernels_per_step": round(
            sum(e.count for e in device_events) / steps
        )
        if seen
        else None,
        "device_events_seen": seen,
        "top": [
            {
                "name": e.key,
                "ms_per_step": round(own(e) / 1000 / steps, 3),
                "calls_per_step": e.count / steps,
            }
            for e in ranked
        ],
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="gpu")
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument(
        "--window",
        type=int,
        default=10,
        help="steps queued back to back in 'in a row'",
    )
    parser.add_argument(
        "--compile",
        action="store_true",
        help="run the step through the recipe's torch.compile",
    )
    parser.add_argument(
        "--compile-mode",
        default=None,
        help="torch.compile's mode (e.g. reduce-overhead, max-autotune); implies --compile",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also profile one window of steps in a row",
    )
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=None,
        help="write the result here instead of results/",
    )
    args = parser.parse_args(argv)
    # as experiments.gpu_recipe: only a recipe that compiles is compiled (the smoke recipe, say, is not)
    compiled = RECIPES[args.recipe].compile and (
        args.compile or args.compile_mode is not None
    )
    recipe = dataclasses.replace(
        RECIPES[args.recipe],
        compile=compiled,
        compile_mode=args.compile_mode if compiled else None,
    )
    device = pick_device()

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    # the pipeline's cost does not depend on the pictures
    raw = cdata.load_cifar10(allow_synthetic=True)
    loaders = {
        policy: cdata.BatchLoader(
            raw.train_images,
            raw.train_labels,
            recipe.batch_size,
            shuffle=True,
            augment=recipe.augment,
            crop_padding=recipe.crop_padding,
            policy=policy,
            drop_last=True,
            device=device,
            channels_last=recipe.channels_last,
        )
        for policy in (recipe.policy, None)
    }
    batches = {
        policy: _endless(loader) for policy, loader in loaders.items()
    }
    torch.manual_seed(0)
    model = build_model(recipe).to(device)
    if recipe.channels_last:
        model = model.to(memory_format=torch.channels_last)
    net = (
        torch.compile(model, mode=recipe.compile_mode)
        if recipe.compile
        else model
    )
    steps = (args.rounds + 3) * (args.window + 2)
    trainer = Trainer(
        model,
        make_optimizer(recipe, model),
        lr_factor=lr_factor(recipe.schedule, 10 * steps, steps),
        grad_clip=recipe.grad_clip,
        amp_dtype=choose_amp(recipe, model, device, print),
        net=net,
    )
    mix = mixer(recipe, len(cdata.CLASSES), torch.Generator().manual_seed(1))
    fixed_x, fixed_y = next(batches[recipe.policy])
    fixed_x, fixed_target = mix(fixed_x, fixed_y)

    def step(x, target):
        with trainer.autocast():
            logits = trainer.net(x)
        loss = soft_cross_entropy(logits.float(), target)
        trainer.update(loss)
        return logits, loss

    sums = {
        "loss": torch.zeros((), device=device),
        "correct": torch.zeros((), dtype=torch.int64, device=device),
    }

    def whole():  # as Trainer.train_epoch: the sums stay on the device
        x, y = next(batches[recipe.policy])
        x, target = mix(x, y)
        logits, loss = step(x, target)
        sums["loss"] += loss.detach() * len(y)
        sums["correct"] += (logits.argmax(-1) == y).sum()

    def in_a_row():
        for _ in range(args.window):
            whole()

    parts = {
        "batch": lambda: next(batches[recipe.policy]),
        "batch, no policy": lambda: next(batches[None]),
        "mix": lambda: mix(fixed_x, fixed_y),
        "step": lambda: step(fixed_x, fixed_target),
        "whole": whole,
        "in a row": in_a_row,
    }
    seconds: dict[str, list[float]] = {name: [] for name in PARTS}
    # two warm-up rounds: allocation, kernel choice, compilation
    for r in range(args.rounds + 2):
        for name in PARTS:
            sync()
            start = time.perf_counter()
            parts[name]()
            sync()
            if r >= 2:
                seconds[name].append(
                    (time.perf_counter() - start)
                    / (args.window if name == "in a row" else 1)
                )

    profile = (
        _profile(in_a_row, sync, args.window, device)
        if args.profile
        else None
    )
    whole_s = statistics.median(seconds["whole"])
    row_s = statistics.median(seconds["in a row"])
    rows = {
        name: {
            "median_s": round(statistics.median(s), 6),
            "share_of_whole": round(statistics.median(s) / whole_s, 3),
        }
        for name, s in seconds.items()
    }
    out = {
        "recipe": recipe.name,
        "batch_size": recipe.batch_size,
        "policy": recipe.policy,
        "rounds": args.rounds,
        "window": args.window,
        "compile": recipe.compile,
        "compile_mode": recipe.compile_mode,
        "amp": str(trainer.amp_dtype).replace("torch.", "")
        if trainer.amp_dtype
        else "float32",
        "device": str(device),
        "parts": rows,
        "whole_images_per_s": round(recipe.batch_size / whole_s, 1),
        "in_a_row_images_per_s": round(recipe.batch_size / row_s, 1),
        "parts_sum_over_whole": round(
            sum(rows[n]["median_s"] for n in ("batch", "mix", "step"))
            / whole_s,
            3,
        ),
        "profile": profile,
    }
    for name, row in rows.items():
        print(
            f"{name:18s} {row['median_s'] * 1000:8.2f} ms  {row['share_of_whole']:6.2f} of a whole step"
        )
    print(
        f"steps in a row: {out['in_a_row_images_per_s']:.0f} images/s (a step alone: {out['whole_images_per_s']:.0f}); "
        f"batch + mix + step = {out['parts_sum_over_whole']:.2f} of a step alone"
    )
    if profile is not None:
        busy = (
            "not seen (a CPU, or no CUDA profiling here)"
            if profile["device_busy"] is None
            else f"{profile['device_busy']:.2f}"
        )
        print(
            f"profiled window: {profile['wall_ms_per_step']:.2f} ms per step, device busy {busy}, "
            f"{profile['kernels_per_step']} kernels per step; most time: "
            + ", ".join(
                f"{op['name']} {op['ms_per_step']:.2f} ms"
                for op in profile["top"][:5]
            )
        )
    name = (
        "bench_gpu_pipeline"
        + ("" if args.recipe == "gpu" else f"_{args.recipe}")
        + (
            ""
            if not recipe.compile
            else (
                "_compile"
                + (
                    f"_{recipe.compile_mode.replace('-', '_')}"
                    if recipe.compile_mode
                    else ""
                )
            )
        )
    )
    path = write_result(
        name, out, dataset=raw.source, directory=args.out_dir
    )
    print(f"written {path}")
    return out


if __name__ == "__main__":
    main()
