"""Looking inside models, for the chapters' figures (not graded).

``dependence_matrix`` measures, with the full Jacobian, which input positions each output
position depends on: chapter 06 uses it to show that a causal mask lets nothing flow back from
the future.  (Reading runs against runs is ``training/evidence.py``.)
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

__all__ = ["dependence_matrix"]


def dependence_matrix(fn: Callable[[Tensor], Tensor], x: Tensor) -> Tensor:
    """``D[t, s] = || d fn(x)[t] / d x[s] ||``: how much output position t depends on input position s.

    ``x`` is ``(n, d)`` (one sequence); ``fn`` maps ``(1, n, d) -> (1, n, d_out)``.  A causal
    layer gives a lower-triangular ``D`` (zero above the diagonal: nothing flows back from the
    future); the diagonal is non-zero when each position sees itself.  Computed with the full
    Jacobian, so a zero entry is exactly zero, not a cancellation in a sum of gradients.
    """
    if x.dim() != 2:
        raise ValueError(
            f"dependence_matrix: x must be one sequence of shape (n, d), got {tuple(x.shape)}"
        )
    # (n, d_out, n, d)
    jac = torch.autograd.functional.jacobian(
        lambda inp: fn(inp.unsqueeze(0)).squeeze(0), x
    )
    return jac.pow(2).sum(dim=(1, 3)).sqrt()
