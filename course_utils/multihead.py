"""Reference multi-head attention (chapter 04): split heads, attend per head, merge, project.

Shapes: ``(B, N, H*D)`` <-> ``(B, H, N, D)``; head h owns features ``h*D:(h+1)*D``.

Besides the references (``split_heads``, ``merge_heads``, ``MultiHeadAttention``) this module
holds what chapters 04 and 05 use around them:

- ``to_torch_mha`` / ``from_torch_mha``: the same weights in ``torch.nn.MultiheadAttention``
  (batch_first) and back; ``torch_attn_mask`` turns a course mask (True = may attend) into
  PyTorch's ``attn_mask`` (True = may NOT attend);
- ``reference_heads``: lets a test run a learner's ``MultiHeadAttention`` with the course's
  ``split_heads``/``merge_heads``, so one mistake costs one exercise;
- a toy task whose two relations (previous token, next token) two heads learn to split
  between them: ``prev_next_batch``, ``ToyAttentionModel``, ``train_toy``.
"""
from __future__ import annotations

import contextlib
import math
from typing import Iterator, MutableMapping

import torch
from torch import Tensor, nn

from .masking import masked_softmax

__all__ = [
    "split_heads", "merge_heads", "MultiHeadAttention",
    "to_torch_mha", "from_torch_mha", "torch_attn_mask", "reference_heads",
    "prev_next_batch", "ToyAttentionModel", "train_toy", "toy_accuracy",
]


