"""A small encoder-decoder Transformer built from the course's pieces, and how to decode with it (ch. 06).

Pieces: ``MultiHeadAttention`` (chapter 04), ``sinusoidal_encoding`` (chapter 05), the masks
and ``masked_softmax`` of ``references.masking``.  Layers follow ``torch.nn.Transformer``'s
semantics where the two overlap, so a test can copy the weights over and compare outputs:

- ``norm_first=False`` is the paper's post-norm layer, ``x = LN(x + Sublayer(x))``;
  ``norm_first=True`` is pre-norm, ``x = x + Sublayer(LN(x))``;
- ``Encoder`` and ``Decoder`` end with a LayerNorm, as ``nn.Transformer``'s stacks do (needed
  with pre-norm, whose residual stream is never normalised otherwise);
- the feed-forward block is ``linear2(dropout(relu(linear1(x))))``.

Masks are bool, True = may attend (PyTorch's bool masks mean the opposite).  The model takes
token ids and finds padding itself (``tokens != pad_id``).

The model has the interface the decoders of ``references.decoding`` use: ``encode(src)`` and
``decode(tgt, memory, src_keep)``.  For decoding one token at a time it also has an incremental
path, ``decode_step(token, memory, src_keep, cache)``: each decoder layer keeps the keys and
values of its self-attention for the positions already fed (``LayerCache``, ``DecoderCache``),
so a step runs the decoder on the newest position only, instead of on the whole prefix again.
"""

from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..references.masking import causal_mask, key_mask, masked_softmax
from ..references.multihead import (
    MultiHeadAttention,
    merge_heads,
    split_heads,
)
from ..references.positional import sinusoidal_encoding

__all__ = [
    "EncoderLayer",
    "DecoderLayer",
    "Encoder",
    "Decoder",
    "Seq2SeqTransformer",
    "decoder_self_mask",
    "LayerCache",
    "DecoderCache",
]


def decoder_self_mask(tgt_keep: Tensor) -> Tensor:
    """``(B, t)`` real-token mask -> bool ``(B, 1, t, t)``: causal and not padding."""
    t = tgt_keep.shape[-1]
    return key_mask(tgt_keep) & causal_mask(t, device=tgt_keep.device)


@dataclasses.dataclass
class LayerCache:
    """One decoder layer's keys and values, kept between decoding steps; heads split, ``(B, H, ., D)``.

    ``self_k``, ``self_v``: ``(B, H, t, D)``, the self-attention keys and values of the t positions
    fed so far (each step appends one).  ``cross_k``, ``cross_v``: ``(B, H, n, D)``, the
    cross-attention keys and values, projected from the encoder's memory once per source.
    """

    self_k: Tensor
    self_v: Tensor
    cross_k: Tensor
    cross_v: Tensor


@dataclasses.dataclass
class DecoderCache:
    """What ``Seq2SeqTransformer.decode_step`` keeps between steps.

    ``layers``: one ``LayerCache`` per decoder layer; ``tgt_keep (B, t)``: which of the t tokens fed
    so far are real (not ``pad_id``: the padding after a finished sequence's EOS is masked as
    keys, as ``decode`` masks it); ``memory_mask``: ``(B, 1, 1, n)`` from ``src_keep``, or None.
    """

    layers: list[LayerCache]
    tgt_keep: Tensor
    memory_mask: Tensor | None

    @property
    def length(self) -> int:
        """t, the number of positions fed so far (the position of the next token)."""
        return self.tgt_keep.shape[1]


def _attend(
    attn: MultiHeadAttention,
    query: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None,
) -> Tensor:
    """``attn``'s forward pass with keys and values already projected and split into heads.

    ``query (B, m, d_model)``, ``k``, ``v`` ``(B, H, n, D)`` -> ``(B, m, d_model)``: the same
    operations as ``MultiHeadAttention.forward`` after its key and value projections, so a cached
    step computes what the full pass computes for its row.
    """
    q = split_heads(attn.w_q(query), attn.num_heads)  # (B, H, m, D)
    # (B, H, m, n)
    scores = q @ k.transpose(-2, -1) / math.sqrt(attn.head_dim)
    weights = masked_softmax(scores, mask, dim=-1)
    return attn.w_o(merge_heads(attn.dropout(weights) @ v))


