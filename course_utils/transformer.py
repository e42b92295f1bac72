"""A small encoder-decoder Transformer built from the course's pieces, and how to decode with it (ch. 06).

Pieces: ``MultiHeadAttention`` (chapter 04), ``sinusoidal_encoding`` (chapter 05), the masks
and ``masked_softmax`` of ``course_utils.masking``.  Layers follow ``torch.nn.Transformer``'s
semantics where the two overlap, so a test can copy the weights over and compare outputs:

- ``norm_first=False`` is the paper's post-norm layer, ``x = LN(x + Sublayer(x))``;
  ``norm_first=True`` is pre-norm, ``x = x + Sublayer(LN(x))``;
- ``Encoder`` and ``Decoder`` end with a LayerNorm, as ``nn.Transformer``'s stacks do (needed
  with pre-norm, whose residual stream is never normalised otherwise);
- the feed-forward block is ``linear2(dropout(relu(linear1(x))))``.

Masks are bool, True = may attend (PyTorch's bool masks mean the opposite).  The model takes
token ids and finds padding itself (``tokens != pad_id``).

Decoding, all three stopping at end-of-sequence: ``greedy_decode`` (graded in chapter 06),
``beam_search`` and ``sample_decode`` (temperature sampling).  They return ``(B, 1 + T)`` token
ids that start with ``bos_id``; a sequence that has produced ``eos_id`` is filled with
``pad_id`` afterwards, and the loop stops once every sequence has ended (or after
``max_new_tokens`` steps).  ``CopyModel`` is a stand-in with the same decoding interface whose
next token is known in advance, for testing decoders.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .masking import causal_mask, key_mask
from .multihead import MultiHeadAttention
from .positional import sinusoidal_encoding

__all__ = ["EncoderLayer", "DecoderLayer", "Encoder", "Decoder", "Seq2SeqTransformer",
           "greedy_decode", "beam_search", "sample_decode", "CopyModel", "decoder_self_mask"]


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


# --------------------------------------------------------------------------- decoding
def _check_decode_args(fn: str, src: Tensor, max_new_tokens: int) -> None:
    if not isinstance(src, Tensor) or src.dim() != 2 or src.is_floating_point():
        raise ValueError(f"{fn}: src must be a (B, n) tensor of token ids, got "
                         f"{getattr(src, 'dtype', type(src))} {tuple(getattr(src, 'shape', ()))}")
    if max_new_tokens < 0:
        raise ValueError(f"{fn}: max_new_tokens must be >= 0, got {max_new_tokens}")


def _step_logits(model: nn.Module, ys: Tensor, memory: Tensor, src_keep: Tensor) -> Tensor:
    return model.decode(ys, memory, src_keep)[:, -1]  # (B, V): the prediction after the last token


@torch.no_grad()
def greedy_decode(model: nn.Module, src: Tensor, max_new_tokens: int, bos_id: int, eos_id: int,
                  pad_id: int) -> Tensor:
    """Pick the most probable next token at every step.

    ``src (B, n)`` -> ``(B, 1 + T)`` token ids starting with ``bos_id``; after a sequence's
    ``eos_id`` come only ``pad_id``; T is the number of steps taken: the loop stops as soon as
    every sequence has produced ``eos_id``, or after ``max_new_tokens`` steps.
    """
    _check_decode_args("greedy_decode", src, max_new_tokens)
    src_keep = src != pad_id
    memory = model.encode(src)
    ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for _ in range(max_new_tokens):
        if done.all():
            break
        next_token = _step_logits(model, ys, memory, src_keep).argmax(dim=-1)
        next_token = next_token.masked_fill(done, pad_id)  # finished sequences only grow padding
        ys = torch.cat([ys, next_token[:, None]], dim=1)
        done = done | (next_token == eos_id)
    return ys


@torch.no_grad()
def sample_decode(model: nn.Module, src: Tensor, max_new_tokens: int, bos_id: int, eos_id: int, pad_id: int,
                  temperature: float = 1.0, generator: torch.Generator | None = None) -> Tensor:
    """Draw each next token from ``softmax(logits / temperature)``; same output format as ``greedy_decode``.

    ``temperature < 1`` sharpens the distribution (``0`` is greedy decoding), ``> 1`` flattens it.
    ``generator`` (on ``src``'s device) makes the draws reproducible.
    """
    _check_decode_args("sample_decode", src, max_new_tokens)
    if temperature < 0:
        raise ValueError(f"sample_decode: temperature must be >= 0, got {temperature}")
    src_keep = src != pad_id
    memory = model.encode(src)
    ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for _ in range(max_new_tokens):
        if done.all():
            break
        logits = _step_logits(model, ys, memory, src_keep).float()
        if temperature == 0:
            next_token = logits.argmax(dim=-1)
        else:
            probs = torch.softmax(logits / temperature, dim=-1)
            next_token = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
        next_token = next_token.masked_fill(done, pad_id)
        ys = torch.cat([ys, next_token[:, None]], dim=1)
        done = done | (next_token == eos_id)
    return ys


@torch.no_grad()
def beam_search(model: nn.Module, src: Tensor, max_new_tokens: int, bos_id: int, eos_id: int, pad_id: int,
                beam_size: int = 4, length_penalty: float = 0.0, return_scores: bool = False):
    """Keep the ``beam_size`` best partial outputs by total log-probability; same format as ``greedy_decode``.

    The score of a hypothesis is ``s(y_1..t) = sum_k log P(y_k | y_<k, src)``; each step extends
    every hypothesis by every token and keeps the top ``beam_size`` per source sequence.  A
    hypothesis that has produced ``eos_id`` is finished: it can only be extended by ``pad_id`` at
    no cost, so its score is frozen while it stays in the beam.  The search stops when every
    hypothesis of every sequence has finished (or after ``max_new_tokens`` steps) and returns
    the best one, ranked by ``score / length ** length_penalty`` (``length_penalty = 0``: the raw
    sum, which favours short outputs when lengths vary).  With ``beam_size = 1`` this is greedy
    decoding.  ``return_scores=True`` also returns the chosen hypotheses' scores ``(B,)``.
    """
    _check_decode_args("beam_search", src, max_new_tokens)
    batch, k = src.shape[0], beam_size
    src_keep = src != pad_id
    if k < 1:
        raise ValueError(f"beam_search: beam_size must be >= 1, got {beam_size}")
    memory = model.encode(src)
    # Every sequence gets k rows; at the start all k hypotheses are the same "<bos>", so only
    # the first may be extended (the others start at -inf) or the beam would hold k copies.
    memory = memory.repeat_interleave(k, dim=0)  # (B*k, n, d)
    src_keep = src_keep.repeat_interleave(k, dim=0)
    ys = torch.full((batch * k, 1), bos_id, dtype=torch.long, device=src.device)
    scores = torch.full((batch, k), float("-inf"), device=src.device)
    scores[:, 0] = 0.0
    done = torch.zeros(batch * k, dtype=torch.bool, device=src.device)
    lengths = torch.zeros(batch * k, device=src.device)  # generated tokens up to and including eos
    for _ in range(max_new_tokens):
        if done.all():
            break
        logp = torch.log_softmax(_step_logits(model, ys, memory, src_keep).float(), dim=-1)  # (B*k, V)
        vocab = logp.shape[-1]
        if k > vocab:
            raise ValueError(f"beam_search: beam_size={k} exceeds the vocabulary size {vocab}")
        finished = torch.full_like(logp, float("-inf"))
        finished[:, pad_id] = 0.0  # a finished hypothesis may only grow padding, for free
        logp = torch.where(done[:, None], finished, logp)
        candidates = (scores.reshape(-1, 1) + logp).reshape(batch, k * vocab)
        top_scores, top_index = candidates.topk(k, dim=-1)  # (B, k), best first
        parent = (torch.arange(batch, device=src.device)[:, None] * k + top_index // vocab).reshape(-1)
        token = (top_index % vocab).reshape(-1)
        ys = torch.cat([ys[parent], token[:, None]], dim=1)
        lengths = lengths[parent] + (~done[parent]).float()
        done = done[parent] | (token == eos_id)
        scores = top_scores
    ranked = scores / lengths.clamp_min(1.0).reshape(batch, k) ** length_penalty if length_penalty else scores
    best = ranked.argmax(dim=-1)  # (B,)
    rows = torch.arange(batch, device=src.device) * k + best
    out = ys[rows]
    return (out, scores[torch.arange(batch, device=src.device), best]) if return_scores else out


class CopyModel(nn.Module):
    """A decoding test double: it "predicts" the source tokens in order, then ``eos_id``, then junk.

    ``encode(src)`` returns the one-hot source as memory ``(B, n, V)``; ``decode(tgt, memory,
    src_keep)`` returns logits ``(B, t, V)`` whose position p prefers source token p while
    ``p < length``, ``eos_id`` at ``p == length`` and a junk token afterwards -- so a decoder
    that does not stop at ``eos_id`` shows it.  Like the real model's cross-attention, it learns
    which source positions are real from ``src_keep`` (``length = src_keep.sum(-1)``; ``None``
    means every position is real), so a decoder that forgets the source mask copies padding.
    The winning logit beats the rest by about 3, and the runner-up differs per position, so
    argmax has no ties.  ``forward(src, tgt)`` is ``decode(tgt, encode(src), src != pad_id)``.
    """

    def __init__(self, vocab_size: int, pad_id: int, eos_id: int, junk_id: int | None = None):
        super().__init__()
        self.vocab_size, self.pad_id, self.eos_id = vocab_size, pad_id, eos_id
        self.junk_id = vocab_size - 1 if junk_id is None else junk_id
        self.dummy = nn.Parameter(torch.zeros(()))  # gives the module a device and a dtype

    def encode(self, src: Tensor, src_keep: Tensor | None = None) -> Tensor:
        return F.one_hot(src, self.vocab_size).to(self.dummy.dtype)

    def decode(self, tgt: Tensor, memory: Tensor, src_keep: Tensor | None = None) -> Tensor:
        src = memory.argmax(dim=-1)  # (B, n)
        batch, n = src.shape
        t = tgt.shape[1]
        keep = torch.ones_like(src, dtype=torch.bool) if src_keep is None else src_keep
        length = keep.sum(dim=1, keepdim=True)  # (B, 1)
        p = torch.arange(t, device=src.device).expand(batch, t)  # (B, t)
        from_src = src.gather(1, p.clamp(max=max(n - 1, 0))) if n else torch.full_like(p, self.eos_id)
        wanted = torch.where(p < length, from_src, torch.where(p == length, self.eos_id, self.junk_id))
        ripple = 0.1 * torch.sin(torch.arange(t * self.vocab_size, device=src.device, dtype=memory.dtype))
        logits = 3.0 * F.one_hot(wanted, self.vocab_size).to(memory.dtype)
        return logits + ripple.reshape(1, t, self.vocab_size) + self.dummy

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        return self.decode(tgt, self.encode(src), src != self.pad_id)
