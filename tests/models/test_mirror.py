"""A mirror-symmetric ViT (``models.mirror``, ``FastViT(mirror=True)``): an image and its mirror get
the same logits, in evaluation and in training, before and after optimiser steps, and the ties
keep what the rest of the course relies on (initial scale, weight decay groups, state dicts)."""

from __future__ import annotations

import pytest
import torch

from course_utils.models.mirror import PairedBatchNorm2d, swap
from course_utils.models.vit_fast import FastViT
from course_utils.training.optim import parameter_groups

SMALL = dict(
    img_size=16,
    patch_size=4,
    num_classes=10,
    dim=32,
    depth=2,
    num_heads=2,
    mlp_dim=64,
    stem_channels=(8, 16),
    stem_convs=(1, 2),
    dropout=0.0,
    init="pytorch",  # the cpu recipes' (the course's zeroes the head: every logit 0 at the start)
)


def _model(seed: int = 0, **kw) -> FastViT:
    torch.manual_seed(seed)
    return FastViT(**{**SMALL, "mirror": True, **kw})


def _images(n: int = 6, seed: int = 1) -> torch.Tensor:
    return torch.randn(
        n, 3, 16, 16, generator=torch.Generator().manual_seed(seed)
    )


@pytest.mark.parametrize("heads", [1, 2, 4])
def test_an_image_and_its_mirror_get_the_same_logits(heads):
    model = _model(num_heads=heads).eval()
    x = _images()
    with torch.no_grad():
        a, b = model(x), model(x.flip(-1))
    assert a.abs().max() > 1e-3  # not trivially zero
    assert torch.allclose(a, b, atol=1e-5), (a - b).abs().max()
    # the same model untied is not invariant: the check can fail
    torch.manual_seed(0)
    plain = FastViT(**SMALL).eval()
    with torch.no_grad():
        assert not torch.allclose(plain(x), plain(x.flip(-1)), atol=1e-3)


def test_a_flipped_batch_trains_like_the_batch_itself():
    """In training mode the paired batch norms see the same statistics for a batch and its mirror,
    so the logits (and the loss) are the same; after optimiser steps the ties still hold."""
    model = _model().train()
    opt = torch.optim.AdamW(parameter_groups(model, 0.05), lr=1e-2)
    x, y = _images(16), torch.arange(16) % 10
    for _ in range(3):
        logits = model(x)
        assert torch.allclose(logits, model(x.flip(-1)), atol=1e-5)
        loss = torch.nn.functional.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        assert torch.allclose(model(x), model(x.flip(-1)), atol=1e-5)


def test_channels_last_and_bf16_keep_the_symmetry():
    model = _model().to(memory_format=torch.channels_last).eval()
    x = _images().contiguous(memory_format=torch.channels_last)
    flipped = x.flip(-1).contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        assert torch.allclose(model(x), model(flipped), atol=1e-5)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            a, b = model(x).float(), model(flipped).float()
    # bf16 rounds each path differently: equal to bf16's precision, not to float32's
    assert (a - b).abs().max() <= 0.02 * a.abs().max()


def test_the_ties_keep_the_initial_scale_and_halve_the_free_parameters():
    torch.manual_seed(0)
    plain = FastViT(**SMALL)
    tied = _model()
    for name in ("blocks.0.attn.w_q", "blocks.1.mlp.0", "patch_embed.net.0"):
        p = plain.get_submodule(name).weight
        t = tied.get_submodule(name).weight
        assert 0.75 < t.std().item() / p.std().item() < 1.33, name
    # the first convolution: each odd filter is its even twin mirrored left-right
    w = tied.patch_embed.net[0].weight
    half = w.shape[0] // 2
    assert torch.allclose(w[half:], w[:half].flip(-1))


def test_weight_decay_skips_the_tied_position_table_and_cls_token():
    model = _model()
    names = model.no_weight_decay()
    assert names == {
        "parametrizations.pos_embed.original",
        "parametrizations.cls_token.original",
    }
    decayed = {id(p) for p in parameter_groups(model, 0.05)[0]["params"]}
    params = dict(model.named_parameters())
    assert all(id(params[n]) not in decayed for n in names)
    assert (
        id(params["blocks.0.attn.w_q.parametrizations.weight.original"])
        in decayed
    )


