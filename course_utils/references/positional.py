"""Reference position information (chapter 05).

- ``sinusoidal_encoding``: the Transformer's fixed 1-D encoding, sin/cos pairs interleaved;
- ``LearnedPositionalEmbedding``: one trainable vector per position (BERT, ViT);
- ``offset_matrix``: the block rotation ``M_k`` with ``PE[p + k] = PE[p] @ M_k`` for every p;
- ``sincos_2d_encoding``: fixed 2-D encoding of a grid of image patches (row half, column half);
- ``rotary_embedding``: RoPE, the same rotations applied to queries and keys, so that their
  dot product depends on the positions only through the offset;
- ``RelativePositionBias``: a learned bias per head and offset, added to the attention scores;
- ``interpolate_positions``: a 1-D table of ``L`` position vectors resampled to a new length
  (linear), to run a learned embedding on longer sequences;
- ``resample_grid``: a ViT's position embeddings resampled to a new patch grid (bicubic, class
  token kept aside), as timm's ``resample_abs_pos_embed`` does.

Row-vector convention throughout: an encoding is a row, a linear map multiplies on the right.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "sinusoidal_encoding",
    "LearnedPositionalEmbedding",
    "frequencies",
    "offset_matrix",
    "sincos_2d_encoding",
    "rotary_embedding",
    "RelativePositionBias",
    "interpolate_positions",
    "resample_grid",
]


def sinusoidal_encoding(
    num_positions: int,
    d_model: int,
    base: float = 10000.0,
    *,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> Tensor:
    """``(num_positions, d_model)`` with PE[p, 2i] = sin(p / base^(2i/d)), PE[p, 2i+1] = cos(same).

    Columns 2i and 2i+1 share one frequency, so the pair rotates with position; computed in
    float64 and then cast, so large positions keep their precision.
    """
    if d_model % 2:
        raise ValueError(
            f"sinusoidal_encoding: d_model must be even (sin/cos pairs), got {d_model}"
        )
    if num_positions < 0:
        raise ValueError(
            f"sinusoidal_encoding: num_positions must be >= 0, got {num_positions}"
        )
    # (P, 1)
    position = torch.arange(num_positions, dtype=torch.float64)[:, None]
    # 2i = 0, 2, 4, ...
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angle = position / base ** (two_i / d_model)  # (P, d_model/2)
    pe = torch.empty(num_positions, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe.to(dtype=dtype, device=device)


class LearnedPositionalEmbedding(nn.Module):
    """A trainable ``weight`` of shape ``(num_positions, d_model)``; ``forward(x)`` adds ``weight[:n]``.

    ``x`` has shape ``(..., n, d_model)`` with ``n <= num_positions``.
    """

    def __init__(self, num_positions: int, d_model: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_positions, d_model))
        nn.init.trunc_normal_(self.weight, std=0.02)  # as in ViT and BERT

    def forward(self, x: Tensor) -> Tensor:
        n = x.shape[-2]
        if n > self.weight.shape[0]:
            raise ValueError(
                f"LearnedPositionalEmbedding: {n} positions but only {self.weight.shape[0]} are learned"
            )
        if x.shape[-1] != self.weight.shape[1]:
            raise ValueError(
                f"LearnedPositionalEmbedding: x has {x.shape[-1]} features, expected {self.weight.shape[1]}"
            )
        return x + self.weight[:n]


# --------------------------------------------------------------------------- rotations
def frequencies(d_model: int, base: float = 10000.0) -> Tensor:
    """The angular frequencies ``omega_i = base^(-2i/d_model)``, ``i = 0 .. d_model/2 - 1`` (float64)."""
    if d_model % 2:
        raise ValueError(
            f"frequencies: d_model must be even (sin/cos pairs), got {d_model}"
        )
    return base ** (
        -torch.arange(0, d_model, 2, dtype=torch.float64) / d_model
    )


def _pair_rotation(angle: Tensor) -> Tensor:
    """``(..., d/2) -> (..., d, d)``: block diagonal, block i = [[cos a_i, -sin a_i], [sin a_i, cos a_i]].

    For a row ``[s, c] = [sin t, cos t]`` this block gives ``[s, c] @ block = [sin(t + a), cos(t + a)]``.
    """
    half = angle.shape[-1]
    cos, sin = angle.cos(), angle.sin()
    out = torch.zeros(
        *angle.shape[:-1],
        2 * half,
        2 * half,
        dtype=angle.dtype,
        device=angle.device,
    )
    idx = torch.arange(half, device=angle.device)
    out[..., 2 * idx, 2 * idx] = cos
    out[..., 2 * idx, 2 * idx + 1] = -sin
    out[..., 2 * idx + 1, 2 * idx] = sin
    out[..., 2 * idx + 1, 2 * idx + 1] = cos
    return out


def offset_matrix(
    k: float,
    d_model: int,
    base: float = 10000.0,
    *,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> Tensor:
    """``(d_model, d_model)`` matrix ``M_k`` with ``sinusoidal_encoding(...)[p + k] = PE[p] @ M_k`` for all p.

    Block-diagonal: pair i is rotated by the angle ``k * omega_i``, because
    sin((p+k)w) = sin(pw)cos(kw) + cos(pw)sin(kw) and cos((p+k)w) = cos(pw)cos(kw) - sin(pw)sin(kw).
    ``M_k`` does not depend on p: moving by k positions is one fixed linear map.
    """
    angle = float(k) * frequencies(d_model, base)
    return _pair_rotation(angle).to(dtype=dtype, device=device)


def rotary_embedding(
    x: Tensor, base: float = 10000.0, positions: Tensor | None = None
) -> Tensor:
    """RoPE: rotate feature pairs (2i, 2i+1) of ``x (..., n, d)`` by ``position * omega_i``.

    Row p becomes ``x[p] @ M_p`` (``offset_matrix(p)``), computed pair by pair without the
    matrix.  Applied to queries and keys, ``rotary(q)[p] . rotary(k)[r] = q[p] . (k[r] @ M_{r-p})``
    (rotations compose and are orthogonal), so scores depend on positions only through the
    offset r - p, and every vector keeps its norm.  ``positions`` (``(n,)``) defaults to
    ``0 .. n-1``.  Since ``PE[p] = PE[0] @ M_p``, the sinusoidal encoding is RoPE applied to the
    constant vector ``(0, 1, 0, 1, ...)``.  (The RoFormer paper rotates the other way round,
    ``M_{-p}`` in this pair order; the offset property is the same.)
    """
    if not x.is_floating_point():
        raise TypeError(
            f"rotary_embedding: x must be floating point, got {x.dtype}"
        )
    n, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(
            f"rotary_embedding: the feature size must be even (pairs), got {d}"
        )
    if positions is None:
        positions = torch.arange(n, dtype=torch.float64, device=x.device)
    elif positions.shape != (n,):
        raise ValueError(
            f"rotary_embedding: positions must have shape ({n},), got {tuple(positions.shape)}"
        )
    angle = positions.to(device=x.device, dtype=torch.float64)[
        :, None
    ] * frequencies(d, base).to(x.device)  # (n, d/2)
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    # [e, o] @ [[cos, -sin], [sin, cos]] = [e cos + o sin, -e sin + o cos]
    out[..., 0::2] = even * cos + odd * sin
    out[..., 1::2] = odd * cos - even * sin
    return out


# --------------------------------------------------------------------------- images and relative positions
def sincos_2d_encoding(
    grid_h: int,
    grid_w: int,
    d_model: int,
    base: float = 10000.0,
    *,
    cls_token: bool = False,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> Tensor:
    """Fixed 2-D encoding of a ``grid_h x grid_w`` grid of patches: ``(grid_h*grid_w, d_model)``.

    Patches are numbered row by row (patch ``r*grid_w + c`` is at row r, column c), as
    ``patchify`` produces them.  The first half of the features is the 1-D sinusoidal encoding
    of the row, the second half that of the column, so patches in the same row share the
    first half, and a step down or a step right changes one half only.  ``cls_token=True``
    prepends a row of zeros for a class token, which has no place in the grid.
    """
    if d_model % 4:
        raise ValueError(
            f"sincos_2d_encoding: d_model must be divisible by 4 (sin/cos pairs for rows and columns), "
            f"got {d_model}"
        )
    # (grid_h, d/2)
    rows = sinusoidal_encoding(
        grid_h, d_model // 2, base, dtype=torch.float64
    )
    # (grid_w, d/2)
    cols = sinusoidal_encoding(
        grid_w, d_model // 2, base, dtype=torch.float64
    )
    pe = torch.cat(
        [
            rows[:, None, :].expand(grid_h, grid_w, -1),
            cols[None, :, :].expand(grid_h, grid_w, -1),
        ],
        dim=-1,
    )
    pe = pe.reshape(grid_h * grid_w, d_model)
    if cls_token:
        pe = torch.cat([torch.zeros(1, d_model, dtype=pe.dtype), pe], dim=0)
    return pe.to(dtype=dtype, device=device)


class RelativePositionBias(nn.Module):
    """A learned scalar per head and per offset ``j - i`` (clipped to ``[-max_distance, max_distance]``).

    ``forward(m, n)`` returns ``(num_heads, m, n)`` to add to the attention scores of ``m``
    queries and ``n`` keys: entry ``[h, i, j] = bias[h, clip(j - i) + max_distance]``.  The bias
    of a pair of tokens depends only on how far apart they are, not where they are.  This scalar
    per-head form is T5's (Raffel et al. 2020, which buckets long offsets logarithmically instead
    of clipping) and Swin's; Shaw et al. (2018), who introduced relative positions, learned vectors
    per offset and added them to the keys and values instead.
    """

    def __init__(self, num_heads: int, max_distance: int):
        super().__init__()
        if max_distance < 0:
            raise ValueError(
                f"RelativePositionBias: max_distance must be >= 0, got {max_distance}"
            )
        self.num_heads, self.max_distance = num_heads, max_distance
        # zero: start position-blind
        self.bias = nn.Parameter(
            torch.zeros(num_heads, 2 * max_distance + 1)
        )

    def offsets(self, m: int, n: int) -> Tensor:
        """``(m, n)`` long tensor of clipped offsets ``j - i``, shifted to ``0 .. 2*max_distance``."""
        device = self.bias.device
        rel = (
            torch.arange(n, device=device)[None, :]
            - torch.arange(m, device=device)[:, None]
        )
        return (
            rel.clamp(-self.max_distance, self.max_distance)
            + self.max_distance
        )

    def forward(self, m: int, n: int) -> Tensor:
        return self.bias[:, self.offsets(m, n)]  # (H, m, n)


# --------------------------------------------------------------------------- longer inputs than in training
def interpolate_positions(table: Tensor, new_length: int) -> Tensor:
    """A ``(L, d)`` table of position vectors resampled to ``(new_length, d)`` by linear interpolation.

    The first and the last rows stay where they are (``align_corners=True``): new row ``j`` sits
    at the old position ``j * (L - 1) / (new_length - 1)`` and mixes the two rows around it, so
    ``new_length == L`` returns the table unchanged.  A sequence's positions are points, the
    first token and the last one, hence this alignment; an image's patches are cells that cover
    the picture, which is why ``resample_grid`` aligns cell centres instead.  Neighbouring
    positions come closer together: in the new table, ``k`` steps span only about
    ``k (L - 1) / (new_length - 1)`` steps of the old one.  Differentiable (the result of a
    learned ``weight`` can be fine-tuned through); float dtypes are kept.
    """
    if table.dim() != 2:
        raise ValueError(
            f"interpolate_positions: expected a table (L, d), got shape {tuple(table.shape)}"
        )
    if table.shape[0] < 1 or new_length < 1:
        raise ValueError(
            f"interpolate_positions: lengths must be >= 1, got {table.shape[0]} -> {new_length}"
        )
    if not table.is_floating_point():
        raise TypeError(
            f"interpolate_positions: table must be floating point, got {table.dtype}"
        )
    # (1, d, L): F.interpolate resamples the last axis, one channel per feature
    columns = table.T[None]
    return F.interpolate(
        columns, size=new_length, mode="linear", align_corners=True
    )[0].T


def _grid_size(grid: int | tuple[int, int], name: str) -> tuple[int, int]:
    h, w = (grid, grid) if isinstance(grid, int) else tuple(grid)
    if h < 1 or w < 1:
        raise ValueError(
            f"resample_grid: {name} must be positive, got {grid!r}"
        )
    return int(h), int(w)


def resample_grid(
    pos_embed: Tensor,
    old_grid: int | tuple[int, int],
    new_grid: int | tuple[int, int],
    num_prefix_tokens: int = 1,
    *,
    antialias: bool = True,
) -> Tensor:
    """A ViT's position embeddings for an ``old_grid`` of patches resampled to a ``new_grid`` (bicubic).

    ``pos_embed`` is ``(1, num_prefix_tokens + H*W, d)`` (the shape of ``ViT.pos_embed``) or the
    same without the leading 1; grids are ``(H, W)`` or one int for a square grid.  The first
    ``num_prefix_tokens`` rows (the CLS token's) have no place in the grid and are kept as
    they are; the others, numbered row by row as ``patchify`` numbers patches, are reshaped to
    ``(H, W, d)``, resized as an image with ``d`` channels, and flattened again.  Returns
    ``(1, num_prefix_tokens + H'*W', d)`` (or without the leading 1, like the input).

    ``align_corners=False``: each patch is a cell, and the new grid's cells cover the same
    picture as the old grid's.  ``antialias=True`` matches the default of timm's
    ``resample_abs_pos_embed``: PyTorch then uses Pillow's cubic kernel (a = -0.5, taps outside
    the grid dropped), which also smooths when the grid shrinks.  ``antialias=False`` is plain
    ``F.interpolate(..., mode="bicubic")`` (a = -0.75, edge rows repeated), as DeiT's
    fine-tuning script calls it.  Half-precision inputs are resampled in float32.
    """
    if pos_embed.dim() not in (2, 3) or (
        pos_embed.dim() == 3 and pos_embed.shape[0] != 1
    ):
        raise ValueError(
            f"resample_grid: expected pos_embed (1, P + H*W, d) or (P + H*W, d), "
            f"got shape {tuple(pos_embed.shape)}"
        )
    (h, w), (new_h, new_w) = (
        _grid_size(old_grid, "old_grid"),
        _grid_size(new_grid, "new_grid"),
    )
    # (P + H*W, d)
    table = pos_embed[0] if pos_embed.dim() == 3 else pos_embed
    if num_prefix_tokens < 0 or table.shape[0] != num_prefix_tokens + h * w:
        raise ValueError(
            f"resample_grid: {table.shape[0]} rows, but {num_prefix_tokens} prefix token(s) "
            f"and a {h}x{w} grid need {num_prefix_tokens + h * w}"
        )
    prefix, patches = table[:num_prefix_tokens], table[num_prefix_tokens:]
    d = table.shape[1]
    work = (
        patches.float()
        if patches.dtype in (torch.float16, torch.bfloat16)
        else patches
    )
    # (1, d, H, W): a picture with d channels
    image = work.reshape(h, w, d).permute(2, 0, 1)[None]
    image = F.interpolate(
        image,
        size=(new_h, new_w),
        mode="bicubic",
        align_corners=False,
        antialias=antialias,
    )
    patches = (
        image[0].permute(1, 2, 0).reshape(new_h * new_w, d).to(table.dtype)
    )
    out = torch.cat([prefix, patches], dim=0)
    return out[None] if pos_embed.dim() == 3 else out
