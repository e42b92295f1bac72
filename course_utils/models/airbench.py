"""A ViT tokenizer built like the convolutional half of Jordan's CIFAR-10 speed runs (airbench94,
"94% on CIFAR-10 in 3.29 seconds on a single GPU", 2024): a fixed patch-whitening layer, then conv
groups that pool before their batch norm, at the widths that train fastest per image there.

``AirbenchTokenizer(img_size, patch_size, in_chans, dim, channels)``, ``forward(images (B, C, H, W))
-> (B, N, dim)`` with ``N = (img_size // patch_size) ** 2``, the same tokens as the reference's
``ConvTokenizer`` of that patch size, so a ViT takes either:

- ``whiten``: a 2x2 convolution to 24 channels, its filters the 12 leading whitening filters of
  the training images' 2x2 patches and their negatives (``models.whitening``; set by
  ``init_from_data``, never trained), its bias trained; GELU.  No padding: 32 -> 31 pixels;
- one group per width in ``channels``: conv3x3 -> 2x2 max-pool -> batch norm -> GELU -> conv3x3 ->
  batch norm -> GELU.  The pool comes before the norm, so each group's second convolution works
  at the coarser resolution, the cheaper place for a wide layer;
- ``tail_convs`` more conv3x3 -> batch norm -> GELU layers at the last group's width and
  resolution (airbench's third group starts with one there), then a max-pool to the token grid and
  a 1x1 projection to ``dim``.

The batch norms train their shift, not their scale, and their running statistics follow the
batches quickly (momentum 0.4 in PyTorch's convention, 0.6 in airbench's), both as airbench's do
over its few epochs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .whitening import whitening_filters

__all__ = ["AirbenchTokenizer"]

WHITEN_WIDTH = 24  # airbench's: 12 directions of a 2x2x3 patch (of 12), each with its negative
WHITEN_KERNEL = 2
NORM_MOMENTUM = 0.4


def _norm(channels: int) -> nn.BatchNorm2d:
    norm = nn.BatchNorm2d(channels, momentum=NORM_MOMENTUM)
    norm.weight.requires_grad_(False)
    return norm


class AirbenchTokenizer(nn.Module):
    """Patch whitening, then conv groups (conv, pool, norm, GELU, conv, norm, GELU), then tokens.

    ``forward(images (B, in_chans, img_size, img_size)) -> (B, N, dim)``.  ``channels``: one group per
    width; the groups halve the image each (after the whitening layer's one-pixel loss),
    ``tail_convs`` layers follow at the last width, and a final max-pool brings the map to
    ``img_size // patch_size`` on a side.
    """

    def __init__(
        self,
        img_size: int,
        patch_size: int,
        in_chans: int,
        dim: int,
        channels: tuple[int, ...],
        tail_convs: int = 0,
    ):
        super().__init__()
        if not isinstance(tail_convs, int) or tail_convs < 0:
            raise ValueError(
                f"AirbenchTokenizer: tail_convs={tail_convs!r} must be a whole number of layers, "
                "0 or more (e.g. tail_convs=1)"
            )
        grid = img_size // patch_size
        side = img_size - WHITEN_KERNEL + 1
        for _ in channels:
            side //= 2
        if not channels or grid < 1 or side < grid:
            raise ValueError(
                f"AirbenchTokenizer: {len(channels)} groups leave a {side}x{side} map from "
                f"{img_size}x{img_size} images, too few for a {grid}x{grid} token grid (patch "
                f"{patch_size}); give fewer widths in stem_channels or a larger patch_size"
            )
        self.whiten = nn.Conv2d(in_chans, WHITEN_WIDTH, WHITEN_KERNEL)
        self.whiten.weight.requires_grad_(False)
        groups, c_in = [], WHITEN_WIDTH
        for c_out in channels:
            groups.append(
                nn.Sequential(
                    nn.Conv2d(c_in, c_out, 3, padding=1, bias=False),
                    nn.MaxPool2d(2),
                    _norm(c_out),
                    nn.GELU(),
                    nn.Conv2d(c_out, c_out, 3, padding=1, bias=False),
                    _norm(c_out),
                    nn.GELU(),
                )
            )
            c_in = c_out
        self.groups = nn.Sequential(*groups)
        # at the last group's resolution, before the pool to the grid: where the map still holds
        # more positions than the tokens, so a layer here sees detail the tokens no longer do
        self.tail = nn.Sequential(
            *(
                nn.Sequential(
                    nn.Conv2d(c_in, c_in, 3, padding=1, bias=False),
                    _norm(c_in),
                    nn.GELU(),
                )
                for _ in range(tail_convs)
            )
        )
        self.proj = nn.Conv2d(c_in, dim, 1)
        self.grid = grid
        self.num_patches = grid * grid
        self.patch_size, self.in_chans, self.dim = patch_size, in_chans, dim
        self.channels = tuple(channels)
        self.tail_convs = tail_convs

    def convolutional_parameters(self) -> list[nn.Parameter]:
        """The trainable parameters before the projection (the whitening bias, the groups' and the
        tail's kernels and norm shifts): the part ``training.optim``'s ``"adamw+sgd"`` trains with SGD; the
        projection into the Transformer's width trains with the Transformer."""
        return [
            p
            for module in (self.whiten, self.groups, self.tail)
            for p in module.parameters()
            if p.requires_grad
        ]

    @torch.no_grad()
    def init_from_data(self, images: Tensor) -> None:
        """Set ``whiten`` to the whitening filters of ``images (N, C, H, W)`` (normalised training
        images) and its bias to zero."""
        filters = whitening_filters(
            images, WHITEN_WIDTH, kernel=WHITEN_KERNEL
        )
        self.whiten.weight.copy_(filters.to(self.whiten.weight.dtype))
        self.whiten.bias.zero_()

    def forward(self, images: Tensor) -> Tensor:
        x = self.tail(self.groups(F.gelu(self.whiten(images))))
        # (B, C, side, side) -> (B, C, grid, grid): overlapping windows where side is no multiple
        x = F.adaptive_max_pool2d(x, self.grid)
        return self.proj(x).flatten(2).transpose(1, 2)
