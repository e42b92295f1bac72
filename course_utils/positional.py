"""Reference position information (chapter 05): sinusoidal and learned 1-D encodings."""
from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["sinusoidal_encoding", "LearnedPositionalEmbedding"]


def sinusoidal_encoding(num_positions: int, d_model: int, base: float = 10000.0, *,
                        dtype: torch.dtype = torch.float32, device: torch.device | str | None = None) -> Tensor:
    """``(num_positions, d_model)`` with PE[p, 2i] = sin(p / base^(2i/d)), PE[p, 2i+1] = cos(same).

    Columns 2i and 2i+1 share one frequency, so the pair rotates with position; computed in
    float64 and then cast, so large positions keep their precision.
    """
    if d_model % 2:
        raise ValueError(f"sinusoidal_encoding: d_model must be even (sin/cos pairs), got {d_model}")
    if num_positions < 0:
        raise ValueError(f"sinusoidal_encoding: num_positions must be >= 0, got {num_positions}")
    position = torch.arange(num_positions, dtype=torch.float64)[:, None]  # (P, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # 2i = 0, 2, 4, ...
    angle = position / base ** (two_i / d_model)  # (P, d_model/2)
    pe = torch.empty(num_positions, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe.to(dtype=dtype, device=device)


class LearnedPositionalEmbedding(nn.Module):
    """A trainable ``weight`` of shape ``(num_positions, d_model)``; ``forward(x)`` adds ``weight[:n]``.

    ``x`` has shape ``(..., n, d_model)`` with ``n <= num_positions``.
    """

    def __init__(self, num_positions: int, d_model: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_positions, d_model))
        nn.init.trunc_normal_(self.weight, std=0.02)  # as in ViT and BERT

    def forward(self, x: Tensor) -> Tensor:
        n = x.shape[-2]
        if n > self.weight.shape[0]:
            raise ValueError(f"LearnedPositionalEmbedding: {n} positions but only {self.weight.shape[0]} are learned")
        if x.shape[-1] != self.weight.shape[1]:
            raise ValueError(f"LearnedPositionalEmbedding: x has {x.shape[-1]} features, expected {self.weight.shape[1]}")
        return x + self.weight[:n]
