"""The optimiser and learning-rate schedule a recipe asks for.

``make_optimizer(recipe, model)``: AdamW or SGD with Nesterov momentum over ``parameter_groups``
(no weight decay on norms, biases and what the model's ``no_weight_decay()`` names), or both at
once (``"adamw+sgd"``: SGD for a ViT's convolutional tokenizer, AdamW for the rest, as
``SplitOptimizer``);
``lr_factor(schedule, total_steps, warmup_steps)``: the multiplier of the base learning rate at each
step, for ``Trainer(lr_factor=...)`` (a ``LambdaLR``).  Chapter 07 and 08 plot the schedules with it.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from ..references.schedules import noam_lr, warmup_cosine_lr
from .recipes import Recipe

__all__ = [
    "lr_factor",
    "parameter_groups",
    "make_optimizer",
    "SplitOptimizer",
]


def lr_factor(
    schedule: str, total_steps: int, warmup_steps: int
) -> Callable[[int], float]:
    """Multiplier of the base ``lr`` at each step (for ``LambdaLR``).

    Every warm-up is linear from 0 at step 0 (chapter 08's ``warmup_cosine_lr``); Noam counts
    its steps from 1, as the Transformer paper does.
    """
    if schedule == "cosine":
        return lambda step: warmup_cosine_lr(
            step, total_steps, warmup_steps, 1.0
        )
    if schedule == "linear":
        # the same warm-up, then a straight line to 0 at total_steps: a short run keeps more of its
        # steps at a useful rate than under the cosine's long tail near 0
        if total_steps <= warmup_steps:
            raise ValueError(
                f"linear schedule: total_steps={total_steps} must exceed warmup_steps={warmup_steps}"
            )
        return lambda step: (
            step / warmup_steps
            if step < warmup_steps
            else max(
                0.0, (total_steps - step) / (total_steps - warmup_steps)
            )
        )
    if schedule == "noam":
        # Shaped like the Transformer paper's schedule, rescaled so that its peak (at the end of
        # the warmup) is the recipe's lr: d_model only sets the scale, which lr already does.
        w = max(warmup_steps, 1)
        return lambda step: noam_lr(step + 1, 1, w) / noam_lr(w, 1, w)
    # the same warm-up as warmup_cosine_lr: 0 at step 0, 1 at warmup_steps
    if schedule == "constant":
        return lambda step: (
            min(1.0, step / warmup_steps) if warmup_steps else 1.0
        )
    raise ValueError(
        f"unknown schedule {schedule!r}: choose 'cosine', 'linear', 'noam' or 'constant'"
    )


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Decay matrices and conv kernels only; norms, biases and the parameters the model names in
    ``no_weight_decay()`` (timm's convention: a ViT's CLS token and position embeddings) stay undecayed."""
    skip = (
        set(model.no_weight_decay())
        if hasattr(model, "no_weight_decay")
        else set()
    )
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (no_decay if p.dim() < 2 or name in skip else decay).append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


class SplitOptimizer(torch.optim.Optimizer):
    """Two optimisers over disjoint parameters, stepped as one: ``param_groups`` lists both parts'
    groups (the same dicts), so one ``LambdaLR`` scales every group's learning rate from its own
    starting value, and ``state_dict`` holds both parts' states."""

    def __init__(self, *parts: torch.optim.Optimizer):
        self.parts = parts
        super().__init__(
            [g for part in parts for g in part.param_groups], {}
        )

    def _relink(self) -> None:
        # a part's load_state_dict replaces its group dicts; the shared list must follow
        self.param_groups = [
            g for part in self.parts for g in part.param_groups
        ]

    @torch.no_grad()
    def step(self, closure=None):
        if closure is not None:
            raise ValueError("SplitOptimizer.step takes no closure")
        for part in self.parts:
            part.step()

    def state_dict(self) -> dict:
        return {"parts": [part.state_dict() for part in self.parts]}

    def load_state_dict(self, state_dict: dict) -> None:
        parts = state_dict.get("parts", ())
        if len(parts) != len(self.parts):
            raise ValueError(
                f"SplitOptimizer: the stored state has {len(parts)} parts, this optimiser "
                f"{len(self.parts)}; resume with the recipe that wrote the checkpoint"
            )
        for part, state in zip(self.parts, parts):
            part.load_state_dict(state)
        self._relink()


def _tokenizer_sgd(recipe: Recipe, model: nn.Module, fused: bool | None):
    """SGD with Nesterov momentum over a ViT's tokenizer's convolutional layers (what
    ``model.patch_embed.convolutional_parameters()`` returns): their kernels at
    ``tokenizer_lr``, its one-dimensional parameters (norm shifts, biases) at ``tokenizer_lr *
    tokenizer_bias_lr_scale`` with the decay divided by the same factor, so every parameter
    shrinks by the same share per step.  Returns the optimiser and the ids of its parameters."""
    named = getattr(
        getattr(model, "patch_embed", None), "convolutional_parameters", None
    )
    params = named() if named is not None else []
    if not params:
        raise ValueError(
            f"recipe {recipe.name!r}: optimizer='adamw+sgd' trains a ViT's convolutional tokenizer "
            "with SGD, and this model has none that names its convolutional parameters (the "
            "airbench tokenizer does: model_kwargs tokenizer='airbench'); use optimizer='adamw'"
        )
    lr, scale = recipe.tokenizer_lr, recipe.tokenizer_bias_lr_scale
    decay = recipe.tokenizer_weight_decay
    sgd = torch.optim.SGD(
        [
            {
                "params": [p for p in params if p.dim() > 1],
                "lr": lr,
                "weight_decay": decay,
            },
            {
                "params": [p for p in params if p.dim() <= 1],
                "lr": lr * scale,
                "weight_decay": decay / scale,
            },
        ],
        lr=lr,
        momentum=recipe.momentum,
        nesterov=recipe.momentum > 0,
        fused=fused,
    )
    return sgd, {id(p) for p in params}


def make_optimizer(
    recipe: Recipe, model: nn.Module
) -> torch.optim.Optimizer:
    """The recipe's optimiser over ``parameter_groups``: AdamW (the ViT's), SGD with Nesterov
    momentum (a ResNet's standard choice, ``recipe.momentum``), or for ``"adamw+sgd"`` SGD over the
    tokenizer (``_tokenizer_sgd``) and AdamW over the rest."""
    groups = parameter_groups(model, recipe.weight_decay)
    # The fused kernels update every tensor in one pass (the same arithmetic), where the default on a
    # CPU loops over the tensors one by one: fewer, larger operations, which counts where steps are
    # short (the cpu recipe's small model on 2 cores).
    fused = all(
        p.is_floating_point() and p.device.type in ("cpu", "cuda")
        for p in model.parameters()
    )
    if recipe.optimizer == "adamw":
        return torch.optim.AdamW(groups, lr=recipe.lr, fused=fused or None)
    if recipe.optimizer == "adamw+sgd":
        # convolutions with batch norms after them train fast with large SGD steps (airbench), where
        # the Transformer (and the projection into it, which no norm follows) needs Adam's
        # per-parameter scaling
        sgd, taken = _tokenizer_sgd(recipe, model, fused or None)
        rest = [
            {**g, "params": [p for p in g["params"] if id(p) not in taken]}
            for g in groups
        ]
        adamw = torch.optim.AdamW(rest, lr=recipe.lr, fused=fused or None)
        return SplitOptimizer(sgd, adamw)
    if recipe.optimizer == "sgd":
        return torch.optim.SGD(
            groups,
            lr=recipe.lr,
            momentum=recipe.momentum,
            nesterov=recipe.momentum > 0,
            fused=fused or None,
        )
    raise ValueError(
        f"unknown optimizer {recipe.optimizer!r}: choose 'adamw', 'sgd' or 'adamw+sgd'"
    )
