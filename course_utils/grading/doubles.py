"""Test doubles: stand-ins with a known answer, for testing a learner's code without a trained model.

Both have the decoding interface of ``models.transformer.Seq2SeqTransformer`` (``encode(src)``,
``decode(tgt, memory, src_keep)``):

- ``CopyModel``: its next token is known in advance, so a decoder's stopping, padding and
  source-mask handling show.
- ``ScriptedModel``: what it predicts after a prefix is read from a *script*, a small table
  written so that the answer of each decoder is known by hand: greedy decoding and beam search
  disagree, one hypothesis ends early with the best score, a wider beam finds what a narrower one
  misses.  The source's first token chooses the script, so the sources of one batch follow
  different scripts and a decoder that mixes up their beams shows it.  ``SCRIPTS`` holds the
  course's scripts; ``describe`` writes one out.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "CopyModel",
    "ScriptedModel",
    "SCRIPTS",
    "GREEDY_TRAP",
    "EARLY_END",
    "LONGER_WINS",
    "WIDE_BEAM",
    "JUNK",
    "describe",
    "next_token_probs",
    "path_log_prob",
]


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

    def __init__(
        self,
        vocab_size: int,
        pad_id: int,
        eos_id: int,
        junk_id: int | None = None,
    ):
        super().__init__()
        self.vocab_size, self.pad_id, self.eos_id = (
            vocab_size,
            pad_id,
            eos_id,
        )
        self.junk_id = vocab_size - 1 if junk_id is None else junk_id
        # gives the module a device and a dtype
        self.dummy = nn.Parameter(torch.zeros(()))

    def encode(self, src: Tensor, src_keep: Tensor | None = None) -> Tensor:
        return F.one_hot(src, self.vocab_size).to(self.dummy.dtype)

    def decode(
        self, tgt: Tensor, memory: Tensor, src_keep: Tensor | None = None
    ) -> Tensor:
        src = memory.argmax(dim=-1)  # (B, n)
        batch, n = src.shape
        t = tgt.shape[1]
        keep = (
            torch.ones_like(src, dtype=torch.bool)
            if src_keep is None
            else src_keep
        )
        length = keep.sum(dim=1, keepdim=True)  # (B, 1)
        p = torch.arange(t, device=src.device).expand(batch, t)  # (B, t)
        from_src = (
            src.gather(1, p.clamp(max=max(n - 1, 0)))
            if n
            else torch.full_like(p, self.eos_id)
        )
        wanted = torch.where(
            p < length,
            from_src,
            torch.where(p == length, self.eos_id, self.junk_id),
        )
        ripple = 0.1 * torch.sin(
            torch.arange(
                t * self.vocab_size, device=src.device, dtype=memory.dtype
            )
        )
        logits = 3.0 * F.one_hot(wanted, self.vocab_size).to(memory.dtype)
        return logits + ripple.reshape(1, t, self.vocab_size) + self.dummy

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        return self.decode(tgt, self.encode(src), src != self.pad_id)


PAD, BOS, EOS = 0, 1, 2
JUNK = 12  # what the model "predicts" after EOS: a decoder that keeps extending finished outputs writes it

# Script: {prefix (the tokens after BOS) -> {next token: probability}}.  A prefix that is not
# listed is followed by EOS with probability 0.9; a prefix that ends in EOS or PAD by JUNK with
# probability 0.9.  The probability left over is spread over the other tokens, unevenly, so
# that no two candidates of a beam ever tie.

# Source token 3.  Greedy takes 3 (0.5), then 5 (0.34), then EOS: 0.5 * 0.34 * 0.9 = 0.153.
# The first token 4 is less likely (0.4) but is followed by 5 almost surely:
# 0.4 * 0.95 * 0.9 = 0.342.  A beam of 2 keeps both first tokens and finds 4 5 EOS.
GREEDY_TRAP = {
    (): {3: 0.5, 4: 0.4},
    (3,): {5: 0.34, 6: 0.32, 7: 0.3},
    (4,): {5: 0.95},
}

# Source token 4.  EOS right away has probability 0.4; every longer output is less likely
# (at most 0.55 * 0.3 * 0.6 * 0.9 = 0.089).  Beam search must keep the finished hypothesis
# "EOS" at its score while the others grow, and return it followed by padding.
EARLY_END = {
    (): {EOS: 0.4, 3: 0.55},
    (3,): {4: 0.3, 5: 0.28, 6: 0.26},
    (3, 4): {7: 0.6},
    (3, 5): {8: 0.5},
}

# Source token 5.  Greedy: 5 3 EOS, 0.45 * 0.26 * 0.9 = 0.105.  Beam (2 or more):
# 6 8 9 EOS, 0.35 * 0.8 * 0.9 * 0.9 = 0.227, the longer output.
LONGER_WINS = {
    (): {5: 0.45, 6: 0.35, 7: 0.1},
    (5,): {3: 0.26, 4: 0.25, 7: 0.24, 8: 0.2},
    (6,): {8: 0.8},
    (6, 8): {9: 0.9},
}

# Source token 6.  The best output starts with the third most likely token: 5 6 EOS,
# 0.2 * 0.97 * 0.9 = 0.175, against 0.4 * 0.3 * 0.9 = 0.108 for the best output after 3.
# A beam of 2 drops the first token 5 at once; a beam of 3 keeps it.
WIDE_BEAM = {
    (): {3: 0.4, 4: 0.35, 5: 0.2},
    (3,): {7: 0.3, 8: 0.29, 9: 0.28},
    (4,): {7: 0.31, 8: 0.3, 9: 0.29},
    (5,): {6: 0.97},
}

SCRIPTS = {3: GREEDY_TRAP, 4: EARLY_END, 5: LONGER_WINS, 6: WIDE_BEAM}


def _background(vocab_size: int) -> Tensor:
    """Uneven positive weights, one per token, that sum to 1 (they share the leftover probability)."""
    w = (
        1.0
        + 0.37 * torch.arange(vocab_size, dtype=torch.float64)
        + 0.05
        * torch.sin(torch.arange(vocab_size, dtype=torch.float64) * 2.3)
    )
    return w / w.sum()


def next_token_probs(
    script: dict, prefix: tuple, vocab_size: int = 13
) -> Tensor:
    """The script's distribution ``(vocab_size,)`` (float64) over the token after ``prefix``."""
    if prefix and prefix[-1] in (EOS, PAD):
        listed = {JUNK: 0.9}
    else:
        listed = script.get(prefix, {EOS: 0.9})
    mass = sum(listed.values())
    if mass > 0.99:
        raise ValueError(
            f"ScriptedModel: the listed probabilities after {prefix} sum to {mass}; keep them <= 0.99"
        )
    rest = _background(vocab_size)
    rest[list(listed)] = 0.0
    probs = rest / rest.sum() * (1.0 - mass)
    for token, p in listed.items():
        probs[token] = p
    return probs


