"""Measuring a classifier: loss, accuracy and confusion over batches, on one view or several per image.

``evaluate(model, batches, amp_dtype, flip=..., shifts=...)`` averages the logits of each image's
views (the image, its shifts, and each one's mirror); ``view_offsets`` lists the unmirrored views;
``final_test`` is the test a run ends with: the chosen views and, beside them, what fewer views give
on the same weights.  Nothing here draws random numbers or changes the model's weights.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from . import data as cdata

__all__ = ["evaluate", "view_offsets", "final_test"]


@torch.no_grad()
def evaluate(
    model: nn.Module,
    loader,
    amp_dtype: torch.dtype | None = None,
    *,
    confusion: bool = False,
    flip: bool = False,
    shifts: tuple = (),
) -> dict:
    """Mean loss and accuracy of a classifier over batches ``(x (B, C, H, W), y (B,))``; with
    ``confusion`` also the confusion matrix (``confusion[true][predicted]`` counts, a list of
    lists).  ``flip`` averages the logits of each image and its left-right mirror (the mirror is
    a training augmentation, so the model has learned both views); ``shifts``, pairs ``(dy, dx)``,
    adds the image moved by each (``data.translate``; the random crops of training move images
    too), with its mirror when ``flip``.  Images are in ``data.normalize``'s units.  ``amp_dtype``
    (bf16/fp16) runs the forward passes under autocast, as the model trained.  With more than one
    view, ``acc_single_view`` is the accuracy of the first view alone (the image as it is), read off
    the same forward passes at no extra cost."""
    model.eval()
    total, correct, loss_sum = 0, 0, 0.0
    correct_single = 0
    matrix = None
    offsets = view_offsets(shifts)
    for x, y in loader:
        with torch.autocast(
            x.device.type,
            dtype=amp_dtype or torch.float32,
            enabled=amp_dtype is not None,
        ):
            views = [cdata.translate(x, dy, dx) for dy, dx in offsets]
            views += [v.flip(-1) for v in views] if flip else []
            # (B, classes) per view; the first view is the image itself
            per_view = [model(v) for v in views]
            # (B, classes): the mean over views
            logits = sum(per_view) / len(per_view)
        num_classes = logits.shape[-1]
        if matrix is None:
            matrix = torch.zeros(num_classes, num_classes, dtype=torch.long)
        loss_sum += F.cross_entropy(
            logits.float(), y, reduction="sum"
        ).item()
        pred = logits.argmax(-1)
        correct += (pred == y).sum().item()
        correct_single += (per_view[0].argmax(-1) == y).sum().item()
        total += len(y)
        if confusion:
            matrix += torch.bincount(
                (y * num_classes + pred).cpu(), minlength=num_classes**2
            ).view_as(matrix)
    out = {"loss": loss_sum / total, "acc": correct / total}
    if len(offsets) > 1 or flip:
        out["acc_single_view"] = correct_single / total
    if confusion:
        out["confusion"] = matrix.tolist()
    return out


def view_offsets(shifts) -> list[tuple[int, int]]:
    """The (dy, dx) of every unmirrored view ``evaluate`` averages: the image itself, then each shift."""
    return [(0, 0)] + [tuple(s) for s in shifts if tuple(s) != (0, 0)]


def final_test(
    model: nn.Module,
    test_loader,
    val_loader,
    amp_dtype: torch.dtype | None,
    *,
    flip: bool,
    shifts: tuple,
) -> dict:
    """The test of a trained classifier on every view the run asks for (``flip``, ``shifts``), with the
    confusion matrix; and what the extra views add, measured on the same weights and images: the
    per-epoch validation's views on the test (``test_acc_flip``, when there are shifts), the shifted
    views on the validation images the shifts were chosen on (``best_val_acc_test_views``), and one
    view (``test_acc_single_view``, when ``flip``).  Returns the entries of a run's summary."""
    test = evaluate(
        model,
        test_loader,
        amp_dtype,
        confusion=True,
        flip=flip,
        shifts=shifts,
    )
    out = {
        "test_acc": test["acc"],
        "test_loss": test["loss"],
        "test_confusion": test["confusion"],
        "classes": list(cdata.CLASSES),
        "test_views": len(view_offsets(shifts)) * (2 if flip else 1),
    }
    if shifts:
        out["test_acc_flip"] = evaluate(
            model, test_loader, amp_dtype, flip=flip
        )["acc"]
        out["best_val_acc_test_views"] = evaluate(
            model, val_loader, amp_dtype, flip=flip, shifts=shifts
        )["acc"]
    if flip:
        # the first of the test's views, from the same passes
        out["test_acc_single_view"] = test["acc_single_view"]
    return out
