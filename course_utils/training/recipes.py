"""Training recipes, the mechanism: one typed config for a CIFAR-10 run, and checked overrides.

A ``Recipe`` is everything that defines a run (saved in its checkpoint, so a resume must match);
``CHOICES`` lists the values the fields that name a choice may take (checked when a recipe is
made); ``apply_overrides`` is the one way to change a recipe (the command line's ``--set
KEY=VALUE`` and the experiments' tables of changes alike), with a type check per field;
``as_stored`` is a recipe as a results file stores it; ``build_model`` makes the recipe's network.

The course's named recipes, and what each run was made with, are an experiment's:
``course_utils.experiments.recipes``.
"""

from __future__ import annotations

import dataclasses
import json
from typing import (
    Any,
    Literal,
    TypeVar,
    get_args,
    get_origin,
    get_type_hints,
)

from torch import nn

from ..models.compact import CompactTransformer
from ..models.resnet import cifar_resnet
from ..models.vit_fast import FastViT
from .data import CLASSES, FlipName, PolicyName

__all__ = [
    "Recipe",
    "CHOICES",
    "Scale",
    "build_model",
    "apply_overrides",
    "as_stored",
    "from_stored",
]

T = TypeVar("T")

# The fields that name one of a fixed set of choices: their types say which (``CHOICES`` is read
# from them), and ``Recipe`` checks them when it is made or replaced.
ModelName = Literal["vit", "cct", "resnet"]
OptimizerName = Literal["adamw", "sgd", "adamw+sgd"]
ScheduleName = Literal["cosine", "linear", "noam", "constant"]
AmpName = Literal["auto", "bf16", "fp16", "none"]
CompileMode = Literal[
    "default",
    "reduce-overhead",
    "max-autotune",
    "max-autotune-no-cudagraphs",
]


