"""Mirror-symmetric weights: a ViT whose prediction cannot change when the image is flipped
left-right, by construction rather than by learning it from flipped copies.

Every hidden width comes in pairs of channels that are each other's mirror image: flipping the
input image flips every feature map left-right *and* swaps the two channels of every pair.  In
the tokenizer and the residual stream channel ``i`` pairs with ``i + C/2``; in the queries, keys
and values ``2i`` pairs with ``2i + 1`` (``swap``).  Writing ``S`` for a swap, each layer is tied
so that it commutes with the mirror:

* a convolution ``W (out, in, k, k)`` equals ``S W S`` flipped along its width (the first one,
  reading RGB, swaps its outputs only);
* a linear layer ``W (out, in)`` equals ``S_out W S_in`` (the head, whose logits are not paired,
  ``W S``); a bias or a norm's scale and shift equals ``S b``;
* a batch norm takes its statistics over both channels of a pair together (``PairedBatchNorm2d``);
* the position table puts at column ``c`` of the token grid what it puts at column
  ``grid - 1 - c``, channels swapped; the CLS token is its own swap;
* attention itself needs no tie: each head's slice of the queries holds whole pairs, and
  ``q . k`` is the same after both vectors swap.

So the CLS token leaves the last block changed only by ``S``, and the head reads ``W S x = W x``:
the logits of an image and of its mirror are the same number, up to rounding.

The ties are ``torch.nn.utils.parametrize`` parametrizations that project each stored tensor ``P``
onto its symmetric part ``(P + T(P)) / 2``; the optimiser still sees the stored tensors.  At the
start each random tensor is replaced by its symmetric part times sqrt(2), which keeps the size its
initialisation gave it (the average of two independent draws is sqrt(2) smaller).  The network
has about half the free parameters and the same arithmetic as the one it ties.

``make_positions_symmetric`` ties the position table alone (columns ``c`` and ``grid - 1 - c``
share a vector): the Transformer then reads no left from right, while the rest of the network
stays free and still learns each orientation from flipped training images.

Shapes: feature maps ``(B, C, H, W)`` with ``C`` even; tokens ``(B, N, dim)``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn.utils import parametrize

__all__ = [
    "PairedBatchNorm2d",
    "make_mirror_symmetric",
    "make_positions_symmetric",
    "swap",
]


def swap(t: Tensor, dim: int, kind: str) -> Tensor:
    """``t`` with the two channels of each pair of dimension ``dim`` exchanged (``S``).

    ``kind="halves"``: channel ``i`` pairs with ``i + C/2`` (the residual stream and the tokenizer:
    a batch norm then sees a pair as two rows of one ``C/2``-wide table, a free view of
    channels-last memory); ``"pairs"``: ``2i`` with ``2i + 1`` (queries, keys and values: each
    head's contiguous slice then holds whole pairs, whatever the number of heads).
    """
    dim = dim % t.dim()
    n = t.shape[dim]
    if kind == "halves":
        return t.roll(n // 2, dim)
    if kind == "pairs":
        return (
            t.unflatten(dim, (n // 2, 2)).flip(dim + 1).flatten(dim, dim + 1)
        )
    raise ValueError(f"swap: kind={kind!r}; choose 'halves' or 'pairs'")


class _Symmetric(nn.Module):
    """A parametrization ``P -> (P + T(P)) / 2`` for an involution ``T`` (``_mirror``)."""

    def forward(self, p: Tensor) -> Tensor:
        return (p + self._mirror(p)) / 2

    def _mirror(self, p: Tensor) -> Tensor:
        raise NotImplementedError


class _Vector(_Symmetric):
    """A bias, a norm's scale or shift, or a CLS token: paired along the last dimension."""

    def __init__(self, kind: str = "halves"):
        super().__init__()
        self.kind = kind

    def _mirror(self, p: Tensor) -> Tensor:
        return swap(p, -1, self.kind)


class _Matrix(_Symmetric):
    """A linear layer's ``(out, in)`` weight; ``out_kind=None`` for the head's logits, whose
    classes are not paired."""

    def __init__(self, out_kind: str | None, in_kind: str):
        super().__init__()
        self.out_kind, self.in_kind = out_kind, in_kind

    def _mirror(self, p: Tensor) -> Tensor:
        p = swap(p, 1, self.in_kind)
        return p if self.out_kind is None else swap(p, 0, self.out_kind)


class _Kernel(_Symmetric):
    """A convolution's ``(out, in, k, k)`` weight, mirrored along its width; ``in_paired=False``
    for the layer that reads the image."""

    def __init__(self, in_paired: bool):
        super().__init__()
        self.in_paired = in_paired

    def forward(self, p: Tensor) -> Tensor:
        kernel = super().forward(p)
        if p.dim() == 4 and p.is_contiguous(
            memory_format=torch.channels_last
        ):
            # keep the stored kernel's channels-last layout: a contiguous kernel would make the
            # convolution's input gradient contiguous too, and every elementwise backward that
            # meets it beside a channels-last activation several times slower
            kernel = kernel.contiguous(memory_format=torch.channels_last)
        return kernel

    def _mirror(self, p: Tensor) -> Tensor:
        p = swap(p, 0, "halves")
        if self.in_paired:
            p = swap(p, 1, "halves")
        return p.flip(-1)


class _Positions(_Symmetric):
    """A position table ``(1, prefix + grid * grid, dim)`` over a row-major square token grid:
    column ``c`` tied to column ``grid - 1 - c``, its channels swapped (``swap_channels=False``:
    the same vector at both columns)."""

    def __init__(self, grid: int, prefix: int, swap_channels: bool = True):
        super().__init__()
        self.grid, self.prefix = grid, prefix
        self.swap_channels = swap_channels

    def _mirror(self, p: Tensor) -> Tensor:
        head, cells = p[:, : self.prefix], p[:, self.prefix :]
        cells = (
            cells.unflatten(1, (self.grid, self.grid)).flip(2).flatten(1, 2)
        )
        p = torch.cat([head, cells], dim=1)
        return swap(p, -1, "halves") if self.swap_channels else p


class PairedBatchNorm2d(nn.BatchNorm1d):
    """Batch norm over ``(B, C, H, W)`` with one mean, variance, scale and shift per channel pair.

    The pair's two channels (``i`` and ``i + C/2``) are normalised together, so the layer commutes
    with the mirror (a per-channel batch norm would see different statistics in the two channels
    of a pair whenever a batch is not mirror-symmetric).  It is a ``BatchNorm1d`` of ``C / 2``
    features run on the ``(B * H * W * 2, C / 2)`` table of the pixels: with channels-last memory
    that table is a view.
    """

    def __init__(self, channels: int, **kwargs):
        if channels % 2:
            raise ValueError(
                f"PairedBatchNorm2d: {channels} channels cannot be paired; give an even width"
            )
        super().__init__(channels // 2, **kwargs)

    def forward(self, x: Tensor) -> Tensor:
        b, c, h, w = x.shape
        table = x.permute(0, 2, 3, 1).reshape(b * h * w * 2, c // 2)
        return super().forward(table).reshape(b, h, w, c).permute(0, 3, 1, 2)


def _tie(module: nn.Module, name: str, tie: _Symmetric) -> None:
    """Register ``tie`` on ``module.name``, first replacing a random tensor by its symmetric part
    times sqrt(2) (a tensor that is already symmetric, such as ones or zeros, is kept)."""
    with torch.no_grad():
        p = getattr(module, name)
        symmetric = tie(p)
        if not torch.allclose(symmetric, p):
            p.copy_(symmetric * math.sqrt(2))
    parametrize.register_parametrization(module, name, tie)


def _check_even(widths: dict[str, int]) -> None:
    odd = {k: v for k, v in widths.items() if v % 2}
    if odd:
        shown = ", ".join(f"{k}={v}" for k, v in odd.items())
        raise ValueError(
            f"mirror symmetry pairs every hidden channel, so each width must be even; got {shown}: "
            "change the recipe's widths"
        )


def _is_attention(m: nn.Module) -> bool:
    """Chapter 04's ``MultiHeadAttention`` (``w_q``, ``w_k``, ``w_v``, ``w_o``, ``num_heads``)."""
    return all(
        hasattr(m, a) for a in ("w_q", "w_k", "w_v", "w_o", "num_heads")
    )


def make_mirror_symmetric(model: nn.Module) -> nn.Module:
    """Tie ``model`` (a ``references.vit.ViT`` or ``models.vit_fast.FastViT`` with a convolutional
    tokenizer, built and initialised) so that ``model(images)`` equals ``model(images.flip(-1))``.

    The batch norms of the tokenizer are replaced by ``PairedBatchNorm2d``s; every other change is a
    parametrization, so the state dict names ``parametrizations.<name>.original`` tensors.  Returns
    ``model``.
    """
    from ..references.vit import ConvTokenizer

    tokenizer = model.patch_embed
    if not isinstance(tokenizer, ConvTokenizer):
        raise ValueError(
            "mirror symmetry needs a convolutional tokenizer (a patch's pixels have no mirror "
            "pairing in a linear patch embedding); give stem_channels"
        )
    no_pairs = {model.head, getattr(model, "seq_pool", None)}
    dim = model.pos_embed.shape[-1]
    widths = {"dim": dim}
    for name, m in model.named_modules():
        if isinstance(m, nn.Conv2d):
            widths[f"{name} (a tokenizer width)"] = m.out_channels
        elif isinstance(m, nn.Linear) and m not in no_pairs:
            widths[f"{name} (a linear layer's output)"] = m.out_features
        elif _is_attention(m):
            widths[f"{name} (its head width, dim / num_heads)"] = (
                dim // m.num_heads
            )
    _check_even(widths)

    convs = [m for m in tokenizer.net if isinstance(m, nn.Conv2d)]
    for i, layer in enumerate(tokenizer.net):
        if isinstance(layer, nn.BatchNorm2d):
            paired = PairedBatchNorm2d(
                layer.num_features, eps=layer.eps, momentum=layer.momentum
            )
            tokenizer.net[i] = paired.to(
                layer.weight.device, layer.weight.dtype
            )
        elif isinstance(layer, nn.ReLU):
            # the paired batch norm returns a view of its table; an in-place ReLU on a view makes
            # autograd rebuild the table in backward (several times the step's ReLU cost)
            layer.inplace = False
    for conv in convs:
        _tie(conv, "weight", _Kernel(in_paired=conv is not convs[0]))
        if conv.bias is not None:
            _tie(conv, "bias", _Vector())

    attention = [m for m in model.modules() if _is_attention(m)]
    inside = set()
    for m in attention:
        # queries, keys and values pair "2i with 2i+1", so that every head holds whole pairs
        for layer, out_kind, in_kind in (
            (m.w_q, "pairs", "halves"),
            (m.w_k, "pairs", "halves"),
            (m.w_v, "pairs", "halves"),
            (m.w_o, "halves", "pairs"),
        ):
            _tie(layer, "weight", _Matrix(out_kind, in_kind))
            if layer.bias is not None:
                _tie(layer, "bias", _Vector(out_kind))
            inside.add(layer)
    for m in model.modules():
        if isinstance(m, nn.Linear) and m not in inside:
            out_kind = None if m in no_pairs else "halves"
            _tie(m, "weight", _Matrix(out_kind, "halves"))
            if m.bias is not None and out_kind is not None:
                _tie(m, "bias", _Vector())
        elif isinstance(m, nn.LayerNorm) and m.elementwise_affine:
            _tie(m, "weight", _Vector())
            if m.bias is not None:
                _tie(m, "bias", _Vector())

    _tie_positions(model, swap_channels=True)
    if getattr(model, "cls_token", None) is not None:
        _tie(model, "cls_token", _Vector())
    return model


def make_positions_symmetric(model: nn.Module) -> nn.Module:
    """Tie ``model``'s position table alone: the token at column ``c`` of the grid gets the vector
    the token at column ``grid - 1 - c`` gets, so the Transformer reads no left from right (the
    rows stay apart).  Unlike ``make_mirror_symmetric`` the network is not invariant: its
    tokenizer still learns each orientation from flipped training images.  Returns ``model``."""
    _tie_positions(model, swap_channels=False)
    return model


def _tie_positions(model: nn.Module, swap_channels: bool) -> None:
    """Tie ``model.pos_embed`` over its square token grid (``_Positions``); the slots before the
    grid (a CLS token's) are tied to themselves."""
    tokens = model.patch_embed.num_patches
    grid = int(round(tokens**0.5))
    if grid * grid != tokens:
        raise ValueError(
            f"a mirror tie needs a square token grid; got {tokens} tokens"
        )
    prefix = model.pos_embed.shape[1] - tokens
    _tie(model, "pos_embed", _Positions(grid, prefix, swap_channels))
