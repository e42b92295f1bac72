"""Training speed of the cpu recipe's conv tokenizer with its pools after vs before BatchNorm+ReLU.

    python -m benchmarks.tokenizer_order        # writes results/bench_tokenizer_order.json

``ConvTokenizer(pool_first=True)`` pools straight after each conv, so its BatchNorm and ReLU run on a
quarter of the pixels.  Both orders of the cpu recipe's model (otherwise identical), plus a control
(a second copy of the first order), take full training steps (forward, backward, AdamW) at the
recipe's batch size, with the trainer's precision on this CPU, one step each per round in
alternating order; the ratio per round is pool-after / pool-first time (above 1.0: pool-first is
faster), reported as the median with its range beside the control's.  The cpu recipe's epoch count
is set from such measurements on the machines its results were made on.
"""
from __future__ import annotations

import argparse
import dataclasses
import statistics
from pathlib import Path

import torch

from benchmarks.timing import in_rotation, train_step
from course_utils.results import write_result
from course_utils.training.recipes import RECIPES, build_model
from course_utils.training.trainer import choose_amp


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out-dir", type=Path, default=None, help="write the result here instead of results/")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    recipe = RECIPES["cpu"]
    kwargs = {k: v for k, v in recipe.model_kwargs.items() if k != "pool_first"}
    variants = {"pool after norm": False, "pool after norm (control)": False, "pool first": True}
    steps, models = {}, {}
    x = torch.randn(recipe.batch_size, 3, 32, 32, generator=torch.Generator().manual_seed(1)).contiguous(
        memory_format=torch.channels_last)
    y = torch.randint(0, 10, (recipe.batch_size,), generator=torch.Generator().manual_seed(2))
    amp = None
    for name, pool_first in variants.items():
        torch.manual_seed(0)
        model = build_model(dataclasses.replace(recipe, model_kwargs=dict(kwargs, pool_first=pool_first)))
        model = model.to(memory_format=torch.channels_last).train()
        amp = choose_amp(recipe, model, torch.device("cpu"), print)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        models[name] = model
        steps[name] = (lambda m=model, o=optimizer: train_step(m, o, x, y, amp is not None))
    seconds = in_rotation(steps, args.rounds, alternate=True)

    def ratio(a: str, b: str) -> dict:
        r = [p / q for p, q in zip(seconds[a], seconds[b])]
        return {"median": round(statistics.median(r), 4), "min": round(min(r), 4), "max": round(max(r), 4)}

    rows = {name: {"pool_first": variants[name], "median_step_s": round(statistics.median(seconds[name]), 5)}
            for name in variants}
    out = {"amp": str(amp).replace("torch.", "") if amp else "float32", "batch_size": recipe.batch_size,
           "rounds": args.rounds, "torch_threads": args.threads, "model_kwargs": kwargs, "variants": rows,
           "speedup_pool_first": ratio("pool after norm", "pool first"),
           "control": ratio("pool after norm", "pool after norm (control)")}
    for name, row in rows.items():
        print(f"{name:28s} {row['median_step_s'] * 1000:7.1f} ms per step")
    s, c = out["speedup_pool_first"], out["control"]
    print(f"pool-after / pool-first step time: {s['median']:.3f} (range {s['min']:.3f}-{s['max']:.3f}); "
          f"control {c['median']:.3f} (range {c['min']:.3f}-{c['max']:.3f})")
    path = write_result("bench_tokenizer_order", out, dataset="synthetic random tensors", directory=args.out_dir)
    print(f"written {path}")
    return out


if __name__ == "__main__":
    main()
