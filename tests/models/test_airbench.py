"""The airbench tokenizer (``models.airbench``): its tokens, its fixed whitening layer, what it
trains and what it refuses, inside ``FastViT(tokenizer="airbench")``."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from course_utils.models.airbench import AirbenchTokenizer
from course_utils.models.vit_fast import FastViT
from course_utils.models.whitening import whitening_filters

ARGS = dict(
    img_size=32,
    patch_size=8,
    num_classes=10,
    dim=32,
    depth=1,
    num_heads=2,
    mlp_dim=64,
    stem_channels=(8, 16),
    init="pytorch",
)


def test_tokens_have_the_reference_grid_and_the_model_classifies():
    torch.manual_seed(0)
    model = FastViT(**ARGS, tokenizer="airbench")
    assert isinstance(model.patch_embed, AirbenchTokenizer)
    x = torch.randn(3, 3, 32, 32)
    tokens = model.patch_embed(x)
    assert tokens.shape == (3, 16, 32)
    assert model.patch_embed.num_patches == 16
    assert model(x).shape == (3, 10)
    # channels-last (the recipe's memory format) computes the same
    cl = model.to(memory_format=torch.channels_last)
    assert torch.allclose(
        cl(x.contiguous(memory_format=torch.channels_last)),
        model(x),
        atol=1e-5,
    )


def test_the_group_pools_before_it_normalises():
    """conv -> pool -> norm -> GELU -> conv -> norm -> GELU; the second conv at the pooled size."""
    tok = AirbenchTokenizer(32, 8, 3, 32, (8,))
    kinds = [type(m).__name__ for m in tok.groups[0]]
    assert kinds == [
        "Conv2d",
        "MaxPool2d",
        "BatchNorm2d",
        "GELU",
        "Conv2d",
        "BatchNorm2d",
        "GELU",
    ]
    seen = {}

    def record(module, inputs, output):
        seen["side"] = output.shape[-1]

    tok.groups[0][4].register_forward_hook(record)
    tok(torch.randn(2, 3, 32, 32))
    assert seen["side"] == 15  # 32 - 1 after the 2x2 whitening, then halved


def test_whitening_is_set_from_data_and_held_fixed_and_norms_train_shifts_only():
    torch.manual_seed(0)
    model = FastViT(**ARGS, tokenizer="airbench")
    tok = model.patch_embed
    images = torch.randn(64, 3, 32, 32)
    model.init_from_data(images)
    assert torch.equal(
        tok.whiten.weight, whitening_filters(images, 24, kernel=2)
    )
    assert (tok.whiten.bias == 0).all()
    assert (
        not tok.whiten.weight.requires_grad and tok.whiten.bias.requires_grad
    )
    norms = [m for m in tok.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert len(norms) == 4
    assert all(
        not n.weight.requires_grad and n.bias.requires_grad for n in norms
    )
    # a backward pass leaves the fixed parameters without a gradient
    F.cross_entropy(model(images[:8]), torch.arange(8)).backward()
    assert tok.whiten.weight.grad is None
    assert all(n.weight.grad is None for n in norms)
    assert tok.whiten.bias.grad is not None


def test_the_convolutional_parameters_are_the_trainable_ones_before_the_projection():
    tok = AirbenchTokenizer(32, 8, 3, 32, (8, 16))
    named = {id(p) for p in tok.convolutional_parameters()}
    trainable = {id(p) for p in tok.parameters() if p.requires_grad}
    projection = {id(p) for p in tok.proj.parameters()}
    assert named == trainable - projection
    assert (
        len(named) == 1 + 2 * 2 + 2 * 2
    )  # whitening bias; per group 2 kernels, 2 shifts


def test_too_many_groups_for_the_grid_are_refused():
    with pytest.raises(ValueError, match="too few for a 4x4 token grid"):
        AirbenchTokenizer(32, 8, 3, 32, (8, 8, 8))


@pytest.mark.parametrize(
    "extra, named",
    [
        (dict(stem_convs=2), "stem_convs"),
        (dict(extra_sizes=(24,)), "extra_sizes"),
        (dict(whiten_stem=True), "whiten_stem"),
        (dict(mirror=True), "mirror"),
        (dict(stem_channels=None), "no stem_channels"),
    ],
)
def test_fastvit_refuses_what_the_airbench_tokenizer_does_not_take(
    extra, named
):
    with pytest.raises(ValueError, match=f"given: {named}"):
        FastViT(**{**ARGS, **extra}, tokenizer="airbench")


def test_an_unknown_tokenizer_is_named():
    with pytest.raises(
        ValueError, match="tokenizer='airbnb' is not a choice"
    ):
        FastViT(**ARGS, tokenizer="airbnb")


def test_tail_convs_work_at_the_last_groups_resolution_and_train_with_the_tokenizer():
    """Each tail layer is conv3x3 -> norm (shift only) -> GELU at the last width, on the map before
    the pool to the grid; its kernels and shifts are convolutional parameters (trained by SGD)."""
    tok = AirbenchTokenizer(32, 8, 3, 32, (8, 16), tail_convs=2)
    assert len(tok.tail) == 2
    for layer in tok.tail:
        assert [type(m).__name__ for m in layer] == [
            "Conv2d",
            "BatchNorm2d",
            "GELU",
        ]
        assert (layer[0].in_channels, layer[0].out_channels) == (16, 16)
        assert not layer[1].weight.requires_grad
    seen = {}

    def record(module, inputs, output):
        seen["side"] = output.shape[-1]

    tok.tail[0][0].register_forward_hook(record)
    assert tok(torch.randn(2, 3, 32, 32)).shape == (2, 16, 32)
    assert (
        seen["side"] == 7
    )  # 32 -> 31 (whitening) -> 15 -> 7, before the pool to 4x4
    named = {id(p) for p in tok.convolutional_parameters()}
    assert {id(p) for p in tok.tail.parameters() if p.requires_grad} <= named
    assert (
        len(named) == 1 + 2 * 2 + 2 * 2 + 2 * 2
    )  # whitening bias; groups; tail kernels, shifts
    model = FastViT(**ARGS, tokenizer="airbench", tail_convs=1)
    assert len(model.patch_embed.tail) == 1


@pytest.mark.parametrize("bad", [-1, 1.5, "1"])
def test_a_tail_that_is_no_layer_count_is_refused(bad):
    with pytest.raises(ValueError, match="whole number of layers"):
        AirbenchTokenizer(32, 8, 3, 32, (8,), tail_convs=bad)


def test_tail_convs_without_the_airbench_tokenizer_are_refused():
    with pytest.raises(ValueError, match="belongs to tokenizer='airbench'"):
        FastViT(**ARGS, tail_convs=1)
