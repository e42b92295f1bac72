"""Training speed of the ``cpu`` recipe's ViT at 16 tokens against the same model at 64 tokens.

    python -m benchmarks.token_grid            # writes results/bench_token_grid.json

The ``cpu`` recipe's convolutional tokenizer pools 32x32 images down to a 4x4 grid (16 tokens).
Its 64-token sibling stops one pooling earlier (an 8x8 grid: ``patch_size=4``, one stem layer
fewer), everything else equal.  Both take full training steps (forward, backward, AdamW) at the
recipe's batch size and precision (bf16 autocast where the CPU has native bf16, as the trainer's
``amp="auto"`` would pick, else float32), measured in rotation, one step each per round; the
ratio is the median of the per-round ratios, with its range.  From the images per second follow
the epochs of 45,000 training images that fit in 30 minutes, the recipe's budget.  Whether fewer
epochs of the 64-token model would end more accurate is a training question this benchmark does
not answer.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
from pathlib import Path

import torch

from benchmarks.timing import (
    TRAIN_IMAGES,
    epochs_in_half_hour,
    in_rotation,
    ratio_spread,
    train_step,
)
from course_utils.experiments.recipes import RECIPES
from course_utils.results import write_result
from course_utils.training.precision import choose_amp
from course_utils.training.recipes import build_model


def models() -> dict[str, tuple[dict, torch.nn.Module]]:
    """The recipe's model (16 tokens) and its 64-token sibling, with their model_kwargs."""
    cpu = RECIPES["cpu"]
    fine = dict(
        cpu.model_kwargs,
        patch_size=4,
        stem_channels=tuple(cpu.model_kwargs["stem_channels"][:-1]),
    )
    out = {}
    for name, kwargs in (
        ("16 tokens (cpu recipe)", cpu.model_kwargs),
        ("64 tokens", fine),
    ):
        recipe = dataclasses.replace(cpu, model_kwargs=kwargs)
        out[name] = (
            kwargs,
            build_model(recipe).to(memory_format=torch.channels_last),
        )
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=None,
        help="write the result here instead of results/",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    recipe = RECIPES["cpu"]
    built = models()
    amp = choose_amp(
        recipe, next(iter(built.values()))[1], torch.device("cpu"), print
    )
    x = torch.randn(recipe.batch_size, 3, 32, 32).contiguous(
        memory_format=torch.channels_last
    )
    y = torch.randint(0, 10, (recipe.batch_size,))
    optimizers = {
        name: torch.optim.AdamW(m.parameters(), lr=1e-4)
        for name, (_, m) in built.items()
    }

    steps = {
        name: (
            lambda m=model, o=optimizers[name]: train_step(
                m, o, x, y, amp is not None
            )
        )
        for name, (_, model) in built.items()
    }
    seconds = in_rotation(steps, args.rounds)
    coarse, fine = list(built)
    rows = {}
    for name, (kwargs, model) in built.items():
        per_s = recipe.batch_size / statistics.median(seconds[name])
        rows[name] = {
            "model_kwargs": kwargs,
            "parameters": sum(p.numel() for p in model.parameters()),
            "tokens": (32 // kwargs["patch_size"]) ** 2,
            "train_img_per_s": round(per_s, 1),
            "epochs_in_30_min": epochs_in_half_hour(per_s),
        }
        print(
            f"{name:24s} {per_s:7.1f} img/s  {rows[name]['epochs_in_30_min']:5.1f} epochs in 30 min"
        )
    ratio = ratio_spread(seconds[fine], seconds[coarse], digits=None)
    print(
        f"64-token step time / 16-token step time: {ratio['median']:.2f} (range {ratio['min']:.2f}-{ratio['max']:.2f})"
    )
    path = write_result(
        "bench_token_grid",
        {
            "amp": str(amp).replace("torch.", "") if amp else "float32",
            "train_images": TRAIN_IMAGES,
            "batch_size": recipe.batch_size,
            "rounds": args.rounds,
            "torch_threads": args.threads,
            "models": rows,
            "step_time_ratio_64_over_16": ratio,
        },
        dataset="synthetic random tensors",
        directory=args.out_dir,
    )
    print(f"written {path}")


if __name__ == "__main__":
    main()
