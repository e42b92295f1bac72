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
``results/bench_gpu_pipeline.json`` (``--out-dir`` elsewhere).
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
from course_utils.training import data as cdata
from course_utils.training.recipes import RECIPES, build_model
from course_utils.training.trainer import Trainer, _mixer, choose_amp, lr_factor, make_optimizer

PARTS = ("batch", "batch, no policy", "mix", "step", "whole", "in a row")


def _endless(loader: cdata.BatchLoader):
    epoch = 0
    while True:
        loader.set_epoch(epoch)
        yield from loader
        epoch += 1


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="gpu")
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--window", type=int, default=10, help="steps queued back to back in 'in a row'")
    parser.add_argument("--compile", action="store_true", help="run the step through the recipe's torch.compile")
    parser.add_argument("--out-dir", type=Path, default=None, help="write the result here instead of results/")
    args = parser.parse_args(argv)
    recipe = dataclasses.replace(RECIPES[args.recipe], compile=RECIPES[args.recipe].compile and args.compile)
    device = pick_device()

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    raw = cdata.load_cifar10(allow_synthetic=True)  # the pipeline's cost does not depend on the pictures
    loaders = {policy: cdata.BatchLoader(raw.train_images, raw.train_labels, recipe.batch_size, shuffle=True,
                                         augment=recipe.augment, policy=policy, drop_last=True, device=device,
                                         channels_last=recipe.channels_last)
               for policy in (recipe.policy, None)}
    batches = {policy: _endless(loader) for policy, loader in loaders.items()}
    torch.manual_seed(0)
    model = build_model(recipe).to(device)
    if recipe.channels_last:
        model = model.to(memory_format=torch.channels_last)
    net = torch.compile(model) if recipe.compile else model
    steps = (args.rounds + 3) * (args.window + 2)
    trainer = Trainer(model, make_optimizer(recipe, model), lr_factor=lr_factor(recipe.schedule, 10 * steps, steps),
                      grad_clip=recipe.grad_clip, amp_dtype=choose_amp(recipe, model, device, print), net=net)
    mix = _mixer(recipe, len(cdata.CLASSES), torch.Generator().manual_seed(1))
    fixed_x, fixed_y = next(batches[recipe.policy])
    fixed_x, fixed_target = mix(fixed_x, fixed_y)

    def step(x, target):
        with trainer.autocast():
            logits = trainer.net(x)
        loss = soft_cross_entropy(logits.float(), target)
        trainer.update(loss)
        return logits, loss

    sums = {"loss": torch.zeros((), device=device), "correct": torch.zeros((), dtype=torch.int64, device=device)}

    def whole():  # as Trainer.train_epoch: the sums stay on the device
        x, y = next(batches[recipe.policy])
        x, target = mix(x, y)
        logits, loss = step(x, target)
        sums["loss"] += loss.detach() * len(y)
        sums["correct"] += (logits.argmax(-1) == y).sum()

    def in_a_row():
        for _ in range(args.window):
            whole()

    parts = {"batch": lambda: next(batches[recipe.policy]), "batch, no policy": lambda: next(batches[None]),
             "mix": lambda: mix(fixed_x, fixed_y), "step": lambda: step(fixed_x, fixed_target), "whole": whole,
             "in a row": in_a_row}
    seconds: dict[str, list[float]] = {name: [] for name in PARTS}
    for r in range(args.rounds + 2):  # two warm-up rounds: allocation, kernel choice, compilation
        for name in PARTS:
            sync()
            start = time.perf_counter()
            parts[name]()
            sync()
            if r >= 2:
                seconds[name].append((time.perf_counter() - start) / (args.window if name == "in a row" else 1))

    whole_s = statistics.median(seconds["whole"])
    row_s = statistics.median(seconds["in a row"])
    rows = {name: {"median_s": round(statistics.median(s), 6), "share_of_whole": round(statistics.median(s) / whole_s, 3)}
            for name, s in seconds.items()}
    out = {"recipe": recipe.name, "batch_size": recipe.batch_size, "policy": recipe.policy, "rounds": args.rounds,
           "window": args.window,
           "compile": recipe.compile, "amp": str(trainer.amp_dtype).replace("torch.", "") if trainer.amp_dtype else "float32",
           "device": str(device), "parts": rows,
           "whole_images_per_s": round(recipe.batch_size / whole_s, 1),
           "in_a_row_images_per_s": round(recipe.batch_size / row_s, 1),
           "parts_sum_over_whole": round(sum(rows[n]["median_s"] for n in ("batch", "mix", "step")) / whole_s, 3)}
    for name, row in rows.items():
        print(f"{name:18s} {row['median_s'] * 1000:8.2f} ms  {row['share_of_whole']:6.2f} of a whole step")
    print(f"steps in a row: {out['in_a_row_images_per_s']:.0f} images/s (a step alone: {out['whole_images_per_s']:.0f}); "
          f"batch + mix + step = {out['parts_sum_over_whole']:.2f} of a step alone")
    path = write_result("bench_gpu_pipeline", out, dataset=raw.source, directory=args.out_dir)
    print(f"written {path}")
    return out


if __name__ == "__main__":
    main()
