"""PyTorch-built twins of the course's graded layers: what the class edition builds instead.

The class edition (``tools/class_edition.py``) holds no source of a graded reference, yet some
cells that are not exercises build the course's layer: a model to train, a layer whose weights
a test copies into the learner's.  There the class edition's
``references.multihead.MultiHeadAttention`` is this module's twin:

- the same constructor, and the same parameters created in the same order, so the same seed
  gives the same weights and ``checks.transplant`` moves them either way;
- the same call, ``forward(query, key, value, mask)`` with the course's masks (bool, True = may
  attend, a query that may attend to nothing gets zero weights), and the same returns;
- computed by PyTorch's own ``F.multi_head_attention_forward``, which the hidden tests forbid
  in a learner's answer: the twin answers no exercise (a test pastes it and sees it lose).

In eval mode it equals the reference up to rounding.  In training mode with dropout the
weights it returns are those after dropout (PyTorch's), and its dropout draws differ.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["MultiHeadAttention", "PatchEmbedding", "EncoderBlock", "ViT"]


class MultiHeadAttention(nn.Module):
    """H heads on d_model/H features each; ``forward(query (B, m, d), key (B, n, d), value (B, n, d),
    mask)`` -> out ``(B, m, d)``, weights ``(B, H, m, n)``; unbatched ``(m, d)`` inputs too."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        qkv_bias: bool | None = None,
    ):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(
                f"MultiHeadAttention: d_model={d_model} is not divisible by num_heads={num_heads}"
            )
        self.d_model, self.num_heads, self.head_dim = (
            d_model,
            num_heads,
            d_model // num_heads,
        )
        qkv_bias = bias if qkv_bias is None else qkv_bias
        # in the reference's order: the same seed gives the same weights
        self.w_q = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.w_k = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.w_v = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        mask: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        for name, t in (("query", query), ("key", key), ("value", value)):
            if t.shape[-1] != self.d_model:
                raise ValueError(
                    f"MultiHeadAttention: {name} has {t.shape[-1]} features, expected d_model={self.d_model}"
                )
        unbatched = query.dim() == 2
        if unbatched:
            query, key, value = query[None], key[None], value[None]
            mask = (
                None
                if mask is None
                else (mask[None] if mask.dim() == 3 else mask)
            )
        B, m, n, H = (
            query.shape[0],
            query.shape[1],
            key.shape[1],
            self.num_heads,
        )
        attn_mask = blocked = None
        if mask is not None:
            # (B, m, n): shared by the heads
            keep = mask.unsqueeze(-3) if mask.dim() == 3 else mask
            keep = keep.expand(B, H, m, n)
            # (B, H, m): queries that may attend to nothing
            blocked = ~keep.any(-1)
            # PyTorch's softmax over no key is NaN: let such a query see every key, zero it below
            # PyTorch: True = may NOT
            attn_mask = ~(keep | blocked[..., None]).reshape(B * H, m, n)
        biases = (
            None
            if self.w_q.bias is None
            else torch.cat([self.w_q.bias, self.w_k.bias, self.w_v.bias])
        )
        # w_o is applied after the zeroing, so PyTorch's output projection is the identity here
        identity = torch.eye(
            self.d_model, dtype=query.dtype, device=query.device
        )
        heads, weights = F.multi_head_attention_forward(
            query.transpose(0, 1),
            key.transpose(0, 1),
            value.transpose(0, 1),
            self.d_model,
            H,
            None,
            biases,
            None,
            None,
            False,
            self.dropout.p,
            identity,
            None,
            training=self.training,
            need_weights=True,
            attn_mask=attn_mask,
            use_separate_proj_weight=True,
            q_proj_weight=self.w_q.weight,
            k_proj_weight=self.w_k.weight,
            v_proj_weight=self.w_v.weight,
            average_attn_weights=False,
        )
        # (B, m, H * D), head h in features h*D:(h+1)*D
        heads = heads.transpose(0, 1)
        if blocked is not None:
            weights = weights.masked_fill(blocked[..., None], 0.0)
            # (B, m, H, D)
            per_head = heads.unflatten(-1, (H, self.head_dim))
            heads = per_head.masked_fill(
                blocked.transpose(1, 2)[..., None], 0.0
            ).flatten(-2)
        out = self.w_o(heads)
        return (out[0], weights[0]) if unbatched else (out, weights)


