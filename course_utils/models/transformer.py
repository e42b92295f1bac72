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
``decode(tgt, memory, src_keep)``.
"""
from __future__ import annotations

import math

import torch.nn.functional as F
from torch import Tensor, nn

from ..references.masking import causal_mask, key_mask
from ..references.multihead import MultiHeadAttention
from ..references.positional import sinusoidal_encoding

__all__ = ["EncoderLayer", "DecoderLayer", "Encoder", "Decoder", "Seq2SeqTransformer", "decoder_self_mask"]


def decoder_self_mask(tgt_keep: Tensor) -> Tensor:
    """``(B, t)`` real-token mask -> bool ``(B, 1, t, t)``: causal and not padding."""
    t = tgt_keep.shape[-1]
    return key_mask(tgt_keep) & causal_mask(t, device=tgt_keep.device)


class EncoderLayer(nn.Module):
    """Self-attention and a feed-forward block, each with a residual connection and a LayerNorm.

    ``forward(x (B, n, d_model), mask)`` -> ``(B, n, d_model)``; ``mask`` broadcasts against the
    ``(B, H, n, n)`` scores (e.g. ``key_mask(src_keep)``).  The last attention weights are kept
    in ``self.attn_weights`` (detached), for plots.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0, norm_first: bool = False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)  # inside the feed-forward block
        self.dropout1 = nn.Dropout(dropout)  # on each sublayer's output, before the residual sum
        self.dropout2 = nn.Dropout(dropout)
        self.attn_weights: Tensor | None = None

    def _sa(self, x: Tensor, mask: Tensor | None) -> Tensor:
        out, weights = self.self_attn(x, x, x, mask)
        self.attn_weights = weights.detach()
        return self.dropout1(out)

    def _ff(self, x: Tensor) -> Tensor:
        return self.dropout2(self.linear2(self.dropout(F.relu(self.linear1(x)))))

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        if self.norm_first:  # pre-norm: the residual stream x itself is never normalised
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

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0, norm_first: bool = False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
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
        out, weights = self.cross_attn(x, memory, memory, mask)  # queries: decoder; keys, values: encoder
        self.cross_weights = weights.detach()
        return self.dropout2(out)

    def _ff(self, x: Tensor) -> Tensor:
        return self.dropout3(self.linear2(self.dropout(F.relu(self.linear1(x)))))

    def forward(self, x: Tensor, memory: Tensor, self_mask: Tensor | None = None,
                memory_mask: Tensor | None = None) -> Tensor:
        if self.norm_first:
            x = x + self._sa(self.norm1(x), self_mask)
            x = x + self._ca(self.norm2(x), memory, memory_mask)
            return x + self._ff(self.norm3(x))
        x = self.norm1(x + self._sa(x, self_mask))
        x = self.norm2(x + self._ca(x, memory, memory_mask))
        return self.norm3(x + self._ff(x))


class Encoder(nn.Module):
    """``num_layers`` encoder layers and a final LayerNorm: ``forward(x (B, n, d), mask)``."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, num_layers: int, dropout: float = 0.0,
                 norm_first: bool = False):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout, norm_first)
                                    for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)


class Decoder(nn.Module):
    """``num_layers`` decoder layers and a final LayerNorm: ``forward(x, memory, self_mask, memory_mask)``."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, num_layers: int, dropout: float = 0.0,
                 norm_first: bool = False):
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(d_model, num_heads, d_ff, dropout, norm_first)
                                    for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x: Tensor, memory: Tensor, self_mask: Tensor | None = None,
                memory_mask: Tensor | None = None) -> Tensor:
        for layer in self.layers:
            x = layer(x, memory, self_mask, memory_mask)
        return self.norm(x)


class Seq2SeqTransformer(nn.Module):
    """Token embeddings + sinusoidal positions + ``Encoder`` + ``Decoder`` + a linear readout.

    ``forward(src (B, n), tgt (B, t))`` -> logits ``(B, t, tgt_vocab)`` with teacher forcing:
    position i of the logits predicts ``tgt[:, i + 1]`` from ``tgt[:, :i + 1]`` and the whole
    source.  For decoding, the two halves are separate: ``memory = encode(src)`` once, then
    ``decode(tgt, memory, src_keep)`` for every longer prefix, where ``src_keep = src != pad_id``.
    """

    def __init__(self, src_vocab: int, tgt_vocab: int, d_model: int = 64, num_heads: int = 4,
                 num_encoder_layers: int = 2, num_decoder_layers: int = 2, d_ff: int = 256,
                 dropout: float = 0.0, max_len: int = 128, pad_id: int = 0, norm_first: bool = True):
        super().__init__()
        self.config = dict(src_vocab=src_vocab, tgt_vocab=tgt_vocab, d_model=d_model, num_heads=num_heads,
                           num_encoder_layers=num_encoder_layers, num_decoder_layers=num_decoder_layers,
                           d_ff=d_ff, dropout=dropout, max_len=max_len, pad_id=pad_id, norm_first=norm_first)
        self.d_model, self.pad_id, self.max_len = d_model, pad_id, max_len
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        # A buffer that is not saved: it is a fixed function of (max_len, d_model).
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model), persistent=False)
        self.embed_dropout = nn.Dropout(dropout)
        self.encoder = Encoder(d_model, num_heads, d_ff, num_encoder_layers, dropout, norm_first)
        self.decoder = Decoder(d_model, num_heads, d_ff, num_decoder_layers, dropout, norm_first)
        self.out = nn.Linear(d_model, tgt_vocab)
        # nn.Embedding starts at N(0, 1); times sqrt(d_model) that would drown the position code
        # (entries in [-1, 1]).  Starting at N(0, 1/d_model) makes both of size 1 after the scaling.
        for embedding in (self.src_embed, self.tgt_embed):
            nn.init.normal_(embedding.weight, std=d_model ** -0.5)

    def _embed(self, embedding: nn.Embedding, tokens: Tensor) -> Tensor:
        n = tokens.shape[-1]
        if n > self.max_len:
            raise ValueError(f"Seq2SeqTransformer: {n} positions but max_len={self.max_len}")
        # sqrt(d_model) scales the embeddings up to the size of the position code, as in the paper.
        x = embedding(tokens) * math.sqrt(self.d_model) + self.pe[:n].to(embedding.weight.dtype)
        return self.embed_dropout(x)

    def encode(self, src: Tensor, src_keep: Tensor | None = None) -> Tensor:
        """``src (B, n)`` token ids -> memory ``(B, n, d_model)``; padding found from ``pad_id`` by default."""
        if src_keep is None:
            src_keep = src != self.pad_id
        return self.encoder(self._embed(self.src_embed, src), key_mask(src_keep))

    def decode(self, tgt: Tensor, memory: Tensor, src_keep: Tensor | None) -> Tensor:
        """Logits ``(B, t, tgt_vocab)`` for the prefix ``tgt (B, t)``.

        ``src_keep (B, n)`` says which memory positions are real source tokens (``src != pad_id``);
        pass ``None`` only if the source has no padding.
        """
        self_mask = decoder_self_mask(tgt != self.pad_id)
        memory_mask = None if src_keep is None else key_mask(src_keep)
        x = self.decoder(self._embed(self.tgt_embed, tgt), memory, self_mask, memory_mask)
        return self.out(x)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        src_keep = src != self.pad_id
        return self.decode(tgt, self.encode(src, src_keep), src_keep)

    def cross_attention(self) -> list[Tensor]:
        """The cross-attention weights of the last ``decode`` call, one ``(B, H, t, n)`` per layer."""
        return [layer.cross_weights for layer in self.decoder.layers]