def split_heads(x: Tensor, num_heads: int) -> Tensor:
    """``(..., N, H*D) -> (..., H, N, D)``.

    The transpose matters: viewing ``(B, N, H*D)`` straight as ``(B, H, N, D)`` would give
    "head" h a slice of the flattened token-feature matrix that mixes different tokens.
    """
    if x.shape[-1] % num_heads:
        raise ValueError(f"split_heads: feature size {x.shape[-1]} is not divisible by num_heads={num_heads}")
    return x.unflatten(-1, (num_heads, x.shape[-1] // num_heads)).transpose(-3, -2)


def merge_heads(x: Tensor) -> Tensor:
    """``(..., H, N, D) -> (..., N, H*D)``, the exact inverse of ``split_heads``."""
    if x.dim() < 3:
        raise ValueError(f"merge_heads: expected (..., H, N, D), got shape {tuple(x.shape)}")
    return x.transpose(-3, -2).flatten(-2)


# The functions as defined here, kept under private names: ``reference_heads`` must use these
# even if a notebook rebinds ``course_utils.multihead.split_heads``.
_SPLIT_HEADS, _MERGE_HEADS = split_heads, merge_heads


def _heads_mask(mask: Tensor | None) -> Tensor | None:
    # A (B, m, n) mask (one per sequence) must broadcast over the heads of (B, H, m, n);
    # (m, n) and (B, 1, 1, n)-style masks already do.
    if mask is not None and mask.dim() == 3:
        return mask.unsqueeze(-3)
    return mask


class MultiHeadAttention(nn.Module):
    """H heads of scaled dot-product attention on d_model/H features each, then ``w_o``.

    ``forward(query (B, m, d_model), key (B, n, d_model), value (B, n, d_model), mask)``
    -> out ``(B, m, d_model)``, weights ``(B, H, m, n)`` (before dropout).  ``mask`` is bool,
    True = may attend, shaped ``(m, n)``, ``(B, m, n)``, ``(B, 1, n)`` or ``(B, H, m, n)``.
    ``bias`` is for all four projections; ``qkv_bias`` (if given) overrides it for ``w_q, w_k, w_v``
    (vit-pytorch, for one, has no query/key/value bias but an output bias).
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 qkv_bias: bool | None = None):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"MultiHeadAttention: d_model={d_model} is not divisible by num_heads={num_heads}")
        self.d_model, self.num_heads, self.head_dim = d_model, num_heads, d_model // num_heads
        qkv_bias = bias if qkv_bias is None else qkv_bias
        self.w_q = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.w_k = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.w_v = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        for name, t in (("query", query), ("key", key), ("value", value)):
            if t.shape[-1] != self.d_model:
                raise ValueError(f"MultiHeadAttention: {name} has {t.shape[-1]} features, expected d_model={self.d_model}")
        q = split_heads(self.w_q(query), self.num_heads)  # (B, H, m, D)
        k = split_heads(self.w_k(key), self.num_heads)  # (B, H, n, D)
        v = split_heads(self.w_v(value), self.num_heads)  # (B, H, n, D)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # scale by the head's size
        weights = masked_softmax(scores, _heads_mask(mask), dim=-1)  # (B, H, m, n)
        out = self.dropout(weights) @ v
        return self.w_o(merge_heads(out)), weights


# --------------------------------------------------------------------------- PyTorch's version
def _linear_parts(mha: nn.Module) -> tuple[nn.Linear, nn.Linear, nn.Linear, nn.Linear]:
    parts = []
    for name in ("w_q", "w_k", "w_v", "w_o"):
        layer = getattr(mha, name, None)
        if not isinstance(layer, nn.Linear):
            raise TypeError(f"to_torch_mha: expected a module with nn.Linear submodules w_q, w_k, w_v, w_o; "
                            f"{name} is {type(layer).__name__}")
        parts.append(layer)
    d = parts[0].in_features
    for name, layer in zip(("w_q", "w_k", "w_v", "w_o"), parts):
        if (layer.in_features, layer.out_features) != (d, d):
            raise ValueError(f"to_torch_mha: {name} maps {layer.in_features} -> {layer.out_features} features; "
                             f"nn.MultiheadAttention needs d_model -> d_model ({d} -> {d})")
    if len({layer.bias is None for layer in parts}) != 1:
        raise ValueError("to_torch_mha: either all four projections have a bias or none does")
    return tuple(parts)  # type: ignore[return-value]


def to_torch_mha(mha: nn.Module, *, num_heads: int | None = None, dropout: float | None = None) -> nn.MultiheadAttention:
    """A ``torch.nn.MultiheadAttention(batch_first=True)`` computing what ``mha`` computes.

    ``mha`` is any module with ``nn.Linear`` submodules ``w_q``, ``w_k``, ``w_v``, ``w_o``
    (the course's ``MultiHeadAttention`` or a learner's); ``num_heads`` and ``dropout``
    default to its ``num_heads`` attribute and the ``p`` of its ``dropout`` submodule.

    PyTorch stores the three input projections stacked in one ``(3 d, d)`` matrix
    ``in_proj_weight`` (rows: queries, then keys, then values) and ``w_o`` as ``out_proj``.
    Both use ``nn.Linear``'s layout, ``y = x W^T + b``, so the weights copy over unchanged.
    Call it with ``average_attn_weights=False`` to get per-head weights ``(B, H, m, n)``, and
    convert masks with ``torch_attn_mask`` (PyTorch's bool masks mean the opposite).
    """
    w_q, w_k, w_v, w_o = _linear_parts(mha)
    if num_heads is None:
        num_heads = getattr(mha, "num_heads", None)
        if num_heads is None:
            raise ValueError("to_torch_mha: the module has no num_heads attribute; pass num_heads=...")
    if dropout is None:
        drop = getattr(mha, "dropout", None)
        dropout = drop.p if isinstance(drop, nn.Dropout) else float(drop) if isinstance(drop, (int, float)) else 0.0
    d = w_q.in_features
    bias = w_q.bias is not None
    weight = w_q.weight
    torch_mha = nn.MultiheadAttention(d, num_heads, dropout=dropout, bias=bias, batch_first=True,
                                      device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        torch_mha.in_proj_weight.copy_(torch.cat([w_q.weight, w_k.weight, w_v.weight], dim=0))
        torch_mha.out_proj.weight.copy_(w_o.weight)
        if bias:
            torch_mha.in_proj_bias.copy_(torch.cat([w_q.bias, w_k.bias, w_v.bias], dim=0))
            torch_mha.out_proj.bias.copy_(w_o.bias)
    torch_mha.train(mha.training)
    return torch_mha


def from_torch_mha(torch_mha: nn.MultiheadAttention) -> MultiHeadAttention:
    """The course's ``MultiHeadAttention`` with the weights of ``torch_mha`` (the inverse of ``to_torch_mha``).

    Only the common configuration converts: one ``embed_dim`` for queries, keys and values
    (``kdim = vdim = embed_dim``), no ``add_bias_kv`` and no ``add_zero_attn``.  To load the
    weights into another module with the same submodule names, use ``.state_dict()`` of the result.
    """
    if not isinstance(torch_mha, nn.MultiheadAttention):
        raise TypeError(f"from_torch_mha: expected torch.nn.MultiheadAttention, got {type(torch_mha).__name__}")
    if not torch_mha._qkv_same_embed_dim:
        raise ValueError("from_torch_mha: kdim/vdim differ from embed_dim; the course's module has one d_model")
    if torch_mha.bias_k is not None or torch_mha.add_zero_attn:
        raise ValueError("from_torch_mha: add_bias_kv/add_zero_attn have no counterpart in the course's module")
    d, h = torch_mha.embed_dim, torch_mha.num_heads
    bias = torch_mha.in_proj_bias is not None
    weight = torch_mha.in_proj_weight
    mha = MultiHeadAttention(d, h, dropout=torch_mha.dropout, bias=bias).to(device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        for layer, w in zip((mha.w_q, mha.w_k, mha.w_v), weight.chunk(3, dim=0)):
            layer.weight.copy_(w)
        mha.w_o.weight.copy_(torch_mha.out_proj.weight)
        if bias:
            for layer, b in zip((mha.w_q, mha.w_k, mha.w_v), torch_mha.in_proj_bias.chunk(3, dim=0)):
                layer.bias.copy_(b)
            mha.w_o.bias.copy_(torch_mha.out_proj.bias)
    mha.train(torch_mha.training)
    return mha


def torch_attn_mask(mask: Tensor, batch_size: int, num_heads: int, m: int, n: int) -> Tensor:
    """A course mask (bool, True = may attend) as ``nn.MultiheadAttention``'s ``attn_mask``.

    PyTorch's bool ``attn_mask`` means the opposite (True = NOT allowed) and must be ``(m, n)``
    or ``(B*H, m, n)``; the course's masks broadcast against ``(B, H, m, n)``.  A ``(m, n)``
    mask is only inverted; any other shape is expanded to ``(B, H, m, n)``, inverted and
    flattened to ``(B*H, m, n)`` (batch-major, as PyTorch expects).
    """
    if mask.dtype != torch.bool:
        raise TypeError(f"torch_attn_mask: expected a bool mask (True = may attend), got {mask.dtype}")
    if mask.dim() == 2:
        return ~mask
    if mask.dim() == 3:  # (B, m, n) or (B, 1, n): one mask per sequence, shared by its heads
        mask = mask.unsqueeze(-3)
    return ~mask.expand(batch_size, num_heads, m, n).reshape(batch_size * num_heads, m, n)


@contextlib.contextmanager
def reference_heads(namespace: MutableMapping[str, object]) -> Iterator[None]:
    """Inside the ``with`` block, ``namespace['split_heads']`` and ``['merge_heads']`` are the course's.

    A learner's ``MultiHeadAttention`` may call their own ``split_heads``/``merge_heads``; a test
    of the module runs it with ``reference_heads(globals())`` so that a mistake in those two
    exercises is not counted again.  The previous bindings are restored afterwards.
    """
    saved = {name: namespace[name] for name in ("split_heads", "merge_heads") if name in namespace}
    namespace["split_heads"], namespace["merge_heads"] = _SPLIT_HEADS, _MERGE_HEADS
    try:
        yield
    finally:
        for name in ("split_heads", "merge_heads"):
            if name in saved:
                namespace[name] = saved[name]
            else:
                namespace.pop(name, None)


# --------------------------------------------------------------------------- a toy task for heads
def prev_next_batch(batch_size: int, seq_len: int, vocab: int, *, generator: torch.Generator | None = None,
                    device: torch.device | str | None = None) -> tuple[Tensor, Tensor]:
    """Random token sequences and, for every position, its two neighbours' tokens.

    tokens ``(B, n)``; targets ``(B, n, 2)`` with ``targets[b, i] = (tokens[b, i-1], tokens[b, i+1])``,
    indices taken cyclically (position 0's previous token is the last one).  Solving it needs
    two different relations between positions, one per target: a job for two heads.
    """
    tokens = torch.randint(vocab, (batch_size, seq_len), generator=generator)
    targets = torch.stack([tokens.roll(1, dims=1), tokens.roll(-1, dims=1)], dim=-1)
    return tokens.to(device), targets.to(device)


class ToyAttentionModel(nn.Module):
    """Token embedding + position information + one attention layer + a linear readout.

    ``attention`` is a module with ``forward(q, k, v) -> (out, weights)`` (e.g. a
    ``MultiHeadAttention``).  ``positional`` says how positions enter: ``"learned"`` (a
    ``LearnedPositionalEmbedding``), ``"sinusoidal"``, ``"none"``, a fixed ``(n, d_model)``
    tensor to add, or a module applied to the embedded tokens (``x -> x + positions``).
    There is no residual connection: the readout sees only what attention gathered, so the
    attention maps show everything the model uses.  ``forward(tokens (B, n))`` returns
    ``logits (B, n, 2, vocab)`` (previous, next) and the attention weights.
    """

    def __init__(self, vocab: int, seq_len: int, d_model: int, attention: nn.Module,
                 positional: str | Tensor | nn.Module = "learned"):
        super().__init__()
        from .positional import LearnedPositionalEmbedding, sinusoidal_encoding

        self.vocab = vocab
        self.embed = nn.Embedding(vocab, d_model)
        self.pos: nn.Module | None = None
        self.register_buffer("pe", None, persistent=False)
        if isinstance(positional, nn.Module):
            self.pos = positional
        elif isinstance(positional, Tensor):
            if positional.shape != (seq_len, d_model):
                raise ValueError(f"ToyAttentionModel: a fixed encoding must have shape ({seq_len}, {d_model}), "
                                 f"got {tuple(positional.shape)}")
            self.pe = positional.detach().clone().float()
        elif positional == "learned":
            self.pos = LearnedPositionalEmbedding(seq_len, d_model)
        elif positional == "sinusoidal":
            self.pe = sinusoidal_encoding(seq_len, d_model)
        elif positional != "none":
            raise ValueError(f"ToyAttentionModel: positional must be 'learned', 'sinusoidal', 'none', a tensor "
                             f"or a module, got {positional!r}")
        self.attention = attention
        self.readout = nn.Linear(d_model, 2 * vocab)

    def forward(self, tokens: Tensor) -> tuple[Tensor, Tensor]:
        x = self.embed(tokens)
        if self.pos is not None:
            x = self.pos(x)
        elif self.pe is not None:
            x = x + self.pe[: tokens.shape[-1]]
        out, weights = self.attention(x, x, x)
        return self.readout(out).unflatten(-1, (2, self.vocab)), weights


@torch.no_grad()
def toy_accuracy(model: ToyAttentionModel, tokens: Tensor, targets: Tensor) -> Tensor:
    """Accuracy per target, ``(2,)``: previous token, next token."""
    was_training = model.training
    model.eval()
    logits, _ = model(tokens)
    model.train(was_training)
    return (logits.argmax(-1) == targets).double().mean(dim=(0, 1))


def train_toy(model: ToyAttentionModel, *, seq_len: int, steps: int, batch_size: int = 128, lr: float = 1e-2,
              seed: int = 0) -> list[float]:
    """Adam on fresh random batches of ``prev_next_batch``; returns the loss of every step.

    Each batch is new data, so there is nothing to overfit: the loss measures the task itself.
    On the CPU it runs on one thread: the matrices are so small that more threads only add
    synchronisation (and on a shared machine, waiting).
    """
    generator = torch.Generator().manual_seed(seed)
    device = next(model.parameters()).device
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    threads = torch.get_num_threads()
    if device.type == "cpu":
        torch.set_num_threads(1)
    model.train()
    losses = []
    try:
        for _ in range(steps):
            tokens, targets = prev_next_batch(batch_size, seq_len, model.vocab, generator=generator, device=device)
            logits, _ = model(tokens)
            loss = nn.functional.cross_entropy(logits.flatten(0, -2), targets.flatten())
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    finally:
        torch.set_num_threads(threads)
        model.eval()
    return losses