# ----------------------------------------------------------------------------- chapter 07's ViT
# The layers below keep the course's modules and parameter names (so the stored ViT loads and a
# test's transplant works) and compute with torchvision's ViT: each forward hands the course's
# parameters to torchvision's modules under torchvision's names (``torch.func.functional_call``).
# The hidden tests forbid torchvision's ViT parts (nn.MultiheadAttention inside them, and
# ``VisionTransformer._process_input``) in a learner's answer.


def _torchvision_vit():
    from torchvision.models import vision_transformer

    return vision_transformer


def _block_parameters(
    block: "EncoderBlock", prefix: str = ""
) -> dict[str, Tensor]:
    """A course EncoderBlock's parameters under the names of torchvision's ``EncoderBlock``."""
    attn = block.attn
    weight = torch.cat([attn.w_q.weight, attn.w_k.weight, attn.w_v.weight])
    # qkv_bias=False: torchvision's attention always has a bias
    if attn.w_q.bias is None:
        bias = weight.new_zeros(weight.shape[0])
    else:
        bias = torch.cat([attn.w_q.bias, attn.w_k.bias, attn.w_v.bias])
    out_bias = (
        attn.w_o.bias
        if attn.w_o.bias is not None
        else attn.w_o.weight.new_zeros(attn.w_o.weight.shape[0])
    )
    return {
        f"{prefix}ln_1.weight": block.norm1.weight,
        f"{prefix}ln_1.bias": block.norm1.bias,
        f"{prefix}self_attention.in_proj_weight": weight,
        f"{prefix}self_attention.in_proj_bias": bias,
        f"{prefix}self_attention.out_proj.weight": attn.w_o.weight,
        f"{prefix}self_attention.out_proj.bias": out_bias,
        f"{prefix}ln_2.weight": block.norm2.weight,
        f"{prefix}ln_2.bias": block.norm2.bias,
        f"{prefix}mlp.0.weight": block.mlp[0].weight,
        f"{prefix}mlp.0.bias": block.mlp[0].bias,
        f"{prefix}mlp.3.weight": block.mlp[3].weight,
        f"{prefix}mlp.3.bias": block.mlp[3].bias,
    }


def _shell(module: nn.Module, owner: nn.Module) -> nn.Module:
    """``module`` (built on the meta device: it holds no numbers) in ``owner``'s train/eval mode."""
    return module.train(owner.training)


class _WeighingAttention(nn.MultiheadAttention):
    """torchvision's attention, made to compute its weights explicitly when dropout draws masks (so
    that a seed drops what the course's layers drop: the fused path draws in another order) or when
    they are wanted (``keep_weights``); they are left in ``last_weights``, ``(B, H, m, n)``."""

    keep_weights = False
    last_weights: Tensor | None = None

    def forward(
        self,
        query,
        key,
        value,
        key_padding_mask=None,
        need_weights=True,
        attn_mask=None,
        average_attn_weights=True,
        is_causal=False,
    ):
        explicit = self.keep_weights or (self.training and self.dropout > 0)
        out, self.last_weights = super().forward(
            query,
            key,
            value,
            key_padding_mask=key_padding_mask,
            need_weights=explicit,
            attn_mask=attn_mask,
            average_attn_weights=False,
            is_causal=is_causal,
        )
        # batch_first attention hands back a transposed view: made contiguous, the dropout after it
        # draws its mask in the (B, m, d) order the course's layers draw it in
        return out.contiguous(), self.last_weights


def _weighing(block: nn.Module) -> nn.Module:
    """A torchvision EncoderBlock whose attention is a ``_WeighingAttention``."""
    block.self_attention.__class__ = _WeighingAttention
    return block


class PatchEmbedding(nn.Module):
    """``forward(images (B, C, S, S)) -> (B, N, dim)``: a Conv2d named ``proj`` (kernel = stride = P),
    applied by torchvision's ViT input step."""

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

    # what torchvision's VisionTransformer._process_input reads of its module
    image_size = property(lambda self: self.img_size)
    hidden_dim = property(lambda self: self.proj.out_channels)
    conv_proj = property(lambda self: self.proj)

    def forward(self, images: Tensor) -> Tensor:
        return _torchvision_vit().VisionTransformer._process_input(
            self, images
        )


