"""The course's named CIFAR-10 recipes (``RECIPES``), each with a short note (``NOTES``): what it
is for, what its numbers stand on, its earlier versions, and the results its runs wrote.

    python -m course_utils.experiments.recipes            # every recipe: its note and its fields
    python -m course_utils.experiments.recipes cpu gpu    # some of them

The mechanism (``Recipe``, its checks, ``apply_overrides``, ``build_model``) is
``course_utils.training.recipes``; a named recipe changes only here, and a changed recipe is a
new version: the tables that read stored runs (``experiments.cpu_recipe``, ``experiments.sweep``)
leave out the runs of another version rather than mix them.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from ..training.data import CLASSES
from ..training.recipes import Recipe, apply_overrides

__all__ = ["RECIPES", "NOTES", "Note", "CIFAR_VIT", "EARLIER_CPU_BATCH"]

CIFAR_VIT = dict(img_size=32, num_classes=len(CLASSES))

# The cpu recipe's batch size and learning rate before it moved to the smaller batch (the version
# results/bench_cpu_recipe_batch128.json holds): runs stored with them (cpu_float32's seeds,
# chapter 08's ablation budgets) keep them, so that they stay the recipes they were made with.
EARLIER_CPU_BATCH = dict(batch_size=128, lr=2e-3)


@dataclasses.dataclass(frozen=True)
class Note:
    """What a recipe is for (``purpose``), what its numbers stand on (``basis``), its earlier
    versions, oldest first (``history``), and the results files its runs write (``results``)."""

    purpose: str
    basis: str = ""
    history: tuple[str, ...] = ()
    results: tuple[str, ...] = ()


RECIPES: dict[str, Recipe] = {
    "cpu": Recipe(
        name="cpu",
        model_kwargs=dict(
            CIFAR_VIT,
            patch_size=8,
            dim=192,
            depth=4,
            num_heads=3,
            mlp_dim=384,
            stem_channels=(32, 64, 128),
            dropout=0.0,
        ),
        epochs=31,
        batch_size=64,
        lr=1.4e-3,
        weight_decay=0.05,
        warmup_epochs=1,
        label_smoothing=0.1,
        grad_clip=1.0,
        augment=True,
        policy=None,
        amp="auto",
        channels_last=True,
        eval_flip=True,
        test_shifts=((1, 0), (-1, 0), (0, 1), (0, -1)),
    ),
    "resnet": Recipe(
        name="resnet",
        model="resnet",
        model_kwargs=dict(num_classes=len(CLASSES)),
        epochs=30,
        batch_size=128,
        optimizer="sgd",
        momentum=0.9,
        lr=0.1,
        weight_decay=5e-4,
        warmup_epochs=0,
        label_smoothing=0.0,
        grad_clip=None,
        augment=True,
        amp="auto",
        channels_last=True,
        eval_flip=True,
    ),
    "gpu": Recipe(
        name="gpu",
        model_kwargs=dict(
            CIFAR_VIT,
            patch_size=4,
            dim=384,
            depth=7,
            num_heads=6,
            mlp_dim=1152,
            stem_channels=(96, 192),
            dropout=0.0,
        ),
        epochs=300,
        batch_size=256,
        lr=1e-3,
        weight_decay=0.05,
        warmup_epochs=10,
        label_smoothing=0.1,
        grad_clip=1.0,
        augment=True,
        policy="trivial",
        mixup_alpha=0.8,
        cutmix_alpha=1.0,
        amp="auto",
        compile=True,
        channels_last=True,
        eval_batch_size=1000,
        eval_flip=True,
    ),
    "gpu_fast": Recipe(
        name="gpu_fast",
        model="cct",
        model_kwargs=dict(
            img_size=32,
            num_classes=len(CLASSES),
            dim=256,
            depth=7,
            num_heads=4,
            mlp_ratio=2.0,
            conv_layers=1,
            drop_path=0.1,
            attn_dropout=0.1,
        ),
        epochs=150,
        batch_size=512,
        lr=1.1e-3,
        weight_decay=0.06,
        warmup_epochs=5,
        label_smoothing=0.1,
        grad_clip=None,
        augment=True,
        policy="trivial",
        mixup_alpha=0.8,
        cutmix_alpha=1.0,
        mix_until=0.9,
        amp="auto",
        compile=True,
        channels_last=False,
        eval_batch_size=1000,
        eval_flip=True,
    ),
    "laptop": Recipe(
        name="laptop",
        model_kwargs=dict(
            CIFAR_VIT,
            patch_size=4,
            dim=64,
            depth=4,
            num_heads=4,
            mlp_dim=128,
            dropout=0.0,
        ),
        epochs=10,
        batch_size=128,
        lr=2e-3,
        weight_decay=0.05,
        warmup_epochs=1,
        label_smoothing=0.1,
        grad_clip=1.0,
        augment=True,
        amp="auto",
    ),
    "smoke": Recipe(
        name="smoke",
        model_kwargs=dict(
            CIFAR_VIT, patch_size=8, dim=32, depth=1, num_heads=2, mlp_dim=64
        ),
        epochs=3,
        batch_size=64,
        lr=3e-3,
        warmup_epochs=0.5,
        amp="none",
        fast_train=512,
        fast_eval=256,
        fast_epochs=3,
    ),
}
RECIPES["cpu_float32"] = apply_overrides(
    RECIPES["cpu"],
    dict(amp="none", epochs=23, test_shifts=(), **EARLIER_CPU_BATCH),
    name="cpu_float32",
)
RECIPES["cpu_avx2"] = apply_overrides(
    RECIPES["cpu_float32"], dict(epochs=14), name="cpu_avx2"
)
RECIPES["cpu_avx2_init"] = apply_overrides(
    RECIPES["cpu_avx2"],
    {"model_kwargs.init": "pytorch"},
    name="cpu_avx2_init",
)
RECIPES["cpu_avx2_b64"] = apply_overrides(
    RECIPES["cpu_avx2_init"],
    dict(
        batch_size=RECIPES["cpu"].batch_size, lr=RECIPES["cpu"].lr, epochs=15
    ),
    name="cpu_avx2_b64",
)
RECIPES["cpu_avx2_pad2"] = apply_overrides(
    RECIPES["cpu_avx2_b64"], dict(crop_padding=2), name="cpu_avx2_pad2"
)
RECIPES["cpu_avx2_seqpool"] = apply_overrides(
    RECIPES["cpu_avx2_pad2"],
    {"model_kwargs.pool": "seq"},
    name="cpu_avx2_seqpool",
)
RECIPES["cpu_avx2_linear"] = apply_overrides(
    RECIPES["cpu_avx2_pad2"], dict(schedule="linear"), name="cpu_avx2_linear"
)
RECIPES["cpu_stem2"] = apply_overrides(
    RECIPES["cpu"],
    {
        "model_kwargs.stem_convs": 2,
        "model_kwargs.depth": 3,
        "model_kwargs.init": "pytorch",
        "crop_padding": 2,
        "schedule": "linear",
        "epochs": 26,
    },
    name="cpu_stem2",
)
RECIPES["cpu_stem2_pad4"] = apply_overrides(
    RECIPES["cpu_stem2"],
    dict(crop_padding=4, epochs=RECIPES["cpu_stem2"].epochs - 1),
    name="cpu_stem2_pad4",
)
RECIPES["cpu_stem122"] = apply_overrides(
    RECIPES["cpu_stem2_pad4"],
    {"model_kwargs.stem_convs": (1, 2, 2), "epochs": 29},
    name="cpu_stem122",
)
RECIPES["cpu_stem122_ema"] = apply_overrides(
    RECIPES["cpu_stem122"], dict(ema_decay=0.999), name="cpu_stem122_ema"
)
# one-seed screens of the optimiser's settings around cpu_stem122 (seed 0, read on validation)
RECIPES["cpu_stem122_lr_down"] = apply_overrides(
    RECIPES["cpu_stem122"], dict(lr=1e-3), name="cpu_stem122_lr_down"
)
RECIPES["cpu_stem122_lr_up"] = apply_overrides(
    RECIPES["cpu_stem122"], dict(lr=2e-3), name="cpu_stem122_lr_up"
)
RECIPES["cpu_stem122_ls2"] = apply_overrides(
    RECIPES["cpu_stem122"], dict(label_smoothing=0.2), name="cpu_stem122_ls2"
)
RECIPES["cpu_stem122_ls0"] = apply_overrides(
    RECIPES["cpu_stem122"], dict(label_smoothing=0.0), name="cpu_stem122_ls0"
)
# half the batch, the learning rate divided by sqrt(2) (NOTES["cpu_stem122_b32"] says why)
RECIPES["cpu_stem122_b32"] = apply_overrides(
    RECIPES["cpu_stem122"],
    dict(batch_size=32, lr=RECIPES["cpu_stem122"].lr / 2**0.5),
    name="cpu_stem122_b32",
)
RECIPES["cpu_stem122_altflip"] = apply_overrides(
    RECIPES["cpu_stem122"],
    dict(flip="alternate"),
    name="cpu_stem122_altflip",
)
# the images whole, uncropped, in the last tenth of the epochs (the last two of 29)
RECIPES["cpu_stem122_cropend"] = apply_overrides(
    RECIPES["cpu_stem122"], dict(crop_until=0.9), name="cpu_stem122_cropend"
)
# a wider network for fewer epochs (NOTES["cpu_wide"] says why); the epochs are planned from the
# first one to fill the half hour, at most 40
RECIPES["cpu_wide"] = apply_overrides(
    RECIPES["cpu_stem122"],
    {
        "model_kwargs.stem_channels": (32, 128, 256),
        "model_kwargs.stem_convs": (1, 1, 2),
        "model_kwargs.dim": 256,
        "model_kwargs.num_heads": 4,
        "model_kwargs.mlp_dim": 512,
        "budget_s": 1800,
        "epochs": 40,
    },
    name="cpu_wide",
)
# the first half of cpu_stem122's epochs on 24x24 images (NOTES["cpu_stem122_prog"] says why)
RECIPES["cpu_stem122_prog"] = apply_overrides(
    RECIPES["cpu_stem122"],
    {"model_kwargs.extra_sizes": (24,), "progressive": ((24, 0.5),)},
    name="cpu_stem122_prog",
)
# cpu_stem122 with its full-resolution layer fixed to patch whitening (NOTES["cpu_stem122_white"])
RECIPES["cpu_stem122_white"] = apply_overrides(
    RECIPES["cpu_stem122"],
    {"model_kwargs.whiten_stem": True},
    name="cpu_stem122_white",
)
# cpu_stem122 with TrivialAugment on top of its crops and flips (NOTES["cpu_stem122_trivial"])
RECIPES["cpu_stem122_trivial"] = apply_overrides(
    RECIPES["cpu_stem122"],
    dict(policy="trivial"),
    name="cpu_stem122_trivial",
)
# cpu_stem122 for twice its epochs: not a half-hour recipe (NOTES["cpu_stem122_x2"] says why)
RECIPES["cpu_stem122_x2"] = apply_overrides(
    RECIPES["cpu_stem122"],
    dict(epochs=2 * RECIPES["cpu_stem122"].epochs),
    name="cpu_stem122_x2",
)
# cpu_stem122 with stochastic depth (NOTES["cpu_stem122_dp"] says why)
RECIPES["cpu_stem122_dp"] = apply_overrides(
    RECIPES["cpu_stem122"],
    {"model_kwargs.drop_path": 0.1},
    name="cpu_stem122_dp",
)
# cpu_stem122 tied to its mirror image, so that an image and its mirror get the same logits, with
# the epochs its slower step fits in the half hour (NOTES["cpu_stem122_mirror"])
RECIPES["cpu_stem122_mirror"] = apply_overrides(
    RECIPES["cpu_stem122"],
    {"model_kwargs.mirror": True, "epochs": 26},
    name="cpu_stem122_mirror",
)
# cpu_stem122 with its position table alone mirror-symmetric (NOTES["cpu_stem122_mirrorpos"])
RECIPES["cpu_stem122_mirrorpos"] = apply_overrides(
    RECIPES["cpu_stem122"],
    {"model_kwargs.mirror_positions": True},
    name="cpu_stem122_mirrorpos",
)
# airbench94's optimiser settings (Jordan, 2024), in its units: per 1024 images of a summed loss,
# with Nesterov momentum 0.85; NOTES["cpu_airbench"] says how they become cpu_airbench's
AIRBENCH_SGD = dict(
    lr=11.5, weight_decay=0.0153, momentum=0.85, bias_lr_scale=64.0
)


def _airbench_sgd(batch_size: int) -> dict:
    """airbench94's SGD settings as ``Recipe`` fields for a mean loss over ``batch_size`` images:
    its lr is per ``1024 * (1 + 1 / (1 - momentum))`` summed images, and its decay is given per step
    and divided by the lr (PyTorch couples the two)."""
    momentum = AIRBENCH_SGD["momentum"]
    per_image = AIRBENCH_SGD["lr"] / (1024 * (1 + 1 / (1 - momentum)))
    return dict(
        optimizer="adamw+sgd",
        momentum=momentum,
        tokenizer_lr=per_image * batch_size,
        tokenizer_weight_decay=AIRBENCH_SGD["weight_decay"]
        / AIRBENCH_SGD["lr"],
        tokenizer_bias_lr_scale=AIRBENCH_SGD["bias_lr_scale"],
    )


# the ViT on airbench's tokenizer, trained in part as airbench trains (NOTES["cpu_airbench"])
RECIPES["cpu_airbench"] = apply_overrides(
    RECIPES["cpu_stem122"],
    {
        "model_kwargs.tokenizer": "airbench",
        "model_kwargs.stem_channels": (64, 256),
        "model_kwargs.stem_convs": 1,
        "model_kwargs.dim": 256,
        "model_kwargs.depth": 2,
        "model_kwargs.num_heads": 4,
        "model_kwargs.mlp_dim": 512,
        "epochs": 16,
        "batch_size": 512,
        "lr": 1e-3,
        # airbench's warm-up share (23% of the steps), then the linear decay to 0
        "warmup_epochs": 0.23 * 16,
        "label_smoothing": 0.2,
        "crop_padding": 2,
        **_airbench_sgd(512),
    },
    name="cpu_airbench",
)
# cpu_airbench with the epochs its seed 0 left spare in the half hour (NOTES["cpu_airbench_e18"])
RECIPES["cpu_airbench_e18"] = apply_overrides(
    RECIPES["cpu_airbench"],
    {"epochs": 18, "warmup_epochs": 0.23 * 18},
    name="cpu_airbench_e18",
)
# cpu_airbench with one more convolution at the tokenizer's last width, before the pool to the
# tokens, and the epochs its step leaves in the half hour (NOTES["cpu_airbench_tail"])
RECIPES["cpu_airbench_tail"] = apply_overrides(
    RECIPES["cpu_airbench"],
    {"model_kwargs.tail_convs": 1, "epochs": 13, "warmup_epochs": 0.23 * 13},
    name="cpu_airbench_tail",
)
# cpu_airbench_tail, the recipe chosen on validation, trained again on 49,000 of the 50,000 training
# images for the final reading, the epochs cut so that it sees as many images (NOTES["cpu_airbench_tail_49k"])
RECIPES["cpu_airbench_tail_49k"] = apply_overrides(
    RECIPES["cpu_airbench_tail"],
    {"val_size": 1000, "epochs": 12, "warmup_epochs": 0.23 * 12},
    name="cpu_airbench_tail_49k",
)
# cpu_airbench_tail with locality self-attention in its two blocks (NOTES["cpu_airbench_lsa"])
RECIPES["cpu_airbench_lsa"] = apply_overrides(
    RECIPES["cpu_airbench_tail"],
    {"model_kwargs.locality": True},
    name="cpu_airbench_lsa",
)
RECIPES["cpu_avx2_stem122"] = apply_overrides(
    RECIPES["cpu_stem122"],
    dict(amp="none", budget_s=1800, epochs=60),
    name="cpu_avx2_stem122",
)
# cpu_avx2_stem122 itself, run on a CPU with wider units held to AVX2 kernels (experiments.cpu_recipe's
# KERNEL_LIMITS): a stand-in for an AVX2-only CPU until one runs it, kept apart from such a CPU's runs
RECIPES["cpu_avx2_stem122_held"] = apply_overrides(
    RECIPES["cpu_avx2_stem122"], {}, name="cpu_avx2_stem122_held"
)

NOTES: dict[str, Note] = {
    "cpu": Note(
        purpose="chapter 07's ViT: 2 CPU cores with native bf16 (Intel AMX or AMD avx512_bf16), under half an hour",
        basis="convolutional only in its tokenizer (Compact Convolutional Transformers' inductive-bias lever: "
        "three 3x3 conv-BN-ReLU layers with 2x2 pools down to a 4x4 grid of 16 tokens), then a small "
        "pre-norm ViT with a CLS token; a finer grid (patch 4: 64 tokens) costs more per image, so fewer "
        "epochs would fit.  Validation averages each image with its mirror; the test averages ten views "
        "(the image and its one-pixel shifts, each with its mirror), chosen on seed 0's validation images "
        "(chapter 07, section 7.9).  The epochs leave part of the half hour spare on an idle machine (a "
        "shared virtual machine runs the same epochs slower at some times: the runs record each epoch's "
        "time).  torch.compile is off: no faster on such a CPU, in bf16 or float32 "
        "(results/bench_cpu_precision.json), and compiling costs the first step",
        history=(
            "batch 128 at lr 2e-3 (EARLIER_CPU_BATCH; results/bench_cpu_recipe_batch128.json, commit 07e2f93); "
            "then half the batch with the lr divided by sqrt(2), the usual rule for Adam-type optimisers: "
            "twice the updates per epoch for a little more time per image on two cores (chapter 07, "
            "section 7.9, reads the two versions' seeds against each other)",
        ),
        results=("ch07_vit_cpu[_seed<s>].json", "bench_cpu_recipe.json"),
    ),
    "resnet": Note(
        purpose="chapter 07's convolutional baseline (ResNet-20) with a ResNet's own recipe",
        basis="He et al., 2016: SGD with Nesterov momentum 0.9 at lr 0.1, weight decay 5e-4 as in most later "
        "CIFAR work, no warm-up, no label smoothing; cosine decay, the ViT's augmentation and evaluation, and "
        "the epochs that fill the cpu recipe's half hour on the same machine",
        results=(
            "ch07_resnet_cpu[_seed<s>].json",
            "bench_resnet_recipe.json",
        ),
    ),
    "gpu": Note(
        purpose="chapter 08: one GPU, many epochs",
        basis="a ViT-S-like model (patch 4 on 32x32: 64 tokens) with the DeiT-style recipe (AdamW, warm-up and "
        "cosine, label smoothing, TrivialAugment, MixUp/CutMix); chapter 08 cites the literature",
        results=(
            "ch08_vit_gpu.json",
            "ch08_vit_gpu_short[_seed<s>].json",
            "ch08_vit_gpu_cut.json",
        ),
    ),
    "gpu_fast": Note(
        purpose="chapter 08, question 1: one GPU for ten minutes",
        basis="CCT-7/3x1 (Hassani et al., 2021: 95.0% on CIFAR-10 at 300 epochs, batch 128) with the paper's "
        "ingredients (AdamW at weight decay 0.06, label smoothing, MixUp/CutMix, stochastic depth 0.1, "
        "attention dropout 0.1) made fast: batch 512 with the lr scaled by sqrt(4) from the paper's 5.5e-4, "
        "TrivialAugment on the GPU in place of AutoAugment, bf16, torch.compile, the data held on the GPU; "
        "MixUp/CutMix stop for the last tenth.  The epochs fit ten minutes of training on an H100 "
        "(experiments.gpu_window measures the step and cuts a shorter window's run to fit)",
        results=("ch08_gpu_fast[_cut][_seed<s>].json",),
    ),
    "laptop": Note(
        purpose="chapter 07's 'train your own ViT': a laptop CPU's few minutes",
        basis="a plain ViT with 4x4 patches (64 tokens), small enough for a learner's own class; the command "
        "line's --train-images (or the chapter's own subset) cuts the training split",
        results=("ch07_vit_laptop.json",),
    ),
    "smoke": Note(purpose="seconds on a CPU: tests and fast mode"),
    "cpu_float32": Note(
        purpose="the cpu recipe on a CPU without native bf16 (where amp='auto' picks float32)",
        basis="the same model and ingredients in float32 (channels-last, the faster memory format there by "
        "benchmarks.cpu_precision), with the epochs that fill the same half hour: set against the ratio of "
        "float32 to bf16 time per epoch of whole runs on one machine, not the step benchmark's, which times "
        "the steps alone and not the validation pass and data pipeline an epoch also holds",
        history=(
            "its stored seeds were made at EARLIER_CPU_BATCH and tested with the two mirrored views (their "
            "weights are not kept), so it keeps those until they are run again",
        ),
        results=(
            "ch07_vit_cpu_float32[_seed<s>].json",
            "bench_cpu_recipe_float32.json",
        ),
    ),
    "cpu_avx2": Note(
        purpose="cpu_float32 on a CPU whose widest vectors are AVX2 (256 bits, no AVX-512)",
        basis="its training steps run slower than on the AVX-512 machine cpu_float32's count was set on "
        "(benchmarks.cpu_precision on each reads the ratio), so fewer epochs fill the half hour; nothing "
        "else changes, so the two read against each other as one recipe on two CPUs",
        history=(
            "12 epochs; then 14 (115 s an epoch on an idle 2-core AVX2 EPYC)",
        ),
        results=(
            "ch07_vit_cpu_avx2[_seed<s>].json",
            "bench_cpu_recipe_avx2.json",
            "bench_cpu_precision_avx2.json",
        ),
    ),
    "cpu_avx2_init": Note(
        purpose="cpu_avx2 with PyTorch's default initialisation: the init lever at chapter 07's half hour",
        basis="chapter 08's init_pytorch lever read higher, beyond the noise, at the mini budget "
        "(results/ch08_levers_model_mini.json); a lever has to be checked at the budget it will be used "
        "at, so this is cpu_avx2 with that one change, read against cpu_avx2's seeds on validation",
        results=(
            "ch07_vit_cpu_avx2_init[_seed<s>].json",
            "bench_cpu_recipe_avx2_init.json",
        ),
    ),
    "cpu_avx2_b64": Note(
        purpose="cpu_avx2_init at the cpu recipe's own batch and learning rate: the next candidate for the AVX2 half hour",
        basis="the cpu recipe moved to the smaller batch for twice the updates per epoch; on an AVX2-only CPU "
        "an epoch of the smaller batch takes little longer than one of the larger (each run's history "
        "holds its epochs' times, beside cpu_avx2_init's), so the updates cost few epochs; one epoch "
        "more than cpu_avx2_init, which left part of the half hour spare; read against cpu_avx2_init's "
        "seeds on validation",
        results=(
            "ch07_vit_cpu_avx2_b64[_seed<s>].json",
            "bench_cpu_recipe_avx2_b64.json",
        ),
    ),
    "cpu_avx2_pad2": Note(
        purpose="cpu_avx2_b64 with crops that move the image by at most two pixels instead of four",
        basis="a half hour on an AVX2-only CPU is few epochs, and the model fits its augmented training "
        "images hardly better than the validation images (cpu_avx2_b64's history: train_acc against "
        "val_acc), so it under-fits: a milder augmentation asks less of it.  Short CIFAR-10 schedules "
        "(Jordan's airbench, 2024) move images by two pixels; read against cpu_avx2_b64 on validation",
        results=(
            "ch07_vit_cpu_avx2_pad2[_seed<s>].json",
            "bench_cpu_recipe_avx2_pad2.json",
        ),
    ),
    "cpu_avx2_seqpool": Note(
        purpose="cpu_avx2_pad2 with sequence pooling instead of the CLS token",
        basis="Compact Convolutional Transformers (Hassani et al., 2021) compare the same small ViT "
        "with a CLS token (ViT-Lite) and with sequence pooling (CVT) on CIFAR-10, and the pooled one "
        "tests higher: every patch token's output reaches the head, weighted by a learned score, "
        "instead of the one token that has to gather the others through attention.  It also drops one "
        "of the seventeen tokens; read against cpu_avx2_pad2 on validation",
        results=(
            "ch07_vit_cpu_avx2_seqpool[_seed<s>].json",
            "bench_cpu_recipe_avx2_seqpool.json",
        ),
    ),
    "cpu_avx2_linear": Note(
        purpose="cpu_avx2_pad2 with a learning rate that falls in a straight line to zero instead of a cosine",
        basis="a cosine spends the last tenth of a run at a rate so small that the weights hardly move "
        "(cpu_avx2_pad2's last epochs barely change its validation accuracy); a straight line keeps a "
        "useful rate for longer, and in runs cut short by a budget it trains at least as well "
        "(Li, Yumer and Ramanan, Budgeted Training, 2020; Defazio et al., 2023).  Built on "
        "cpu_avx2_pad2, not cpu_avx2_seqpool, which read lower on validation; read against "
        "cpu_avx2_pad2 on validation",
        results=(
            "ch07_vit_cpu_avx2_linear[_seed<s>].json",
            "bench_cpu_recipe_avx2_linear.json",
        ),
    ),
    "cpu_stem2": Note(
        purpose="the cpu recipe's next candidate on 2 cores with native bf16: more of the work in the tokenizer",
        basis="the cpu recipe's ViT tests lower than the ResNet-20 of the same half hour (chapter 07), "
        "whose 19 3x3 convolutions all work at 32x32 to 8x8, where the ViT's tokenizer has one per "
        "resolution: this one has two of each width (32x32, 16x16, 8x8: a VGG-like stem, the "
        "inductive-bias lever Compact Convolutional Transformers pull further) and one encoder "
        "block fewer, so that an epoch costs a little more than the cpu recipe's and a few "
        "epochs fewer fill the half hour (each run's history holds its epochs' times); with the three changes the AVX2 line read "
        "higher together (PyTorch's initialisation, two-pixel crops, a linear decay to zero: "
        "cpu_avx2_init, cpu_avx2_pad2, cpu_avx2_linear), and the epochs a side-by-side step benchmark "
        "of the candidate models fitted into the half hour; they leave too little spare (a seed on a "
        "slower hour of the shared machine ran past it: chapter 07), so its next version, "
        "cpu_stem2_pad4, trains one fewer.  Read against the cpu recipe's seeds on validation",
        results=(
            "ch07_vit_cpu_stem2[_seed<s>].json",
            "bench_cpu_recipe_stem2.json",
        ),
    ),
    "cpu_stem2_pad4": Note(
        purpose="cpu_stem2 with crops that move the image by up to four pixels again, and one epoch fewer",
        basis="the two-pixel crops were chosen on the AVX2 line for a model that fitted its augmented "
        "training images hardly better than the validation images; cpu_stem2 fits them far better "
        "(its last epochs' training accuracy keeps rising while validation stays level, and the margin "
        "is about one and a half times the cpu recipe's: chapter 07), so it over-fits and the wider "
        "crops of the cpu recipe ask more of it.  One epoch fewer leaves the half hour the spare that "
        "cpu_stem2's seeds on a slower hour lacked.  Read against cpu_stem2's seeds on validation",
        results=(
            "ch07_vit_cpu_stem2_pad4[_seed<s>].json",
            "bench_cpu_recipe_stem2_pad4.json",
        ),
    ),
    "cpu_stem122": Note(
        purpose="cpu_stem2_pad4 with one convolution at full resolution instead of two, and the epochs "
        "the time saved buys",
        basis="a profile of cpu_stem2_pad4's step puts its largest single cost in the tokenizer's "
        "32x32 stage, where 32 channels at full resolution make each layer's batch norm, ReLU and "
        "convolution move more memory than any later layer, for few of the step's FLOPs; with one "
        "layer there (widths 32, 64, 128 with 1, 2, 2 layers) an image trains faster, side by side in "
        "one run (benchmarks.cpu_recipe_steps, bench_cpu_recipe_steps.json), and the epochs are those "
        "of that ratio less a spare for a slower hour of the shared machine.  Read against "
        "cpu_stem2_pad4's seeds on validation",
        results=(
            "ch07_vit_cpu_stem122[_seed<s>].json",
            "bench_cpu_recipe_stem122.json",
            "bench_cpu_recipe_steps.json",
        ),
    ),
    "cpu_stem122_ema": Note(
        purpose="cpu_stem122 measured and kept as a moving average of its weights (ema_decay 0.999)",
        basis="cpu_stem122's seeds test more than a point higher on two views than on one: their "
        "predictions still move with the last steps' noise, which an average of the weights over about "
        "the last 1 / (1 - decay) steps (about an epoch and a half here) smooths without a second "
        "forward pass at test time.  The decay is a first choice from that span, not tuned; the "
        "average's update is one pass over the weights a step, small beside the step, so the epochs "
        "stay cpu_stem122's.  The result also records the trained weights' last validation beside the "
        "average's.  Read against cpu_stem122's seeds on validation",
        results=(
            "ch07_vit_cpu_stem122_ema[_seed<s>].json",
            "bench_cpu_recipe_stem122_ema.json",
        ),
    ),
    "cpu_stem122_lr_down": Note(
        purpose="cpu_stem122 at a learning rate sqrt(2) lower (1e-3), a one-seed screen",
        basis="the stem models (cpu_stem2 onwards) test level on one view whatever their epochs, and the optimiser's settings they share were chosen for the cpu recipe's model (its learning rate is 2e-3 at batch 128 divided by sqrt(2)), never on them.  A screen: seed 0 only, read against cpu_stem122's seed 0 on validation; an effect is stated only after the seeds the noise rule needs",
        results=(
            "ch07_vit_cpu_stem122_lr_down[_seed<s>].json",
            "bench_cpu_recipe_stem122_lr_down.json",
        ),
    ),
    "cpu_stem122_lr_up": Note(
        purpose="cpu_stem122 at a learning rate sqrt(2) higher (2e-3), a one-seed screen",
        basis="the stem models (cpu_stem2 onwards) test level on one view whatever their epochs, and the optimiser's settings they share were chosen for the cpu recipe's model (its learning rate is 2e-3 at batch 128 divided by sqrt(2)), never on them.  A screen: seed 0 only, read against cpu_stem122's seed 0 on validation; an effect is stated only after the seeds the noise rule needs",
        results=(
            "ch07_vit_cpu_stem122_lr_up[_seed<s>].json",
            "bench_cpu_recipe_stem122_lr_up.json",
        ),
    ),
    "cpu_stem122_ls2": Note(
        purpose="cpu_stem122 with label smoothing 0.2 instead of 0.1, a one-seed screen",
        basis="cpu_stem122 ends its runs fitting its augmented training images far better than "
        "validation, and the gap widens over the last epochs; stronger smoothing of the targets is the "
        "regulariser that costs nothing per step (airbench's short CIFAR-10 runs use 0.2).  "
        "A screen: seed 0 only, read against cpu_stem122's seed 0 on validation; an effect is stated only after the seeds the noise rule needs",
        results=(
            "ch07_vit_cpu_stem122_ls2[_seed<s>].json",
            "bench_cpu_recipe_stem122_ls2.json",
        ),
    ),
    "cpu_stem122_ls0": Note(
        purpose="cpu_stem122 without label smoothing, a one-seed screen",
        basis="cpu_stem122 is under-trained rather than over-fitted at 29 epochs: its validation loss "
        "still falls at the last epoch, twice the epochs test higher (cpu_stem122_x2), and each "
        "regulariser added to it read lower on validation (label smoothing 0.2, TrivialAugment, "
        "stochastic depth: cpu_stem122_ls2, cpu_stem122_trivial, cpu_stem122_dp).  The regulariser it "
        "already has that costs nothing to remove is its label smoothing (0.1).  A screen: seed 0 only, read against cpu_stem122's seed 0 on validation; "
        "an effect is stated only after the seeds the noise rule needs",
        results=(
            "ch07_vit_cpu_stem122_ls0[_seed<s>].json",
            "bench_cpu_recipe_stem122_ls0.json",
        ),
    ),
    "cpu_stem122_b32": Note(
        purpose="cpu_stem122 at half the batch (32) with the learning rate divided by sqrt(2), a "
        "one-seed screen at equal epochs",
        basis="cpu_stem122 is under-trained at 29 epochs (its validation loss is lowest at the last "
        "epoch on every seed, and twice the epochs test higher: cpu_stem122_x2), so the lever is "
        "more progress per image: half the batch makes twice the updates per epoch.  The learning "
        "rate follows the rule the cpu recipe used when it halved its batch (divided by sqrt(2), "
        "chapter 07, section 7.9).  On two cores each image costs a little more at the smaller "
        "batch; the run's epoch times measure how much, so a budgeted version can be planned from "
        "it.  A screen at equal epochs: seed 0, read against cpu_stem122's seed 0 on validation; an "
        "effect is stated only after the seeds the noise rule needs",
        results=(
            "ch07_vit_cpu_stem122_b32[_seed<s>].json",
            "bench_cpu_recipe_stem122_b32.json",
        ),
    ),
    "cpu_stem122_altflip": Note(
        purpose="cpu_stem122 with alternating flips instead of random ones, a one-seed screen",
        basis="with random flips, an image keeps its orientation from one epoch to the next half the "
        "time, so a short run shows many images fewer ways than its epochs could; alternating "
        "flips (each image's orientation drawn once, then turned over every epoch) show each image "
        "both ways in any two epochs, and for short CIFAR-10 runs do what a few more epochs of "
        "random flips do (Jordan, 2024, airbench).  Nothing else changes: the batches' order and "
        "crops stay cpu_stem122's, seed for seed.  A screen, read against cpu_stem122's seeds on "
        "validation: seed 0 first, then seeds 1 and 2, the first to record one-view validation "
        "beside two views (cpu_stem122's seed 1 was run again to record it too); an effect is "
        "stated only after the seeds the noise rule needs",
        results=(
            "ch07_vit_cpu_stem122_altflip[_seed<s>].json",
            "bench_cpu_recipe_stem122_altflip.json",
        ),
    ),
    "cpu_stem122_cropend": Note(
        purpose="cpu_stem122 with its last epochs on whole images (no random crops), a one-seed screen",
        basis="the goal is read on one view, the whole image as it is, yet training shows an image "
        "exactly so in only one of its 81 four-pixel crops: a mismatch between training and test "
        "views that a short fine-tuning on the test's view removes (Touvron et al., 2019, FixRes).  "
        "Here the last tenth of the epochs, at the linear decay's smallest learning rates, trains on "
        "whole images; flips go on, and every epoch before stays cpu_stem122's, seed for seed.  A "
        "screen: seed 1, read against cpu_stem122's seed 1 on one-view validation (the first seeds "
        "to record it); an effect is stated only after the seeds the noise rule needs",
        results=(
            "ch07_vit_cpu_stem122_cropend[_seed<s>].json",
            "bench_cpu_recipe_stem122_cropend.json",
        ),
    ),
    "cpu_stem122_prog": Note(
        purpose="cpu_stem122 progressively resized: the first half of its 29 epochs on 24x24 images, "
        "the second on full-size ones; a one-seed screen of what the smaller images cost at equal epochs",
        basis="in the stem chain every change that bought epochs read level or better and the one that "
        "gave them up (cpu_wide) read far worse, so the next lever is cheaper epochs.  A 24x24 image "
        "has 0.56 of the pixels, and the tokenizer's convolutions (most of the step) and the tokens "
        "(9 instead of 16) shrink with it: the FLOPs per image fall to 0.57 of full size "
        "(training.compute.flops_per_image).  The augmented image is downsized (antialiased) and the "
        "position table resampled to the 3x3 grid, so one set of weights trains at both sizes "
        "(fast.ai's progressive resizing), and the closing half at full size fits the model to the "
        "test's view (FixRes).  At equal epochs the run measures both things a budgeted version "
        "needs: what the small images cost in accuracy (read against cpu_stem122's seed 0 on "
        "one-view validation) and what they save in time on the same machine (the epochs at either "
        "size in one run's history).  A screen: an effect is stated only after the seeds the noise "
        "rule needs",
        results=(
            "ch07_vit_cpu_stem122_prog[_seed<s>].json",
            "bench_cpu_recipe_stem122_prog.json",
        ),
    ),
    "cpu_stem122_white": Note(
        purpose="cpu_stem122 with the tokenizer's first layer fixed to patch whitening filters, a one-seed "
        "screen at equal epochs",
        basis="Jordan's CIFAR-10 speed runs (airbench, 2024) start from a first layer that whitens "
        "the image's small patches and is never trained: the layer after it sees decorrelated "
        "inputs of equal variance from the first step, which speeds early learning.  Here the "
        "32 filters of the 32x32 stage are the 16 leading whitening filters of the 3x3 patches of "
        "5,000 training images, each with its negative (after the ReLU the pair keeps both signs), "
        "and their batch norm keeps its statistics but trains no scale or shift.  Nothing before "
        "the 16x16 stage then needs a gradient, so backward skips the full-resolution layer, where "
        "cpu_stem122's profile puts the step's most memory-bound work.  At equal epochs the run "
        "reads what the fixed layer costs or gives in accuracy (against cpu_stem122's seed 0 on "
        "validation); the step's speed is read side by side (benchmarks.cpu_recipe_steps).  A "
        "screen: an effect is stated only after the seeds the noise rule needs",
        results=(
            "ch07_vit_cpu_stem122_white[_seed<s>].json",
            "bench_cpu_recipe_stem122_white.json",
        ),
    ),
    "cpu_stem122_trivial": Note(
        purpose="cpu_stem122 with TrivialAugment (one operation and strength per image) after its crops "
        "and flips, a one-seed screen at equal epochs",
        basis="cpu_stem122's seeds end their 29 epochs at about 0.94 training accuracy on augmented "
        "images against about 0.86 on one view of the validation images: by then the network fits "
        "what it is shown better than what it has not seen, and a stronger augmentation is the "
        "usual remedy.  TrivialAugment (Muller and Hutter, 2021) has no setting to tune, and the "
        "course's batched version costs a few microseconds per image (bench_trivial_augment.json) "
        "against more than a millisecond for the training step, so the epochs stay cpu_stem122's.  "
        "It also makes each epoch harder to fit, which a short schedule may not repay.  A screen: "
        "seed 0, read against cpu_stem122's seed 0 on validation; an effect is stated only after "
        "the seeds the noise rule needs",
        results=(
            "ch07_vit_cpu_stem122_trivial[_seed<s>].json",
            "bench_cpu_recipe_stem122_trivial.json",
        ),
    ),
    "cpu_stem122_x2": Note(
        purpose="cpu_stem122 for twice its epochs (about an hour on 2 cores): what twice the half "
        "hour's compute buys, a one-seed measurement, not a half-hour recipe",
        basis="the bf16 half hour's goal is 0.88 on one view of the test images, every seed; "
        "cpu_stem122 tests about 0.858 at 29 epochs, and the same network held to AVX2 kernels "
        "in float32 about 0.84 at 13 (cpu_avx2_stem122_held).  Whether a faster step alone could "
        "reach the goal depends on how the accuracy grows with epochs, which two different "
        "precisions and machines only hint at.  The same recipe with the linear decay stretched "
        "over 58 epochs answers it on one machine: if twice the epochs still tests below 0.88, "
        "no speed-up of this network's step by up to two can meet the goal, and the next "
        "candidates must change the network or the data it sees.  Seed 0, read against "
        "cpu_stem122's seed 0; chosen and tested like every recipe (best validation epoch, test "
        "read once)",
        results=(
            "ch07_vit_cpu_stem122_x2[_seed<s>].json",
            "bench_cpu_recipe_stem122_x2.json",
        ),
    ),
    "cpu_stem122_dp": Note(
        purpose="cpu_stem122 with stochastic depth (drop_path 0.1), a one-seed screen at equal epochs",
        basis="cpu_stem122's seeds end fitting their augmented training images far better than "
        "validation (training accuracy about 0.94 against 0.88), and twice the epochs widen the gap "
        "with validation level (cpu_stem122_x2), while TrivialAugment, a stronger regulariser, slows "
        "the fit too much for 29 epochs (cpu_stem122_trivial).  Stochastic depth (section 8.2) drops "
        "each block's residual branches per image: it regularises the Transformer without changing "
        "what the tokenizer sees, and a dropped branch costs nothing.  The rate is the anchor's "
        "(Compact Convolutional Transformers' CCT-7/3x1: 0.1 at the last block, rising linearly from "
        "0 at the first), not tuned.  A screen: seed 0, read against cpu_stem122's seed 0 on "
        "validation; an effect is stated only after the seeds the noise rule needs",
        results=(
            "ch07_vit_cpu_stem122_dp[_seed<s>].json",
            "bench_cpu_recipe_stem122_dp.json",
        ),
    ),
    "cpu_stem122_mirror": Note(
        purpose="cpu_stem122 with every layer tied to its left-right mirror (models.mirror): one view "
        "that gives what averaging an image with its mirror gives, a one-seed screen",
        basis="on validation, cpu_stem122 gains more from averaging each image with its mirror than "
        "from any setting screened around it (compare the two-view and one-view columns of its "
        "runs): its one view is a noisy estimate of a prediction that should not depend on the "
        "image's orientation.  Tying every channel to a mirrored twin makes the network's output "
        "invariant by construction, with the same arithmetic per image and half the free "
        "parameters; a flipped training image then teaches the same thing as the original, so the "
        "flips no longer enlarge the data and the tie has to make up for that.  The ties cost "
        "arithmetic-free work per step (building each tied weight, normalising channel pairs "
        "together): the epochs are cpu_stem122's divided by the step's time ratio measured side by "
        "side (benchmarks.cpu_recipe_steps), rounded.  A screen: seed 0, read against cpu_stem122's "
        "seeds on one-view validation.  Its seed 0 ran slightly over the half hour (its epochs, "
        "validation included, cost more than the steps alone: results/ch07_vit_cpu_stem122_mirror.json "
        "records each), so a run to keep would take one epoch fewer",
        results=(
            "ch07_vit_cpu_stem122_mirror[_seed<s>].json",
            "bench_cpu_recipe_stem122_mirror.json",
        ),
    ),
    "cpu_stem122_mirrorpos": Note(
        purpose="cpu_stem122 with its position table tied left to right (columns c and 3 - c of "
        "the 4x4 token grid share a vector), a one-seed screen at equal epochs",
        basis="cpu_stem122's two-view validation stands well above its one view (its seed 1 records "
        "both), and tying the whole network "
        "to its mirror (cpu_stem122_mirror) made one view equal two views without raising either "
        "to the two-view level: that network lost what flipped images teach.  A learned position "
        "table is the one part of cpu_stem122 that tells the Transformer left from right outright "
        "(the tokenizer's convolutions learn both orientations from the flips), so that tokens of "
        "a flipped image arrive with positions their content never met there.  Tying the table "
        "alone removes that asymmetry and keeps the flips as data; the rows stay apart, and the "
        "step's cost does not change.  A screen: seed 0, read against cpu_stem122's seeds on "
        "one-view validation",
        results=(
            "ch07_vit_cpu_stem122_mirrorpos[_seed<s>].json",
            "bench_cpu_recipe_stem122_mirrorpos.json",
        ),
    ),
    "cpu_wide": Note(
        purpose="the bf16 half hour's next candidate: a wider network than cpu_stem122's, for the fewer "
        "epochs the half hour holds",
        basis="every setting screened around cpu_stem122 (learning rate, label smoothing, a moving "
        "average, flips, whole images at the end) tests level on one view, so the model, not its "
        "training, is what holds the half hour back.  The fastest CIFAR-10 trainer (airbench) spends "
        "its compute on width at 16x16 and 8x8 for few epochs.  This tokenizer keeps one 32-wide "
        "convolution at 32x32, one of 128 at 16x16 and two of 256 at 8x8, and the Transformer grows to "
        "256 wide (4 heads); wider layers run nearer the CPU's matmul speed, so the time per image "
        "grows less than the FLOPs (`python -m benchmarks.cpu_recipe_steps --recipes cpu_stem122 "
        "cpu_wide` measures both).  The epochs are "
        "planned after the first one (budget_s).  Read against cpu_stem122's "
        "seeds on one-view validation",
        results=(
            "ch07_vit_cpu_wide[_seed<s>].json",
            "bench_cpu_recipe_wide.json",
        ),
    ),
    "cpu_airbench": Note(
        purpose="the bf16 half hour's next candidate: the ViT on the convolutional half of the fastest "
        "CIFAR-10 trainer, that half trained the way it trains there",
        basis="every setting screened around cpu_stem122 tests level on one view, twice its epochs "
        "included (cpu_stem122_x2), and the ResNet-20 of the same half hour lands at the same level, "
        "while Jordan's airbench94 (2024) reaches 94% on CIFAR-10 in about ten epochs with about three "
        "times cpu_stem122's arithmetic per image: its network and its training both learn more per "
        "image.  Here airbench's first two conv groups (models.airbench: fixed 2x2 patch whitening, "
        "widths 64 and 256, each group pooling before its batch norm, norms with a shift and no "
        "scale) are the tokenizer, max-pooled to cpu_stem122's 4x4 grid of tokens, and two "
        "Transformer blocks 256 wide take the place of airbench's third group.  The tokenizer trains "
        "with airbench's SGD (Nesterov momentum 0.85, its learning rate per image at batch 512, "
        "its decay per step, its 64-fold rate on the norms' shifts), the Transformer and the "
        "projection into it with AdamW as before (Xiao et al., 2021, 'Early convolutions help "
        "transformers see better': a conv stem makes a ViT trainable by less delicate "
        "optimisers, yet SGD at airbench's rate diverges on attention's weights here); airbench's "
        "label smoothing 0.2, two-pixel crops, and warm-up over 23% of the steps before the linear "
        "decay.  The epochs are those a side-by-side step benchmark fits in the half hour "
        "(benchmarks.cpu_recipe_steps).  Prediction, written before the run: one-view validation "
        "at least 0.875, against cpu_stem122's 0.864 (seed 1), from a curve that already reads "
        "0.81 after three epochs on a three-epoch schedule where cpu_stem122's reads 0.77.  Read "
        "against cpu_stem122's seeds on one-view validation",
        results=(
            "ch07_vit_cpu_airbench[_seed<s>].json",
            "bench_cpu_recipe_airbench.json",
        ),
    ),
    "cpu_airbench_e18": Note(
        purpose="cpu_airbench for 18 epochs instead of 16: the half hour its first seed left unused",
        basis="cpu_airbench's seed 0 trained its 16 epochs in about 24 minutes, validation included "
        "(results/ch07_vit_cpu_airbench.json records each epoch's time), and read higher on one-view "
        "validation than any cpu_stem122 run, yet below the 0.88 the goal asks of the test set.  "
        "Short screens of its settings, three-epoch schedules on seed 0 run outside the results "
        "(the Transformer's AdamW rate halved, doubled and quadrupled; the tokenizer's SGD rate "
        "halved; batch 256; label smoothing 0.1), all read within about half a point of one "
        "another on validation, so the settings are left as they are and the spare time goes to "
        "epochs: 18 at its pace is about 27 minutes, with a tenth of the half hour spare for a "
        "slower hour.  The warm-up stays 23% of the steps.  Prediction: one-view validation about "
        "0.878 (cpu_stem122's twice-the-epochs run gained about half a point on validation for "
        "twice the epochs; two more here is a ninth more).  Read against cpu_airbench's seed 0 on "
        "one-view validation",
        results=(
            "ch07_vit_cpu_airbench_e18[_seed<s>].json",
            "bench_cpu_recipe_airbench_e18.json",
        ),
    ),
    "cpu_airbench_tail": Note(
        purpose="cpu_airbench with one more 3x3 convolution at the tokenizer's last width (256 "
        "channels on the 7x7 map), before the max-pool to the 4x4 grid of tokens",
        basis="cpu_airbench's seeds test about a point short of 0.88 on one view, and more epochs "
        "do not close the gap (cpu_airbench_e18 reads level), while airbench94's all-convolutional "
        "network, whose third group starts with such a layer, read about two points higher on "
        "validation than the ViT after the same three-epoch schedule.  Short screens of three-epoch "
        "schedules on seed 0 (one-view validation, outside the results): tokens from the 7x7 map "
        "without the pool (49 tokens) read level with cpu_airbench's 16 at about 1.6 times the "
        "time; a max-pooled head instead of the CLS token read level; this layer read about 0.8 "
        "points higher at about 1.2 times the time, with two Transformer blocks or one.  Two blocks "
        "stay, so that attention keeps doing the mixing.  The side-by-side step benchmark "
        "(results/bench_cpu_recipe_steps_airbench_tail.json) times an image at about 1.22 times "
        "cpu_airbench's, so 13 epochs fill the same share of the half hour as cpu_airbench's 16 at "
        "its seeds' mean pace, with the spare a slower hour of the shared machine needs; the "
        "warm-up stays 23% of the steps, and the layer trains with the tokenizer's SGD.  "
        "Prediction, written before the run: one-view validation about 0.877 against "
        "cpu_airbench's 0.873, 0.875 and 0.872: the screen's gain less what three epochs fewer "
        "cost.  Read against cpu_airbench's seeds on validation",
        results=(
            "ch07_vit_cpu_airbench_tail[_seed<s>].json",
            "bench_cpu_recipe_airbench_tail.json",
            "bench_cpu_recipe_steps_airbench_tail.json",
        ),
    ),
    "cpu_airbench_tail_49k": Note(
        purpose="the final reading of the recipe chosen on validation: cpu_airbench_tail trained on "
        "49,000 training images instead of 45,000, its validation cut to 1,000 images that serve "
        "only to pick the epoch whose weights read the test set",
        basis="cpu_airbench_tail read higher than cpu_airbench beyond the noise on validation and "
        "its screens show a plateau (more convolution, a wider or deeper Transformer, locality "
        "self-attention: all level on validation), so the recipe is chosen; what is left is the "
        "data a 5,000-image validation keeps out of training.  A choice between recipes needs that "
        "validation, the final fit of a chosen one does not: with the schedule's linear decay to 0 "
        "its last epoch read best on every seed, 0.7 to 1.8 points above the one before; 1,000 "
        "images' standard error is about a point, so the pick could fall one epoch early, costing "
        "at most that margin.  The split draws the same "
        "per-class permutation, so these 1,000 images are part of cpu_airbench_tail's 5,000 of the "
        "same seed.  12 epochs of 49,000 images are about as many images as 13 of 45,000, so the "
        "step costs the same half hour, its spare included; the warm-up stays 23% of the steps.  "
        "Decided before the run: its three seeds are the bf16 goal's reading whatever they read; "
        "it is not a choice among recipes, so its test set is compared with cpu_airbench_tail's "
        "only paired by seed, never used to choose.  Prediction, written before the run: one-view "
        "test about 0.882 on the mean of three seeds against cpu_airbench_tail's 0.8787 (a tenth "
        "more distinct images at the same number seen; the seeds scatter by about half a point, "
        "so two of the three at 0.88 or above is as likely as three)",
        results=(
            "ch07_vit_cpu_airbench_tail_49k[_seed<s>].json",
            "bench_cpu_recipe_airbench_tail_49k.json",
        ),
    ),
    "cpu_airbench_lsa": Note(
        purpose="cpu_airbench_tail with locality self-attention: in both Transformer blocks no token "
        "attends to itself, and the softmax's temperature is learned per block (FastViT(locality=True))",
        basis="cpu_airbench_tail's three seeds read higher than cpu_airbench's beyond the noise, yet "
        "only one of them reaches 0.88 on the test's one view.  Short screens of three-epoch "
        "schedules on seed 0 around it (one-view validation, outside the results, its own model run "
        "beside them) all read within about half a point of it: a second convolution before the "
        "pool, a Transformer 384 wide, a third block (each costing time), and this change (at the "
        "same arithmetic).  Lee, Lee and "
        "Song (2021, 'Vision Transformer for Small-Size Datasets') measured its gains on CIFAR over "
        "100 epochs and more, and a learned temperature may sharpen attention only late in a "
        "schedule, which three epochs cannot show; it costs no arithmetic worth counting, so it "
        "is the one screened change that earns a full-length seed.  Prediction, written before the run: one-view validation level "
        "with cpu_airbench_tail's seed 0 (results/ch07_vit_cpu_airbench_tail.json), within half a point "
        "either way.  Read against "
        "cpu_airbench_tail's seed 0 on validation: a one-seed screen",
        results=(
            "ch07_vit_cpu_airbench_lsa[_seed<s>].json",
            "bench_cpu_recipe_airbench_lsa.json",
        ),
    ),
    "cpu_avx2_stem122": Note(
        purpose="the AVX2 half hour's next candidate: cpu_stem122 in float32, as many epochs as the half "
        "hour holds on the machine that runs it",
        basis="the AVX2 chain's best (cpu_avx2_linear) keeps the cpu recipe's one-convolution tokenizer "
        "and falls short of the target on one view; the bf16 chain's tokenizer reads higher beyond the "
        "noise there (chapter 07), and cpu_stem122 is its cheapest version per image.  Its epoch count "
        "cannot be measured in advance without such a machine, so the trainer decides it after the "
        "first epoch (budget_s: the whole epochs that fit the budget's share at the first epoch's "
        "pace, at most `epochs`); float32, since a CPU without native bf16 trains faster in it.  "
        "Read against cpu_avx2_linear's seeds on validation, on an AVX2-only CPU",
        results=(
            "ch07_vit_cpu_avx2_stem122[_seed<s>].json",
            "bench_cpu_recipe_avx2_stem122.json",
        ),
    ),
    "cpu_avx2_stem122_held": Note(
        purpose="cpu_avx2_stem122 on a CPU that has wider units, held to AVX2 kernels: a stand-in for "
        "an AVX2-only CPU until one runs the recipe",
        basis="with PyTorch's own kernels, oneDNN's and MKL's held to AVX2 (ATEN_CPU_CAPABILITY, "
        "ONEDNN_MAX_CPU_ISA, MKL_ENABLE_INSTRUCTIONS), a run computes what an AVX2-only CPU computes, "
        "in float32.  Its speed stands for such a CPU's only where the wider units are no faster per "
        "cycle (AMD's Zen 4 runs AVX-512 on 256-bit halves) and the clocks and caches are alike, and "
        "the epochs follow from the speed (budget_s); the tables name the limits beside the CPU.  "
        "Read as the AVX2 goal's prediction, not its measurement",
        results=(
            "ch07_vit_cpu_avx2_stem122_held[_seed<s>].json",
            "bench_cpu_recipe_avx2_stem122_held.json",
        ),
    ),
}


def describe(name: str) -> str:
    """A recipe's note and its fields, as text."""
    note, recipe = NOTES[name], RECIPES[name]
    lines = [f"{name}: {note.purpose}"]
    if note.basis:
        lines.append(f"  basis: {note.basis}")
    lines += [f"  earlier: {h}" for h in note.history]
    if note.results:
        lines.append(f"  results/: {', '.join(note.results)}")
    lines.append(
        "  "
        + ", ".join(
            f"{k}={v!r}" for k, v in recipe.to_dict().items() if k != "name"
        )
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_utils.experiments.recipes",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help=f"recipes to show (default: all of {', '.join(RECIPES)})",
    )
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in RECIPES]
    if unknown:
        parser.error(
            f"no recipe {', '.join(unknown)}; the recipes are {', '.join(RECIPES)}"
        )
    print("\n\n".join(describe(name) for name in args.names or RECIPES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
