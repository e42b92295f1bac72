"""Chapter 02's layer comparison (course_utils/experiments/layer_comparison.py): its measuring functions
at tiny sizes.

- reach: a stack of L causal convolutions with kernel k sees exactly the 1 + L(k-1) inputs before
  the output, a dilated stack k**L of them; one attention or RNN layer sees every input;
- the smallest stack that connects output n-1 to input 0 matches the formulas;
- graph depth: constant in n for attention and convolution, growing by the same amount per
  position for the RNN;
- FLOPs: 4 n^2 d for attention's core, 6 n d^2 for its projections, 4 n d^2 for the RNN,
  2 k n d^2 for a convolution, so core / RNN = n / d;
- the RNN's gradient shrinks with the distance, attention's does not;
- the command line at its smoke-test size writes a result file where it is told to.
"""

from __future__ import annotations

import json

import pytest
import torch

from course_utils.experiments import layer_comparison as lc

N, D = 12, 3


@pytest.mark.parametrize("layers", [1, 2, 3, 5])
def test_causal_conv_reach_is_one_plus_layers_times_kernel_minus_one(layers):
    seen = lc.reach(
        lc.build("conv", D, layers=layers, seed=layers), N, D, seed=layers
    )
    width = 1 + layers * (lc.K - 1)
    assert seen == list(range(N - width, N)), (
        f"{layers} layers should see the last {width} inputs, saw {seen}"
    )


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_dilated_conv_reach_is_kernel_to_the_layers(layers):
    n = 30
    seen = lc.reach(
        lc.build("conv", D, layers=layers, dilated=True, seed=0), n, D
    )
    width = min(n, lc.K**layers)
    assert seen == list(range(n - width, n)), (
        f"dilations 1, 3, 9, ...: the last {width} inputs, saw {seen}"
    )


@pytest.mark.parametrize("kind", ["attention", "rnn"])
def test_one_attention_or_rnn_layer_reaches_every_input(kind):
    assert lc.reach(lc.build(kind, D, seed=0), N, D) == list(range(N))
    assert lc.layers_to_connect(kind, N, D) == 1


@pytest.mark.parametrize("n", [2, 5, 9, 10, 28])
def test_layers_to_connect_match_the_formulas(n):
    assert lc.layers_to_connect("conv", n, D) == -(-(n - 1) // (lc.K - 1))
    assert lc.layers_to_connect("conv", n, D, dilated=True) == lc._ceil_log(
        n, lc.K
    )
    assert lc._ceil_log(n, lc.K) == min(L for L in range(10) if lc.K**L >= n)


def test_reach_table_records_agreement_across_seeds():
    rows = lc.reach_table([6, 9], seeds=[0, 1], d=D)
    for row in rows:
        assert row["same_for_every_seed"]
        assert row["layers_needed"]["conv"] == row["formula"]["conv"]
        assert (
            row["layers_needed"]["dilated_conv"]
            == row["formula"]["dilated_conv"]
        )
        assert (
            row["layers_needed"]["attention"]
            == row["layers_needed"]["rnn"]
            == 1
        )


def test_graph_depth_counts_a_chain():
    x = torch.randn(3, requires_grad=True)
    y = x
    depths = []
    for _ in range(4):
        y = torch.sin(y) * 2
        depths.append(lc.graph_depth(y))
    assert [b - a for a, b in zip(depths, depths[1:])] == [2, 2, 2], (
        "two operations per step: sin, then mul"
    )


def test_depth_is_constant_for_attention_and_conv_and_grows_for_the_rnn():
    depth = {
        kind: [lc.layer_depth(kind, n, D) for n in (4, 8, 16)]
        for kind in lc.LAYERS
    }
    assert len(set(depth["attention"])) == 1, depth
    assert len(set(depth["conv"])) == 1, depth
    a, b, c = depth["rnn"]
    assert b - a > 0 and (c - b) == 2 * (b - a), (
        f"the RNN adds the same operations per position: {depth['rnn']}"
    )


@pytest.mark.parametrize("n,d", [(4, 8), (8, 8), (16, 4), (5, 7)])
def test_flop_counts_follow_table_1(n, d):
    core, proj = (
        lc.count_flops("attention_core", n, d),
        lc.count_flops("projections", n, d),
    )
    assert core == 4 * n * n * d, (
        "Q K^T and weights @ V: two products of n*n*d multiply-adds"
    )
    assert proj == 6 * n * d * d, "three (n, d) x (d, d) products"
    assert lc.count_flops("attention", n, d) == core + proj
    assert lc.count_flops("rnn", n, d) == 4 * n * d * d, (
        "x_t W_ih and h_(t-1) W_hh at each of n steps"
    )
    assert lc.count_flops("conv", n, d) == 2 * lc.K * n * d * d, (
        "one (d, d) matrix per tap of the kernel"
    )


def test_flop_table_crosses_over_at_n_equal_d():
    rows = lc.flop_table([(4, 8), (8, 8), (16, 8)])
    assert [r["core_over_rnn"] for r in rows] == [0.5, 1.0, 2.0]
    assert all(
        r["core_per_n2d"] == 4
        and r["rnn_per_nd2"] == 4
        and r["conv_per_knd2"] == 2
        for r in rows
    )


def test_decay_per_step_recovers_a_geometric_sequence():
    norms = 3.0 * 0.5 ** torch.arange(10, dtype=torch.float64)
    norms[0] = 100.0  # distance 0 is left out of the fit
    assert lc.decay_per_step(norms) == pytest.approx(0.5, rel=1e-12)


def test_rnn_gradient_decays_with_distance_and_attention_does_not():
    out = lc.gradient_decay(10, 4, seeds=[0, 1, 2])
    rnn, attention = out["rnn"], out["attention"]
    assert len(rnn["median"]) == len(attention["median"]) == 10
    assert rnn["decay_per_step"]["max"] < 0.9, rnn["decay_per_step"]
    assert (
        0.8 < attention["decay_per_step"]["min"]
        and attention["decay_per_step"]["max"] < 1.25
    )
    for stats in (rnn, attention):
        assert all(
            lo <= q1 <= m <= q3 <= hi
            for lo, q1, m, q3, hi in zip(
                stats["min"],
                stats["q25"],
                stats["median"],
                stats["q75"],
                stats["max"],
            )
        )


def test_quick_run_writes_where_it_is_told(tmp_path):
    threads = torch.get_num_threads()
    try:
        assert lc.main(["--quick", "--out", str(tmp_path)]) == 0
    finally:
        torch.set_num_threads(threads)
    record = json.loads((tmp_path / f"{lc.NAME}.json").read_text())
    data = record["data"]
    assert record["provenance"]["command"].endswith("--quick")
    assert set(data) >= {
        "reach",
        "rnn_gradient",
        "sequential",
        "flops",
        "load_average_1min",
    }
    for row in data["sequential"]["time"]["rows"]:
        for kind in lc.LAYERS:
            t = row[kind]
            assert (
                0 < t["ms_q25"] <= t["ms"] <= t["ms_q75"] and t["flops"] > 0
            )
    assert (
        data["reach"]["growth"]["conv"]
        == data["reach"]["growth"]["conv_formula"]
    )
    assert (
        data["reach"]["growth"]["dilated_conv"]
        == data["reach"]["growth"]["dilated_conv_formula"]
    )
