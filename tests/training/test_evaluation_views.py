"""Evaluation over several views of each image: the shifted views are what the training crops show,
and the result is the mean of the model's logits over exactly those views."""

from __future__ import annotations

import pytest
import torch

from course_utils.training import data as cdata
from course_utils.training.evaluation import evaluate, final_test


def _images(b=3, h=6, w=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return cdata.normalize(
        torch.randint(1, 256, (b, 3, h, w), generator=g, dtype=torch.uint8)
    )


@pytest.mark.parametrize(
    "dy,dx", [(1, 0), (-1, 0), (0, 1), (0, -1), (2, -1), (-2, 3)]
)
def test_translate_moves_the_content_and_fills_black(dy, dx):
    x = _images()
    t = cdata.translate(x, dy, dx)
    h, w = x.shape[-2:]
    black = cdata.normalize(torch.zeros(1, 3, 1, 1, dtype=torch.uint8))
    for i in range(h):
        for j in range(w):
            si, sj = i - dy, j - dx  # where the pixel came from
            want = (
                x[:, :, si, sj]
                if 0 <= si < h and 0 <= sj < w
                else black[:, :, 0, 0].expand(3, 3)
            )
            torch.testing.assert_close(t[:, :, i, j], want)


def test_translate_keeps_the_memory_format_and_leaves_zero_shifts_alone():
    x = _images().contiguous(memory_format=torch.channels_last)
    assert cdata.translate(x, 1, 0).is_contiguous(
        memory_format=torch.channels_last
    )
    assert cdata.translate(x, 0, 0) is x
    assert cdata.translate(_images(), 0, 1).is_contiguous()


def test_a_shifted_view_is_a_crop_the_training_augmentation_can_draw():
    raw = torch.randint(1, 256, (1, 3, 8, 8), dtype=torch.uint8)
    crops = {
        tuple(
            cdata.random_crop_flip(
                raw,
                padding=4,
                flip=False,
                generator=torch.Generator().manual_seed(s),
            )
            .flatten()
            .tolist()
        )
        for s in range(400)
    }
    shifted = cdata.translate(cdata.normalize(raw), 1, -1) - cdata.normalize(
        torch.zeros_like(raw)
    )
    # the same picture in uint8: undo normalize's affine map
    std = torch.tensor(cdata.STD).view(1, 3, 1, 1)
    as_uint8 = torch.round(shifted * std * 255).to(torch.uint8)
    assert tuple(as_uint8.flatten().tolist()) in crops


def test_evaluate_averages_the_logits_of_every_view():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Linear(3 * 6 * 5, 4)
    )
    x, y = _images(b=8), torch.randint(0, 4, (8,))
    shifts = ((1, 0), (0, -1))
    views = [x, cdata.translate(x, 1, 0), cdata.translate(x, 0, -1)]
    views += [v.flip(-1) for v in views]
    with torch.no_grad():
        mean_logits = sum(model(v) for v in views) / len(views)
    got = evaluate(model, [(x, y)], flip=True, shifts=shifts)
    want_loss = torch.nn.functional.cross_entropy(mean_logits, y).item()
    assert got["acc"] == pytest.approx(
        (mean_logits.argmax(-1) == y).float().mean().item()
    )
    assert got["loss"] == pytest.approx(want_loss, rel=1e-5)
    # without flip: the three unmirrored views only; without shifts: the two mirrored ones
    three = sum(model(v) for v in views[:3]) / 3
    assert evaluate(model, [(x, y)], shifts=shifts)["loss"] == pytest.approx(
        torch.nn.functional.cross_entropy(three, y).item(), rel=1e-5
    )
    two = (model(x) + model(x.flip(-1))) / 2
    assert evaluate(model, [(x, y)], flip=True)["loss"] == pytest.approx(
        torch.nn.functional.cross_entropy(two, y).item(), rel=1e-5
    )


def test_evaluate_reads_the_image_alone_from_the_same_passes():
    """``acc_single_view``: the first view (the image as it is) alone, whatever else is averaged."""
    torch.manual_seed(3)
    model = torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Linear(3 * 6 * 5, 4)
    )
    batches = [
        (_images(b=16, seed=s), torch.randint(0, 4, (16,))) for s in (4, 5)
    ]
    alone = evaluate(model, batches)
    assert "acc_single_view" not in alone  # one view: acc is already that
    for kwargs in (
        dict(flip=True),
        dict(shifts=((1, 0), (0, 1))),
        dict(flip=True, shifts=((1, 0),)),
    ):
        got = evaluate(model, batches, **kwargs)
        assert got["acc_single_view"] == alone["acc"], kwargs
    # the mirrored image alone is another reading: the key is the unmirrored, unshifted view's
    mirrored = evaluate(model, [(x.flip(-1), y) for x, y in batches])
    views = evaluate(model, batches, flip=True)
    assert {mirrored["acc"], views["acc"]} != {alone["acc"]}


def test_the_final_test_reports_each_view_beside_fewer():
    """``final_test``: the run's views on the test set, and on the same weights the per-epoch
    validation's views, the shifted views on validation and one view."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Linear(3 * 6 * 5, 4)
    )
    test = [(_images(b=8, seed=1), torch.randint(0, 4, (8,)))]
    val = [(_images(b=8, seed=2), torch.randint(0, 4, (8,)))]
    shifts = ((1, 0),)
    got = final_test(model, test, val, None, flip=True, shifts=shifts)
    assert got["test_views"] == 4 and got["classes"][0] == "airplane"
    assert (
        got["test_acc"]
        == evaluate(model, test, flip=True, shifts=shifts)["acc"]
    )
    assert sum(map(sum, got["test_confusion"])) == 8
    assert got["test_acc_flip"] == evaluate(model, test, flip=True)["acc"]
    assert (
        got["best_val_acc_test_views"]
        == evaluate(model, val, flip=True, shifts=shifts)["acc"]
    )
    assert got["test_acc_single_view"] == evaluate(model, test)["acc"]
    plain = final_test(model, test, val, None, flip=False, shifts=())
    assert plain["test_views"] == 1 and not {
        "test_acc_flip",
        "test_acc_single_view",
    } & set(plain)


@pytest.mark.parametrize("padding", [0, 2, 4])
def test_the_loader_moves_images_by_at_most_the_recipes_crop_padding(
    padding,
):
    """A bright pixel in the centre of a black image lands within ``crop_padding`` pixels of where
    it was, and over many draws reaches every offset up to it (so the reach is used, not just bounded)."""
    raw = torch.zeros(256, 3, 9, 9, dtype=torch.uint8)
    raw[:, :, 4, 4] = 255
    loader = cdata.BatchLoader(
        raw,
        torch.zeros(256, dtype=torch.long),
        256,
        shuffle=True,
        augment=True,
        crop_padding=padding,
    )
    ((x, _),) = list(loader)
    bright = x[:, 0].flatten(1).argmax(1)
    rows, cols = bright // 9 - 4, bright % 9 - 4
    assert rows.abs().max() == padding and cols.abs().max() == padding


def test_a_recipe_refuses_a_crop_padding_that_is_not_a_pixel_count():
    from course_utils.training.recipes import Recipe

    with pytest.raises(
        ValueError, match="crop_padding=-1 must be a whole number"
    ):
        Recipe(name="x", crop_padding=-1)
    with pytest.raises(ValueError, match="crop_padding=2.5"):
        Recipe(name="x", crop_padding=2.5)
