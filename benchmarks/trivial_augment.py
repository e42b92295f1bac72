"""TrivialAugment on a batch: the course's per-image batched version against torchvision's transform.

    python -m benchmarks.trivial_augment               # this machine's device (the GPU where there is one)
    python -m benchmarks.trivial_augment --device cpu

Three ways to augment a batch of uint8 CIFAR-10 images on one device, each measured in the same run,
in alternating order, to its end (``torch.cuda.synchronize`` on a GPU):

- ``torchvision, per image``: ``v2.TrivialAugmentWide`` called once per image (the policy as published:
  an operation per image);
- ``torchvision, per group of 16``: one call per 16 images, so 16 images share an operation (the
  course's loader did this before ``augment.trivial_augment``);
- ``course, per image``: ``course_utils.training.augment.trivial_augment``.

Reports the fastest round's milliseconds per batch of each and the ratios to the course's version;
writes ``results/bench_trivial_augment.json`` (``--out-dir`` elsewhere).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from torchvision.transforms import v2

from course_utils.results import write_result
from course_utils.runtime import pick_device
from course_utils.training import augment
from course_utils.training import data as cdata


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--device",
        default=None,
        help="default: the GPU where there is one, else the CPU",
    )
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--repeats", type=int, default=10, help="batches per round"
    )
    parser.add_argument("--out-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    device = torch.device(args.device) if args.device else pick_device()
    # the cost does not depend on the pictures
    raw = cdata.load_cifar10(allow_synthetic=True)
    x = raw.train_images[: args.batch].to(device)
    policy, g = v2.TrivialAugmentWide(), torch.Generator().manual_seed(0)
    ways = {
        "torchvision, per image": lambda: torch.stack(
            [policy(image) for image in x]
        ),
        "torchvision, per group of 16": lambda: torch.cat(
            [policy(chunk) for chunk in x.split(16)]
        ),
        "course, per image": lambda: augment.trivial_augment(x, g),
    }

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    seconds: dict[str, list[float]] = {name: [] for name in ways}
    # round 0 warms up (allocation, kernel choice)
    for r in range(args.rounds + 1):
        for name in list(ways) if r % 2 else list(ways)[::-1]:
            sync()
            start = time.perf_counter()
            for _ in range(args.repeats):
                ways[name]()
            sync()
            if r:
                seconds[name].append(
                    (time.perf_counter() - start) / args.repeats
                )
    best = {name: min(s) for name, s in seconds.items()}
    course = best["course, per image"]
    out = {
        "device": str(device),
        "batch": args.batch,
        "rounds": args.rounds,
        "repeats": args.repeats,
        "threads": torch.get_num_threads(),
        "ms_per_batch": {
            name: round(1000 * s, 3) for name, s in best.items()
        },
        "ratio_to_course": {
            name: round(s / course, 2) for name, s in best.items()
        },
    }
    for name, s in best.items():
        print(
            f"{name:30s} {1000 * s:8.2f} ms per batch of {args.batch}  ({s / course:5.2f}x the course's)"
        )
    path = write_result(
        "bench_trivial_augment",
        out,
        dataset=raw.source,
        directory=args.out_dir,
    )
    print(f"written {path}")
    return out


if __name__ == "__main__":
    main()
