"""``crop_until``: random crops for the first share of the epochs, then the images whole (as the
test shows them), decided epoch by epoch so that a resumed run keeps to it."""

from __future__ import annotations

import dataclasses

import pytest

from course_utils.experiments.recipes import RECIPES
from course_utils.training import data as cdata
from course_utils.training import trainer


@pytest.mark.parametrize("bad", [0, 0.0, -0.5, 1.5, "0.9", None])
def test_a_recipe_refuses_a_crop_share_outside_its_range(bad):
    with pytest.raises(
        ValueError, match=r"crop_until=.*--set crop_until=0\.9"
    ):
        dataclasses.replace(RECIPES["smoke"], crop_until=bad)


def test_the_last_epochs_train_on_whole_images_and_a_resumed_run_keeps_to_it(
    tmp_path, split, monkeypatch
):
    paddings = []
    real = cdata.random_crop_flip

    def spy(images, *, padding=4, **kwargs):
        paddings.append(padding)
        return real(images, padding=padding, **kwargs)

    monkeypatch.setattr(cdata, "random_crop_flip", spy)
    # 3 epochs: crops in epochs 1 and 2 (0 and 1 < 0.5 * 3 = 1.5), the third whole
    recipe = dataclasses.replace(
        RECIPES["smoke"], augment=True, crop_padding=3, crop_until=0.5
    )
    quiet = dict(data=split, log=lambda *_: None)
    steps = len(split.train_images) // recipe.batch_size
    trainer.train(recipe, tmp_path / "whole", **quiet)
    assert paddings == [3] * (2 * steps) + [0] * steps

    paddings.clear()
    trainer.train(
        recipe,
        tmp_path / "split",
        max_epochs_this_call=1,
        evaluate_test=False,
        **quiet,
    )
    trainer.train(recipe, tmp_path / "split", **quiet)
    assert paddings == [3] * (2 * steps) + [0] * steps

    # the default crops every epoch
    paddings.clear()
    trainer.train(
        dataclasses.replace(recipe, crop_until=1.0),
        tmp_path / "all",
        **quiet,
    )
    assert paddings == [3] * (3 * steps)
