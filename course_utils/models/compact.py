"""A Compact Convolutional Transformer (Hassani et al., 2021): chapter 08's fast GPU model.

``CompactTransformer(dim=256, depth=7, num_heads=4, mlp_ratio=2)`` with one 3x3 convolution in its
tokenizer is the paper's CCT-7/3x1: a convolution and a 3x3/2 max-pool turn a 32x32 image into a
16x16 grid of 256 tokens (four times the tokens of 4x4 patches, at the cost of one cheap layer),
a learned position embedding, pre-norm encoder blocks with stochastic depth, and *sequence
pooling* instead of a CLS token: a learned score per token, softmax over the tokens, and the
weighted mean of the tokens is what the classifier sees.

Shapes: images ``(B, 3, H, W)``; tokens ``(B, N, dim)`` with ``N = (H/2)(W/2)``; logits
``(B, num_classes)``.  Attention runs through ``F.scaled_dot_product_attention`` (flash or
memory-efficient kernels on a GPU); chapter 04 teaches what that kernel computes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torchvision.ops import StochasticDepth

__all__ = ["CompactTransformer"]


class _Block(nn.Module):
    """Pre-norm encoder block, ``x + drop(MSA(LN x))`` then ``x + drop(MLP(LN x))``: ``(B, N, d) -> (B, N, d)``.

    ``drop`` is stochastic depth: in training a sample's whole branch is dropped with probability
    ``drop_path`` (and the kept ones scaled by ``1/(1-p)``), so a deep net trains as an ensemble
    of shallower ones; in evaluation every branch is kept.
    """

    def __init__(
        self,
        dim: int,
        num_heads: int,
        mlp_dim: int,
        drop_path: float,
        attn_dropout: float,
    ):
        super().__init__()
        self.num_heads, self.attn_dropout = num_heads, attn_dropout
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(
            nn.Linear(dim, mlp_dim), nn.GELU(), nn.Linear(mlp_dim, dim)
        )
        self.drop = StochasticDepth(drop_path, mode="row")

    def attention(self, x: Tensor) -> Tensor:
        b, n, d = x.shape
        q, k, v = (
            self.qkv(x)
            .view(b, n, 3, self.num_heads, d // self.num_heads)
            .permute(2, 0, 3, 1, 4)
        )
        out = F.scaled_dot_product_attention(
            q, k, v, dropout_p=self.attn_dropout if self.training else 0.0
        )
        return self.proj(out.transpose(1, 2).reshape(b, n, d))

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.drop(self.attention(self.norm1(x)))
        return x + self.drop(self.mlp(self.norm2(x)))


class CompactTransformer(nn.Module):
    """CCT: convolutional tokenizer, encoder, sequence pooling, linear head (see the module docstring).

    ``conv_layers`` 3x3 conv-ReLU-maxpool(3, stride 2) stages (the last one's width is ``dim``, the
    ones before it ``stem_width``); ``drop_path`` rises linearly from 0 in the first block to its
    value in the last (as in the paper and timm).
    """

    def __init__(
        self,
        img_size: int = 32,
        num_classes: int = 10,
        dim: int = 256,
        depth: int = 7,
        num_heads: int = 4,
        mlp_ratio: float = 2.0,
        conv_layers: int = 1,
        stem_width: int = 64,
        drop_path: float = 0.1,
        attn_dropout: float = 0.1,
        in_chans: int = 3,
    ):
        super().__init__()
        if dim % num_heads:
            raise ValueError(
                f"CompactTransformer: dim {dim} is not divisible by num_heads {num_heads}"
            )
        if img_size % 2**conv_layers:
            raise ValueError(
                f"CompactTransformer: img_size {img_size} does not halve {conv_layers} times"
            )
        layers, c_in = [], in_chans
        for i in range(conv_layers):
            c_out = dim if i == conv_layers - 1 else stem_width
            layers += [
                nn.Conv2d(c_in, c_out, 3, padding=1, bias=False),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(3, stride=2, padding=1),
            ]
            c_in = c_out
        self.tokenizer = nn.Sequential(*layers)
        self.num_tokens = (img_size // 2**conv_layers) ** 2
        self.img_size = img_size
        self.pos_embed = nn.Parameter(torch.zeros(1, self.num_tokens, dim))
        rates = [drop_path * i / max(depth - 1, 1) for i in range(depth)]
        self.blocks = nn.ModuleList(
            _Block(dim, num_heads, int(dim * mlp_ratio), r, attn_dropout)
            for r in rates
        )
        self.norm = nn.LayerNorm(dim)
        # sequence pooling: one score per token
        self.pool = nn.Linear(dim, 1)
        self.head = nn.Linear(dim, num_classes)
        self._init()

    def _init(self) -> None:
        nn.init.trunc_normal_(self.pos_embed, std=0.2)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")

    def no_weight_decay(self) -> set[str]:
        """Parameters the trainer does not decay: the position embedding."""
        return {"pos_embed"}

    def forward(self, images: Tensor) -> Tensor:
        if (
            images.dim() != 4
            or images.shape[-1] != self.img_size
            or images.shape[-2] != self.img_size
        ):
            raise ValueError(
                f"CompactTransformer: expected images (B, 3, {self.img_size}, {self.img_size}), "
                f"got {tuple(images.shape)}"
            )
        # (B, N, dim)
        x = (
            self.tokenizer(images).flatten(2).transpose(1, 2)
            + self.pos_embed
        )
        for block in self.blocks:
            x = block(x)
        x = self.norm(x)
        # (B, N, 1)
        weights = torch.softmax(self.pool(x).float(), dim=1).to(x.dtype)
        return self.head((weights * x).sum(dim=1))
