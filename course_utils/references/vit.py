"""Reference Vision Transformer (chapter 07): patches, patch embedding, pre-norm encoder, ViT.

Shapes: images ``(B, C, H, W)``; P = patch size; N = (H/P)(W/P) patches; tokens ``(B, N, dim)``.
The ViT prepends a learned CLS token, adds a learned 1-D position embedding, runs ``depth``
pre-norm encoder blocks, and classifies from the final LayerNorm of the CLS token:

    z_0 = [x_cls; x_p^1 E; ...; x_p^N E] + E_pos
    z'_l = MSA(LN(z_{l-1})) + z_{l-1},   z_l = MLP(LN(z'_l)) + z'_l
    y = LN(z_L^0) -> head

``stem_channels`` swaps the linear patch embedding for a small convolutional tokenizer (a
few 3x3 conv layers that downsample by the patch size), the inductive-bias lever of
Compact Convolutional Transformers that lets a ViT learn CIFAR-10 from scratch on a CPU.
"""

from __future__ import annotations

import math

import torch
from einops import rearrange
from torch import Tensor, nn

from .multihead import MultiHeadAttention

__all__ = [
    "patchify",
    "PatchEmbedding",
    "ConvTokenizer",
    "EncoderBlock",
    "ViT",
    "count_parameters",
]


def patchify(images: Tensor, patch_size: int) -> Tensor:
    """``(B, C, H, W) -> (B, N, P*P*C)``: patches in row-major order, each flattened as (p1 p2 c)."""
    if images.dim() != 4:
        raise ValueError(
            f"patchify: expected images (B, C, H, W), got shape {tuple(images.shape)}"
        )
    if not isinstance(patch_size, int) or patch_size < 1:
        raise ValueError(
            f"patchify: patch_size must be a positive integer, got {patch_size!r}"
        )
    h, w = images.shape[-2:]
    if h % patch_size or w % patch_size:
        raise ValueError(
            f"patchify: image size {h}x{w} is not divisible by patch size {patch_size}"
        )
    return rearrange(
        images,
        "b c (h p1) (w p2) -> b (h w) (p1 p2 c)",
        p1=patch_size,
        p2=patch_size,
    )


