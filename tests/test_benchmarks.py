"""The ViT throughput benchmark runs end to end (tiny sizes) and reports every ratio it promises."""
from __future__ import annotations

import json

import pytest


@pytest.fixture
def bench(tmp_path, monkeypatch):
    """The benchmark module at a tiny size (batch 4, one step, one round), writing into ``tmp_path``."""
    pytest.importorskip("timm")
    pytest.importorskip("vit_pytorch")
    from benchmarks import vit_throughput

    monkeypatch.setattr(vit_throughput, "BATCH", 4)
    monkeypatch.setattr(vit_throughput, "STEPS", 1)
    monkeypatch.setattr(vit_throughput, "ROUNDS", 1)
    monkeypatch.setattr("course_utils.results.RESULTS_DIR", tmp_path)
    return vit_throughput


def test_vit_throughput_benchmark_smoke(bench, tmp_path):
    out = bench.main(force_bf16=True)  # every path, whatever this CPU does natively
    saved = json.loads((tmp_path / "bench_vit_throughput.json").read_text())["data"]
    params = saved["parameters"]
    assert params["course"] == params["timm"] == params["course_again"], "course vs timm: the same parameter set"
    assert params["vit-pytorch"] - params["course_no_qkv_bias"] == 480, "course vs vit-pytorch: like with like"
    for label in ("float32", "bf16_autocast"):
        for key in ("ratio_course_over_timm", "ratio_course_over_vit_pytorch",
                    "ratio_course_with_qkv_bias_over_vit_pytorch"):
            assert out[label][key] > 0
            low, high = out[label][key.replace("ratio_", "range_")]
            assert low <= out[label][key] <= high, "the median ratio lies inside its per-round range"
        assert set(out[label]["train_img_per_s"]) == {"course", "course_no_qkv_bias", "course_again", "timm",
                                                      "vit-pytorch"}
        assert "ratio_control_course_over_course_again" in out[label]


def test_vit_throughput_benchmark_skips_bf16_where_it_is_emulated(bench, monkeypatch):
    monkeypatch.setattr(bench, "matmul_gflops", lambda: {"float32": 50.0, "bfloat16": 0.8})
    out = bench.main()
    assert "no native bf16" in out["bf16_autocast"]["skipped"]
    assert out["float32"]["ratio_course_over_timm"] > 0
