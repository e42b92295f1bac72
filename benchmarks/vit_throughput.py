"""Training throughput of the course's ViT vs timm's VisionTransformer and vit-pytorch's ViT.

    python -m benchmarks.vit_throughput           # writes results/bench_vit_throughput.json
    python -m benchmarks.vit_throughput --force-bf16   # bf16 rounds even on a CPU without native bf16

Same configuration for all three (32x32 images, patch 4, width 192, depth 6, 3 heads, MLP 384,
CLS-token classifier, 10 classes): images per second of full training steps (forward,
backward, AdamW step) at batch 128 on the CPU, in float32 and under bf16 autocast (what the
trainer picks on CPUs with AMX).  bf16 is skipped, with the reason recorded, on a CPU whose bf16
matrix multiply is slower than its float32 one (no AMX / AVX512-BF16: bf16 is then emulated and
a round would take many minutes to say what the probe already says).  The models are measured in
rotation, one step each per round, many rounds; each ratio is the median of the ratios within a
round, printed with their range (ratio >= 1.0 means the course's model is at least as fast).  A
control, the course model against a second copy of itself, measures the noise floor: on a shared
machine a ratio is only as good as the control's distance from 1.0.

Like is compared with like: timm's model has query/key/value biases, as the course's has by
default (identical parameter counts); vit-pytorch's has none, so it is compared with the course
model built with ``qkv_bias=False`` (vit-pytorch then has 480 parameters more: the two LayerNorms
around its patch Linear).  The course model with biases is reported against vit-pytorch too.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.nn.functional as F

from course_utils.results import write_result

# the course's ViT as the trainer trains it
from course_utils.models.vit_fast import (
    FastViT,
)
from course_utils.references.vit import count_parameters

CFG = dict(
    img_size=32,
    patch_size=4,
    num_classes=10,
    dim=192,
    depth=6,
    num_heads=3,
    mlp_dim=384,
)
BATCH, STEPS, ROUNDS = 128, 1, 41


def build() -> dict[str, torch.nn.Module]:
    import timm.models.vision_transformer as tv
    import vit_pytorch

    # the control: the same model twice shows the benchmark's own noise
    return {
        "course": FastViT(**CFG),
        "course_no_qkv_bias": FastViT(**CFG, qkv_bias=False),
        "course_again": FastViT(**CFG),
        "timm": tv.VisionTransformer(
            img_size=32,
            patch_size=4,
            num_classes=10,
            embed_dim=192,
            depth=6,
            num_heads=3,
            mlp_ratio=2.0,
            class_token=True,
            global_pool="token",
        ),
        "vit-pytorch": vit_pytorch.ViT(
            image_size=32,
            patch_size=4,
            num_classes=10,
            dim=192,
            depth=6,
            heads=3,
            mlp_dim=384,
            dim_head=64,
            pool="cls",
        ),
    }


RATIOS = {
    "ratio_course_over_timm": ("course", "timm"),
    "ratio_course_over_vit_pytorch": ("course_no_qkv_bias", "vit-pytorch"),
    "ratio_course_with_qkv_bias_over_vit_pytorch": ("course", "vit-pytorch"),
    "ratio_control_course_over_course_again": ("course", "course_again"),
}


def measure(models: dict, amp: torch.dtype | None, rounds: int) -> dict:
    """Images/s per model, measured in rotation; each ratio is the median of per-round ratios.

    On a shared 2-core machine the speed of identical work drifts by 10-20 % from one second to
    the next, so a ratio of two medians taken minutes apart says more about the drift than about
    the models.  Each round runs one training step of every model back to back (in an order
    rotated each round, so no model is always first); the ratio within a round compares models
    under the same conditions, and the median over many rounds drops the rounds a burst of other
    work spoiled.  The range of per-round ratios is reported beside the median, and the control
    (the course model against a second copy of itself) shows how far from 1.0 noise alone goes.
    """
    x, y = torch.randn(BATCH, 3, 32, 32), torch.randint(0, 10, (BATCH,))
    opts = {
        k: torch.optim.AdamW(m.parameters(), 1e-3) for k, m in models.items()
    }

    def steps(name: str, n: int) -> float:
        model, opt = models[name], opts[name]
        model.train()
        start = time.perf_counter()
        for _ in range(n):
            with torch.autocast(
                "cpu", dtype=torch.bfloat16, enabled=amp is not None
            ):
                loss = F.cross_entropy(model(x).float(), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return n * BATCH / (time.perf_counter() - start)

    for name in models:
        steps(name, 2)  # warm-up
    names = list(models)
    rates = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            rates[name].append(steps(name, STEPS))
        print(
            f"{'bf16' if amp else 'float32'} round",
            r + 1,
            {k: round(v[-1]) for k, v in rates.items()},
            flush=True,
        )
    out = {
        "train_img_per_s": {
            k: round(statistics.median(v), 1) for k, v in rates.items()
        }
    }
    for key, (a, b) in RATIOS.items():
        per_round = [ra / rb for ra, rb in zip(rates[a], rates[b])]
        out[key] = round(statistics.median(per_round), 3)
        out[key.replace("ratio_", "range_")] = [
            round(min(per_round), 3),
            round(max(per_round), 3),
        ]
    out["all_rounds"] = rates
    return out


def matmul_gflops(n: int = 512, repeats: int = 5) -> dict[str, float]:
    """GFLOP/s of an n x n matrix multiply in float32 and bfloat16 (does this CPU do bf16 natively?)."""
    out = {}
    for dtype in (torch.float32, torch.bfloat16):
        a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
        a @ b
        start = time.perf_counter()
        for _ in range(repeats):
            a @ b
        out[str(dtype).replace("torch.", "")] = round(
            2 * n**3 * repeats / (time.perf_counter() - start) / 1e9, 1
        )
    return out


def main(force_bf16: bool = False, rounds: int | None = None) -> dict:
    rounds = rounds or ROUNDS
    torch.manual_seed(0)
    models = build()
    wall = time.perf_counter()
    result = {
        "config": CFG,
        "batch_size": BATCH,
        "steps_per_round": STEPS,
        "rounds": rounds,
        "torch_threads": torch.get_num_threads(),
        "parameters": {k: count_parameters(m) for k, m in models.items()},
    }
    result["matmul_gflops"] = probe = matmul_gflops()
    for label, amp in (("float32", None), ("bf16_autocast", torch.bfloat16)):
        if (
            amp is not None
            and probe["bfloat16"] < probe["float32"]
            and not force_bf16
        ):
            result[label] = {
                "skipped": f"bf16 matmul {probe['bfloat16']} GFLOP/s < float32 {probe['float32']} "
                "GFLOP/s on this CPU (no native bf16); the trainer's amp=auto picks float32 here"
            }
            print(f"{label}: {result[label]['skipped']}")
            continue
        result[label] = measure(models, amp, rounds)
        print(
            f"{label}: median img/s {result[label]['train_img_per_s']}; course/timm "
            f"{result[label]['ratio_course_over_timm']} (rounds {result[label]['range_course_over_timm']}), "
            f"course/vit-pytorch {result[label]['ratio_course_over_vit_pytorch']} "
            f"(rounds {result[label]['range_course_over_vit_pytorch']}); target >= 1.0; control course/course "
            f"{result[label]['ratio_control_course_over_course_again']} "
            f"(rounds {result[label]['range_control_course_over_course_again']})"
        )
    write_result(
        "bench_vit_throughput",
        result,
        dataset="synthetic random tensors",
        wall_time_s=time.perf_counter() - wall,
    )
    return result


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--force-bf16",
        action="store_true",
        help="measure bf16 even where the probe says it is emulated",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=ROUNDS,
        help="rounds of every model (default %(default)s)",
    )
    args = parser.parse_args()
    main(force_bf16=args.force_bf16, rounds=args.rounds)
