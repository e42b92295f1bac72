"""Chapter 04's toy task: two relations (previous token, next token) that two heads learn to split.

``prev_next_batch`` draws the data, ``ToyAttentionModel`` is one attention layer with a readout,
``train_toy`` trains it with the trainer's optimisation step, ``toy_accuracy`` and
``toy_losses`` score it, one number per target.
Chapter 05 reuses it to compare position encodings.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..references.positional import sinusoidal_encoding
from .trainer import Trainer

__all__ = [
    "prev_next_batch",
    "ToyAttentionModel",
    "train_toy",
    "toy_accuracy",
    "toy_losses",
]


def prev_next_batch(
    batch_size: int,
    seq_len: int,
    vocab: int,
    *,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> tuple[Tensor, Tensor]:
    """Random token sequences and, for every position, its two neighbours' tokens.

    tokens ``(B, n)``; targets ``(B, n, 2)`` with ``targets[b, i] = (tokens[b, i-1], tokens[b, i+1])``,
    indices taken cyclically (position 0's previous token is the last one).  Solving it needs
    two different relations between positions, one per target.  ``ToyAttentionModel`` with two
    heads can give each relation a head; with one head, its output mixes both neighbours.
    """
    tokens = torch.randint(vocab, (batch_size, seq_len), generator=generator)
    targets = torch.stack(
        [tokens.roll(1, dims=1), tokens.roll(-1, dims=1)], dim=-1
    )
    return tokens.to(device), targets.to(device)


class ToyAttentionModel(nn.Module):
    """Token embedding + position information + one attention layer + a linear readout.

    ``attention`` is a module with ``forward(q, k, v) -> (out, weights)`` (e.g. a
    ``MultiHeadAttention``).  ``positional`` says how positions enter: ``"learned"`` (a
    trainable table, as chapter 05's ``LearnedPositionalEmbedding``), ``"sinusoidal"``, ``"none"``, a fixed ``(n, d_model)``
    tensor to add, or a module applied to the embedded tokens (``x -> x + positions``).
    There is no residual connection: the readout sees only what attention gathered, so the
    attention maps show everything the model uses.  ``forward(tokens (B, n))`` returns
    ``logits (B, n, 2, vocab)`` (previous, next) and the attention weights.
    """

    def __init__(
        self,
        vocab: int,
        seq_len: int,
        d_model: int,
        attention: nn.Module,
        positional: str | Tensor | nn.Module = "learned",
    ):
        super().__init__()
        self.vocab = vocab
        self.embed = nn.Embedding(vocab, d_model)
        self.pos: nn.Module | None = None
        self.register_buffer("pe", None, persistent=False)
        if isinstance(positional, nn.Module):
            self.pos = positional
        elif isinstance(positional, Tensor):
            if positional.shape != (seq_len, d_model):
                raise ValueError(
                    f"ToyAttentionModel: a fixed encoding must have shape ({seq_len}, {d_model}), "
                    f"got {tuple(positional.shape)}"
                )
            self.pe = positional.detach().clone().float()
        elif positional == "learned":
            # A trainable (seq_len, d_model) table whose first n rows are added to the tokens: what
            # chapter 05's LearnedPositionalEmbedding computes, with its initialisation, held in PyTorch's
            # own nn.Embedding so that the class edition (which holds no graded class) trains it too.
            self.pos = nn.Embedding(
                seq_len,
                d_model,
                _weight=nn.init.trunc_normal_(
                    torch.empty(seq_len, d_model), std=0.02
                ),
            )
        elif positional == "sinusoidal":
            self.pe = sinusoidal_encoding(seq_len, d_model)
        elif positional != "none":
            raise ValueError(
                f"ToyAttentionModel: positional must be 'learned', 'sinusoidal', 'none', a tensor "
                f"or a module, got {positional!r}"
            )
        self.attention = attention
        self.readout = nn.Linear(d_model, 2 * vocab)

    def forward(self, tokens: Tensor) -> tuple[Tensor, Tensor]:
        x = self.embed(tokens)
        if isinstance(self.pos, nn.Embedding):
            x = x + self.pos.weight[: tokens.shape[-1]]
        elif self.pos is not None:
            x = self.pos(x)
        elif self.pe is not None:
            x = x + self.pe[: tokens.shape[-1]]
        out, weights = self.attention(x, x, x)
        return self.readout(out).unflatten(-1, (2, self.vocab)), weights


@torch.no_grad()
def toy_accuracy(
    model: ToyAttentionModel, tokens: Tensor, targets: Tensor
) -> Tensor:
    """Accuracy per target, ``(2,)``: previous token, next token."""
    was_training = model.training
    model.eval()
    logits, _ = model(tokens)
    model.train(was_training)
    return (logits.argmax(-1) == targets).double().mean(dim=(0, 1))


@torch.no_grad()
def toy_losses(
    model: ToyAttentionModel, tokens: Tensor, targets: Tensor
) -> Tensor:
    """Mean cross-entropy per target in nats, ``(2,)`` in float64: previous token, next token.

    Guessing uniformly among the ``vocab`` tokens scores ``ln(vocab)`` on each.
    """
    was_training = model.training
    model.eval()
    logits, _ = model(tokens)
    model.train(was_training)
    log_p = logits.double().log_softmax(dim=-1)
    return (
        -log_p.gather(-1, targets.unsqueeze(-1)).squeeze(-1).mean(dim=(0, 1))
    )


def train_toy(
    model: ToyAttentionModel,
    *,
    seq_len: int,
    steps: int,
    batch_size: int = 128,
    lr: float = 1e-2,
    seed: int = 0,
) -> list[float]:
    """Adam on fresh random batches of ``prev_next_batch``; returns the loss of every step.

    Each batch is new data, so there is nothing to overfit: the loss measures the task itself.
    On the CPU it runs on one thread: the matrices are so small that more threads only add
    synchronisation (and on a shared machine, waiting).
    """
    generator = torch.Generator().manual_seed(seed)
    device = next(model.parameters()).device
    trainer = Trainer(model, torch.optim.Adam(model.parameters(), lr=lr))
    threads = torch.get_num_threads()
    if device.type == "cpu":
        torch.set_num_threads(1)
    model.train()
    losses = []
    try:
        for _ in range(steps):
            tokens, targets = prev_next_batch(
                batch_size,
                seq_len,
                model.vocab,
                generator=generator,
                device=device,
            )
            logits, _ = model(tokens)
            losses.append(
                trainer.step(
                    nn.functional.cross_entropy(
                        logits.flatten(0, -2), targets.flatten()
                    )
                )
            )
    finally:
        torch.set_num_threads(threads)
        model.eval()
    return losses