class EncoderLayer(nn.Module):
    """Self-attention and a feed-forward block, each with a residual connection and a LayerNorm.

    ``forward(x (B, n, d_model), mask)`` -> ``(B, n, d_model)``; ``mask`` broadcasts against the
    ``(B, H, n, n)`` scores (e.g. ``key_mask(src_keep)``).  The last attention weights are kept
    in ``self.attn_weights`` (detached), for plots.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = False,
    ):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(
            d_model, num_heads, dropout=dropout
        )
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)  # inside the feed-forward block
        # on each sublayer's output, before the residual sum
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.attn_weights: Tensor | None = None

    def _sa(self, x: Tensor, mask: Tensor | None) -> Tensor:
        out, weights = self.self_attn(x, x, x, mask)
        self.attn_weights = weights.detach()
        return self.dropout1(out)

    def _ff(self, x: Tensor) -> Tensor:
        return self.dropout2(
            self.linear2(self.dropout(F.relu(self.linear1(x))))
        )

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        # pre-norm: the residual stream x itself is never normalised
        if self.norm_first:
            x = x + self._sa(self.norm1(x), mask)
            return x + self._ff(self.norm2(x))
        x = self.norm1(x + self._sa(x, mask))  # post-norm, as in the paper
        return self.norm2(x + self._ff(x))


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention to the encoder's output, feed-forward.

    ``forward(x (B, t, d), memory (B, n, d), self_mask, memory_mask)`` -> ``(B, t, d)``.
    In cross-attention the queries come from the decoder (``x``) and the keys and values from
    the encoder (``memory``), so its weights are ``(B, H, t, n)``: one row per target
    position, one column per source position.  The last weights of both attentions are kept in
    ``self.self_weights`` and ``self.cross_weights`` (detached).
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = False,
    ):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(
            d_model, num_heads, dropout=dropout
        )
        self.cross_attn = MultiHeadAttention(
            d_model, num_heads, dropout=dropout
        )
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)
        self.self_weights: Tensor | None = None
        self.cross_weights: Tensor | None = None

    def _sa(self, x: Tensor, mask: Tensor | None) -> Tensor:
        out, weights = self.self_attn(x, x, x, mask)
        self.self_weights = weights.detach()
        return self.dropout1(out)

    def _ca(self, x: Tensor, memory: Tensor, mask: Tensor | None) -> Tensor:
        # queries: decoder; keys, values: encoder
        out, weights = self.cross_attn(x, memory, memory, mask)
        self.cross_weights = weights.detach()
        return self.dropout2(out)

    def _ff(self, x: Tensor) -> Tensor:
        return self.dropout3(
            self.linear2(self.dropout(F.relu(self.linear1(x))))
        )

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        self_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
    ) -> Tensor:
        if self.norm_first:
            x = x + self._sa(self.norm1(x), self_mask)
            x = x + self._ca(self.norm2(x), memory, memory_mask)
            return x + self._ff(self.norm3(x))
        x = self.norm1(x + self._sa(x, self_mask))
        x = self.norm2(x + self._ca(x, memory, memory_mask))
        return self.norm3(x + self._ff(x))

    # ------------------------------------------------------------------ decoding with a cache
    def start_cache(self, memory: Tensor) -> LayerCache:
        """An empty self-attention cache and the cross-attention keys and values of ``memory (B, n, d)``.

        The memory does not change while one output is decoded, so its keys and values are
        projected here once, not at every step.
        """
        attn = self.cross_attn
        empty = memory.new_zeros(
            memory.shape[0],
            self.self_attn.num_heads,
            0,
            self.self_attn.head_dim,
        )
        return LayerCache(
            self_k=empty,
            self_v=empty,
            cross_k=split_heads(attn.w_k(memory), attn.num_heads),
            cross_v=split_heads(attn.w_v(memory), attn.num_heads),
        )

    def _sa_step(self, x: Tensor, cache: LayerCache, mask: Tensor) -> Tensor:
        attn = self.self_attn
        # The keys and values of the earlier positions do not change when a token is appended (the
        # causal mask keeps every position from seeing later ones), so only the new position's are
        # computed, and appended.  The cache holds only the past, so no causal mask is needed.
        cache.self_k = torch.cat(
            [cache.self_k, split_heads(attn.w_k(x), attn.num_heads)], dim=-2
        )
        cache.self_v = torch.cat(
            [cache.self_v, split_heads(attn.w_v(x), attn.num_heads)], dim=-2
        )
        return self.dropout1(
            _attend(attn, x, cache.self_k, cache.self_v, mask)
        )

    def _ca_step(
        self, x: Tensor, cache: LayerCache, mask: Tensor | None
    ) -> Tensor:
        return self.dropout2(
            _attend(self.cross_attn, x, cache.cross_k, cache.cross_v, mask)
        )

    def forward_step(
        self,
        x: Tensor,
        cache: LayerCache,
        self_mask: Tensor,
        memory_mask: Tensor | None = None,
    ) -> Tensor:
        """The newest position only: ``x (B, 1, d)`` -> ``(B, 1, d)``.

        Equals (to rounding) the last row of ``forward`` on the whole prefix.  Appends the new
        position's self-attention key and value to ``cache``; ``self_mask`` ``(B, 1, 1, t + 1)``
        says which of the t cached positions and the new one are real tokens.
        """
        if self.norm_first:
            x = x + self._sa_step(self.norm1(x), cache, self_mask)
            x = x + self._ca_step(self.norm2(x), cache, memory_mask)
            return x + self._ff(self.norm3(x))
        x = self.norm1(x + self._sa_step(x, cache, self_mask))
        x = self.norm2(x + self._ca_step(x, cache, memory_mask))
        return self.norm3(x + self._ff(x))


class Encoder(nn.Module):
    """``num_layers`` encoder layers and a final LayerNorm: ``forward(x (B, n, d), mask)``."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        num_layers: int,
        dropout: float = 0.0,
        norm_first: bool = False,
    ):
        super().__init__()
        self.layers = nn.ModuleList(
            EncoderLayer(d_model, num_heads, d_ff, dropout, norm_first)
            for _ in range(num_layers)
        )
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)


