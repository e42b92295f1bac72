"""What a training run computes, counted: floating-point operations per image, and the epochs that
spend a given number of them.

A budget in FLOPs, unlike one in epochs, gives every model the same compute: a model whose image
costs a third as much trains three times as many epochs, as it would in the same minutes on a
machine whose speed is set by its arithmetic.  (Wall time also depends on how well each kernel uses
the machine; chapter 08 states the minutes it measured beside the FLOPs.)
"""

from __future__ import annotations

import torch

from .recipes import Recipe, build_model

__all__ = ["flops_per_image", "epochs_for"]


def flops_per_image(recipe: Recipe, side: int = 32) -> float:
    """Forward plus backward FLOPs of one ``side`` x ``side`` training image (32: CIFAR-10's; a smaller
    one where the model takes it, as a progressively resized recipe's early epochs train on),
    counted on the CPU in float32 (the count does not depend on the device; attention through the
    math kernel, which the counter reads).  The backward pass is the one a training step runs, to
    the parameters that train (``torch.autograd.grad`` returns their gradients: a measurement, not
    a step; an optimiser's elementwise update is not among the operations the counter counts).
    Tied weights (``models.mirror``) are counted untied: the counter cannot follow
    ``torch.autograd.grad`` into a parametrization, and building a tied weight is elementwise work
    it does not count either."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.utils import parametrize
    from torch.utils.flop_counter import FlopCounterMode

    model = build_model(recipe)
    for module in model.modules():
        if parametrize.is_parametrized(module):
            for name in list(module.parametrizations):
                parametrize.remove_parametrizations(module, name)
    params = [p for p in model.parameters() if p.requires_grad]
    x = torch.randn(2, 3, side, side)
    with (
        FlopCounterMode(display=False) as counter,
        sdpa_kernel(SDPBackend.MATH),
    ):
        torch.autograd.grad(
            model(x).float().sum(), params, allow_unused=True
        )
    return counter.get_total_flops() / len(x)


def epochs_for(flops: float, per_image: float, images: int) -> int:
    """The whole epochs of ``images`` training images at ``per_image`` FLOPs each that come nearest to
    spending ``flops`` (at least one).  Raises ValueError for a budget or cost that is not positive."""
    if not (flops > 0 and per_image > 0 and images > 0):
        raise ValueError(
            f"a FLOP budget needs positive numbers; got flops={flops}, per_image={per_image}, "
            f"images={images}"
        )
    return max(1, round(flops / (per_image * images)))
