"""Test doubles: stand-ins with a known answer, for testing a learner's code without a trained model.

``CopyModel`` has the decoding interface of ``models.transformer.Seq2SeqTransformer``; its next
token is known in advance, so a decoder's stopping, padding and source-mask handling show.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["CopyModel"]


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
