"""Chapter 07's ViT as the trainer runs it: the reference's modules and parameters, attention fused.

``FastViT`` is ``references.vit.ViT`` with ``FastEncoderBlock`` blocks: the same constructor, the
same parameters created in the same order (the same seed gives the same weights; a stored
``ViT`` state dict loads either way), the same outputs up to rounding.  Only the attention
inside each block is computed differently: one ``(3d, d)`` projection and PyTorch's
``scaled_dot_product_attention``, without materialising the weights.  ``attention_maps`` still
reads the weights through the reference's readable path.

Levers the reference does not have, for chapter 08's ablations and chapter 07's recipes
(all off by default, and then nothing is drawn from the random generator that the reference does
not draw): ``drop_path`` (stochastic depth, section 8.2: each block's two residual branches are
dropped per sample with a probability rising linearly from 0 at the first block to
``drop_path`` at the last), ``init="pytorch"`` (PyTorch's default initialisation of each layer
instead of the course's truncated normal, the one a learner gets who writes no initialisation)
``pool="seq"`` (sequence pooling, as in Compact Convolutional Transformers: no CLS token; the
head reads a learned softmax-weighted mean of the patch tokens), ``stem_convs`` (that many
conv layers per width of the convolutional tokenizer, ``references.vit.ConvTokenizer``'s
``convs_per_stage``), ``extra_sizes`` (smaller square images the model also takes, its
learned positions resampled to their coarser grid: the early epochs of a progressively resized
recipe train on them) and ``whiten_stem`` (the tokenizer's first convolution fixed to patch
whitening filters from training images, ``init_from_data``, and with its batch norm's scale and
shift, not trained: no gradient then flows through the full-resolution layer, the step's most
memory-bound stage), ``mirror`` (``models.mirror``: every layer tied to its left-right
mirror, so that an image and its mirror get the same logits by construction),
``mirror_positions`` (the position table alone tied: columns ``c`` and ``grid - 1 - c`` of the
token grid share a vector), ``tokenizer="airbench"`` (``models.airbench``: a fixed whitening
layer and conv groups that pool before they normalise, one group per width of ``stem_channels``,
in place of the reference's ``ConvTokenizer``; ``init_from_data`` sets its whitening filters) and
``locality`` (locality self-attention, Lee, Lee and Song, 2021, "Vision Transformer for Small-Size
Datasets": in every block no token attends to itself, and the softmax's temperature, the
``sqrt(dim / heads)`` that scores are divided by, is a learned number per block, so that training
can sharpen attention that small data sets leave too flat).

Shapes: tokens ``(B, N, dim)`` (``N`` counts the CLS token when there is one); heads
``(B, H, N, dim / H)``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torchvision.ops import StochasticDepth

from ..references.multihead import (
    MultiHeadAttention,
    merge_heads,
    split_heads,
)
from ..references.positional import resample_grid
from ..references.vit import ConvTokenizer, EncoderBlock, ViT
from .airbench import AirbenchTokenizer
from .mirror import make_mirror_symmetric, make_positions_symmetric
from .whitening import whitening_filters

__all__ = ["FastEncoderBlock", "FastViT"]


class FastEncoderBlock(EncoderBlock):
    """``references.vit.EncoderBlock`` with fused self-attention: ``forward(x (B, N, dim)) -> (B, N, dim)``.

    ``drop_path`` (identity unless ``FastViT`` sets a rate) drops each residual branch per sample;
    ``temperature`` (None unless ``FastViT(locality=True)`` sets it) makes the attention local.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # no parameters by default: the state dict is the reference's
        self.drop_path: nn.Module = nn.Identity()
        self.temperature: nn.Parameter | None = None

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.drop_path(
            self.drop1(
                fused_self_attention(
                    self.attn, self.norm1(x), temperature=self.temperature
                )
            )
        )
        return x + self.drop_path(self.mlp(self.norm2(x)))