def test_a_state_dict_reloads_into_a_new_tied_model():
    model = _model(seed=0)
    model.train()
    model(_images(8))  # move the running statistics
    other = _model(seed=5)
    other.load_state_dict(model.state_dict())
    model.eval(), other.eval()
    x = _images()
    with torch.no_grad():
        assert torch.equal(model(x), other(x))


@pytest.mark.parametrize(
    "change, named",
    [
        (dict(stem_channels=(6, 15)), "patch_embed.net"),
        (dict(dim=30, num_heads=2), "dim"),
        (dict(num_heads=4, dim=36), "head width"),
        (dict(mlp_dim=63), "mlp"),
    ],
)
def test_an_odd_width_is_refused_with_its_name(change, named):
    with pytest.raises(ValueError, match="must be even") as err:
        _model(**change)
    assert named in str(err.value)


def test_a_linear_patch_embedding_or_a_whitened_stem_is_refused():
    plain = {
        k: v
        for k, v in SMALL.items()
        if k not in ("stem_channels", "stem_convs")
    }
    with pytest.raises(ValueError, match="convolutional tokenizer"):
        FastViT(**plain, mirror=True)
    with pytest.raises(ValueError, match="cannot be combined"):
        _model(whiten_stem=True)


def test_swap_exchanges_pairs_and_is_its_own_inverse():
    t = torch.arange(8)
    assert swap(t, 0, "halves").tolist() == [4, 5, 6, 7, 0, 1, 2, 3]
    assert swap(t, 0, "pairs").tolist() == [1, 0, 3, 2, 5, 4, 7, 6]
    m = torch.randn(4, 6)
    for kind in ("halves", "pairs"):
        assert torch.equal(swap(swap(m, 1, kind), 1, kind), m)
    with pytest.raises(ValueError, match="choose 'halves' or 'pairs'"):
        swap(t, 0, "odd")


def test_the_paired_batch_norm_normalises_each_pair_together():
    bn = PairedBatchNorm2d(6)
    assert bn.running_mean.shape == (3,)
    x = torch.randn(4, 6, 5, 5) * torch.arange(1.0, 7.0).view(1, 6, 1, 1)
    out = bn(
        x
    )  # contiguous memory: the table is a copy, the result the same
    both = torch.cat([out[:, :3], out[:, 3:]], dim=0)  # channel i with i + 3
    assert torch.allclose(
        both.mean(dim=(0, 2, 3)), torch.zeros(3), atol=1e-5
    )
    assert torch.allclose(
        both.var(dim=(0, 2, 3), unbiased=False), torch.ones(3), atol=1e-3
    )
    # one channel alone is not normalised: the statistics are the pair's
    assert not torch.allclose(
        out[:, 0].var(unbiased=False), torch.tensor(1.0), atol=0.05
    )
    with pytest.raises(ValueError, match="even width"):
        PairedBatchNorm2d(5)


def test_symmetric_positions_tie_the_table_alone():
    """``mirror_positions``: columns c and grid-1-c of the position table hold one vector (the rows
    and the CLS slot stay free), the rest of the network stays untied, so the model is not
    invariant; combined with ``mirror`` it is refused."""
    torch.manual_seed(0)
    model = FastViT(**SMALL, mirror_positions=True)
    cells = model.pos_embed[0, 1:].unflatten(0, (4, 4))
    assert torch.equal(cells, cells.flip(1))
    assert not torch.allclose(cells[0], cells[1])  # rows apart
    assert not torch.allclose(
        cells[:, 0], cells[:, 1]
    )  # columns 0 and 1 apart
    assert model.no_weight_decay() == {
        "parametrizations.pos_embed.original",
        "cls_token",
    }
    x = _images()
    model.eval()
    with torch.no_grad():
        assert not torch.allclose(model(x), model(x.flip(-1)), atol=1e-3)
    with pytest.raises(ValueError, match="not both"):
        _model(mirror_positions=True)