@dataclasses.dataclass
class Recipe:
    """Everything that defines a training run (saved in the checkpoint; resume must match)."""

    name: str
    model: ModelName = "vit"  # "vit", "cct" (models.compact) or "resnet" (ResNet-20, models.resnet)
    model_kwargs: dict = dataclasses.field(default_factory=dict)
    epochs: int = 10
    batch_size: int = 128
    optimizer: OptimizerName = "adamw"  # "adamw", "sgd" (Nesterov momentum) or "adamw+sgd" (SGD for the ViT's tokenizer)
    momentum: float = 0.9  # sgd, and adamw+sgd's tokenizer
    lr: float = 1e-3
    weight_decay: float = 0.05
    # "adamw+sgd" only: the tokenizer's SGD learning rate, its weight decay (PyTorch's coupled form:
    # each step shrinks a weight by lr * decay before momentum), and the factor on the learning rate
    # (dividing the decay) of its one-dimensional parameters, the norms' shifts and the biases
    tokenizer_lr: float | None = None
    tokenizer_weight_decay: float = 0.0
    tokenizer_bias_lr_scale: float = 1.0
    warmup_epochs: float = 1.0
    schedule: ScheduleName = "cosine"  # "cosine" (warmup + cosine), "linear" (warmup + straight line to 0), "noam" (warmup + 1/sqrt(step)) or "constant"
    label_smoothing: float = 0.1
    grad_clip: float | None = 1.0
    augment: bool = True
    # the random crop's reach: the image is zero-padded by this many pixels on each side and cut back
    # to its size at a random place, so it moves by up to this many pixels (0: flips only)
    crop_padding: int = 4
    # how the augmentation mirrors images: "random" (each image, each epoch, with probability 1/2)
    # or "alternate" (each image's orientation drawn once, then turned over every epoch)
    flip: FlipName = "random"
    # random crops stop after this fraction of the epochs: the last epochs train on the images
    # whole, as the test shows them (flips and any policy go on).  Training on crops and testing on
    # the whole image is a mismatch (Touvron et al., 2019, "Fixing the train-test resolution
    # discrepancy"); a few closing epochs without crops fit the model to the test's view.
    crop_until: float = 1.0
    # Progressive resizing: ((side, until), ...) with sides and shares rising.  While the epoch is
    # below until * epochs the training images (augmented at full size) are downsized to side x side
    # pixels, for the first such pair that holds; after the last, full size.  A small image costs
    # less (a convolution's work and the tokens both shrink with the area), so more epochs fit the
    # same time, and the closing epochs at full size fit the model to the test's view (Touvron et
    # al., 2019).  Validation and test stay at full size.  A ViT must list the sides in
    # model_kwargs["extra_sizes"] (models.vit_fast.FastViT resamples its positions to them).
    # Lists (JSON) are taken as tuples.
    progressive: tuple = ()
    # "trivial", "randaugment", "autoaugment" or None
    policy: PolicyName | None = None
    mixup_alpha: float = 0.0
    cutmix_alpha: float = 0.0
    # MixUp/CutMix stop after this fraction of the epochs: the last epochs fit the real images
    # (the regulariser has done its work by then, and the test images are not mixed)
    mix_until: float = 1.0
    amp: AmpName = "auto"  # "auto", "bf16", "fp16" or "none"
    compile: bool = False
    # torch.compile's mode when compile is on: None for its default; "reduce-overhead" also replays
    # the compiled steps as CUDA graphs (one launch for many kernels, for steps the host cannot
    # launch fast enough), "max-autotune" also searches matmul and conv kernels
    compile_mode: CompileMode | None = None
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
    # Train as many whole epochs as fit this many seconds (validation passes included), at most
    # ``epochs``: the count is decided at the end of the first epoch from its time (the trainer's
    # ``planned_epochs``), so that one recipe fills the same half hour on a slower or a faster CPU.
    # The warm-up must cover that first epoch, whose learning rates then do not depend on the count.
    # None: exactly ``epochs``.  Fast mode ignores it.
    budget_s: float | None = None
    # Keep an exponential moving average of the weights (and of BatchNorm's running statistics):
    # after every optimiser step, average = decay * average + (1 - decay) * weights, so it spans
    # about 1 / (1 - decay) recent steps.  Validation, the choice of the best epoch and the test
    # then read the average, and the result also records the last epoch's weights as trained on
    # validation.  None: the weights as trained.
    ema_decay: float | None = None
    # fast mode (CI, grading): train on a subset for a few epochs
    fast_train: int = 2000
    fast_eval: int = 500
    fast_epochs: int = 2

    def __post_init__(self):
        if not (
            isinstance(self.crop_padding, int) and self.crop_padding >= 0
        ):
            raise ValueError(
                f"recipe {self.name!r}: crop_padding={self.crop_padding!r} must be a whole number of "
                "pixels, 0 or more (e.g. --set crop_padding=2)"
            )
        if not (
            isinstance(self.crop_until, (int, float))
            and 0.0 < self.crop_until <= 1.0
        ):
            raise ValueError(
                f"recipe {self.name!r}: crop_until={self.crop_until!r} must be the share of the "
                "epochs trained on crops, above 0 and at most 1 (e.g. --set crop_until=0.9)"
            )
        self._check_progressive()
        if (self.optimizer == "adamw+sgd") != (
            self.tokenizer_lr is not None
        ):
            raise ValueError(
                f"recipe {self.name!r}: optimizer={self.optimizer!r} with tokenizer_lr="
                f"{self.tokenizer_lr!r}: the tokenizer's SGD learning rate is given with "
                "optimizer='adamw+sgd' and only then (e.g. --set optimizer=adamw+sgd tokenizer_lr=0.75)"
            )
        if self.optimizer == "adamw+sgd" and not (
            self.tokenizer_lr > 0 and self.tokenizer_bias_lr_scale > 0
        ):
            raise ValueError(
                f"recipe {self.name!r}: tokenizer_lr={self.tokenizer_lr!r} and "
                f"tokenizer_bias_lr_scale={self.tokenizer_bias_lr_scale!r} must be above 0"
            )
        if self.budget_s is not None:
            if not (
                isinstance(self.budget_s, (int, float)) and self.budget_s > 0
            ):
                raise ValueError(
                    f"recipe {self.name!r}: budget_s={self.budget_s!r} must be a number of seconds "
                    "above 0, or None for exactly `epochs` (e.g. --set budget_s=1800)"
                )
            if self.warmup_epochs < 1:
                raise ValueError(
                    f"recipe {self.name!r}: budget_s needs warmup_epochs >= 1 (got "
                    f"{self.warmup_epochs}): the epoch count is decided after the first epoch, and "
                    "only a warm-up's learning rates do not depend on it (e.g. --set warmup_epochs=1)"
                )
        if self.ema_decay is not None and not (
            isinstance(self.ema_decay, float) and 0.0 < self.ema_decay < 1.0
        ):
            raise ValueError(
                f"recipe {self.name!r}: ema_decay={self.ema_decay!r} must be a number between 0 "
                "and 1 (the share of the average kept at each step), or None for no average "
                "(e.g. --set ema_decay=0.999)"
            )
        # A misspelt choice fails here, when the recipe is made or overridden, not after the data loaded.
        for field, allowed in CHOICES.items():
            value = getattr(self, field)
            if value not in allowed:
                shown = ", ".join(repr(a) for a in allowed)
                example = next(a for a in allowed if a is not None)
                raise ValueError(
                    f"recipe {self.name!r}: {field}={value!r} is not a choice; choose one of {shown} "
                    f"(on the command line, e.g. --set {field}={example})"
                )

    def _check_progressive(self) -> None:
        example = "--set progressive=[[24,0.5]]"
        pairs = self.progressive
        if isinstance(pairs, (list, tuple)) and all(
            isinstance(p, (list, tuple)) for p in pairs
        ):
            # JSON (the command line, a stored recipe) gives lists; the recipe holds tuples
            pairs = tuple(tuple(p) for p in pairs)
            self.progressive = pairs
        good = isinstance(pairs, tuple) and all(
            isinstance(p, tuple)
            and len(p) == 2
            and isinstance(p[0], int)
            and p[0] > 0
            and isinstance(p[1], (int, float))
            and 0.0 < p[1] <= 1.0
            for p in pairs
        )
        if good:
            sides, shares = [p[0] for p in pairs], [p[1] for p in pairs]
            good = sides == sorted(set(sides)) and shares == sorted(
                set(shares)
            )
        if not good:
            raise ValueError(
                f"recipe {self.name!r}: progressive={pairs!r} must be (side, until) pairs, sides in "
                f"pixels and shares of the epochs in (0, 1], both rising (e.g. {example})"
            )
        if self.model == "vit" and pairs:
            listed = tuple(self.model_kwargs.get("extra_sizes", ()))
            missing = [side for side, _ in pairs if side not in listed]
            if missing:
                raise ValueError(
                    f"recipe {self.name!r}: progressive trains on {missing}-pixel images, which the "
                    f"ViT does not take: add them to model_kwargs['extra_sizes'] (now {listed!r}), "
                    "e.g. --set model_kwargs.extra_sizes=(24,)"
                )

    def train_size(self, epoch: int, epochs: int) -> int | None:
        """The side the training images are downsized to in this (0-based) epoch of ``epochs``, or
        None for full size (``progressive``)."""
        return next(
            (
                side
                for side, until in self.progressive
                if epoch < until * epochs
            ),
            None,
        )

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _choices() -> dict[str, tuple]:
    """``{field: its allowed values}`` for every ``Literal``-typed field of ``Recipe`` (None first
    where the field is optional)."""
    found = {}
    for field, hint in get_type_hints(Recipe).items():
        parts = (
            get_args(hint) if get_origin(hint) is not Literal else (hint,)
        )
        literal = [p for p in parts if get_origin(p) is Literal]
        if literal:
            none = (None,) if type(None) in parts else ()
            found[field] = none + get_args(literal[0])
    return found


