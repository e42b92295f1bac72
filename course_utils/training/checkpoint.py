"""A run's record on disk: what its checkpoint holds besides the ``Trainer``'s state, whether a
checkpoint belongs to the run asked for, the history files and the result file.

``Trainer.save``/``Trainer.resume`` write and read the model, optimiser, schedule, scaler and RNG;
``RunState`` is what ``train`` adds to them (epochs done, the history, the best validation epoch's
weights, the training time), stored as top-level entries of the same checkpoint.
"""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from .. import files
from .data import Split
from .recipes import Recipe, as_stored

__all__ = ["RunState", "resumable", "write_history", "write_run_result"]


@dataclasses.dataclass
class RunState:
    """How far a run has got: ``epoch`` epochs done, one ``history`` record per epoch, the best
    validation accuracy so far and the weights that reached it (``best_state``, a state_dict), and
    the training seconds (``elapsed``, without the clean-training diagnostic and the test), and for
    a recipe with a time budget the epoch count decided after the first epoch (``planned_epochs``)."""

    epoch: int = 0
    history: list[dict] = dataclasses.field(default_factory=list)
    best_val: float = -1.0
    best_state: dict | None = None
    elapsed: float = 0.0
    planned_epochs: int | None = None

    def entries(self) -> dict:
        """The checkpoint's entries for this state (not ``dataclasses.asdict``, which would copy the weights)."""
        return {
            f.name: getattr(self, f.name) for f in dataclasses.fields(self)
        }

    @classmethod
    def from_checkpoint(cls, ckpt: dict) -> RunState:
        # an entry added after a checkpoint was written takes its default
        return cls(
            **{
                f.name: ckpt[f.name]
                for f in dataclasses.fields(cls)
                if f.name in ckpt
            }
        )


def resumable(path: Path, recipe: Recipe, fast: bool) -> bool:
    """Whether ``path`` holds a checkpoint to resume; raises if it was written by another recipe or mode."""
    if not path.exists():
        return False
    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    # as_stored: a checkpoint written before a field was added has that field's default
    if (
        as_stored(ckpt["recipe"]) != as_stored(recipe)
        or ckpt["fast"] != fast
    ):
        raise RuntimeError(
            f"{path} belongs to a different recipe or mode; use another --out folder "
            "or delete the checkpoint to start over"
        )
    return True


def write_history(out: Path, history: list[dict]) -> None:
    """``out/history.json`` and ``out/history.csv``, one row per epoch record; each written atomically."""
    files.write_json(out / "history.json", history)
    if history:
        with (
            files.atomic_path(out / "history.csv") as tmp,
            open(tmp, "w", newline="") as fh,
        ):
            writer = csv.DictWriter(fh, fieldnames=list(history[0]))
            writer.writeheader()
            writer.writerows(history)


def write_run_result(
    name: str,
    model: nn.Module,
    summary: dict,
    data: Split,
    fast: bool,
    elapsed: float,
    code: str,
    log: Callable[[str], None],
) -> None:
    """``results/<name>.json`` and the trained weights in half precision (the book shows what the model attends to)."""
    from ..results import RESULTS_DIR, write_result

    files.torch_save(
        {
            k: (v.half() if v.is_floating_point() else v)
            for k, v in model.state_dict().items()
        },
        RESULTS_DIR / f"{name}_model.pth",
    )
    path = write_result(
        name,
        summary,
        dataset=data.source,
        split=f"validation ({len(data.val_labels):,} images carved from the training set)"
        if not fast
        else "validation subset (fast mode)",
        wall_time_s=elapsed,
        git_commit=code,
    )
    log(f"result written to {path}")
