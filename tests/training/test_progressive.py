"""Progressive resizing: a recipe's early epochs train on smaller images (``Recipe.progressive``),
which ``FastViT`` takes through ``extra_sizes`` with its positions resampled to the coarser grid."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from course_utils.models.vit_fast import FastViT
from course_utils.references.positional import resample_grid
from course_utils.training import data as cdata
from course_utils.training.recipes import (
    Recipe,
    apply_overrides,
    from_stored,
)
from course_utils.training.trainer import train

# img 32, patch 8 (a 4x4 grid), 10 classes, dim 24, depth 1, 2 heads, MLP 48
ARGS = (32, 8, 10, 24, 1, 2, 48)


def _pair(**kwargs) -> tuple[FastViT, FastViT]:
    """The same weights with and without ``extra_sizes`` (the other ``kwargs`` on both)."""
    plain_kwargs = {k: v for k, v in kwargs.items() if k != "extra_sizes"}
    torch.manual_seed(0)
    plain = FastViT(*ARGS, **plain_kwargs).eval()
    torch.manual_seed(0)
    other = FastViT(*ARGS, **kwargs).eval()
    return plain, other


@pytest.mark.parametrize("pool", ["cls", "seq"])
def test_extra_sizes_leave_full_size_images_as_they_were(pool):
    plain, other = _pair(pool=pool, extra_sizes=(16, 24))
    x = torch.randn(3, 3, 32, 32)
    assert torch.equal(plain(x), other(x))
    assert plain.state_dict().keys() == other.state_dict().keys()


@pytest.mark.parametrize("pool", ["cls", "seq"])
def test_a_smaller_image_reads_the_position_table_resampled_to_its_grid(
    pool,
):
    _, model = _pair(pool=pool, extra_sizes=(24,))
    x = torch.randn(2, 3, 24, 24)
    prefix = 1 if pool == "cls" else 0
    # (1, prefix + 3*3, dim): the 4x4 table at a 3x3 grid
    expected = resample_grid(model.pos_embed, 4, 3, num_prefix_tokens=prefix)
    assert torch.equal(model.positions(x), expected)
    assert model.tokens(x).shape == (2, prefix + 9, 24)
    assert torch.equal(
        model.positions(torch.randn(1, 3, 32, 32)), model.pos_embed
    )
    # training on the small images trains the full table (with PyTorch's initialisation: the
    # course's zeroes the head, where the first step's gradient would stop)
    torch.manual_seed(0)
    model = FastViT(*ARGS, pool=pool, extra_sizes=(24,), init="pytorch")
    model(x).sum().backward()
    assert (
        model.pos_embed.grad is not None
        and model.pos_embed.grad.abs().sum() > 0
    )


def test_sizes_not_listed_and_bad_lists_are_refused_by_name():
    _, model = _pair(extra_sizes=(24,))
    with pytest.raises(ValueError, match="expected 32x32 images"):
        model(torch.randn(1, 3, 16, 16))
    with pytest.raises(ValueError, match="expected 32x32 images"):
        model(torch.randn(1, 3, 24, 16))
    for bad in ((20,), (32,), (40,), (0,)):
        with pytest.raises(
            ValueError, match="extra_sizes=.*divisible by the patch size 8"
        ):
            FastViT(*ARGS, extra_sizes=bad)


def _recipe(**changes) -> Recipe:
    return Recipe(
        name="tiny",
        model_kwargs=dict(
            img_size=32,
            num_classes=10,
            patch_size=8,
            dim=16,
            depth=1,
            num_heads=2,
            mlp_dim=32,
            extra_sizes=(16, 24),
        ),
        **changes,
    )


def test_the_schedule_takes_the_first_pair_that_holds_then_full_size():
    recipe = _recipe(progressive=((16, 0.25), (24, 0.5)), epochs=8)
    assert [recipe.train_size(e, 8) for e in range(8)] == [
        16,
        16,
        24,
        24,
        None,
        None,
        None,
        None,
    ]
    # the command line and a stored recipe give lists
    listed = apply_overrides(
        _recipe(epochs=8), ["progressive=[[16,0.25],[24,0.5]]"]
    )
    assert listed.progressive == ((16, 0.25), (24, 0.5))
    assert (
        from_stored(dataclasses.asdict(recipe)).progressive
        == recipe.progressive
    )
    assert _recipe().train_size(0, 8) is None


@pytest.mark.parametrize(
    "pairs, message",
    [
        (((24, 0.5), (16, 0.75)), "both rising"),
        (((16, 0.5), (24, 0.25)), "both rising"),
        (((24, 0.0),), r"in \(0, 1\]"),
        (((24, 1.5),), r"in \(0, 1\]"),
        ((24, 0.5), "pairs"),
        (((8, 0.5),), r"add them to model_kwargs\['extra_sizes'\]"),
    ],
)
def test_a_bad_schedule_is_refused_with_the_fix(pairs, message):
    with pytest.raises(ValueError, match=message):
        _recipe(progressive=pairs)


def test_the_trainer_downsizes_training_batches_only_in_the_scheduled_epochs(
    tmp_path,
):
    split = cdata.split_validation(
        cdata.synthetic_cifar(n_train=256, n_test=64), val_size=64
    )
    recipe = _recipe(
        progressive=((24, 0.5),),
        epochs=2,
        batch_size=64,
        amp="none",
        warmup_epochs=0.5,
    )
    seen: list[tuple[bool, int]] = []

    def spy(module, args):
        seen.append((module.training, args[0].shape[-1]))

    original = FastViT.__init__

    def hooked(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.register_forward_pre_hook(spy)

    FastViT.__init__ = hooked
    try:
        result = train(
            recipe,
            tmp_path / "run",
            data=split,
            evaluate_test=False,
            log=lambda *_: None,
        )
    finally:
        FastViT.__init__ = original
    steps = len(split.train_images) // 64
    training = [side for is_training, side in seen if is_training]
    assert training == [24] * steps + [32] * steps
    assert {side for is_training, side in seen if not is_training} == {32}
    assert len(result["history"]) == 2