# The fields that name a choice, and their values (the trainer, the data and build_model read them).
CHOICES: dict[str, tuple] = _choices()


def as_stored(
    recipe: Recipe | dict, *, leave_out: tuple[str, ...] = ()
) -> dict:
    """A recipe as a results file stores it (JSON types: lists, not tuples), so that two compare
    field for field; a stored recipe written before a field was added gets that field's default,
    the value its run used.  ``leave_out`` drops fields that may differ (``name``, ``seed``).
    Raises ValueError for a stored field ``Recipe`` no longer has."""
    if isinstance(recipe, dict):
        recipe = from_stored(recipe)
    return {
        k: v
        for k, v in json.loads(json.dumps(recipe.to_dict())).items()
        if k not in leave_out
    }


def from_stored(stored: dict) -> Recipe:
    """The recipe a results file or a checkpoint stored (``to_dict``'s JSON form) as a ``Recipe``
    again: its ``test_shifts`` become the tuples of pairs the trainer iterates, and a field written
    before it was added takes its default.  Raises ValueError for a stored field ``Recipe`` no longer
    has (the run was made by code this checkout does not hold)."""
    unknown = sorted(
        set(stored) - {f.name for f in dataclasses.fields(Recipe)}
    )
    if unknown:
        raise ValueError(
            f"a stored recipe has fields Recipe lacks: {unknown}; read it with the commit "
            "that wrote it (its provenance names it)"
        )
    fields = dict(stored)
    if "test_shifts" in fields:
        fields["test_shifts"] = tuple(
            tuple(s) for s in fields["test_shifts"]
        )
    return Recipe(**fields)