class EncoderBlock(nn.Module):
    """Pre-norm encoder block with the course's modules (norm1, attn, drop1, norm2, mlp), computed by
    torchvision's ``EncoderBlock``.  ``forward(x (B, N, dim)) -> (B, N, dim)``; ``weighed(x)`` returns
    the output and the attention weights ``(B, H, N, N)``."""

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
        # not a submodule: its parameters are the ones above, lent at each call
        with torch.device("meta"):
            shell = _weighing(
                _torchvision_vit().EncoderBlock(
                    num_heads,
                    dim,
                    mlp_dim,
                    dropout,
                    dropout,
                    functools.partial(nn.LayerNorm, eps=self.norm1.eps),
                )
            )
        object.__setattr__(self, "_shell", shell)

    def forward(self, x: Tensor) -> Tensor:
        return self._run(x, keep_weights=False)[0]

    def weighed(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """``(out (B, N, dim), weights (B, H, N, N))``: what ``ViT.attention_maps`` reads."""
        out, weights = self._run(x, keep_weights=True)
        return out, weights

    def _run(
        self, x: Tensor, keep_weights: bool
    ) -> tuple[Tensor, Tensor | None]:
        shell = _shell(self._shell, self)
        shell.self_attention.keep_weights = keep_weights
        out = torch.func.functional_call(
            shell, _block_parameters(self), (x,)
        )
        return out, shell.self_attention.last_weights


class ViT(nn.Module):
    """Vision Transformer with the course's modules and parameter names (patch_embed, cls_token,
    pos_embed, dropout, blocks, norm, head), computed by torchvision's ViT encoder.
    ``forward(images (B, C, S, S)) -> logits (B, num_classes)``."""

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
            # not graded: the class edition holds its source
            from ..references.vit import (
                ConvTokenizer,
            )

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
            EncoderBlock(dim, num_heads, mlp_dim, dropout, qkv_bias=qkv_bias)
            for _ in range(depth)
        )
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)
        self.img_size = img_size
        with torch.device("meta"):
            shell = _torchvision_vit().Encoder(
                n + 1,
                depth,
                num_heads,
                dim,
                mlp_dim,
                dropout,
                dropout,
                functools.partial(nn.LayerNorm, eps=self.norm.eps),
            )
            for layer in shell.layers:
                _weighing(layer)
        object.__setattr__(self, "_shell", shell)
        self._init()

    def _init(self) -> None:
        # the course's initialisation, in its order: the same seed gives the same weights
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
        nn.init.zeros_(self.head.weight)

    def no_weight_decay(self) -> set[str]:
        """Parameters the trainer does not decay: embeddings, not weights of a map."""
        return {"cls_token", "pos_embed"}

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

    def _encoder_parameters(self) -> dict[str, Tensor]:
        params = {
            "pos_embedding": self.pos_embed,
            "ln.weight": self.norm.weight,
            "ln.bias": self.norm.bias,
        }
        for i, block in enumerate(self.blocks):
            params.update(
                _block_parameters(block, f"layers.encoder_layer_{i}.")
            )
        return params

    def _cls_and_patches(self, images: Tensor) -> Tensor:
        """``(B, C, H, W) -> (B, N+1, dim)``: the CLS token, then the patch tokens; no positions."""
        self.check_images(images)
        x = self.patch_embed(images)
        return torch.cat(
            [self.cls_token.expand(x.shape[0], -1, -1), x], dim=1
        )

    def forward(self, images: Tensor) -> Tensor:
        # torchvision's encoder adds the positions (and its dropout) itself
        x = self._cls_and_patches(images)
        x = torch.func.functional_call(
            _shell(self._shell, self), self._encoder_parameters(), (x,)
        )
        return self.head(x[:, 0])

    def tokens(self, images: Tensor) -> Tensor:
        """``(B, C, H, W) -> (B, N+1, dim)``: patch tokens behind the CLS token, plus positions (what
        the first block reads)."""
        return self.dropout(self._cls_and_patches(images) + self.pos_embed)

    @torch.no_grad()
    def attention_maps(self, images: Tensor) -> list[Tensor]:
        """Attention weights of every block, ``depth`` tensors of shape ``(B, H, N+1, N+1)`` (eval mode)."""
        x = self.tokens(images)
        maps = []
        for block in self.blocks:
            x, weights = block.weighed(x)
            maps.append(weights)
        return maps
