"""Reading learning curves (chapter 08 reference): is a run over-fitting, under-fitting or fine?"""

from __future__ import annotations

__all__ = ["diagnose_curves", "DIAGNOSES"]

DIAGNOSES = ("over-fitting", "under-fitting", "good fit")


def diagnose_curves(
    history: list[dict],
    *,
    target: float = 0.7,
    gap: float = 0.10,
    rise: float = 0.10,
) -> str:
    """Classify a training history (one dict per epoch with ``train_loss``, ``train_acc``,
    ``val_loss``, ``val_acc``, as the trainer writes it), judged at its last epoch:

    - ``"over-fitting"``: the last validation loss is more than ``rise`` (10 %) above the lowest
      validation loss of the run, or the last training accuracy exceeds the last validation
      accuracy by more than ``gap`` (0.10);
    - ``"under-fitting"``: not over-fitting, and the last training accuracy is below ``target``;
    - ``"good fit"``: neither.
    """
    if not history:
        raise ValueError(
            "diagnose_curves: the history is empty (no epoch to judge)"
        )
    last = history[-1]
    lowest_val_loss = min(h["val_loss"] for h in history)
    if (
        last["val_loss"] > (1 + rise) * lowest_val_loss
        or last["train_acc"] - last["val_acc"] > gap
    ):
        return "over-fitting"
    if last["train_acc"] < target:
        return "under-fitting"
    return "good fit"