def build_model(recipe: Recipe) -> nn.Module:
    """The recipe's network: ``images (B, 3, 32, 32) -> logits (B, num_classes)``."""
    if recipe.model == "vit":
        # the reference ViT with fused attention
        return FastViT(**recipe.model_kwargs)
    if recipe.model == "cct":
        return CompactTransformer(**recipe.model_kwargs)
    if recipe.model == "resnet":
        return cifar_resnet(
            depth=20,
            num_classes=recipe.model_kwargs.get("num_classes", len(CLASSES)),
        )
    raise ValueError(
        f"unknown model {recipe.model!r}: choose 'vit', 'cct' or 'resnet'"
    )


@dataclasses.dataclass(frozen=True)
class Scale:
    """An override that multiplies the current value: ``{"lr": Scale(2)}`` is twice the lr so far."""

    factor: float


def _parse(item: str) -> tuple[str, Any]:
    """``"KEY=VALUE"`` -> ``(KEY, value)``: the value read as JSON (``lr=1e-3``, ``augment=false``,
    ``model_kwargs={"dim": 256}``), a bare word that is not JSON as a string (``policy=trivial``),
    ``None`` or ``null`` as None."""
    key, sep, text = item.partition("=")
    if not sep:
        raise ValueError(f"--set {item!r}: expected KEY=VALUE, e.g. lr=1e-3")
    if text in ("None", "null"):
        return key, None
    try:
        return key, json.loads(text)
    except json.JSONDecodeError:
        return key, text  # a bare word: policy=trivial, schedule=cosine


def _checked(
    recipe, field: dataclasses.Field, value: Any, shown: str
) -> Any:
    """``value`` for ``field`` of ``recipe``, type-checked (an int is accepted for a float)."""
    key, declared = field.name, str(field.type)
    if value is None:
        if not ("None" in declared or getattr(recipe, key) is None):
            raise ValueError(
                f"--set {key}=None: {key} is not optional (type {declared})"
            )
        return None
    base = declared.split("|")[0].strip()
    expected = {
        "bool": bool,
        "int": int,
        "float": float,
        "str": str,
        "dict": dict,
    }.get(base)
    if (
        expected is float
        and isinstance(value, int)
        and not isinstance(value, bool)
    ):
        value = float(value)
    if expected is not None and (
        not isinstance(value, expected)
        or (expected is int and isinstance(value, bool))
    ):
        raise ValueError(
            f"--set {key}={shown}: {key} expects {declared}, got {type(value).__name__}"
        )
    return value


def apply_overrides(
    recipe: T,
    overrides: list[str] | dict[str, Any],
    *,
    name: str | None = None,
) -> T:
    """``recipe`` (a ``Recipe`` or any other config dataclass, e.g. chapter 06's ``TrainConfig``)
    with ``overrides`` applied, each checked against the field's type; the one way the course
    changes a recipe.

    ``overrides`` is the command line's ``KEY=VALUE`` list (``--set``) or a dict ``{KEY: value}``
    (an experiment's table of changes).  A string value is read as JSON (``lr=1e-3``,
    ``epochs=30``, ``augment=false``, ``model_kwargs={"dim": 256}``); a bare word that is not
    JSON is a string (``policy=trivial``); ``None`` (or ``null``) clears an optional field.  An
    int is accepted where a float is expected.  ``FIELD.KEY`` (``model_kwargs.dropout=0.1``)
    changes one key of a dict field and keeps the others, where ``model_kwargs={...}`` replaces
    the whole dict.  A ``Scale`` value multiplies the current one.  ``name`` renames the result.
    Raises ValueError naming the field and what it expects.
    """
    fields = {f.name: f for f in dataclasses.fields(recipe)}
    items = (
        [_parse(item) for item in overrides]
        if isinstance(overrides, list)
        else list(overrides.items())
    )
    changes: dict[str, Any] = {} if name is None else {"name": name}
    for key, value in items:
        shown = (
            json.dumps(value)
            if not isinstance(value, (str, Scale))
            else str(value)
        )
        field, _, inner = key.partition(".")
        if field not in fields:
            raise ValueError(
                f"--set {field}: {type(recipe).__name__} has no such field; "
                f"the fields are {', '.join(sorted(fields))}"
            )
        current = changes.get(field, getattr(recipe, field))
        if inner:
            if not isinstance(current, dict):
                raise ValueError(
                    f"--set {key}={shown}: {field} is not a dict, so it has no key {inner!r}"
                )
            current = current.get(inner)
            if isinstance(value, Scale):
                value = current * value.factor
            changes[field] = {
                **changes.get(field, getattr(recipe, field)),
                inner: value,
            }
            continue
        if isinstance(value, Scale):
            value = current * value.factor
        changes[field] = _checked(recipe, fields[field], value, shown)
    return dataclasses.replace(recipe, **changes)
