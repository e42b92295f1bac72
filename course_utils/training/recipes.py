"""Training recipes: one typed config for a CIFAR-10 run, and checked overrides.

A ``Recipe`` is everything that defines a run (saved in its checkpoint, so a resume must match);
``RECIPES`` holds the course's named ones (``cpu`` and its ``cpu_float32`` and ``cpu_avx2`` variants, ``resnet``, ``gpu``,
``laptop``, ``smoke``); ``apply_overrides``
applies the command line's ``--set KEY=VALUE`` with a type check per field; ``build_model``
makes the recipe's network.
"""
from __future__ import annotations

import dataclasses
import json
from typing import TypeVar

from torch import nn

from ..models.compact import CompactTransformer
from ..models.resnet import cifar_resnet
from ..references.vit import ViT
from .data import CLASSES, POLICIES

__all__ = ["Recipe", "RECIPES", "CHOICES", "CIFAR_VIT", "EARLIER_CPU_BATCH", "build_model", "apply_overrides",
           "as_stored"]

T = TypeVar("T")


@dataclasses.dataclass
class Recipe:
    """Everything that defines a training run (saved in the checkpoint; resume must match)."""

    name: str
    model: str = "vit"  # "vit", "cct" (models.compact) or "resnet" (ResNet-20, models.resnet)
    model_kwargs: dict = dataclasses.field(default_factory=dict)
    epochs: int = 10
    batch_size: int = 128
    optimizer: str = "adamw"  # "adamw" or "sgd" (Nesterov momentum)
    momentum: float = 0.9  # sgd only
    lr: float = 1e-3
    weight_decay: float = 0.05
    warmup_epochs: float = 1.0
    schedule: str = "cosine"  # "cosine" (warmup + cosine), "noam" (warmup + 1/sqrt(step)) or "constant"
    label_smoothing: float = 0.1
    grad_clip: float | None = 1.0
    augment: bool = True
    policy: str | None = None  # "trivial", "randaugment", "autoaugment" or None
    mixup_alpha: float = 0.0
    cutmix_alpha: float = 0.0
    # MixUp/CutMix stop after this fraction of the epochs: the last epochs fit the real images
    # (the regulariser has done its work by then, and the test images are not mixed)
    mix_until: float = 1.0
    amp: str = "auto"  # "auto", "bf16", "fp16" or "none"
    compile: bool = False
    # torch.compile's mode when compile is on: None for its default; "reduce-overhead" also replays
    # the compiled steps as CUDA graphs (one launch for many kernels, for steps the host cannot
    # launch fast enough), "max-autotune" also searches matmul and conv kernels
    compile_mode: str | None = None
    channels_last: bool = False
    val_size: int = 5000
    seed: int = 0
    eval_batch_size: int = 500
    # evaluate each image and its mirror image and average the logits (validation and test alike);
    # the test result also records the single-view accuracy
    eval_flip: bool = False
    # the test (run once, after training) also averages views shifted by these (dy, dx) pixels, each
    # with its mirror when eval_flip; the per-epoch validation keeps the cheaper views above, so the
    # training half hour is not spent on evaluation.  The result also records the two-view accuracy.
    test_shifts: tuple = ()
    # after each epoch, also evaluate the first this-many training images as they are (one view, no
    # augmentation, no mixing): the history's clean_train_acc/clean_train_loss, which say whether the
    # model fits its data when the batches it trains on are mixed or strongly augmented (their own
    # accuracy, train_acc, is measured on the altered images).  Not counted in the training time.
    clean_train_eval: int = 0
    # fast mode (CI, grading): train on a subset for a few epochs
    fast_train: int = 2000
    fast_eval: int = 500
    fast_epochs: int = 2

    def __post_init__(self):
        # A misspelt choice fails here, when the recipe is made or overridden, not after the data loaded.
        for field, allowed in CHOICES.items():
            value = getattr(self, field)
            if value not in allowed:
                shown = ", ".join(repr(a) for a in allowed)
                example = next(a for a in allowed if a is not None)
                raise ValueError(f"recipe {self.name!r}: {field}={value!r} is not a choice; choose one of {shown} "
                                 f"(on the command line, e.g. --set {field}={example})")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# The fields that name one of a fixed set of choices (the trainer, the data and build_model read them).
