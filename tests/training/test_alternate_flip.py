"""Alternating flips (``flip="alternate"``): each training image is shown both ways round in any two
consecutive epochs, its first orientation drawn once from the seed, while the batches' order and
crops stay those of random flips; a recipe or loader that names another kind of flip is refused."""

from __future__ import annotations

import pytest
import torch

from course_utils.training import data as cdata


def _orientations(
    loader: cdata.BatchLoader, originals: torch.Tensor
) -> torch.Tensor:
    """bool ``(N,)``: which images the loader's current epoch shows mirrored (labels are indexes;
    no crop, so each output is its image or its mirror exactly)."""
    mirrored = torch.zeros(len(originals), dtype=torch.bool)
    seen = torch.zeros(len(originals), dtype=torch.bool)
    as_is, flipped = (
        cdata.normalize(originals),
        cdata.normalize(originals.flip(-1)),
    )
    for x, y in loader:
        for image, i in zip(x, y.tolist()):
            same, mirror = (
                torch.equal(image, as_is[i]),
                torch.equal(image, flipped[i]),
            )
            assert same != mirror, (
                f"image {i} is neither itself nor its mirror"
            )
            mirrored[i], seen[i] = mirror, True
    assert seen.all()
    return mirrored


def _loader(images, flip, seed=0):
    return cdata.BatchLoader(
        images,
        torch.arange(len(images)),
        16,
        shuffle=True,
        augment=True,
        crop_padding=0,
        flip=flip,
        seed=seed,
    )


@pytest.fixture
def images():
    # no picture equals its own mirror
    return torch.randint(
        0,
        256,
        (96, 3, 6, 6),
        dtype=torch.uint8,
        generator=torch.Generator().manual_seed(1),
    )


def test_every_image_turns_over_every_epoch(images):
    loader = _loader(images, "alternate")
    seen = []
    for epoch in range(4):
        loader.set_epoch(epoch)
        seen.append(_orientations(loader, images))
    for before, after in zip(seen, seen[1:]):
        assert torch.equal(after, ~before)
    # the first orientation is a fair draw, not "all as they are"
    assert 0.25 < seen[0].float().mean() < 0.75
    # and it is the seed's: another seed draws others, the same seed the same
    other, again = (
        _loader(images, "alternate", seed=1),
        _loader(images, "alternate"),
    )
    assert not torch.equal(_orientations(other, images), seen[0])
    assert torch.equal(_orientations(again, images), seen[0])


def test_random_flips_do_not_alternate(images):
    loader = _loader(images, "random")
    first = _orientations(loader, images)
    loader.set_epoch(1)
    second = _orientations(loader, images)
    # about half the images keep their orientation from one epoch to the next
    assert 0.25 < (first == second).float().mean() < 0.75


def test_alternating_keeps_the_order_and_the_crops_of_random_flips():
    """Only the mirroring differs: with the flip undone, the batches are identical."""
    images = torch.randint(
        0,
        256,
        (64, 3, 8, 8),
        dtype=torch.uint8,
        generator=torch.Generator().manual_seed(2),
    )
    runs = {}
    for flip in ("random", "alternate"):
        loader = cdata.BatchLoader(
            images,
            torch.arange(64),
            16,
            shuffle=True,
            augment=True,
            crop_padding=2,
            flip=flip,
            seed=3,
        )
        loader.set_epoch(5)
        runs[flip] = list(loader)
    for (xr, yr), (xa, ya) in zip(runs["random"], runs["alternate"]):
        assert torch.equal(yr, ya)
        for a, b in zip(xr, xa):
            assert torch.equal(a, b) or torch.equal(a, b.flip(-1))


def test_a_mirror_mask_is_checked():
    with pytest.raises(ValueError, match="mirror must be bool"):
        cdata.random_crop_flip(
            torch.zeros(4, 3, 8, 8, dtype=torch.uint8),
            mirror=torch.ones(3, dtype=torch.bool),
        )


def test_another_kind_of_flip_is_refused_with_the_choices():
    from course_utils.experiments.recipes import RECIPES
    from course_utils.training.recipes import apply_overrides

    with pytest.raises(
        ValueError,
        match=r"flip='alternating'.*'random', 'alternate'.*--set flip=",
    ):
        apply_overrides(RECIPES["smoke"], {"flip": "alternating"})
    with pytest.raises(ValueError, match="flip='sometimes'"):
        cdata.BatchLoader(
            torch.zeros(4, 3, 8, 8, dtype=torch.uint8),
            torch.zeros(4),
            2,
            flip="sometimes",
        )


@pytest.mark.xdist_group("train")
def test_a_recipe_passes_its_flip_to_the_training_batches(
    monkeypatch, tmp_path, split
):
    """The trainer builds its training loader with the recipe's ``flip``."""
    import dataclasses

    from course_utils.experiments.recipes import RECIPES
    from course_utils.training import trainer

    made = []
    real = cdata.BatchLoader.__init__

    def spy(self, *args, **kwargs):
        real(self, *args, **kwargs)
        if self.augment:
            made.append(self.flip)

    monkeypatch.setattr(cdata.BatchLoader, "__init__", spy)
    recipe = dataclasses.replace(RECIPES["smoke"], flip="alternate")
    trainer.train(
        recipe,
        tmp_path,
        data=split,
        max_epochs_this_call=1,
        evaluate_test=False,
        log=lambda *_: None,
    )
    assert made == ["alternate"]