class FastViT(ViT):
    """``references.vit.ViT`` built from ``FastEncoderBlock``: ``forward(images (B, C, H, W)) -> (B, classes)``.

    ``drop_path``: the last block's stochastic-depth rate (0: off); ``init``: ``"course"`` (the
    reference's truncated normal) or ``"pytorch"`` (each layer's own default); ``pool``: ``"cls"``
    (the reference's CLS token) or ``"seq"`` (sequence pooling: ``pos_embed (1, N, dim)``, no
    ``cls_token``, and a ``seq_pool`` layer scoring each token); ``stem_convs``: conv layers per
    tokenizer width, one number for all or a tuple with one per width (1: the reference's tokenizer);
    ``tokenizer``: ``"conv"`` (the reference's, with ``stem_convs``) or ``"airbench"`` (with
    ``tail_convs``: layers at its last width before the pool to the token grid); ``locality``: locality
    self-attention in every block.  ``attention_maps``, inherited, reads ``tokens``: ``(B, H, N, N)`` per
    block without a CLS token (refused with ``locality``, which the reference's attention lacks).
    """

    block_type = FastEncoderBlock

    def __init__(
        self,
        *args,
        drop_path: float = 0.0,
        init: str = "course",
        pool: str = "cls",
        stem_convs: int | tuple[int, ...] = 1,
        extra_sizes: tuple[int, ...] = (),
        whiten_stem: bool = False,
        mirror: bool = False,
        mirror_positions: bool = False,
        tokenizer: str = "conv",
        tail_convs: int = 0,
        locality: bool = False,
        **kwargs,
    ):
        if tokenizer not in ("conv", "airbench"):
            raise ValueError(
                f"FastViT: tokenizer={tokenizer!r} is not a choice; choose 'conv' or 'airbench'"
            )
        if pool not in ("cls", "seq"):
            raise ValueError(
                f"FastViT: pool={pool!r} is not a choice; choose 'cls' or 'seq'"
            )
        if init not in ("course", "pytorch"):
            raise ValueError(
                f"FastViT: init={init!r} is not a choice; choose 'course' or 'pytorch'"
            )
        if not 0.0 <= drop_path < 1.0:
            raise ValueError(
                f"FastViT: drop_path={drop_path!r} must be in [0, 1)"
            )
        self._course_init = init == "course"
        super().__init__(*args, **kwargs)
        patch = self.patch_embed.patch_size
        for side in extra_sizes:
            if not (
                isinstance(side, int)
                and 0 < side < self.img_size
                and side % patch == 0
            ):
                raise ValueError(
                    f"FastViT: extra_sizes={tuple(extra_sizes)!r}: each must be a whole number of "
                    f"pixels below img_size {self.img_size} and divisible by the patch size {patch} "
                    f"(e.g. extra_sizes=({self.img_size - patch},))"
                )
        self.extra_sizes = tuple(extra_sizes)
        if tokenizer == "airbench":
            refused = [
                name
                for name, on in (
                    ("stem_convs", stem_convs != 1),
                    ("extra_sizes", bool(extra_sizes)),
                    ("whiten_stem", whiten_stem),
                    ("mirror", mirror),
                )
                if on
            ]
            if not isinstance(self.patch_embed, ConvTokenizer) or refused:
                raise ValueError(
                    "FastViT: tokenizer='airbench' needs stem_channels (one width per group) and "
                    "whitens its own first layer; it takes none of stem_convs, extra_sizes, "
                    f"whiten_stem, mirror (given: {', '.join(refused) or 'no stem_channels'})"
                )
            old = self.patch_embed
            self.patch_embed = AirbenchTokenizer(
                self.img_size,
                old.patch_size,
                old.in_chans,
                old.dim,
                old.channels,
                tail_convs=tail_convs,
            )
        elif tail_convs:
            raise ValueError(
                f"FastViT: tail_convs={tail_convs!r} belongs to tokenizer='airbench'; give "
                "tokenizer='airbench' or leave tail_convs at 0"
            )
        if stem_convs != 1:
            if not isinstance(self.patch_embed, ConvTokenizer):
                raise ValueError(
                    "FastViT: stem_convs needs a convolutional tokenizer; give stem_channels too"
                )
            old = self.patch_embed
            # no initialisation of the reference's touches a convolution or a batch norm, so
            # the new tokenizer keeps PyTorch's defaults under either init
            self.patch_embed = ConvTokenizer(
                self.img_size,
                old.patch_size,
                old.in_chans,
                old.dim,
                old.channels,
                convs_per_stage=stem_convs,
            )
        depth = len(self.blocks)
        for i, block in enumerate(self.blocks):
            rate = drop_path * i / max(depth - 1, 1)
            if rate > 0:
                block.drop_path = StochasticDepth(rate, mode="row")
        if not isinstance(locality, bool):
            raise TypeError(
                f"FastViT: locality={locality!r} must be True or False"
            )
        self.locality = locality
        if locality and self.patch_embed.num_patches + (pool == "cls") < 2:
            raise ValueError(
                "FastViT: locality=True needs at least two tokens (no token attends to itself); "
                "use a smaller patch_size or pool='cls'"
            )
        if locality:
            # after the reference's parameters, so that locality=False draws what the reference
            # draws; each block starts at the usual temperature sqrt(head size)
            for block in self.blocks:
                block.temperature = nn.Parameter(
                    torch.tensor(float(block.attn.head_dim) ** 0.5)
                )
        self.seq_pool: nn.Linear | None = None
        if pool == "seq":
            # the patch tokens' positions, without the CLS token's slot; created after the
            # reference's parameters so that "cls" draws exactly what the reference draws
            self.pos_embed = nn.Parameter(
                self.pos_embed.detach()[:, 1:].clone()
            )
            del self.cls_token
            self.seq_pool = nn.Linear(self.head.in_features, 1)
            # zero scores: training starts from the plain mean of the tokens
            nn.init.zeros_(self.seq_pool.weight)
            nn.init.zeros_(self.seq_pool.bias)
        # after the tokenizer is final (stem_convs replaces it)
        self.whiten_stem = bool(whiten_stem)
        if self.whiten_stem:
            if mirror:
                raise ValueError(
                    "FastViT: whiten_stem and mirror cannot be combined (whitening filters come "
                    "in a filter-and-negative pairing, not a mirror pairing); choose one"
                )
            self._freeze_first_layer()
        self.mirror = bool(mirror)
        if self.mirror and mirror_positions:
            raise ValueError(
                "FastViT: mirror already ties the position table (with the channel pairs); give "
                "mirror or mirror_positions, not both"
            )
        if self.mirror:
            # last: it ties the final tokenizer, blocks and embeddings as initialised
            make_mirror_symmetric(self)
        if mirror_positions:
            make_positions_symmetric(self)

    def _first_layer(self) -> tuple[nn.Conv2d, nn.BatchNorm2d]:
        net = getattr(self.patch_embed, "net", None)
        if not (
            isinstance(self.patch_embed, ConvTokenizer)
            and isinstance(net[0], nn.Conv2d)
            and isinstance(net[1], nn.BatchNorm2d)
        ):
            raise ValueError(
                "FastViT: whiten_stem needs a convolutional tokenizer; give stem_channels too"
            )
        return net[0], net[1]

    def _freeze_first_layer(self) -> None:
        conv, norm = self._first_layer()
        dims = conv.in_channels * conv.kernel_size[0] * conv.kernel_size[1]
        if conv.out_channels % 2 or conv.out_channels > 2 * dims:
            raise ValueError(
                f"FastViT: whiten_stem needs an even first width of at most {2 * dims} (a filter and "
                f"its negative per direction of a {conv.kernel_size[0]}x{conv.kernel_size[1]} patch); "
                f"got {conv.out_channels}: change stem_channels[0]"
            )
        for p in (conv.weight, norm.weight, norm.bias):
            p.requires_grad_(False)

    @torch.no_grad()
    def init_from_data(self, images: Tensor) -> None:
        """With ``whiten_stem``, set the first convolution to the whitening filters of ``images (N, 3,
        H, W)`` (normalised training images; ``models.whitening``); the airbench tokenizer sets its
        own; otherwise nothing."""
        if isinstance(self.patch_embed, AirbenchTokenizer):
            self.patch_embed.init_from_data(images)
            return
        if not self.whiten_stem:
            return
        conv, _ = self._first_layer()
        filters = whitening_filters(
            images, conv.out_channels, kernel=conv.kernel_size[0]
        )
        conv.weight.copy_(filters.to(conv.weight.dtype))

    def _init(self) -> None:
        if self._course_init:
            super()._init()
        else:  # PyTorch's defaults for the layers; the two embeddings have none, so small random ones
            nn.init.normal_(self.pos_embed, std=0.02)
            nn.init.normal_(self.cls_token, std=0.02)

    def no_weight_decay(self) -> set[str]:
        """The reference's names that exist here; a tied one (``mirror``) under its stored name."""
        names = set(dict(self.named_parameters()))
        found = set()
        for name in super().no_weight_decay():
            for stored in (name, f"parametrizations.{name}.original"):
                if stored in names:
                    found.add(stored)
        return found

    def check_images(self, images: Tensor) -> None:
        """The reference's check, which also lets through the square ``extra_sizes``."""
        if images.dim() == 4 and self._extra_side(images) is not None:
            return
        super().check_images(images)

    def _extra_side(self, images: Tensor) -> int | None:
        h, w = images.shape[-2:]
        return h if h == w and h in self.extra_sizes else None

    def positions(self, images: Tensor) -> Tensor:
        """``pos_embed`` for these images: ``(1, N, dim)``, resampled (bicubic,
        ``references.positional.resample_grid``) to the coarser grid of an ``extra_sizes`` image.
        The resampling is differentiable, so training on small images trains the full grid's table."""
        side = self._extra_side(images)
        if side is None:
            return self.pos_embed
        patch = self.patch_embed.patch_size
        return resample_grid(
            self.pos_embed,
            self.img_size // patch,
            side // patch,
            num_prefix_tokens=0 if self.seq_pool is not None else 1,
        )

    def tokens(self, images: Tensor) -> Tensor:
        """``(B, C, H, W) -> (B, N, dim)``: the reference's tokens, or with ``pool="seq"`` the
        patch tokens alone, plus positions."""
        if self.seq_pool is None and self._extra_side(images) is None:
            return super().tokens(images)
        self.check_images(images)
        x = self.patch_embed(images)
        if self.seq_pool is None:
            cls = self.cls_token.expand(x.shape[0], -1, -1)
            x = torch.cat([cls, x], dim=1)
        return self.dropout(x + self.positions(images))

    def forward(self, images: Tensor) -> Tensor:
        if self.seq_pool is None:
            return super().forward(images)
        x = self.tokens(images)
        for block in self.blocks:
            x = block(x)
        x = self.norm(x)
        # (B, N, 1): a softmax over the tokens, in float32 under autocast
        weights = torch.softmax(self.seq_pool(x).float(), dim=1).to(x.dtype)
        return self.head((weights * x).sum(dim=1))

    def attention_maps(self, images: Tensor) -> list[Tensor]:
        if self.locality:
            raise ValueError(
                "FastViT.attention_maps reads the reference's attention, which has no locality "
                "(no masked diagonal, no learned temperature); read maps from a model built with "
                "locality=False"
            )
        return super().attention_maps(images)


