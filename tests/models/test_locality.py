"""Locality self-attention (``FastViT(locality=True)``): each block's attention, written out with
einsum beside the fused paths the trainer runs, and what the option adds, leaves alone and refuses."""

from __future__ import annotations

import pytest
import torch

from course_utils.models.vit_fast import FastViT, fused_self_attention
from course_utils.training.optim import parameter_groups

ARGS = dict(
    img_size=32,
    patch_size=8,
    num_classes=10,
    dim=32,
    depth=2,
    num_heads=4,
    mlp_dim=64,
    stem_channels=(8, 16, 32),
)


def written_out(block, h: torch.Tensor) -> torch.Tensor:
    """Locality self-attention of ``h (B, N, d)`` by the formula: scores divided by the block's
    temperature, each token's score for itself at -inf, softmax over the keys."""
    mha = block.attn
    b, n, d = h.shape

    def heads(t):  # (B, N, d) -> (B, H, N, d / H)
        return t.view(b, n, mha.num_heads, -1).transpose(1, 2)

    q, k, v = heads(mha.w_q(h)), heads(mha.w_k(h)), heads(mha.w_v(h))
    scores = torch.einsum("bhid,bhjd->bhij", q, k) / block.temperature
    diagonal = torch.eye(n, dtype=torch.bool)
    weights = scores.masked_fill(diagonal, float("-inf")).softmax(dim=-1)
    out = torch.einsum("bhij,bhjd->bhid", weights, v).transpose(1, 2)
    return mha.w_o(out.reshape(b, n, d))


@pytest.fixture
def model():
    torch.manual_seed(0)
    m = FastViT(**ARGS, locality=True).eval()
    with (
        torch.no_grad()
    ):  # away from the start value, so that a path ignoring it fails
        for i, block in enumerate(m.blocks):
            block.temperature.fill_(1.5 + i)
    return m


def test_each_block_starts_at_the_usual_temperature():
    torch.manual_seed(0)
    m = FastViT(**ARGS, locality=True)
    assert [b.temperature.item() for b in m.blocks] == [
        pytest.approx((ARGS["dim"] // ARGS["num_heads"]) ** 0.5)
    ] * ARGS["depth"]


def test_the_fused_kernel_computes_the_formula(model):
    """float32: PyTorch's scaled_dot_product_attention with the mask and the folded temperature."""
    block = model.blocks[1]
    h = block.norm1(torch.randn(3, 17, ARGS["dim"]))
    with torch.no_grad():
        got = fused_self_attention(
            block.attn, h, temperature=block.temperature
        )
        want = written_out(block, h)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_the_bf16_training_path_computes_the_formula(model):
    """bf16 with gradients on a CPU: the plain matmuls and softmax the trainer takes there."""
    block = model.blocks[0]
    h = block.norm1(torch.randn(3, 17, ARGS["dim"]))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = fused_self_attention(
            block.attn, h, temperature=block.temperature
        )
    torch.testing.assert_close(
        got.float(), written_out(block, h), atol=3e-2, rtol=3e-2
    )


@pytest.mark.parametrize("bf16", [False, True])
def test_the_temperature_learns_on_either_path(bf16):
    # PyTorch's initialisation: the course's starts the head at zero, which holds every other
    # gradient at zero for the first step
    torch.manual_seed(0)
    model = FastViT(**ARGS, locality=True, init="pytorch").train()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss = (
            model(torch.randn(4, 3, 32, 32)).float().logsumexp(dim=-1).mean()
        )
    loss.backward()
    assert all(
        b.temperature.grad is not None and b.temperature.grad.abs() > 0
        for b in model.blocks
    )


def test_no_token_attends_to_itself(model):
    """With queries and keys at zero every score is equal, so each token's output is the mean of
    the other tokens' values, never its own."""
    block = model.blocks[0]
    mha = block.attn
    with torch.no_grad():
        for layer in (mha.w_q, mha.w_k):
            layer.weight.zero_()
            if layer.bias is not None:
                layer.bias.zero_()
        h = torch.randn(2, 5, ARGS["dim"])
        got = fused_self_attention(mha, h, temperature=block.temperature)
        v = mha.w_v(h)
        others_mean = (v.sum(dim=1, keepdim=True) - v) / 4
        torch.testing.assert_close(
            got, mha.w_o(others_mean), atol=1e-5, rtol=1e-5
        )


def test_one_token_is_refused():
    """A token that may not attend to itself needs another one to attend to."""
    with pytest.raises(ValueError, match="two tokens"):
        FastViT(
            **{**ARGS, "patch_size": 32, "stem_channels": ()},
            pool="seq",
            locality=True,
        )


def test_off_by_default_and_nothing_drawn():
    torch.manual_seed(0)
    plain = FastViT(**ARGS)
    torch.manual_seed(0)
    local = FastViT(**ARGS, locality=True)
    extra = set(local.state_dict()) - set(plain.state_dict())
    assert extra == {f"blocks.{i}.temperature" for i in range(ARGS["depth"])}
    assert all(b.temperature is None for b in plain.blocks)
    for name, tensor in plain.state_dict().items():
        assert torch.equal(tensor, local.state_dict()[name]), name


def test_the_temperature_is_not_decayed(model):
    decay, no_decay = parameter_groups(model, 0.05)
    temperatures = {id(b.temperature) for b in model.blocks}
    assert temperatures <= {id(p) for p in no_decay["params"]}
    assert not temperatures & {id(p) for p in decay["params"]}


def test_attention_maps_are_refused_with_a_fix(model):
    with pytest.raises(ValueError, match="locality=False"):
        model.attention_maps(torch.randn(1, 3, 32, 32))


def test_a_locality_that_is_no_switch_is_refused():
    with pytest.raises(TypeError, match="True or False"):
        FastViT(**ARGS, locality="yes")
