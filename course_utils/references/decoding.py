"""Decoding an encoder-decoder model, token by token (chapter 06).

``greedy_decode`` and ``beam_search`` (both graded in chapter 06; ``beam_search_scored`` also
returns the scores) and ``sample_decode`` (temperature sampling), all stopping at
end-of-sequence.  They work with any model that has ``encode(src) -> memory`` and
``decode(tgt, memory, src_keep) -> logits (B, t, V)`` (``models.transformer.Seq2SeqTransformer``;
``grading.doubles.CopyModel`` and ``grading.doubles.ScriptedModel`` in tests).  They
return ``(B, 1 + T)`` token ids that start with ``bos_id``; a sequence that has produced
``eos_id`` is filled with ``pad_id`` afterwards, and the loop stops once every sequence has
ended (or after ``max_new_tokens`` steps).

``greedy_decode_cached`` gives ``greedy_decode``'s tokens with a key-value cache (its logits
equal the full recomputation's to rounding error).  It needs a model with
``decode_step(token, memory, src_keep, cache)`` (``Seq2SeqTransformer``), which runs the decoder
on the newest position only instead of on the whole prefix.
"""

from __future__ import annotations


import torch
from torch import Tensor, nn

__all__ = [
    "greedy_decode",
    "greedy_decode_cached",
    "beam_search",
    "beam_search_scored",
    "sample_decode",
]


def _check_decode_args(fn: str, src: Tensor, max_new_tokens: int) -> None:
    if (
        not isinstance(src, Tensor)
        or src.dim() != 2
        or src.is_floating_point()
    ):
        raise ValueError(
            f"{fn}: src must be a (B, n) tensor of token ids, got "
            f"{getattr(src, 'dtype', type(src))} {tuple(getattr(src, 'shape', ()))}"
        )
    if max_new_tokens < 0:
        raise ValueError(
            f"{fn}: max_new_tokens must be >= 0, got {max_new_tokens}"
        )


def _step_logits(
    model: nn.Module, ys: Tensor, memory: Tensor, src_keep: Tensor
) -> Tensor:
    # (B, V): the prediction after the last token
    return model.decode(ys, memory, src_keep)[:, -1]


@torch.no_grad()
def greedy_decode(
    model: nn.Module,
    src: Tensor,
    max_new_tokens: int,
    bos_id: int,
    eos_id: int,
    pad_id: int,
) -> Tensor:
    """Pick the most probable next token at every step.

    ``src (B, n)`` -> ``(B, 1 + T)`` token ids starting with ``bos_id``; after a sequence's
    ``eos_id`` come only ``pad_id``; T is the number of steps taken: the loop stops as soon as
    every sequence has produced ``eos_id``, or after ``max_new_tokens`` steps.
    """
    _check_decode_args("greedy_decode", src, max_new_tokens)
    src_keep = src != pad_id
    memory = model.encode(src)
    ys = torch.full(
        (src.shape[0], 1), bos_id, dtype=torch.long, device=src.device
    )
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for _ in range(max_new_tokens):
        if done.all():
            break
        next_token = _step_logits(model, ys, memory, src_keep).argmax(dim=-1)
        # finished sequences only grow padding
        next_token = next_token.masked_fill(done, pad_id)
        ys = torch.cat([ys, next_token[:, None]], dim=1)
        done = done | (next_token == eos_id)
    return ys


@torch.no_grad()
def greedy_decode_cached(
    model: nn.Module,
    src: Tensor,
    max_new_tokens: int,
    bos_id: int,
    eos_id: int,
    pad_id: int,
) -> Tensor:
    """``greedy_decode`` with a key-value cache: the same tokens, less work per step.

    ``greedy_decode`` runs the decoder on the whole prefix ``ys (B, t)`` at step t and keeps only
    the last position's logits: t positions through every layer, t * t attention scores per head.
    Here ``model.decode_step`` feeds only the newest token; each layer appends that position's key
    and value to its cache and attends from it to the t cached ones: one position through every
    layer, t scores per head.  The cross-attention keys and values of the memory are projected
    once, at the first step.  Needs ``model.decode_step(token, memory, src_keep, cache)``.
    """
    _check_decode_args("greedy_decode_cached", src, max_new_tokens)
    src_keep = src != pad_id
    memory = model.encode(src)
    ys = torch.full(
        (src.shape[0], 1), bos_id, dtype=torch.long, device=src.device
    )
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    cache = None  # the first call builds it from the memory
    for _ in range(max_new_tokens):
        if done.all():
            break
        # (B, V): after the newest token
        logits, cache = model.decode_step(ys[:, -1], memory, src_keep, cache)
        next_token = logits.argmax(dim=-1).masked_fill(done, pad_id)
        ys = torch.cat([ys, next_token[:, None]], dim=1)
        done = done | (next_token == eos_id)
    return ys