def fused_self_attention(
    mha: MultiHeadAttention, x: Tensor, temperature: Tensor | None = None
) -> Tensor:
    """``mha(x, x, x)[0]`` for ``x (B, N, d)`` without the ``(B, H, N, N)`` weights kept for backward.

    ``temperature`` (a scalar tensor): locality self-attention instead, the scores divided by it
    rather than by ``sqrt(d / H)`` and each token's score for itself left out of its softmax."""
    # One (3d, d) matmul instead of three (d, d) ones: fewer, larger kernels are faster on a CPU.
    # Under autocast the weights are cast before they are joined: the copy moves half the bytes,
    # and F.linear finds them already in the compute dtype.
    dtype = _compute_dtype(x)
    weight = torch.cat(
        [
            mha.w_q.weight.to(dtype),
            mha.w_k.weight.to(dtype),
            mha.w_v.weight.to(dtype),
        ]
    )
    bias = (
        None
        if mha.w_q.bias is None
        else torch.cat([mha.w_q.bias, mha.w_k.bias, mha.w_v.bias]).to(dtype)
    )
    q, k, v = (
        split_heads(t, mha.num_heads)
        for t in F.linear(x, weight, bias).chunk(3, dim=-1)
    )
    p = mha.dropout.p if mha.training else 0.0
    n = x.shape[-2]
    # (N, N), True where a query may attend: everywhere but the diagonal under locality
    others = (
        None
        if temperature is None
        else ~torch.eye(n, dtype=torch.bool, device=x.device)
    )
    if (
        x.device.type == "cpu"
        and torch.is_grad_enabled()
        and _low_precision(q)
    ):
        # PyTorch's fused CPU kernel has a slow bf16 backward pass for short sequences: there,
        # two plain matmuls and a softmax train the whole ViT faster.  In float32 the fused
        # kernel is the faster one (benchmarks/vit_throughput.py measures both paths).  The scale is
        # applied to the contiguous scores, not to the strided q view (one copy fewer).
        scale = (
            q.shape[-1] ** -0.5 if temperature is None else 1 / temperature
        )
        scores = (q @ k.transpose(-2, -1)) * scale
        if others is not None:
            scores = scores.masked_fill(~others, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        attended = F.dropout(weights, p) @ v
    else:
        if temperature is not None:
            # the kernel divides by sqrt(d / H) itself and takes no tensor scale: fold the
            # learned one into q so that the gradient reaches it
            q = q * (q.shape[-1] ** 0.5 / temperature)
        attended = F.scaled_dot_product_attention(
            q, k, v, attn_mask=others, dropout_p=p
        )
    return mha.w_o(merge_heads(attended))


def _compute_dtype(x: Tensor) -> torch.dtype:
    """The dtype matmuls run in: the autocast dtype when CPU/CUDA autocast is on, else ``x``'s."""
    device = x.device.type if x.device.type in ("cpu", "cuda") else "cpu"
    try:
        if torch.is_autocast_enabled(device):
            return torch.get_autocast_dtype(device)
    except (TypeError, AttributeError):  # torch < 2.4: no device argument
        if device == "cpu" and torch.is_autocast_cpu_enabled():
            return torch.get_autocast_cpu_dtype()
        if device == "cuda" and torch.is_autocast_enabled():
            return torch.get_autocast_gpu_dtype()
    return x.dtype


def _low_precision(t: Tensor) -> bool:
    """True under CPU autocast or for half-precision tensors."""
    try:
        autocast = torch.is_autocast_enabled("cpu")
    except TypeError:  # torch < 2.4
        autocast = torch.is_autocast_cpu_enabled()
    return autocast or t.dtype in (torch.bfloat16, torch.float16)