class Decoder(nn.Module):
    """``num_layers`` decoder layers and a final LayerNorm: ``forward(x, memory, self_mask, memory_mask)``."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        num_layers: int,
        dropout: float = 0.0,
        norm_first: bool = False,
    ):
        super().__init__()
        self.layers = nn.ModuleList(
            DecoderLayer(d_model, num_heads, d_ff, dropout, norm_first)
            for _ in range(num_layers)
        )
        self.norm = nn.LayerNorm(d_model)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        self_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
    ) -> Tensor:
        for layer in self.layers:
            x = layer(x, memory, self_mask, memory_mask)
        return self.norm(x)

    def forward_step(
        self,
        x: Tensor,
        caches: list[LayerCache],
        self_mask: Tensor,
        memory_mask: Tensor | None = None,
    ) -> Tensor:
        """``forward`` for the newest position only, ``x (B, 1, d)``, one ``LayerCache`` per layer."""
        for layer, cache in zip(self.layers, caches):
            x = layer.forward_step(x, cache, self_mask, memory_mask)
        return self.norm(x)


class Seq2SeqTransformer(nn.Module):
    """Token embeddings + sinusoidal positions + ``Encoder`` + ``Decoder`` + a linear readout.

    ``forward(src (B, n), tgt (B, t))`` -> logits ``(B, t, tgt_vocab)`` with teacher forcing:
    position i of the logits predicts ``tgt[:, i + 1]`` from ``tgt[:, :i + 1]`` and the whole
    source.  For decoding, the two halves are separate: ``memory = encode(src)`` once, then
    ``decode(tgt, memory, src_keep)`` for every longer prefix, where ``src_keep = src != pad_id``;
    or ``decode_step(token, memory, src_keep, cache)`` for one new token at a time, with a cache.
    """

    def __init__(
        self,
        src_vocab: int,
        tgt_vocab: int,
        d_model: int = 64,
        num_heads: int = 4,
        num_encoder_layers: int = 2,
        num_decoder_layers: int = 2,
        d_ff: int = 256,
        dropout: float = 0.0,
        max_len: int = 128,
        pad_id: int = 0,
        norm_first: bool = True,
    ):
        super().__init__()
        self.config = dict(
            src_vocab=src_vocab,
            tgt_vocab=tgt_vocab,
            d_model=d_model,
            num_heads=num_heads,
            num_encoder_layers=num_encoder_layers,
            num_decoder_layers=num_decoder_layers,
            d_ff=d_ff,
            dropout=dropout,
            max_len=max_len,
            pad_id=pad_id,
            norm_first=norm_first,
        )
        self.d_model, self.pad_id, self.max_len = d_model, pad_id, max_len
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        # A buffer that is not saved: it is a fixed function of (max_len, d_model).
        self.register_buffer(
            "pe", sinusoidal_encoding(max_len, d_model), persistent=False
        )
        self.embed_dropout = nn.Dropout(dropout)
        self.encoder = Encoder(
            d_model, num_heads, d_ff, num_encoder_layers, dropout, norm_first
        )
        self.decoder = Decoder(
            d_model, num_heads, d_ff, num_decoder_layers, dropout, norm_first
        )
        self.out = nn.Linear(d_model, tgt_vocab)
        # nn.Embedding starts at N(0, 1); times sqrt(d_model) that would drown the position code
        # (entries in [-1, 1]).  Starting at N(0, 1/d_model) makes both of size 1 after the scaling.
        for embedding in (self.src_embed, self.tgt_embed):
            nn.init.normal_(embedding.weight, std=d_model**-0.5)

    def _embed(self, embedding: nn.Embedding, tokens: Tensor) -> Tensor:
        n = tokens.shape[-1]
        if n > self.max_len:
            raise ValueError(
                f"Seq2SeqTransformer: {n} positions but max_len={self.max_len}"
            )
        # sqrt(d_model) scales the embeddings up to the size of the position code, as in the paper.
        x = embedding(tokens) * math.sqrt(self.d_model) + self.pe[:n].to(
            embedding.weight.dtype
        )
        return self.embed_dropout(x)

    def encode(self, src: Tensor, src_keep: Tensor | None = None) -> Tensor:
        """``src (B, n)`` token ids -> memory ``(B, n, d_model)``; padding found from ``pad_id`` by default."""
        if src_keep is None:
            src_keep = src != self.pad_id
        return self.encoder(
            self._embed(self.src_embed, src), key_mask(src_keep)
        )

    def decode(
        self, tgt: Tensor, memory: Tensor, src_keep: Tensor | None
    ) -> Tensor:
        """Logits ``(B, t, tgt_vocab)`` for the prefix ``tgt (B, t)``.

        ``src_keep (B, n)`` says which memory positions are real source tokens (``src != pad_id``);
        pass ``None`` only if the source has no padding.
        """
        self_mask = decoder_self_mask(tgt != self.pad_id)
        memory_mask = None if src_keep is None else key_mask(src_keep)
        x = self.decoder(
            self._embed(self.tgt_embed, tgt), memory, self_mask, memory_mask
        )
        return self.out(x)

    def start_cache(
        self, memory: Tensor, src_keep: Tensor | None
    ) -> DecoderCache:
        """An empty ``DecoderCache`` for ``memory (B, n, d_model)``, with each layer's cross-attention
        keys and values already projected (they depend on the source only)."""
        return DecoderCache(
            layers=[
                layer.start_cache(memory) for layer in self.decoder.layers
            ],
            tgt_keep=torch.zeros(
                memory.shape[0], 0, dtype=torch.bool, device=memory.device
            ),
            memory_mask=None if src_keep is None else key_mask(src_keep),
        )

    def decode_step(
        self,
        token: Tensor,
        memory: Tensor,
        src_keep: Tensor | None,
        cache: DecoderCache | None = None,
    ) -> tuple[Tensor, DecoderCache]:
        """Logits ``(B, tgt_vocab)`` for the token after ``token``, with cached keys and values.

        ``token (B,)`` (or ``(B, 1)``) is the newest decoder input: ``BOS`` at the first call, with
        ``cache=None``; then each token chosen.  Returns the logits and the cache, which now holds
        one more position (the same object, updated: pass it to the next call).  After feeding
        ``ys[:, 0], ..., ys[:, t-1]`` one by one, the logits equal (to rounding)
        ``decode(ys[:, :t], memory, src_keep)[:, -1]``, the full recomputation, but the step runs
        the decoder on one position instead of t.  ``memory`` and ``src_keep`` are read at the
        first call only (the cache keeps their projections and the mask).
        """
        if cache is None:
            cache = self.start_cache(memory, src_keep)
        t = cache.length  # the new token's position
        if t >= self.max_len:
            raise ValueError(
                f"Seq2SeqTransformer.decode_step: position {t} but max_len={self.max_len}"
            )
        token = token.reshape(-1, 1)  # (B, 1)
        # The same operations as _embed, for position t only.
        x = self.tgt_embed(token) * math.sqrt(self.d_model) + self.pe[
            t : t + 1
        ].to(self.tgt_embed.weight.dtype)
        x = self.embed_dropout(x)
        # (B, t + 1)
        cache.tgt_keep = torch.cat(
            [cache.tgt_keep, token != self.pad_id], dim=1
        )
        x = self.decoder.forward_step(
            x, cache.layers, key_mask(cache.tgt_keep), cache.memory_mask
        )
        return self.out(x)[:, 0], cache

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        src_keep = src != self.pad_id
        return self.decode(tgt, self.encode(src, src_keep), src_keep)

    def cross_attention(self) -> list[Tensor]:
        """The cross-attention weights of the last ``decode`` call, one ``(B, H, t, n)`` per layer."""
        return [layer.cross_weights for layer in self.decoder.layers]