@torch.no_grad()
def sample_decode(
    model: nn.Module,
    src: Tensor,
    max_new_tokens: int,
    bos_id: int,
    eos_id: int,
    pad_id: int,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Draw each next token from ``softmax(logits / temperature)``; same output format as ``greedy_decode``.

    ``temperature < 1`` sharpens the distribution (``0`` is greedy decoding), ``> 1`` flattens it.
    ``generator`` (on ``src``'s device) makes the draws reproducible.
    """
    _check_decode_args("sample_decode", src, max_new_tokens)
    if temperature < 0:
        raise ValueError(
            f"sample_decode: temperature must be >= 0, got {temperature}"
        )
    src_keep = src != pad_id
    memory = model.encode(src)
    ys = torch.full(
        (src.shape[0], 1), bos_id, dtype=torch.long, device=src.device
    )
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for _ in range(max_new_tokens):
        if done.all():
            break
        logits = _step_logits(model, ys, memory, src_keep).float()
        if temperature == 0:
            next_token = logits.argmax(dim=-1)
        else:
            probs = torch.softmax(logits / temperature, dim=-1)
            next_token = torch.multinomial(
                probs, 1, generator=generator
            ).squeeze(-1)
        next_token = next_token.masked_fill(done, pad_id)
        ys = torch.cat([ys, next_token[:, None]], dim=1)
        done = done | (next_token == eos_id)
    return ys


def beam_search(
    model: nn.Module,
    src: Tensor,
    max_new_tokens: int,
    bos_id: int,
    eos_id: int,
    pad_id: int,
    beam_size: int = 4,
    length_penalty: float = 0.0,
) -> Tensor:
    """Keep the ``beam_size`` best partial outputs by total log-probability; same format as ``greedy_decode``.

    The score of a hypothesis is ``s(y_1..t) = sum_k log P(y_k | y_<k, src)``; each step extends
    every hypothesis by every token and keeps the top ``beam_size`` per source sequence.  A
    hypothesis that has produced ``eos_id`` is finished: it can only be extended by ``pad_id`` at
    no cost, so its score is frozen while it stays in the beam.  The search stops when every
    hypothesis of every sequence has finished (or after ``max_new_tokens`` steps) and returns
    the best one, ranked by ``score / length ** length_penalty`` (``length_penalty = 0``: the raw
    sum, which favours short outputs when lengths vary).  With ``beam_size = 1`` this is greedy
    decoding.  ``beam_search_scored`` also returns the chosen hypotheses' scores.
    """
    return beam_search_scored(
        model,
        src,
        max_new_tokens,
        bos_id,
        eos_id,
        pad_id,
        beam_size,
        length_penalty,
    )[0]


@torch.no_grad()
def beam_search_scored(
    model: nn.Module,
    src: Tensor,
    max_new_tokens: int,
    bos_id: int,
    eos_id: int,
    pad_id: int,
    beam_size: int = 4,
    length_penalty: float = 0.0,
) -> tuple[Tensor, Tensor]:
    """``beam_search``'s output ``(B, 1 + T)`` and the chosen hypotheses' scores ``(B,)``."""
    _check_decode_args("beam_search", src, max_new_tokens)
    batch, k = src.shape[0], beam_size
    src_keep = src != pad_id
    if k < 1:
        raise ValueError(
            f"beam_search: beam_size must be >= 1, got {beam_size}"
        )
    memory = model.encode(src)
    # Every sequence gets k rows; at the start all k hypotheses are the same "<bos>", so only
    # the first may be extended (the others start at -inf) or the beam would hold k copies.
    memory = memory.repeat_interleave(k, dim=0)  # (B*k, n, d)
    src_keep = src_keep.repeat_interleave(k, dim=0)
    ys = torch.full(
        (batch * k, 1), bos_id, dtype=torch.long, device=src.device
    )
    scores = torch.full((batch, k), float("-inf"), device=src.device)
    scores[:, 0] = 0.0
    done = torch.zeros(batch * k, dtype=torch.bool, device=src.device)
    # generated tokens up to and including eos
    lengths = torch.zeros(batch * k, device=src.device)
    for _ in range(max_new_tokens):
        if done.all():
            break
        # (B*k, V)
        logp = torch.log_softmax(
            _step_logits(model, ys, memory, src_keep).float(), dim=-1
        )
        vocab = logp.shape[-1]
        if k > vocab:
            raise ValueError(
                f"beam_search: beam_size={k} exceeds the vocabulary size {vocab}"
            )
        finished = torch.full_like(logp, float("-inf"))
        # a finished hypothesis may only grow padding, for free
        finished[:, pad_id] = 0.0
        logp = torch.where(done[:, None], finished, logp)
        candidates = (scores.reshape(-1, 1) + logp).reshape(batch, k * vocab)
        # (B, k), best first
        top_scores, top_index = candidates.topk(k, dim=-1)
        parent = (
            torch.arange(batch, device=src.device)[:, None] * k
            + top_index // vocab
        ).reshape(-1)
        token = (top_index % vocab).reshape(-1)
        ys = torch.cat([ys[parent], token[:, None]], dim=1)
        lengths = lengths[parent] + (~done[parent]).float()
        done = done[parent] | (token == eos_id)
        scores = top_scores
    ranked = (
        scores / lengths.clamp_min(1.0).reshape(batch, k) ** length_penalty
        if length_penalty
        else scores
    )
    best = ranked.argmax(dim=-1)  # (B,)
    rows = torch.arange(batch, device=src.device) * k + best
    out = ys[rows]
    return out, scores[torch.arange(batch, device=src.device), best]
