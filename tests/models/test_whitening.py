"""A whitened first layer: ``models.whitening`` gives filters that decorrelate patches, and
``FastViT(whiten_stem=True)`` holds them fixed, with no gradient through its full-resolution layer."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from course_utils.models.vit_fast import FastViT
from course_utils.models.whitening import whitening_filters
from course_utils.training import data as cdata
from course_utils.training.recipes import Recipe
from course_utils.training.trainer import train


def _images(n: int = 64, seed: int = 0) -> torch.Tensor:
    """Correlated images (N, 3, 16, 16): smoothed noise, channels mixed."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, 18, 18, generator=g)
    x = F.avg_pool2d(x, 3, stride=1)  # neighbouring pixels correlate
    mix = torch.tensor([[1.0, 0.5, 0.2], [0.3, 1.0, 0.4], [0.1, 0.6, 1.0]])
    return torch.einsum("dc,nchw->ndhw", mix, x)


def test_the_filters_decorrelate_the_patches_and_come_in_signed_pairs():
    images = _images()
    filters = whitening_filters(images, channels=16, eps=0.0)
    assert filters.shape == (16, 3, 3, 3)
    assert torch.equal(filters[8:], -filters[:8])
    # the leading 8 responses over every patch: unit variance, uncorrelated
    out = F.conv2d(images.double(), filters[:8].double())
    flat = out.transpose(0, 1).reshape(8, -1)
    cov = torch.cov(flat, correction=0)
    assert torch.allclose(cov, torch.eye(8, dtype=cov.dtype), atol=1e-6)
    # in decreasing order of the patches' variance: the first filter is the weakest (it scales the
    # strongest direction down the most)
    norms = filters[:8].flatten(1).norm(dim=1)
    assert (norms[1:] >= norms[:-1] - 1e-6).all()
    # deterministic: the same images give the same filters
    assert torch.equal(
        filters, whitening_filters(images, channels=16, eps=0.0)
    )


@pytest.mark.parametrize("channels", [7, 0, 56])
def test_a_width_the_patches_cannot_fill_is_refused(channels):
    with pytest.raises(ValueError, match="must be even and at most 54"):
        whitening_filters(_images(8), channels)


ARGS = dict(
    img_size=16,
    patch_size=4,
    num_classes=10,
    dim=24,
    depth=1,
    num_heads=2,
    mlp_dim=48,
    stem_channels=(16, 32),
    stem_convs=(1, 2),
)


def test_a_whitened_stem_is_fixed_and_trains_nothing_at_full_resolution():
    torch.manual_seed(0)
    model = FastViT(**ARGS, whiten_stem=True, init="pytorch")
    conv, norm = model.patch_embed.net[0], model.patch_embed.net[1]
    images = _images()
    model.init_from_data(images)
    assert torch.equal(conv.weight, whitening_filters(images, 16))
    frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
    assert frozen == {
        "patch_embed.net.0.weight",
        "patch_embed.net.1.weight",
        "patch_embed.net.1.bias",
    }
    model(images).logsumexp(-1).sum().backward()
    assert conv.weight.grad is None and norm.weight.grad is None
    # the next layer trains
    assert model.patch_embed.net[4].weight.grad.abs().sum() > 0
    # without the option nothing changes: init_from_data does nothing
    torch.manual_seed(0)
    plain = FastViT(**ARGS, init="pytorch")
    before = plain.patch_embed.net[0].weight.clone()
    plain.init_from_data(images)
    assert torch.equal(before, plain.patch_embed.net[0].weight)
    assert all(p.requires_grad for p in plain.parameters())


def test_whiten_stem_needs_a_conv_tokenizer_and_an_even_width_it_can_fill():
    with pytest.raises(ValueError, match="needs a convolutional tokenizer"):
        FastViT(16, 4, 10, 24, 1, 2, 48, whiten_stem=True)
    with pytest.raises(ValueError, match="change stem_channels"):
        FastViT(**{**ARGS, "stem_channels": (15, 32)}, whiten_stem=True)


def test_the_trainer_whitens_from_the_training_images_and_keeps_the_filters(
    tmp_path,
):
    split = cdata.split_validation(
        cdata.synthetic_cifar(n_train=256, n_test=64), val_size=64
    )
    recipe = Recipe(
        name="tiny",
        model_kwargs={**ARGS, "img_size": 32, "whiten_stem": True},
        epochs=1,
        batch_size=64,
        amp="none",
        warmup_epochs=0.5,
    )
    train(
        recipe,
        tmp_path / "run",
        data=split,
        evaluate_test=False,
        log=lambda *_: None,
    )
    weights = torch.load(
        tmp_path / "run" / "checkpoint.pt", weights_only=False
    )["model"]
    expected = whitening_filters(cdata.normalize(split.train_images), 16)
    assert torch.allclose(weights["patch_embed.net.0.weight"], expected)
    assert dataclasses.asdict(recipe)["model_kwargs"]["whiten_stem"] is True
