"""Figures the chapters share: attention heatmaps first, then training curves (a finished run's
``plot_history``, a running one's ``LiveCurves``).  Draws what it is given; imports nothing of ``training``."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import matplotlib.pyplot as plt
import torch
from torch import Tensor


def attention_heatmap(
    weights: Tensor,
    *,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    title: str | None = None,
    annotate: bool | None = None,
    ax: plt.Axes | None = None,
    cmap: str = "viridis",
    vmax: float | None = None,
) -> plt.Axes:
    """Draw a ``(m, n)`` weight matrix: rows are queries, columns are keys.

    Values are annotated when the matrix is small (at most 12 x 12) unless
    ``annotate`` says otherwise.  The colour scale runs from 0 to ``vmax`` (default: the largest
    weight); panels meant to be compared pass one ``vmax`` (1 for attention weights), so one
    colour means one weight in all of them.  Returns the axes, so figures can be composed.
    """
    w = torch.as_tensor(weights).detach().to("cpu", torch.float64)
    if w.dim() == 1:
        w = w.unsqueeze(0)
    if w.dim() != 2:
        raise ValueError(
            f"attention_heatmap: expected (m, n) weights, got shape {tuple(w.shape)}"
        )
    m, n = w.shape
    for labels, size, what in (
        (query_labels, m, "query_labels"),
        (key_labels, n, "key_labels"),
    ):
        if labels is not None and len(labels) != size:
            raise ValueError(
                f"attention_heatmap: {what} has {len(labels)} entries for {size} rows/columns"
            )
    if ax is None:
        _, ax = plt.subplots(
            figsize=(max(3.0, 0.5 * n + 1.5), max(2.5, 0.5 * m + 1.0))
        )
    top = float(w.max()) if vmax is None else float(vmax)
    image = ax.imshow(
        w.numpy(), cmap=cmap, vmin=0.0, vmax=max(1e-12, top), aspect="auto"
    )
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    ax.set_xticks(
        range(n), labels=key_labels if key_labels is not None else range(n)
    )
    ax.set_yticks(
        range(m),
        labels=query_labels if query_labels is not None else range(m),
    )
    if annotate or (annotate is None and m <= 12 and n <= 12):
        top = float(w.max())
        for i in range(m):
            for j in range(n):
                value = float(w[i, j])
                ax.text(
                    j,
                    i,
                    f"{value:.2f}",
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="black" if value > 0.6 * top else "white",
                )
    if title:
        ax.set_title(title)
    return ax


def plot_history(
    history: list[dict], path: Path | None = None, title: str = ""
):
    """Loss and accuracy curves (train vs validation) per epoch from a run's history (one record per
    epoch with ``epoch``, ``train_loss``, ``val_loss``, ``train_acc``, ``val_acc``); saved to ``path``
    if given.

    Built on a bare ``Figure`` (no pyplot state, no backend switch), so saving a plot from a
    notebook leaves its inline figures alone; Jupyter displays the returned figure.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 3.2))
    a, b = fig.subplots(1, 2)
    epochs = [h["epoch"] for h in history]
    a.plot(epochs, [h["train_loss"] for h in history], label="train")
    a.plot(epochs, [h["val_loss"] for h in history], label="validation")
    a.set_xlabel("epoch"), a.set_ylabel("loss"), a.legend()
    b.plot(epochs, [h["train_acc"] for h in history], label="train")
    b.plot(epochs, [h["val_acc"] for h in history], label="validation")
    b.set_xlabel("epoch"), b.set_ylabel("accuracy"), b.legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


class LiveCurves:
    """Validation and training accuracy per epoch, redrawn in place while a run trains.

    Pass an instance as the trainer's ``on_epoch``.  In Jupyter the figure is one output that
    each epoch replaces (an image, not a widget: the stored notebook and the rendered book keep
    the final curve, nothing else); elsewhere it draws nothing and the trainer's epoch lines are
    the progress.  ``reference`` is another run's history (a list of epoch records) drawn in grey
    for comparison, e.g. a stored run of the same recipe.
    """

    def __init__(
        self,
        title: str,
        *,
        epochs: int,
        reference: list[dict] | None = None,
        reference_label: str = "stored run",
    ):
        from matplotlib.figure import Figure

        self.history: list[dict] = []
        self.title, self.epochs, self.reference, self.reference_label = (
            title,
            epochs,
            reference,
            reference_label,
        )
        self.figure = Figure(figsize=(7.5, 3.2))
        self.axes = self.figure.subplots(1, 1)
        self._handle = None
        try:
            from IPython import get_ipython
            from IPython.display import display

            if get_ipython() is not None:
                self._handle = display(self._draw(), display_id=True)
        except ImportError:
            pass

    def _draw(self):
        ax = self.axes
        ax.clear()
        for history, label, style in (
            (self.reference, self.reference_label, dict(color="grey")),
            (self.history, "this run", dict(color="tab:blue")),
        ):
            if history:
                epochs = [h["epoch"] for h in history]
                ax.plot(
                    epochs,
                    [h["val_acc"] for h in history],
                    marker="o",
                    label=f"{label}: validation",
                    **style,
                )
                ax.plot(
                    epochs,
                    [h["train_acc"] for h in history],
                    ls="--",
                    label=f"{label}: training",
                    **style,
                )
        ax.set_xlim(0.5, self.epochs + 0.5)
        ax.set_ylim(0, 1)
        ax.set_xlabel("epoch")
        ax.set_ylabel("accuracy")
        ax.set_title(self.title, fontsize=10)
        if self.history or self.reference:
            ax.legend(fontsize=8, loc="upper left")
        self.figure.tight_layout()
        return self.figure

    def __call__(self, record: dict) -> None:
        self.history.append(record)
        if self._handle is not None:
            self._handle.update(self._draw())


def figure_png(figure, dpi: int = 110) -> bytes:
    """A matplotlib ``Figure`` as PNG bytes: ``IPython.display.Image(figure_png(fig))`` shows it in
    Jupyter whether or not pyplot's inline backend is active (a bare ``Figure`` shows only then)."""
    import io

    buffer = io.BytesIO()
    figure.savefig(
        buffer, format="png", dpi=dpi, facecolor=figure.get_facecolor()
    )
    return buffer.getvalue()