def describe(script: dict) -> str:
    """The listed probabilities of a script, one prefix a line (for a visible test's printout)."""
    lines = []
    for prefix, nxt in script.items():
        shown = ", ".join(
            f"{'EOS' if t == EOS else t}: {p:g}" for t, p in nxt.items()
        )
        lines.append(
            f"  after <bos> {' '.join(map(str, prefix)) or '':<6s} -> {shown}"
        )
    lines.append(
        "  any other prefix -> EOS: 0.9 (and after EOS: junk token 12: 0.9)"
    )
    return "\n".join(lines)


class ScriptedModel(nn.Module):
    """A decoding test double whose next-token distribution after each prefix is given by a script.

    ``encode(src)`` returns the one-hot source as memory ``(B, n, V)``; ``decode(tgt, memory,
    src_keep)`` returns log-probabilities ``(B, t, V)`` (logits whose softmax is the script's
    distribution): position p holds the distribution of the token after ``tgt[:, :p + 1]``.
    The script of a row is ``scripts[first source token]``; a source whose first token has no
    script follows ``{}`` (EOS with probability 0.9 after every prefix).  ``src_keep`` is not
    used.  The token ids are the course's: ``PAD = 0``, ``BOS = 1``, ``EOS = 2``.
    """

    def __init__(
        self, scripts: dict[int, dict] | None = None, vocab_size: int = 13
    ):
        super().__init__()
        self.scripts = SCRIPTS if scripts is None else scripts
        self.vocab_size = vocab_size
        # gives the module a device and a dtype
        self.dummy = nn.Parameter(torch.zeros(()))
        self._log_probs: dict[
            tuple, Tensor
        ] = {}  # (script key, prefix) -> log-probabilities, computed once

    def encode(self, src: Tensor, src_keep: Tensor | None = None) -> Tensor:
        return F.one_hot(src, self.vocab_size).to(self.dummy.dtype)

    def decode(
        self, tgt: Tensor, memory: Tensor, src_keep: Tensor | None = None
    ) -> Tensor:
        batch, t = tgt.shape
        keys = (
            memory[:, 0].argmax(dim=-1).tolist()
            if memory.shape[1]
            else [None] * batch
        )
        rows = tgt.tolist()
        out = torch.empty(batch, t, self.vocab_size, dtype=torch.float64)
        for b in range(batch):
            for p in range(t):
                entry = (keys[b], tuple(rows[b][1 : p + 1]))
                if entry not in self._log_probs:
                    script = self.scripts.get(keys[b], {})
                    self._log_probs[entry] = next_token_probs(
                        script, entry[1], self.vocab_size
                    ).log()
                out[b, p] = self._log_probs[entry]
        return out.to(device=memory.device, dtype=memory.dtype) + self.dummy

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        return self.decode(tgt, self.encode(src), src != PAD)


def path_log_prob(
    script: dict, tokens: list[int], vocab_size: int = 13
) -> float:
    """log P(tokens | the script), ``tokens`` after BOS (for checking the comments above)."""
    return sum(
        math.log(
            float(
                next_token_probs(script, tuple(tokens[:i]), vocab_size)[tok]
            )
        )
        for i, tok in enumerate(tokens)
    )