class PatchEmbedding(nn.Module):
    """Cut into P x P patches and project each to ``dim``: a Conv2d with kernel = stride = P.

    Equivalent to ``patchify`` followed by a Linear layer whose weight is ``proj.weight``
    rearranged to (p1 p2 c) order.  ``forward(images (B, C, H, W)) -> (B, N, dim)``.
    """

    def __init__(
        self, img_size: int, patch_size: int, in_chans: int, dim: int
    ):
        super().__init__()
        if img_size % patch_size:
            raise ValueError(
                f"PatchEmbedding: img_size {img_size} is not divisible by patch_size {patch_size}"
            )
        self.img_size, self.patch_size = img_size, patch_size
        self.num_patches = (img_size // patch_size) ** 2
        self.proj = nn.Conv2d(
            in_chans, dim, kernel_size=patch_size, stride=patch_size
        )

    def forward(self, images: Tensor) -> Tensor:
        # (B, dim, H/P, W/P) -> (B, N, dim)
        return self.proj(images).flatten(2).transpose(1, 2)


class ConvTokenizer(nn.Module):
    """Conv3x3-BN-ReLU layers with 2x2 max-pools until the image shrinks by ``patch_size``.

    ``forward(images) -> (B, N, dim)`` with the same N as a ``PatchEmbedding`` of that patch size.
    ``convs_per_stage`` conv layers of each width in ``channels`` (the pool follows the last of
    them): more of the work done at the finer resolutions, where a convolution's locality helps
    most; the last layer, to ``dim``, stays one.  A tuple gives each width its own count, e.g.
    ``(1, 2, 2)``: one layer at full resolution, where a layer costs the most memory traffic.
    """

    def __init__(
        self,
        img_size: int,
        patch_size: int,
        in_chans: int,
        dim: int,
        channels: tuple[int, ...],
        *,
        convs_per_stage: int | tuple[int, ...] = 1,
    ):
        super().__init__()
        pools = int(math.log2(patch_size))
        if 2**pools != patch_size:
            raise ValueError(
                f"ConvTokenizer: patch_size must be a power of 2, got {patch_size}"
            )
        counts = (
            tuple(convs_per_stage)
            if isinstance(convs_per_stage, (tuple, list))
            else (convs_per_stage,) * len(channels)
        )
        if len(counts) != len(channels):
            raise ValueError(
                f"ConvTokenizer: convs_per_stage={tuple(counts)} gives {len(counts)} counts for "
                f"{len(channels)} widths {tuple(channels)}; give one count per width, or one number"
            )
        if not all(isinstance(n, int) and n >= 1 for n in counts):
            raise ValueError(
                f"ConvTokenizer: convs_per_stage must be at least 1, got {convs_per_stage}"
            )
        widths = list(channels) + [dim]
        layers, c_in = [], in_chans
        for i, c_out in enumerate(widths):
            for _ in range(counts[i] if i < len(channels) else 1):
                layers += [
                    nn.Conv2d(c_in, c_out, 3, padding=1, bias=False),
                    nn.BatchNorm2d(c_out),
                    nn.ReLU(inplace=True),
                ]
                c_in = c_out
            if i < pools:
                layers.append(nn.MaxPool2d(2))
        if pools > len(widths):
            raise ValueError(
                f"ConvTokenizer: {len(widths)} conv layers cannot downsample by {patch_size}"
            )
        self.net = nn.Sequential(*layers)
        self.num_patches = (img_size // patch_size) ** 2
        self.patch_size, self.in_chans, self.dim = patch_size, in_chans, dim
        self.channels = tuple(channels)

    def forward(self, images: Tensor) -> Tensor:
        return self.net(images).flatten(2).transpose(1, 2)


class EncoderBlock(nn.Module):
    """Pre-norm Transformer encoder block: ``x = x + MSA(LN(x)); x = x + MLP(LN(x))`` (GELU MLP).

    ``forward(x (B, N, dim)) -> (B, N, dim)``.  Attention runs through chapter 04's
    ``MultiHeadAttention``, as a learner writes it; ``models.vit_fast`` trains the same block
    through PyTorch's fused kernel.
    """

    def __init__(
        self,
        dim: int,
        num_heads: int,
        mlp_dim: int,
        dropout: float = 0.0,
        *,
        qkv_bias: bool = True,
    ):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = MultiHeadAttention(
            dim, num_heads, dropout=dropout, qkv_bias=qkv_bias
        )
        self.drop1 = nn.Dropout(dropout)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(
            nn.Linear(dim, mlp_dim),
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(mlp_dim, dim),
            nn.Dropout(dropout),
        )

    def forward(self, x: Tensor) -> Tensor:
        h = self.norm1(x)
        x = x + self.drop1(self.attn(h, h, h)[0])
        return x + self.mlp(self.norm2(x))


class ViT(nn.Module):
    """Vision Transformer for classification (see the module docstring).

    Parameters ``cls_token (1, 1, dim)`` and ``pos_embed (1, N+1, dim)``;
    ``forward(images (B, C, H, W)) -> logits (B, num_classes)``.  ``qkv_bias=False`` drops the
    query/key/value biases (as vit-pytorch does; timm keeps them), e.g. to compare like with like.
    ``block_type`` is the class of the ``depth`` blocks (a subclass may swap in a faster one).
    """

    block_type: type[EncoderBlock] = EncoderBlock

    def __init__(
        self,
        img_size: int,
        patch_size: int,
        num_classes: int,
        dim: int,
        depth: int,
        num_heads: int,
        mlp_dim: int,
        in_chans: int = 3,
        dropout: float = 0.0,
        *,
        stem_channels: tuple[int, ...] | None = None,
        qkv_bias: bool = True,
    ):
        super().__init__()
        if stem_channels:
            self.patch_embed = ConvTokenizer(
                img_size, patch_size, in_chans, dim, tuple(stem_channels)
            )
        else:
            self.patch_embed = PatchEmbedding(
                img_size, patch_size, in_chans, dim
            )
        n = self.patch_embed.num_patches
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, n + 1, dim))
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            self.block_type(
                dim, num_heads, mlp_dim, dropout, qkv_bias=qkv_bias
            )
            for _ in range(depth)
        )
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)
        self.img_size = img_size
        self._init()

    def _init(self) -> None:
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        nn.init.zeros_(self.head.weight)  # start from uniform predictions

    def no_weight_decay(self) -> set[str]:
        """Parameters the trainer does not decay (timm's convention): embeddings, not weights of a map."""
        return {"cls_token", "pos_embed"}

    def tokens(self, images: Tensor) -> Tensor:
        """``(B, C, H, W) -> (B, N+1, dim)``: patch tokens behind the CLS token, plus positions."""
        self.check_images(images)
        x = self.patch_embed(images)
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        return self.dropout(torch.cat([cls, x], dim=1) + self.pos_embed)

    def check_images(self, images: Tensor) -> None:
        """A clear error for anything but a batch of ``img_size`` x ``img_size`` images."""
        if images.dim() != 4:
            raise ValueError(
                f"ViT: expected a batch of images (B, C, H, W), got shape {tuple(images.shape)}; "
                "for one image use images.unsqueeze(0)"
            )
        if (
            images.shape[-1] != self.img_size
            or images.shape[-2] != self.img_size
        ):
            raise ValueError(
                f"ViT: expected {self.img_size}x{self.img_size} images, got {tuple(images.shape)}"
            )

    def forward(self, images: Tensor) -> Tensor:
        x = self.tokens(images)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x[:, 0]))

    @torch.no_grad()
    def attention_maps(self, images: Tensor) -> list[Tensor]:
        """Attention weights of every block, ``depth`` tensors of shape ``(B, H, N+1, N+1)``."""
        x, maps = self.tokens(images), []
        for block in self.blocks:
            h = block.norm1(x)
            maps.append(block.attn(h, h, h)[1])
            x = block(x)
        return maps


def count_parameters(model: nn.Module) -> int:
    """The number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