CHOICES: dict[str, tuple] = {
    "model": ("vit", "cct", "resnet"),
    "optimizer": ("adamw", "sgd"),
    "schedule": ("cosine", "noam", "constant"),
    "policy": (None,) + POLICIES,
    "amp": ("auto", "bf16", "fp16", "none"),
    "compile_mode": (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"),
}


CIFAR_VIT = dict(img_size=32, num_classes=len(CLASSES))
RECIPES: dict[str, Recipe] = {
    # Meant for 2 CPU cores with native bf16 (Intel AMX or AMD avx512_bf16) and under half an hour
    # (results/bench_cpu_recipe.json records, per machine and seed, the time to 80% and 85% and
    # the accuracy at 30 minutes).  What is convolutional: the tokenizer only (the inductive-bias
    # lever of Compact Convolutional Transformers: three 3x3 conv-BN-ReLU layers with 2x2 pools down
    # to a 4x4 grid of 16 tokens); everything after it is a small pre-norm ViT with a CLS token.
    # A finer grid (patch 4: 64 tokens) costs more per image (attention and the MLPs run on 4x the
    # tokens), so fewer epochs fit in the half hour.  Validation averages each image with its mirror;
    # the test averages ten views (the image and its one-pixel shifts up, down, left and right, each
    # with its mirror), chosen on seed 0's validation images (chapter 07, section 7.9).
    # The epoch count leaves part of the half hour spare on such a machine when nothing else runs: the
    # same kind of shared virtual machine runs the same epochs slower at some times than at others
    # (the stored runs record each epoch's time).  torch.compile is off: it does not make the steps faster on such a
    # machine, in bf16 or float32 (results/bench_cpu_precision.json), and compiling costs the first step.
    # The batch is half the earlier version's, with the learning rate divided by sqrt(2) (the usual
    # rule for Adam-type optimisers): twice the updates per epoch for a little more time per image on
    # two cores; chapter 07 (section 7.9) reads the two versions' seeds against each other
    # (results/bench_cpu_recipe_batch128.json holds the earlier one).
    "cpu": Recipe(
        name="cpu",
        model_kwargs=dict(CIFAR_VIT, patch_size=8, dim=192, depth=4, num_heads=3, mlp_dim=384,
                          stem_channels=(32, 64, 128), dropout=0.0),
        epochs=31, batch_size=64, lr=1.4e-3, weight_decay=0.05, warmup_epochs=1, label_smoothing=0.1,
        grad_clip=1.0, augment=True, policy=None, amp="auto", channels_last=True, eval_flip=True,
        test_shifts=((1, 0), (-1, 0), (0, 1), (0, -1)),
    ),
    # Chapter 07's convolutional baseline with a ResNet's own standard recipe (He et al., 2016:
    # SGD with Nesterov momentum 0.9 at lr 0.1, weight decay 5e-4 as in most later CIFAR work,
    # no warm-up, no label smoothing), cosine decay, the ViT's augmentation and evaluation, and as
    # many epochs as fill the cpu recipe's half hour on the same machine
    # (python -m benchmarks.cpu_recipe --recipe resnet).
    "resnet": Recipe(
        name="resnet", model="resnet", model_kwargs=dict(num_classes=len(CLASSES)),
        epochs=30, batch_size=128, optimizer="sgd", momentum=0.9, lr=0.1, weight_decay=5e-4,
        warmup_epochs=0, label_smoothing=0.0, grad_clip=None, augment=True, amp="auto", channels_last=True,
        eval_flip=True,
    ),
    # One GPU: a ViT-S-like model (patch 4 on 32x32 gives 64 tokens) with the DeiT-style
    # recipe (AdamW, warmup + cosine, label smoothing, TrivialAugment, MixUp/CutMix) for many
    # epochs; see chapter 08 for the literature it stands on.
    "gpu": Recipe(
        name="gpu",
        model_kwargs=dict(CIFAR_VIT, patch_size=4, dim=384, depth=7, num_heads=6, mlp_dim=1152,
                          stem_channels=(96, 192), dropout=0.0),
        epochs=300, batch_size=256, lr=1e-3, weight_decay=0.05, warmup_epochs=10, label_smoothing=0.1,
        grad_clip=1.0, augment=True, policy="trivial", mixup_alpha=0.8, cutmix_alpha=1.0, amp="auto",
        compile=True, channels_last=True, eval_batch_size=1000, eval_flip=True,
    ),
    # One GPU for ten minutes (chapter 08, question 1): CCT-7/3x1 (Hassani et al., 2021: 95.0% on
    # CIFAR-10 at 300 epochs, batch 128) with the paper's ingredients (AdamW at weight decay 0.06,
    # label smoothing, MixUp/CutMix, stochastic depth 0.1, attention dropout 0.1) made fast: batch
    # 512 with the learning rate scaled by sqrt(4) from the paper's 5.5e-4, TrivialAugment on the
    # GPU in place of AutoAugment, bf16, torch.compile, the data set held on the GPU.  The epoch
    # count is what fits ten minutes of training on an H100 (benchmarks/gpu_window.py measures the
    # step and cuts a shorter window's run to fit); MixUp/CutMix stop for the last tenth.
    "gpu_fast": Recipe(
        name="gpu_fast", model="cct",
        model_kwargs=dict(img_size=32, num_classes=len(CLASSES), dim=256, depth=7, num_heads=4, mlp_ratio=2.0,
                          conv_layers=1, drop_path=0.1, attn_dropout=0.1),
        epochs=150, batch_size=512, lr=1.1e-3, weight_decay=0.06, warmup_epochs=5, label_smoothing=0.1,
        grad_clip=None, augment=True, policy="trivial", mixup_alpha=0.8, cutmix_alpha=1.0, mix_until=0.9,
        amp="auto", compile=True, channels_last=False, eval_batch_size=1000, eval_flip=True,
    ),
    # A laptop CPU's few minutes, for chapter 7's "train your own ViT": a plain ViT with 4x4 patches
    # (64 tokens) small enough for a learner's own class; the command line's --train-images (or the
    # chapter's own subset) cuts the training split.
    "laptop": Recipe(
        name="laptop",
        model_kwargs=dict(CIFAR_VIT, patch_size=4, dim=64, depth=4, num_heads=4, mlp_dim=128, dropout=0.0),
        epochs=10, batch_size=128, lr=2e-3, weight_decay=0.05, warmup_epochs=1, label_smoothing=0.1,
        grad_clip=1.0, augment=True, amp="auto",
    ),
    # Seconds on a CPU: for tests and fast mode.
    "smoke": Recipe(
        name="smoke",
        model_kwargs=dict(CIFAR_VIT, patch_size=8, dim=32, depth=1, num_heads=2, mlp_dim=64),
        epochs=3, batch_size=64, lr=3e-3, warmup_epochs=0.5, amp="none",
        fast_train=512, fast_eval=256, fast_epochs=3,
    ),
}

# The cpu recipe's batch size and learning rate before it moved to the smaller batch: the runs stored
# with them (cpu_float32's seeds, chapter 08's ablation budgets) keep them, so that they stay the
# recipes they were made with.
EARLIER_CPU_BATCH = dict(batch_size=128, lr=2e-3)

# The cpu recipe for a CPU without native bf16 (where the trainer's amp="auto" picks float32): the
# same model and ingredients in float32 (channels-last, the faster memory format there by
# benchmarks.cpu_precision), with as many epochs as fill the same half hour (its stored seeds' times).
# Chapter 07 sets the count against the ratio of float32 to bf16 time per epoch of whole runs on one
# machine, not the step benchmark's, which times the training steps alone and not the validation
# pass and data pipeline an epoch also holds.  Its stored seeds were made at EARLIER_CPU_BATCH and
# tested with the two mirrored views (their weights are not kept), so it keeps those until they are
# run again.
RECIPES["cpu_float32"] = dataclasses.replace(RECIPES["cpu"], name="cpu_float32", amp="none", epochs=23,
                                             test_shifts=(), **EARLIER_CPU_BATCH)

# The same float32 recipe on a CPU whose widest vectors are AVX2 (256 bits, no AVX-512): its
# training steps run slower than on the AVX-512 machine the float32 count was set on (run
# benchmarks.cpu_precision on each to read the ratio), so fewer epochs fill the half hour.  Nothing else changes, so the two read against each
# other as the same recipe on two CPUs.
RECIPES["cpu_avx2"] = dataclasses.replace(RECIPES["cpu_float32"], name="cpu_avx2", epochs=14)


def as_stored(recipe: Recipe | dict, *, leave_out: tuple[str, ...] = ()) -> dict:
    """A recipe as a results file stores it (JSON types: lists, not tuples), so that two compare
    field for field; a stored recipe written before a field was added gets that field's default,
    the value its run used.  ``leave_out`` drops fields that may differ (``name``, ``seed``).
    Raises ValueError for a stored field ``Recipe`` no longer has."""
    if isinstance(recipe, dict):
        unknown = sorted(set(recipe) - {f.name for f in dataclasses.fields(Recipe)})
        if unknown:
            raise ValueError(f"a stored recipe has fields Recipe lacks: {unknown}")
        recipe = Recipe(**recipe)
    return {k: v for k, v in json.loads(json.dumps(recipe.to_dict())).items() if k not in leave_out}


def build_model(recipe: Recipe) -> nn.Module:
    """The recipe's network: ``images (B, 3, 32, 32) -> logits (B, num_classes)``."""
    if recipe.model == "vit":
        return ViT(**recipe.model_kwargs)
    if recipe.model == "cct":
        return CompactTransformer(**recipe.model_kwargs)
    if recipe.model == "resnet":
        return cifar_resnet(depth=20, num_classes=recipe.model_kwargs.get("num_classes", len(CLASSES)))
    raise ValueError(f"unknown model {recipe.model!r}: choose 'vit', 'cct' or 'resnet'")


def apply_overrides(recipe: T, items: list[str]) -> T:
    """``recipe`` (a ``Recipe`` or any other config dataclass, e.g. chapter 06's ``TrainConfig``)
    with ``KEY=VALUE`` overrides applied, each checked against the field's type.

    A value is read as JSON (``lr=1e-3``, ``epochs=30``, ``augment=false``,
    ``model_kwargs={"dim": 256}``); a bare word that is not JSON is a string
    (``policy=trivial``); ``None`` (or ``null``) clears an optional field.  An int is accepted
    where a float is expected.  Raises ValueError naming the field and what it expects.
    """
    fields = {f.name: f for f in dataclasses.fields(recipe)}
    changes = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep:
            raise ValueError(f"--set {item!r}: expected KEY=VALUE, e.g. lr=1e-3")
        if key not in fields:
            raise ValueError(f"--set {key}: {type(recipe).__name__} has no such field; "
                             f"the fields are {', '.join(sorted(fields))}")
        if text in ("None", "null"):
            value = None
        else:
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                value = text  # a bare word: policy=trivial, schedule=cosine
        declared = str(fields[key].type)
        optional = "None" in declared or getattr(recipe, key) is None
        if value is None:
            if not optional:
                raise ValueError(f"--set {key}=None: {key} is not optional (type {declared})")
        else:
            base = declared.split("|")[0].strip()
            expected = {"bool": bool, "int": int, "float": float, "str": str, "dict": dict}.get(base)
            if expected is float and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            if expected is not None and (not isinstance(value, expected) or
                                         (expected is int and isinstance(value, bool))):
                raise ValueError(f"--set {key}={text}: {key} expects {declared}, got {type(value).__name__}")
        changes[key] = value
    return dataclasses.replace(recipe, **changes)
