"""The reference implementations on every device and precision, against PyTorch's own.

Each case runs the course's implementation and PyTorch's counterpart on the same inputs, in the
same dtype (float32, bfloat16, float16) on the same device (the CPU, and CUDA where a GPU is
present), and measures both against PyTorch's float64 result on the CPU computed from the same
low-precision inputs (so input rounding counts for neither).  The course's error must stay within
a small factor of PyTorch's own (or under a floor for the dtype, where PyTorch is exact by luck).
A failure prints both errors: in a low precision, "close to the float64 answer" only means
something next to what PyTorch itself achieves there.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.models import torch_interop
from course_utils.models.vit_fast import FastEncoderBlock
from course_utils.references import attention, masking, regularization, vit
from course_utils.references.multihead import MultiHeadAttention

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
# The course's error may be this many times PyTorch's own (several roundings of intermediate
# results, e.g. the scores in a low precision, against a fused kernel that keeps them in float32)...
RATIO = 4.0
# ...or below this floor (relative to the float64 answer's largest entry), whichever is larger: a few
# units in the last place of the dtype (its machine epsilon is 1.2e-7, 7.8e-3 and 9.8e-4).
FLOOR = {torch.float32: 2e-6, torch.bfloat16: 2e-2, torch.float16: 2.5e-3}


def _inputs(*shape, dtype, device, seed, scale=1.0):
    """A random tensor rounded to ``dtype`` on ``device``, and its float64 CPU copy (same values)."""
    g = torch.Generator().manual_seed(seed)
    low = (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(
        dtype
    )
    return low.to(device), low.to(torch.float64)


def _check(ours, theirs, exact, what: str, dtype, device):
    """The course's error against float64 is within RATIO of PyTorch's own, or under FLOOR."""
    assert ours.dtype == theirs.dtype == dtype, (
        f"{what}: dtype {ours.dtype}, PyTorch gives {theirs.dtype}"
    )
    assert ours.device.type == torch.device(device).type, (
        f"{what}: output on {ours.device}, input on {device}"
    )
    assert ours.shape == exact.shape, (
        f"{what}: shape {tuple(ours.shape)}, expected {tuple(exact.shape)}"
    )
    assert torch.isfinite(ours).all(), (
        f"{what}: non-finite values in {dtype} on {device}"
    )
    _within(ours, theirs, exact, f"{what} in {dtype} on {device}", dtype)


def _within(ours, theirs, exact, what: str, dtype) -> None:
    """Relative to the float64 answer's largest entry: the course's error <= max(RATIO x PyTorch's, FLOOR)."""
    size = exact.abs().max().item() or 1.0
    err_ours = (ours.double().cpu() - exact).abs().max().item() / size
    err_theirs = (theirs.double().cpu() - exact).abs().max().item() / size
    bound = max(RATIO * err_theirs, FLOOR[dtype])
    assert err_ours <= bound, (
        f"{what}: relative error {err_ours:.2e} against float64, "
        f"PyTorch's own {err_theirs:.2e} (allowed {bound:.2e})"
    )


def _autocast_dtype_ok(device, dtype) -> bool:
    """float16 autocast on the CPU arrived in torch 2.5 (TorchVersion compares as a version)."""
    return (
        device == "cuda"
        or dtype != torch.float16
        or torch.__version__ >= (2, 5)
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("masked", [False, True])
def test_scaled_dot_product_attention(device, dtype, masked):
    (q, q64), (k, k64), (v, v64) = (
        _inputs(2, 3, 17, 16, dtype=dtype, device=device, seed=s)
        for s in (1, 2, 3)
    )
    mask = None
    if masked:
        mask = (
            torch.rand(
                2, 1, 17, 17, generator=torch.Generator().manual_seed(4)
            )
            < 0.6
        )
        mask[..., 0] = True
    exact = F.scaled_dot_product_attention(q64, k64, v64, attn_mask=mask)
    dev_mask = None if mask is None else mask.to(device)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=dev_mask)
    readable, weights = attention.scaled_dot_product_attention(
        q, k, v, dev_mask
    )
    _check(
        readable,
        theirs,
        exact,
        "scaled_dot_product_attention",
        dtype,
        device,
    )
    fast, _ = attention.scaled_dot_product_attention(
        q, k, v, dev_mask, need_weights=False
    )
    _check(
        fast,
        theirs,
        exact,
        "scaled_dot_product_attention(need_weights=False)",
        dtype,
        device,
    )
    exact_w = torch.softmax(
        (q64 @ k64.transpose(-2, -1) / 4.0).masked_fill(
            torch.zeros(1, dtype=torch.bool) if mask is None else ~mask,
            float("-inf"),
        ),
        dim=-1,
    )
    theirs_w = torch.softmax(
        (q @ k.transpose(-2, -1) / 4.0)
        .float()
        .masked_fill(
            torch.zeros(1, dtype=torch.bool, device=device)
            if mask is None
            else ~dev_mask,
            float("-inf"),
        ),
        dim=-1,
    ).to(dtype)
    _check(weights, theirs_w, exact_w, "attention weights", dtype, device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_chunked_attention(device, dtype):
    (q, q64), (k, k64), (v, v64) = (
        _inputs(2, 33, 8, dtype=dtype, device=device, seed=s, scale=2.0)
        for s in (5, 6, 7)
    )
    exact = F.scaled_dot_product_attention(q64, k64, v64)
    theirs = F.scaled_dot_product_attention(q, k, v)
    _check(
        attention.chunked_attention(q, k, v, chunk_size=8),
        theirs,
        exact,
        "chunked_attention",
        dtype,
        device,
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_and_masked_softmax(device, dtype):
    x, x64 = _inputs(4, 9, 11, dtype=dtype, device=device, seed=8, scale=5.0)
    _check(
        attention.softmax(x),
        torch.softmax(x, dim=-1),
        torch.softmax(x64, dim=-1),
        "softmax",
        dtype,
        device,
    )
    keep = (
        torch.rand(4, 9, 11, generator=torch.Generator().manual_seed(9))
        < 0.5
    )
    keep[:, :, 0] = True
    exact = torch.softmax(x64.masked_fill(~keep, float("-inf")), dim=-1)
    theirs = torch.softmax(
        x.masked_fill(~keep.to(device), float("-inf")), dim=-1
    )
    _check(
        masking.masked_softmax(x, keep.to(device)),
        theirs,
        exact,
        "masked_softmax",
        dtype,
        device,
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_multi_head_attention_against_torch(device, dtype):
    torch.manual_seed(0)
    ours = MultiHeadAttention(32, 4).to(device=device, dtype=dtype).eval()
    theirs = torch_interop.to_torch_mha(ours)
    exact_model = torch_interop.to_torch_mha(ours).to(
        device="cpu", dtype=torch.float64
    )
    (x, x64), (mem, mem64) = (
        _inputs(3, n, 32, dtype=dtype, device=device, seed=s)
        for n, s in ((7, 10), (9, 11))
    )
    keep = (
        torch.rand(3, 1, 9, generator=torch.Generator().manual_seed(12))
        < 0.7
    )
    keep[..., 0] = True
    torch_mask = torch_interop.torch_attn_mask(keep, 3, 4, 7, 9)
    with torch.no_grad():
        out, _ = ours(x, mem, mem, mask=keep.to(device))
        t_out, _ = theirs(
            x, mem, mem, attn_mask=torch_mask.to(device), need_weights=False
        )
        exact, _ = exact_model(
            x64, mem64, mem64, attn_mask=torch_mask, need_weights=False
        )
    _check(out, t_out, exact, "MultiHeadAttention", dtype, device)


def _torch_encoder_layer(
    block: vit.EncoderBlock, num_heads: int
) -> nn.TransformerEncoderLayer:
    """PyTorch's pre-norm encoder layer computing what ``block`` computes (copied weights)."""
    dim, mlp_dim = block.norm1.normalized_shape[0], block.mlp[0].out_features
    weight = block.norm1.weight
    layer = nn.TransformerEncoderLayer(
        dim,
        num_heads,
        mlp_dim,
        dropout=0.0,
        activation="gelu",
        batch_first=True,
        norm_first=True,
        device=weight.device,
        dtype=weight.dtype,
    )
    with torch.no_grad():
        layer.self_attn.load_state_dict(
            torch_interop.to_torch_mha(block.attn).state_dict()
        )
        layer.linear1.load_state_dict(block.mlp[0].state_dict())
        layer.linear2.load_state_dict(block.mlp[3].state_dict())
        layer.norm1.load_state_dict(block.norm1.state_dict())
        layer.norm2.load_state_dict(block.norm2.state_dict())
    return layer.eval()


@pytest.mark.filterwarnings("ignore:enable_nested_tensor")
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_encoder_block_against_torch_encoder_layer(device, dtype):
    torch.manual_seed(1)
    block = vit.EncoderBlock(48, 6, 96).to(device=device, dtype=dtype).eval()
    fast = FastEncoderBlock(48, 6, 96).to(device=device, dtype=dtype).eval()
    fast.load_state_dict(block.state_dict())
    theirs = _torch_encoder_layer(block, 6)
    exact_model = _torch_encoder_layer(block, 6).to(
        device="cpu", dtype=torch.float64
    )
    x, x64 = _inputs(4, 17, 48, dtype=dtype, device=device, seed=13)
    with torch.no_grad():
        exact, t_out = exact_model(x64), theirs(x)
        _check(block(x), t_out, exact, "EncoderBlock", dtype, device)
        _check(
            fast(x), t_out, exact, "FastEncoderBlock (fused)", dtype, device
        )


@pytest.mark.filterwarnings("ignore:enable_nested_tensor")
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("amp", [torch.bfloat16, torch.float16])
def test_encoder_block_under_autocast_forward_and_backward(device, amp):
    """Mixed precision as the trainer runs it (the fused block): float32 weights, autocast, gradients on."""
    if not _autocast_dtype_ok(device, amp):
        pytest.skip("float16 CPU autocast needs torch >= 2.5")
    torch.manual_seed(2)
    block = FastEncoderBlock(48, 6, 96).to(device).train()
    theirs = _torch_encoder_layer(block, 6).train()
    exact_model = (
        _torch_encoder_layer(block, 6)
        .to(device="cpu", dtype=torch.float64)
        .train()
    )
    x, x64 = _inputs(4, 17, 48, dtype=torch.float32, device=device, seed=14)
    outputs, grads = [], []
    for model in (block, theirs):
        with torch.autocast(device, dtype=amp):
            out = model(x)
        out.float().square().mean().backward()
        outputs.append(out.float())
        grads.append(model.norm1.weight.grad)
    exact = exact_model(x64)
    exact.square().mean().backward()
    # the outputs are float32 tensors computed in `amp`: the floor is amp's
    for (ours, theirs_), target, what in (
        (outputs, exact.detach(), "output"),
        (grads, exact_model.norm1.weight.grad, "LayerNorm weight gradient"),
    ):
        _within(
            ours,
            theirs_,
            target,
            f"EncoderBlock {what} under {amp} autocast on {device}",
            amp,
        )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_label_smoothing_cross_entropy(device, dtype):
    logits, logits64 = _inputs(
        64, 10, dtype=dtype, device=device, seed=15, scale=3.0
    )
    targets = torch.randint(
        0, 10, (64,), generator=torch.Generator().manual_seed(16)
    )
    exact = F.cross_entropy(logits64, targets, label_smoothing=0.1)
    theirs = F.cross_entropy(logits, targets.to(device), label_smoothing=0.1)
    ours = regularization.label_smoothing_cross_entropy(
        logits, targets.to(device), 0.1
    )
    _check(
        ours, theirs, exact, "label_smoothing_cross_entropy", dtype, device
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("amp", [None, torch.bfloat16, torch.float16])
def test_vit_trains_a_step_on_every_device(device, amp):
    """The chapter's ViT (conv tokenizer, the cpu recipe's shape, smaller) runs forward and
    backward on the device with finite gradients, and its autocast logits stay near float32's."""
    if amp is not None and not _autocast_dtype_ok(device, amp):
        pytest.skip("float16 CPU autocast needs torch >= 2.5")
    torch.manual_seed(3)
    model = vit.ViT(
        img_size=32,
        patch_size=4,
        num_classes=10,
        dim=64,
        depth=2,
        num_heads=4,
        mlp_dim=128,
        stem_channels=(16, 32),
    ).to(device)
    # the zero-initialised head would make every logit 0
    nn.init.normal_(model.head.weight, std=0.5)
    images = torch.randn(8, 3, 32, 32, device=device)
    labels = torch.arange(8, device=device) % 10
    with torch.autocast(
        device, dtype=amp or torch.float32, enabled=amp is not None
    ):
        logits = model.train()(images)
    F.cross_entropy(logits.float(), labels).backward()
    assert logits.device.type == device and logits.shape == (8, 10)
    assert all(
        torch.isfinite(p.grad).all()
        for p in model.parameters()
        if p.grad is not None
    )
    model.eval()
    with torch.no_grad():
        reference = model(images)
        with torch.autocast(
            device, dtype=amp or torch.float32, enabled=amp is not None
        ):
            low = model(images).float()
    tol = {None: 1e-5, torch.bfloat16: 5e-2, torch.float16: 1e-2}[amp]
    torch.testing.assert_close(
        low, reference, atol=tol * reference.abs().max().item(), rtol=0
    )
