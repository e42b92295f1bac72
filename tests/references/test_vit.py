"""The reference Vision Transformer (course_utils.references.vit) against direct computations and the literature:
patchify against a loop over patches, the Conv2d patch embedding against patchify + Linear, the fused
attention path against the readable one, the pre-norm property, parameter counts against the ViT
paper's table, memorising one batch, the convolutional tokenizer, and errors for bad inputs."""

from __future__ import annotations

import time

import pytest
import torch
from einops import rearrange
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from course_utils.models.vit_fast import FastEncoderBlock, FastViT
from course_utils.references import vit


def _patches_by_loop(images: torch.Tensor, p: int) -> torch.Tensor:
    """Patch n = (i, j) in row-major order; inside it pixel (p1, p2) in reading order, channels together."""
    b, c, h, w = images.shape
    out = torch.empty(b, (h // p) * (w // p), p * p * c, dtype=images.dtype)
    for i in range(h // p):
        for j in range(w // p):
            k = 0
            for p1 in range(p):
                for p2 in range(p):
                    for ch in range(c):
                        out[:, i * (w // p) + j, k] = images[
                            :, ch, i * p + p1, j * p + p2
                        ]
                        k += 1
    return out


@settings(max_examples=40, deadline=None)
@given(
    b=st.integers(1, 3),
    c=st.integers(1, 4),
    hp=st.integers(1, 4),
    wp=st.integers(1, 4),
    p=st.integers(1, 4),
    double=st.booleans(),
)
def test_patchify_matches_a_loop_over_patches(b, c, hp, wp, p, double):
    dtype = torch.float64 if double else torch.float32
    images = torch.randn(b, c, hp * p, wp * p, dtype=dtype)
    got = vit.patchify(images, p)
    assert got.shape == (b, hp * wp, p * p * c) and got.dtype == dtype
    assert torch.equal(got, _patches_by_loop(images, p))


def test_patchify_keeps_integer_images_and_labelled_example():
    c, r, w = torch.meshgrid(
        torch.arange(2), torch.arange(4), torch.arange(6), indexing="ij"
    )
    # int64: value says (channel, row, col)
    labelled = (100 * c + 10 * r + w)[None]
    patches = vit.patchify(labelled, 2)
    assert patches.dtype == torch.int64
    assert patches[0, 1].tolist() == [2, 102, 3, 103, 12, 112, 13, 113]
    assert patches[0, 3].tolist() == [20, 120, 21, 121, 30, 130, 31, 131]


@pytest.mark.parametrize(
    "img,p,c,dim",
    [(32, 4, 3, 16), (16, 8, 1, 7), (12, 3, 5, 9), (8, 1, 3, 4)],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_conv_patch_embedding_equals_patchify_plus_linear(
    img, p, c, dim, dtype
):
    torch.manual_seed(0)
    embed = vit.PatchEmbedding(img, p, c, dim).to(dtype)
    linear = nn.Linear(p * p * c, dim).to(dtype)
    with torch.no_grad():
        linear.weight.copy_(
            rearrange(embed.proj.weight, "d c p1 p2 -> d (p1 p2 c)")
        )
        linear.bias.copy_(embed.proj.bias)
    images = torch.randn(3, c, img, img, dtype=dtype)
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(
        embed(images), linear(vit.patchify(images, p)), atol=tol, rtol=tol
    )
    assert embed.num_patches == (img // p) ** 2


def _fast_twin(block: vit.EncoderBlock) -> FastEncoderBlock:
    """The trainer's fused block carrying ``block``'s weights."""
    attn = block.attn
    fast = FastEncoderBlock(
        attn.d_model,
        attn.num_heads,
        block.mlp[0].out_features,
        block.drop1.p,
        qkv_bias=attn.w_q.bias is not None,
    )
    fast.load_state_dict(block.state_dict())
    return fast.to(block.norm1.weight.dtype).train(block.training)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(
    "dim,heads,n", [(16, 4, 5), (12, 3, 1), (24, 6, 17)]
)
def test_fused_block_equals_the_reference_block(dtype, dim, heads, n):
    torch.manual_seed(1)
    block = vit.EncoderBlock(dim, heads, 2 * dim).to(dtype).eval()
    fast = _fast_twin(block)
    x = torch.randn(2, n, dim, dtype=dtype)
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(fast(x), block(x), atol=tol, rtol=tol)
    # training mode without dropout: still the same function
    block.train(), fast.train()
    torch.testing.assert_close(fast(x), block(x), atol=tol, rtol=tol)


def test_attention_maps_are_each_blocks_weights():
    torch.manual_seed(4)
    model = FastViT(16, 4, 10, 24, 2, 3, 48).eval()
    images = torch.randn(2, 3, 16, 16)
    maps = model.attention_maps(images)
    assert [tuple(m.shape) for m in maps] == [(2, 3, 17, 17)] * 2
    torch.testing.assert_close(maps[0].sum(-1), torch.ones(2, 3, 17))
    h = model.blocks[0].norm1(model.tokens(images))
    torch.testing.assert_close(maps[0], model.blocks[0].attn(h, h, h)[1])


def test_fast_vit_is_the_reference_vit_with_fused_blocks():
    """Same seed, same parameters and names (a stored state dict loads either way), same logits."""
    torch.manual_seed(5)
    reference = vit.ViT(16, 4, 10, 24, 2, 3, 48, stem_channels=(8,)).eval()
    torch.manual_seed(5)
    fast = FastViT(16, 4, 10, 24, 2, 3, 48, stem_channels=(8,)).eval()
    assert all(type(b) is FastEncoderBlock for b in fast.blocks)
    assert all(type(b) is vit.EncoderBlock for b in reference.blocks)
    assert list(reference.state_dict()) == list(fast.state_dict())
    assert all(
        torch.equal(a, b)
        for a, b in zip(
            reference.state_dict().values(), fast.state_dict().values()
        )
    )
    with torch.no_grad():
        reference.head.weight.normal_()
    fast.load_state_dict(reference.state_dict())
    images = torch.randn(3, 3, 16, 16)
    torch.testing.assert_close(
        fast(images), reference(images), atol=1e-5, rtol=1e-5
    )


@pytest.mark.parametrize("qkv_bias", [True, False])
def test_fused_block_bf16_training_path_equals_the_reference(qkv_bias):
    """Under CPU autocast with gradients on, the fused block takes the two-matmul path; same function."""
    torch.manual_seed(3)
    block = vit.EncoderBlock(24, 3, 48, qkv_bias=qkv_bias).train()
    assert (
        block.attn.w_q.bias is not None
    ) == qkv_bias and block.attn.w_o.bias is not None
    x = torch.randn(4, 9, 24)
    grads = []
    for module in (_fast_twin(block), block):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = module(x)
        out.float().square().mean().backward()
        grads.append(
            (
                out.float().detach(),
                [p.grad.clone() for p in module.parameters()],
            )
        )
    (fast, g_fast), (readable, g_readable) = grads
    torch.testing.assert_close(fast, readable, atol=3e-2, rtol=3e-2)
    for a, b in zip(g_fast, g_readable):
        torch.testing.assert_close(a, b, atol=3e-2, rtol=1e-1)


def test_vit_without_qkv_bias_matches_vit_pytorch_parameter_count():
    vp = pytest.importorskip("vit_pytorch")
    ours = vit.ViT(32, 4, 10, 192, 6, 3, 384, qkv_bias=False)
    theirs = vp.ViT(
        image_size=32,
        patch_size=4,
        num_classes=10,
        dim=192,
        depth=6,
        heads=3,
        mlp_dim=384,
        dim_head=64,
        pool="cls",
    )
    # vit-pytorch adds a LayerNorm before and after its patch Linear (2 x 48 + 2 x 192 parameters).
    assert (
        vit.count_parameters(theirs) - vit.count_parameters(ours)
        == 2 * 48 + 2 * 192
    )


def test_encoder_block_is_the_pre_norm_formula():
    torch.manual_seed(2)
    block = vit.EncoderBlock(16, 4, 32).double().eval()
    with torch.no_grad():
        for norm in (block.norm1, block.norm2):
            norm.weight.normal_(1.0, 0.3)
            norm.bias.normal_(0.0, 0.3)
    x = torch.randn(3, 6, 16, dtype=torch.float64)
    h = block.norm1(x)
    mid = x + block.attn(h, h, h)[0]
    expected = mid + block.mlp(block.norm2(mid))
    torch.testing.assert_close(block(x), expected)
    # the pre-norm property: silence both branches and the block is the identity (post-norm would give LN(x))
    with torch.no_grad():
        for layer in (block.attn.w_o, block.mlp[3]):
            layer.weight.zero_()
            layer.bias.zero_()
    torch.testing.assert_close(block(x), x)


def test_vit_forward_is_cls_first_plus_positions_then_head_on_cls():
    torch.manual_seed(3)
    model = vit.ViT(16, 4, 10, 24, 2, 3, 48).double().eval()
    with torch.no_grad():
        model.head.weight.normal_()
        model.pos_embed.normal_()
    images = torch.randn(2, 3, 16, 16, dtype=torch.float64)
    z = (
        torch.cat(
            [model.cls_token.expand(2, -1, -1), model.patch_embed(images)], 1
        )
        + model.pos_embed
    )
    for block in model.blocks:
        z = block(z)
    torch.testing.assert_close(
        model(images), model.head(model.norm(z[:, 0]))
    )
    maps = model.attention_maps(images)
    assert len(maps) == 2 and all(m.shape == (2, 3, 17, 17) for m in maps)
    torch.testing.assert_close(
        maps[0].sum(-1), torch.ones(2, 3, 17, dtype=torch.float64)
    )


def test_vit_without_position_embedding_cannot_tell_an_image_from_its_jigsaw():
    torch.manual_seed(4)
    model = vit.ViT(32, 8, 10, 32, 2, 4, 64).double().eval()
    with torch.no_grad():
        model.head.weight.normal_()
    images = torch.randn(2, 3, 32, 32, dtype=torch.float64)
    tiles = rearrange(
        images, "b c (h p1) (w p2) -> b (h w) c p1 p2", p1=8, p2=8
    )
    jigsaw = rearrange(
        tiles[:, torch.randperm(16)],
        "b (h w) c p1 p2 -> b c (h p1) (w p2)",
        h=4,
    )
    with torch.no_grad():
        model.pos_embed.zero_()
        torch.testing.assert_close(model(images), model(jigsaw))
        model.pos_embed.normal_()
        assert not torch.allclose(model(images), model(jigsaw), atol=1e-6)


# The ViT paper's Table 1 (quoted in the lecture slides), in millions, and the course's exact counts
# for 224x224 inputs and a 1000-class head (identical to timm's vit_*_224 models).
PAPER = {
    "B/16": (16, 768, 12, 12, 3072, 86),
    "L/16": (16, 1024, 24, 16, 4096, 307),
    "H/14": (14, 1280, 32, 16, 5120, 632),
}
EXACT = {"B/16": 86_567_656, "L/16": 304_326_632, "H/14": 632_045_800}


def _meta_vit(patch, dim, depth, heads, mlp, img=224, classes=1000):
    # shapes only: ViT-H would need 2.5 GB in float32
    with torch.device("meta"):
        return vit.ViT(img, patch, classes, dim, depth, heads, mlp)


@pytest.mark.parametrize("name", sorted(PAPER))
def test_parameter_counts_against_the_vit_paper_table(name):
    patch, dim, depth, heads, mlp, paper_millions = PAPER[name]
    model = _meta_vit(patch, dim, depth, heads, mlp)
    n = vit.count_parameters(model)
    assert n == EXACT[name]
    # the analytic count: blocks 12 D^2 + 13 D each; patch embedding; CLS + positions; final LN; head
    tokens = (224 // patch) ** 2 + 1
    analytic = (
        depth * (12 * dim**2 + 13 * dim)
        + (patch * patch * 3 * dim + dim)
        + tokens * dim
        + dim
        + 2 * dim
        + (dim * 1000 + 1000)
    )
    assert n == analytic
    # How close the table is: B/16 +0.66 % (the table truncates 86.57M to 86M), H/14 +0.007 %,
    # L/16 -0.87 %: the table's 307M is 2.7M above the count; neither a pre-logits layer (+1.05M),
    # a 21k-class head, 384 px inputs (+0.39M) nor patch 14 reaches it, so the entry is approximate.
    ratio = n / (paper_millions * 1e6)
    assert abs(ratio - 1) < 0.01, (
        f"{name}: {n / 1e6:.2f}M vs the table's {paper_millions}M"
    )
    if name == "L/16":
        assert n < 307e6 - 2e6, "the known gap of the table's ViT-L entry"


def test_parameter_counts_match_timm():
    timm = pytest.importorskip("timm")
    for name, timm_name in (
        ("B/16", "vit_base_patch16_224"),
        ("L/16", "vit_large_patch16_224"),
        ("H/14", "vit_huge_patch14_224"),
    ):
        with torch.device("meta"):
            other = timm.create_model(
                timm_name, pretrained=False, num_classes=1000
            )
        assert sum(p.numel() for p in other.parameters()) == EXACT[name], (
            name
        )


def test_vit_memorises_one_batch_quickly():
    threads = torch.get_num_threads()
    # a model this small runs fastest on one thread, and never waits for a busy sibling
    torch.set_num_threads(1)
    try:
        _memorise_one_batch()
    finally:
        torch.set_num_threads(threads)


def _memorise_one_batch():
    torch.manual_seed(0)
    model = vit.ViT(32, 8, 10, 32, 2, 2, 64)
    g = torch.Generator().manual_seed(64)
    images, labels = (
        torch.randn(64, 3, 32, 32, generator=g),
        torch.randint(0, 10, (64,), generator=g),
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    start = time.perf_counter()
    accuracy = 0.0
    for step in range(300):
        loss = nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 10 == 9:
            with torch.no_grad():
                accuracy = (
                    (model(images).argmax(-1) == labels)
                    .double()
                    .mean()
                    .item()
                )
            if accuracy == 1.0:
                break
    assert accuracy == 1.0, (
        f"training accuracy {accuracy} after {step + 1} steps"
    )
    assert time.perf_counter() - start < 60


@pytest.mark.parametrize(
    "patch,channels", [(2, (16,)), (4, (16, 32)), (8, (8, 16)), (1, ())]
)
def test_conv_tokenizer_gives_as_many_tokens_as_patches(patch, channels):
    tokenizer = vit.ConvTokenizer(32, patch, 3, 24, channels).eval()
    tokens = tokenizer(torch.randn(2, 3, 32, 32))
    assert (
        tokens.shape
        == (2, (32 // patch) ** 2, 24)
        == (2, vit.PatchEmbedding(32, patch, 3, 24).num_patches, 24)
    )
    assert tokenizer.num_patches == (32 // patch) ** 2
    model = vit.ViT(
        32, patch, 10, 24, 1, 2, 48, stem_channels=channels or None
    ).eval()
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    if channels:
        assert isinstance(model.patch_embed, vit.ConvTokenizer)


def test_conv_tokenizer_stacks_convs_per_stage_before_each_pool():
    """``convs_per_stage=k``: k conv layers of each width in ``channels``, the pool after the last of
    them, then one layer to ``dim``; the grid and the tokens' shape stay those of one per stage."""
    single = vit.ConvTokenizer(32, 4, 3, 24, (8, 16))
    double = vit.ConvTokenizer(32, 4, 3, 24, (8, 16), convs_per_stage=2)
    convs = [m for m in double.net if isinstance(m, torch.nn.Conv2d)]
    assert [(c.in_channels, c.out_channels) for c in convs] == [
        (3, 8),
        (8, 8),
        (8, 16),
        (16, 16),
        (16, 24),
    ]
    kinds = [type(m).__name__ for m in double.net]
    # each pool follows the second conv-BN-ReLU of its width
    assert [i for i, k in enumerate(kinds) if k == "MaxPool2d"] == [6, 13]
    images = torch.randn(2, 3, 32, 32)
    assert double.eval()(images).shape == single.eval()(images).shape
    assert double.num_patches == single.num_patches == 64
    with pytest.raises(
        ValueError, match="convs_per_stage must be at least 1"
    ):
        vit.ConvTokenizer(32, 4, 3, 24, (8, 16), convs_per_stage=0)


def test_conv_tokenizer_takes_one_count_per_width():
    """``convs_per_stage=(1, 2)``: one layer of the first width, two of the second; a count per
    width that does not match the widths, or a count below 1, is refused with the fix."""
    mixed = vit.ConvTokenizer(32, 4, 3, 24, (8, 16), convs_per_stage=(1, 2))
    convs = [m for m in mixed.net if isinstance(m, torch.nn.Conv2d)]
    assert [(c.in_channels, c.out_channels) for c in convs] == [
        (3, 8),
        (8, 16),
        (16, 16),
        (16, 24),
    ]
    assert mixed.eval()(torch.randn(2, 3, 32, 32)).shape == (2, 64, 24)
    # a list (a recipe read back from JSON) builds the same layers
    as_list = vit.ConvTokenizer(
        32, 4, 3, 24, (8, 16), convs_per_stage=[1, 2]
    )
    assert str(as_list) == str(mixed)
    with pytest.raises(ValueError, match="one count per width"):
        vit.ConvTokenizer(32, 4, 3, 24, (8, 16), convs_per_stage=(1, 2, 2))
    with pytest.raises(ValueError, match="at least 1"):
        vit.ConvTokenizer(32, 4, 3, 24, (8, 16), convs_per_stage=(0, 2))


def test_fast_vit_stem_convs_deepens_the_tokenizer_only():
    """``stem_convs=1`` is the reference's tokenizer; 2 swaps in one with two convolutions per
    width and leaves every other parameter's shape as it was."""
    torch.manual_seed(0)
    plain = FastViT(32, 8, 10, 24, 2, 3, 48, stem_channels=(8, 16, 16))
    deep = FastViT(
        32, 8, 10, 24, 2, 3, 48, stem_channels=(8, 16, 16), stem_convs=2
    )
    count = lambda m: sum(  # noqa: E731
        isinstance(x, torch.nn.Conv2d) for x in m.patch_embed.modules()
    )
    assert (count(plain), count(deep)) == (4, 7)
    outside = lambda m: {  # noqa: E731
        k: v.shape
        for k, v in m.state_dict().items()
        if not k.startswith("patch_embed.")
    }
    assert outside(plain) == outside(deep)
    assert deep(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    with pytest.raises(ValueError, match="stem_convs needs a convolutional"):
        FastViT(32, 8, 10, 24, 2, 3, 48, stem_convs=2)


def test_the_cpu_recipe_model_shapes():
    from course_utils.experiments.recipes import RECIPES
    from course_utils.training.recipes import build_model

    model = build_model(RECIPES["cpu"]).eval()
    assert isinstance(model.patch_embed, vit.ConvTokenizer)
    # 16 tokens (a 4x4 grid) + CLS
    assert model.pos_embed.shape == (
        1,
        17,
        192,
    )
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    deeper = build_model(RECIPES["cpu_stem2"]).eval()
    assert deeper.pos_embed.shape == model.pos_embed.shape
    assert len(deeper.blocks) == len(model.blocks) - 1
    assert deeper(torch.randn(2, 3, 32, 32)).shape == (2, 10)


@pytest.mark.parametrize(
    "call,error,words",
    [
        (
            lambda: vit.patchify(torch.randn(3, 32, 32), 4),
            ValueError,
            "(B, C, H, W)",
        ),
        (
            lambda: vit.patchify(torch.randn(1, 3, 30, 32), 4),
            ValueError,
            "not divisible",
        ),
        (
            lambda: vit.PatchEmbedding(30, 4, 3, 8),
            ValueError,
            "not divisible",
        ),
        (
            lambda: vit.ViT(32, 4, 10, 16, 1, 2, 32)(
                torch.randn(2, 3, 16, 16)
            ),
            ValueError,
            "32x32",
        ),
        (lambda: vit.EncoderBlock(10, 3, 20), ValueError, "divisible"),
        (
            lambda: vit.ConvTokenizer(32, 6, 3, 8, (8,)),
            ValueError,
            "power of 2",
        ),
        (
            lambda: vit.ConvTokenizer(32, 8, 3, 8, (8,)),
            ValueError,
            "cannot downsample",
        ),
    ],
)
def test_bad_inputs_give_clear_errors(call, error, words):
    with pytest.raises(
        error, match=words.replace("(", r"\(").replace(")", r"\)")
    ):
        call()


def test_unbatched_image_gives_a_clear_error():
    with pytest.raises(ValueError, match="B, C, H, W"):
        vit.ViT(32, 4, 10, 16, 1, 2, 32)(torch.randn(3, 32, 32))


def test_zero_patch_size_gives_a_clear_error():
    with pytest.raises(ValueError):
        vit.patchify(torch.randn(1, 3, 8, 8), 0)


def test_fast_vit_levers_stochastic_depth_and_initialisation():
    """Off by default (the reference's weights, seed for seed); stochastic depth rises linearly to
    the last block and acts only in training; ``init="pytorch"`` keeps each layer's default."""
    torch.manual_seed(6)
    plain = FastViT(16, 4, 10, 24, 3, 3, 48)
    torch.manual_seed(6)
    dropped = FastViT(16, 4, 10, 24, 3, 3, 48, drop_path=0.2)
    assert all(
        torch.equal(a, b)
        for a, b in zip(
            plain.state_dict().values(), dropped.state_dict().values()
        )
    )
    rates = [getattr(b.drop_path, "p", 0.0) for b in dropped.blocks]
    assert rates == pytest.approx([0.0, 0.1, 0.2])
    images = torch.randn(8, 3, 16, 16)
    with torch.no_grad():
        plain.head.weight.normal_()
        dropped.head.weight.copy_(plain.head.weight)
        torch.testing.assert_close(
            dropped.eval()(images), plain.eval()(images)
        )
        torch.manual_seed(0)
        assert not torch.allclose(
            dropped.train()(images), plain.train()(images)
        )
    torch.manual_seed(7)
    default = FastViT(16, 4, 10, 24, 2, 3, 48, init="pytorch")
    # the course's init zeroes the head; PyTorch's does not
    assert default.head.weight.abs().sum() > 0
    # nor does it zero the biases
    assert default.blocks[0].attn.w_q.bias.abs().sum() > 0
    with pytest.raises(ValueError, match="init='xavier' is not a choice"):
        FastViT(16, 4, 10, 24, 2, 3, 48, init="xavier")
    with pytest.raises(ValueError, match="drop_path"):
        FastViT(16, 4, 10, 24, 2, 3, 48, drop_path=1.5)


def test_fast_vit_sequence_pooling():
    """``pool="seq"``: no CLS token, one position per patch, and the head reads the softmax-weighted
    mean of the normalised patch tokens (the plain mean at the start); "cls" stays the reference."""
    torch.manual_seed(3)
    plain = FastViT(16, 4, 10, 24, 2, 3, 48)
    torch.manual_seed(3)
    pooled = FastViT(16, 4, 10, 24, 2, 3, 48, pool="seq")
    assert not hasattr(pooled, "cls_token")
    assert pooled.pos_embed.shape == (1, 16, 24)
    torch.testing.assert_close(pooled.pos_embed, plain.pos_embed[:, 1:])
    assert pooled.no_weight_decay() == {"pos_embed"}
    assert plain.seq_pool is None
    images = torch.randn(5, 3, 16, 16)
    with torch.no_grad():
        pooled.head.weight.normal_()
        pooled.eval()
        x = pooled.tokens(images)
        assert x.shape == (5, 16, 24)
        for block in pooled.blocks:
            x = block(x)
        x = pooled.norm(x)
        # zero scores at the start: the plain mean of the tokens
        torch.testing.assert_close(
            pooled(images), pooled.head(x.mean(dim=1))
        )
        pooled.seq_pool.weight.normal_()
        scores = (x @ pooled.seq_pool.weight.T).squeeze(-1)
        weights = torch.softmax(scores, dim=1)
        expected = pooled.head(torch.einsum("bn,bnd->bd", weights, x))
        torch.testing.assert_close(pooled(images), expected)
        maps = pooled.attention_maps(images)
        assert len(maps) == 2 and maps[0].shape == (5, 3, 16, 16)
    with pytest.raises(ValueError, match="pool='mean' is not a choice"):
        FastViT(16, 4, 10, 24, 2, 3, 48, pool="mean")
    with pytest.raises(ValueError, match="expected 16x16 images"):
        pooled(torch.randn(1, 3, 8, 8))


def test_the_class_editions_vit_twin_has_the_image_check_fast_vit_calls():
    """``FastViT(pool="seq")`` calls ``check_images`` on its base class, which the class edition
    swaps for ``models.twins.ViT``: both must have it, with the same error."""
    from course_utils.models import twins

    for base in (vit.ViT, twins.ViT):
        model = base(16, 4, 10, 24, 2, 3, 48)
        model.check_images(torch.randn(2, 3, 16, 16))
        with pytest.raises(ValueError, match="expected 16x16 images"):
            model.check_images(torch.randn(1, 3, 8, 8))
        with pytest.raises(ValueError, match="unsqueeze"):
            model.check_images(torch.randn(3, 16, 16))


def test_the_class_editions_vit_twin_has_the_reference_tokens_and_maps():
    """``attention_maps`` reads ``tokens`` on the reference and on its class-edition twin alike, so a
    subclass that changes the tokens (``FastViT(pool="seq")``) changes the maps on either base."""
    from course_utils.models import twins

    torch.manual_seed(0)
    reference = vit.ViT(16, 4, 10, 24, 2, 3, 48).eval()
    twin = twins.ViT(16, 4, 10, 24, 2, 3, 48).eval()
    twin.load_state_dict(reference.state_dict())
    images = torch.randn(3, 3, 16, 16)
    torch.testing.assert_close(twin.tokens(images), reference.tokens(images))
    for got, want in zip(
        twin.attention_maps(images),
        reference.attention_maps(images),
        strict=True,
    ):
        torch.testing.assert_close(got, want)
    with pytest.raises(ValueError, match="expected 16x16 images"):
        twin.attention_maps(torch.randn(1, 3, 8, 8))
