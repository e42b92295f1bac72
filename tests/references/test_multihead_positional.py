"""Unit tests of course_utils.references.multihead and course_utils.references.positional (chapters 04 and 05).

Multi-head attention is checked against torch.nn.MultiheadAttention with copied weights (both
directions, with masks in both conventions); the encodings against direct loops over their
formulas and against the properties the chapters teach.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from course_utils.grading import checks, isolation
from course_utils.models import torch_interop
from course_utils.references import multihead, positional
from course_utils.training import toy_task
from course_utils.references.masking import causal_mask, padding_mask

DTYPES = [torch.float32, torch.float64]


def _tol(dtype):
    return (
        {"atol": 1e-6, "rtol": 1e-5}
        if dtype == torch.float32
        else {"atol": 1e-12, "rtol": 1e-10}
    )


# ------------------------------------------------------------------ split / merge
@settings(max_examples=50, deadline=None)
@given(
    b=st.integers(1, 3),
    n=st.integers(1, 6),
    h=st.integers(1, 4),
    d=st.integers(1, 5),
)
def test_split_and_merge_are_inverse(b, n, h, d):
    x = checks.random_tensor(b, n, h * d, seed=b + n + h + d)
    heads = multihead.split_heads(x, h)
    assert heads.shape == (b, h, n, d)
    torch.testing.assert_close(
        multihead.merge_heads(heads), x, rtol=0, atol=0
    )
    y = checks.random_tensor(b, h, n, d, seed=7)
    torch.testing.assert_close(
        multihead.split_heads(multihead.merge_heads(y), h), y, rtol=0, atol=0
    )


def test_split_heads_gives_head_h_the_features_h_times_d():
    b, n, h, d = 2, 5, 3, 4
    x = torch.arange(b * n * h * d, dtype=torch.float64).reshape(b, n, h * d)
    heads = multihead.split_heads(x, h)
    for hh in range(h):
        torch.testing.assert_close(
            heads[:, hh], x[:, :, hh * d : (hh + 1) * d]
        )


def test_split_heads_matches_einops_and_accepts_extra_batch_dims():
    from einops import rearrange

    x = checks.random_tensor(2, 3, 5, 12, seed=1)
    torch.testing.assert_close(
        multihead.split_heads(x, 4),
        rearrange(x, "a b n (h d) -> a b h n d", h=4),
    )
    torch.testing.assert_close(
        multihead.merge_heads(multihead.split_heads(x, 4)), x
    )


def test_split_heads_errors():
    with pytest.raises(ValueError, match="not divisible"):
        multihead.split_heads(torch.randn(2, 3, 10), 4)
    with pytest.raises(ValueError, match=r"expected \(\.\.\., H, N, D\)"):
        multihead.merge_heads(torch.randn(3, 4))


# ------------------------------------------------------------------ MultiHeadAttention vs PyTorch
def _random_mask(shape, seed):
    """A bool mask with at least one True per query row (a fully blocked row is NaN in PyTorch)."""
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(shape, generator=g) < 0.6
    mask[..., 0] = True
    return mask


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize(
    "b,m,n,d,h",
    [(2, 5, 5, 16, 4), (3, 4, 7, 12, 3), (1, 1, 3, 8, 8), (2, 6, 6, 8, 1)],
)
def test_mha_matches_torch_after_copying_weights(dtype, bias, b, m, n, d, h):
    torch.manual_seed(0)
    ours = multihead.MultiHeadAttention(d, h, bias=bias).to(dtype).eval()
    theirs = torch_interop.to_torch_mha(ours)
    assert theirs.batch_first and theirs.in_proj_weight.dtype == dtype
    q = checks.random_tensor(b, m, d, dtype=dtype, seed=1)
    k = checks.random_tensor(b, n, d, dtype=dtype, seed=2)
    v = checks.random_tensor(b, n, d, dtype=dtype, seed=3)
    masks = [
        None,
        _random_mask((m, n), 4),
        _random_mask((b, m, n), 5),
        _random_mask((b, 1, n), 6),
        _random_mask((b, h, m, n), 7),
    ]
    for mask in masks:
        out, weights = ours(q, k, v, mask=mask)
        kwargs = (
            {}
            if mask is None
            else {
                "attn_mask": torch_interop.torch_attn_mask(mask, b, h, m, n)
            }
        )
        t_out, t_weights = theirs(
            q, k, v, need_weights=True, average_attn_weights=False, **kwargs
        )
        torch.testing.assert_close(out, t_out, **_tol(dtype))
        torch.testing.assert_close(weights, t_weights, **_tol(dtype))
        assert weights.shape == (b, h, m, n)


@pytest.mark.parametrize("dtype", DTYPES)
def test_torch_weights_load_into_the_course_module(dtype):
    torch.manual_seed(1)
    theirs = nn.MultiheadAttention(
        16, 4, batch_first=True, dtype=dtype
    ).eval()
    # PyTorch initialises the biases to 0: make them matter
    with torch.no_grad():
        theirs.in_proj_bias.normal_()
        theirs.out_proj.bias.normal_()
    ours = torch_interop.from_torch_mha(theirs)
    assert (
        isinstance(ours, multihead.MultiHeadAttention)
        and ours.w_q.weight.dtype == dtype
    )
    x = checks.random_tensor(2, 5, 16, dtype=dtype, seed=8)
    out, weights = ours(x, x, x)
    t_out, t_weights = theirs(x, x, x, average_attn_weights=False)
    torch.testing.assert_close(out, t_out, **_tol(dtype))
    torch.testing.assert_close(weights, t_weights, **_tol(dtype))
    # and back again: the round trip is exact
    again = torch_interop.to_torch_mha(ours)
    for name, param in theirs.state_dict().items():
        torch.testing.assert_close(
            again.state_dict()[name], param, rtol=0, atol=0
        )


def test_key_padding_mask_means_the_opposite():
    """The course's padding mask (True = real token) is PyTorch's key_padding_mask negated."""
    torch.manual_seed(2)
    ours = multihead.MultiHeadAttention(8, 2).eval()
    theirs = torch_interop.to_torch_mha(ours)
    lengths = torch.tensor([5, 3, 1])
    keep = padding_mask(lengths, 5)  # (B, n), True = may attend
    x = checks.random_tensor(3, 5, 8, seed=9)
    # (B, 1, n): the same keys for every query
    out, weights = ours(x, x, x, mask=keep[:, None, :])
    t_out, t_weights = theirs(
        x, x, x, key_padding_mask=~keep, average_attn_weights=False
    )
    torch.testing.assert_close(out, t_out)
    torch.testing.assert_close(weights, t_weights)
    # Passing the course's mask unchanged blocks the real tokens instead: a silent, wrong result.
    wrong_out, _ = theirs(x[:1], x[:1], x[:1], key_padding_mask=keep[:1])
    assert not torch.allclose(wrong_out, out[:1])


def test_causal_mask_and_fully_blocked_rows():
    torch.manual_seed(3)
    ours = multihead.MultiHeadAttention(8, 2).eval()
    theirs = torch_interop.to_torch_mha(ours)
    x = checks.random_tensor(2, 4, 8, seed=10)
    mask = causal_mask(4)
    out, _ = ours(x, x, x, mask=mask)
    t_out, _ = theirs(
        x,
        x,
        x,
        attn_mask=torch_interop.torch_attn_mask(mask, 2, 2, 4, 4),
        is_causal=False,
    )
    torch.testing.assert_close(out, t_out)
    # A query with nothing to attend to: zero weights in the course, NaN in PyTorch.
    blocked = mask.clone()
    blocked[0] = False
    out, weights = ours(x, x, x, mask=blocked)
    assert torch.isfinite(out).all() and (weights[:, :, 0] == 0).all()
    t_out, _ = theirs(
        x, x, x, attn_mask=torch_interop.torch_attn_mask(blocked, 2, 2, 4, 4)
    )
    assert torch.isnan(t_out[:, 0]).all()


def test_dropout_is_off_in_eval_and_on_in_train():
    torch.manual_seed(4)
    mha = multihead.MultiHeadAttention(16, 4, dropout=0.5)
    x = checks.random_tensor(2, 6, 16, seed=11)
    mha.eval()
    a, wa = mha(x, x, x)
    b, wb = mha(x, x, x)
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    mha.train()
    c, wc = mha(x, x, x)
    assert not torch.allclose(a, c)
    torch.testing.assert_close(wc, wa)  # weights are returned before dropout
    assert torch_interop.to_torch_mha(mha).dropout == 0.5


def test_conversion_errors():
    with pytest.raises(TypeError, match="w_q, w_k, w_v, w_o"):
        torch_interop.to_torch_mha(nn.Linear(4, 4))
    with pytest.raises(ValueError, match="kdim/vdim"):
        torch_interop.from_torch_mha(
            nn.MultiheadAttention(8, 2, kdim=4, vdim=4)
        )
    with pytest.raises(ValueError, match="add_bias_kv"):
        torch_interop.from_torch_mha(
            nn.MultiheadAttention(8, 2, add_bias_kv=True)
        )
    with pytest.raises(TypeError, match="bool"):
        torch_interop.torch_attn_mask(torch.ones(3, 3), 1, 1, 3, 3)


def test_parameter_count_does_not_depend_on_the_number_of_heads():
    counts = {
        h: sum(
            p.numel()
            for p in multihead.MultiHeadAttention(64, h).parameters()
        )
        for h in (1, 2, 4, 8, 64)
    }
    assert set(counts.values()) == {4 * (64 * 64 + 64)}


def test_reference_heads_swaps_and_restores():
    def mine_split(x, h):
        return "mine"

    namespace = {"split_heads": mine_split}
    with isolation.reference_heads(namespace):
        assert namespace["split_heads"] is isolation._SPLIT_HEADS
        assert namespace["merge_heads"] is isolation._MERGE_HEADS
    assert namespace == {"split_heads": mine_split}


def test_toy_task_targets_are_the_neighbours():
    tokens, targets = toy_task.prev_next_batch(
        4, 6, 10, generator=torch.Generator().manual_seed(0)
    )
    for i in range(6):
        torch.testing.assert_close(targets[:, i, 0], tokens[:, (i - 1) % 6])
        torch.testing.assert_close(targets[:, i, 1], tokens[:, (i + 1) % 6])


@pytest.mark.slow
def test_two_heads_learn_the_toy_task():
    torch.manual_seed(0)
    model = toy_task.ToyAttentionModel(
        10, 8, 32, multihead.MultiHeadAttention(32, 2)
    )
    threads = torch.get_num_threads()
    toy_task.train_toy(model, seq_len=8, steps=400)
    assert torch.get_num_threads() == threads and not model.training
    tokens, targets = toy_task.prev_next_batch(
        500, 8, 10, generator=torch.Generator().manual_seed(1)
    )
    assert (toy_task.toy_accuracy(model, tokens, targets) > 0.99).all()


# ------------------------------------------------------------------ sinusoidal encoding
def _loop_encoding(num_positions, d_model, base=10000.0):
    """The formula, entry by entry, in Python floats."""
    pe = torch.zeros(num_positions, d_model, dtype=torch.float64)
    for p in range(num_positions):
        for i in range(d_model // 2):
            angle = p / base ** (2 * i / d_model)
            pe[p, 2 * i] = math.sin(angle)
            pe[p, 2 * i + 1] = math.cos(angle)
    return pe


@pytest.mark.parametrize(
    "num_positions,d_model,base",
    [(1, 2, 10000.0), (50, 16, 10000.0), (30, 6, 100.0), (7, 64, 2.0)],
)
def test_sinusoidal_matches_the_formula_loop(num_positions, d_model, base):
    expected = _loop_encoding(num_positions, d_model, base)
    torch.testing.assert_close(
        positional.sinusoidal_encoding(
            num_positions, d_model, base, dtype=torch.float64
        ),
        expected,
        rtol=1e-12,
        atol=1e-12,
    )
    got32 = positional.sinusoidal_encoding(num_positions, d_model, base)
    assert got32.dtype == torch.float32
    torch.testing.assert_close(got32.double(), expected, rtol=0, atol=1e-7)


def test_sinusoidal_first_rows_and_errors():
    pe = positional.sinusoidal_encoding(3, 4, dtype=torch.float64)
    torch.testing.assert_close(
        pe[0], torch.tensor([0.0, 1.0, 0.0, 1.0], dtype=torch.float64)
    )
    torch.testing.assert_close(
        pe[1],
        torch.tensor(
            [math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)],
            dtype=torch.float64,
        ),
    )
    assert positional.sinusoidal_encoding(0, 4).shape == (0, 4)
    with pytest.raises(ValueError, match="even"):
        positional.sinusoidal_encoding(3, 5)


@pytest.mark.parametrize("k", [0, 1, 5, -3, 17])
def test_offset_matrix_moves_every_position_by_k(k):
    d = 16
    pe = positional.sinusoidal_encoding(60, d, dtype=torch.float64)
    m_k = positional.offset_matrix(k, d, dtype=torch.float64)
    lo, hi = max(0, -k), min(60, 60 - k)
    torch.testing.assert_close(pe[lo:hi] @ m_k, pe[lo + k : hi + k])
    # a rotation
    torch.testing.assert_close(
        m_k @ m_k.T, torch.eye(d, dtype=torch.float64)
    )
    torch.testing.assert_close(
        m_k @ positional.offset_matrix(2, d, dtype=torch.float64),
        positional.offset_matrix(k + 2, d, dtype=torch.float64),
    )


def test_dot_products_depend_only_on_the_distance():
    pe = positional.sinusoidal_encoding(100, 32, dtype=torch.float64)
    gram = pe @ pe.T
    for dist in (0, 1, 7, 40):
        diag = torch.diagonal(gram, offset=dist)
        torch.testing.assert_close(
            diag, torch.full_like(diag, float(diag[0]))
        )
    assert gram[0, 0] == pytest.approx(16.0)  # d/2 pairs of unit length


# ------------------------------------------------------------------ learned embedding
def test_learned_embedding_adds_the_first_n_rows_and_trains():
    emb = positional.LearnedPositionalEmbedding(10, 4)
    assert isinstance(emb.weight, nn.Parameter) and emb.weight.requires_grad
    x = torch.zeros(2, 3, 6, 4, requires_grad=True)
    out = emb(x)
    torch.testing.assert_close(out, emb.weight[:6].expand(2, 3, 6, 4))
    out.sum().backward()
    torch.testing.assert_close(emb.weight.grad[:6], torch.full((6, 4), 6.0))
    assert (emb.weight.grad[6:] == 0).all()
    torch.testing.assert_close(emb(torch.zeros(5, 4)), emb.weight[:5])
    with pytest.raises(ValueError, match="only 10 are learned"):
        emb(torch.zeros(11, 4))


# ------------------------------------------------------------------ 2-D, rotary, relative
def test_sincos_2d_structure():
    gh, gw, d = 3, 5, 16
    pe = positional.sincos_2d_encoding(gh, gw, d, dtype=torch.float64)
    assert pe.shape == (gh * gw, d)
    rows = positional.sinusoidal_encoding(gh, d // 2, dtype=torch.float64)
    cols = positional.sinusoidal_encoding(gw, d // 2, dtype=torch.float64)
    for r in range(gh):
        for c in range(gw):
            torch.testing.assert_close(
                pe[r * gw + c], torch.cat([rows[r], cols[c]])
            )
    with_cls = positional.sincos_2d_encoding(gh, gw, d, cls_token=True)
    assert with_cls.shape == (1 + gh * gw, d) and (with_cls[0] == 0).all()
    with pytest.raises(ValueError, match="divisible by 4"):
        positional.sincos_2d_encoding(2, 2, 6)


def test_sincos_2d_similarity_is_translation_invariant_on_the_grid():
    pe = positional.sincos_2d_encoding(
        6, 6, 32, dtype=torch.float64
    ).reshape(6, 6, 32)
    # <PE(r, c), PE(r + dr, c + dc)> depends only on (dr, dc)
    ref = pe[0, 0] @ pe[1, 2]
    for r in range(5):
        for c in range(4):
            assert float(pe[r, c] @ pe[r + 1, c + 2]) == pytest.approx(
                float(ref)
            )


@pytest.mark.parametrize("dtype", DTYPES)
def test_rotary_matches_offset_matrices_and_keeps_norms(dtype):
    x = checks.random_tensor(2, 7, 8, dtype=dtype, seed=12)
    rot = positional.rotary_embedding(x)
    assert rot.dtype == dtype and rot.shape == x.shape
    for p in range(7):
        torch.testing.assert_close(
            rot[:, p],
            x[:, p] @ positional.offset_matrix(p, 8, dtype=dtype),
            **_tol(dtype),
        )
    torch.testing.assert_close(
        rot.norm(dim=-1), x.norm(dim=-1), **_tol(dtype)
    )


@settings(max_examples=30, deadline=None)
@given(
    p=st.integers(0, 200),
    r=st.integers(0, 200),
    shift=st.integers(-100, 100),
)
def test_rotary_scores_depend_only_on_the_offset(p, r, shift):
    q = checks.random_tensor(1, 16, dtype=torch.float64, seed=13)
    k = checks.random_tensor(1, 16, dtype=torch.float64, seed=14)

    def score(pq, pk):
        rq = positional.rotary_embedding(
            q, positions=torch.tensor([float(pq)])
        )
        rk = positional.rotary_embedding(
            k, positions=torch.tensor([float(pk)])
        )
        return float(rq @ rk.T)

    assert score(p, r) == pytest.approx(
        score(p + shift, r + shift), abs=1e-9
    )


def test_sinusoidal_is_rotary_applied_to_a_constant_vector():
    d = 12
    e = torch.tensor([0.0, 1.0] * (d // 2), dtype=torch.float64).expand(
        20, d
    )
    torch.testing.assert_close(
        positional.rotary_embedding(e),
        positional.sinusoidal_encoding(20, d, dtype=torch.float64),
    )


def test_rotary_roformer_convention_is_the_negative_angle():
    x = checks.random_tensor(5, 6, dtype=torch.float64, seed=15)
    pos = torch.arange(5, dtype=torch.float64)
    theta = pos[:, None] * positional.frequencies(6)
    x0, x1 = x[:, 0::2], x[:, 1::2]
    roformer = torch.stack(
        [
            x0 * theta.cos() - x1 * theta.sin(),
            x0 * theta.sin() + x1 * theta.cos(),
        ],
        -1,
    ).flatten(-2)
    torch.testing.assert_close(
        positional.rotary_embedding(x, positions=-pos), roformer
    )


def test_relative_position_bias_is_toeplitz_and_clipped():
    rpb = positional.RelativePositionBias(num_heads=2, max_distance=3)
    with torch.no_grad():
        rpb.bias.copy_(torch.arange(14.0).reshape(2, 7))
    out = rpb(5, 6)
    assert out.shape == (2, 5, 6)
    for i in range(5):
        for j in range(6):
            rel = max(-3, min(3, j - i))
            assert out[1, i, j] == 7 + rel + 3
    out.sum().backward()
    assert rpb.bias.grad.shape == (2, 7) and rpb.bias.grad.sum() == 2 * 5 * 6
