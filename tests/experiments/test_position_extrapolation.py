"""Longer inputs than in training (chapter 05): the two resampling functions of
course_utils.references.positional, the 2-D one against timm's ``resample_abs_pos_embed``, and
the benchmark behind results/ch05_position_extrapolation.json at a tiny size."""

from __future__ import annotations

import json

import pytest
import torch

from course_utils.references import positional, vit


# ------------------------------------------------------------------ interpolate_positions (1-D)
def _linear_by_hand(table: torch.Tensor, new_length: int) -> torch.Tensor:
    """Row j at the old position j (L - 1) / (new_length - 1), mixed from the two rows around it."""
    L = table.shape[0]
    rows = []
    for j in range(new_length):
        x = j * (L - 1) / (new_length - 1) if new_length > 1 else 0.0
        lo = min(int(x), L - 1)
        hi = min(lo + 1, L - 1)
        t = x - lo
        rows.append((1 - t) * table[lo] + t * table[hi])
    return torch.stack(rows)


@pytest.mark.parametrize(
    "L, new_length",
    [(16, 32), (16, 24), (16, 31), (5, 3), (7, 7), (1, 4), (4, 1), (2, 9)],
)
def test_interpolate_positions_is_linear_between_neighbouring_rows(
    L, new_length
):
    table = torch.randn(
        L,
        6,
        dtype=torch.float64,
        generator=torch.Generator().manual_seed(L + new_length),
    )
    out = positional.interpolate_positions(table, new_length)
    assert out.shape == (new_length, 6) and out.dtype == torch.float64
    torch.testing.assert_close(
        out, _linear_by_hand(table, new_length), rtol=1e-12, atol=1e-12
    )


def test_interpolate_positions_keeps_the_table_and_its_ends():
    table = torch.randn(16, 8, generator=torch.Generator().manual_seed(0))
    assert torch.equal(positional.interpolate_positions(table, 16), table)
    # old rows at every second new row
    longer = positional.interpolate_positions(table, 31)
    torch.testing.assert_close(longer[::2], table, rtol=0, atol=1e-6)
    torch.testing.assert_close(
        longer[1::2], (table[:-1] + table[1:]) / 2, rtol=0, atol=1e-6
    )
    for n in (3, 24, 100):
        out = positional.interpolate_positions(table, n)
        torch.testing.assert_close(
            out[[0, -1]], table[[0, -1]], rtol=0, atol=1e-6
        )


def test_interpolate_positions_of_a_learned_table_is_differentiable():
    emb = positional.LearnedPositionalEmbedding(16, 4)
    out = positional.interpolate_positions(emb.weight, 31)
    out.sum().backward()
    # each new row is a convex combination: the weights each old row receives sum to 31 in total
    assert emb.weight.grad is not None
    torch.testing.assert_close(
        emb.weight.grad.sum(dim=0), torch.full((4,), 31.0)
    )


def test_interpolate_positions_errors():
    with pytest.raises(ValueError, match="expected a table"):
        positional.interpolate_positions(torch.randn(1, 16, 4), 32)
    with pytest.raises(ValueError, match=">= 1"):
        positional.interpolate_positions(torch.randn(16, 4), 0)
    with pytest.raises(TypeError, match="floating point"):
        positional.interpolate_positions(torch.arange(16).reshape(8, 2), 4)


# ------------------------------------------------------------------ resample_grid (2-D) against timm
@pytest.mark.parametrize("antialias", [True, False])
# CIFAR-10's grid (32x32 images, 4x4 patches) at 48x48
# two prefix tokens (a class and a distillation token, as in DeiT)
@pytest.mark.parametrize(
    "old, new, prefix",
    [
        (
            (8, 8),
            (12, 12),
            1,
        ),
        ((14, 14), (24, 24), 1),  # ImageNet ViT-B/16, 224 -> 384
        ((8, 8), (4, 4), 1),  # a smaller grid: antialias matters
        ((6, 4), (9, 5), 1),  # rectangular grids
        ((5, 5), (7, 7), 0),  # no class token (DeiT-style prefix count 0)
        (
            (4, 4),
            (6, 3),
            2,
        ),
    ],
)
def test_resample_grid_matches_timm(old, new, prefix, antialias):
    layers = pytest.importorskip("timm.layers")
    d = 24
    pos_embed = torch.randn(
        1,
        prefix + old[0] * old[1],
        d,
        generator=torch.Generator().manual_seed(sum(old + new)),
    )
    ours = positional.resample_grid(
        pos_embed, old, new, num_prefix_tokens=prefix, antialias=antialias
    )
    theirs = layers.resample_abs_pos_embed(
        pos_embed,
        list(new),
        old_size=list(old),
        num_prefix_tokens=prefix,
        interpolation="bicubic",
        antialias=antialias,
        align_corners=False,
    )
    assert ours.shape == (1, prefix + new[0] * new[1], d)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-6)
    assert torch.equal(ours[:, :prefix], pos_embed[:, :prefix]), (
        "the prefix rows are kept as they are"
    )


def test_resample_grid_reads_the_patches_row_by_row():
    # A table whose row for patch (r, c) is (r, c): resampling must keep rows as rows and columns as columns.
    h, w = 4, 6
    r, c = torch.meshgrid(
        torch.arange(h, dtype=torch.float64),
        torch.arange(w, dtype=torch.float64),
        indexing="ij",
    )
    grid = torch.stack([r, c], dim=-1).reshape(h * w, 2)
    # CLS row first
    table = torch.cat([torch.full((1, 2), 99.0, dtype=torch.float64), grid])
    # 2-D in, 2-D out
    out = positional.resample_grid(
        table, (h, w), (h, 2 * w), antialias=False
    )
    assert out.shape == (1 + h * 2 * w, 2)
    torch.testing.assert_close(
        out[0], torch.tensor([99.0, 99.0], dtype=torch.float64)
    )
    rows = out[1:, 0].reshape(h, 2 * w)
    # the row coordinate does not move
    torch.testing.assert_close(rows, r[:, :1].expand(h, 2 * w))


def test_resample_grid_same_grid_is_the_identity_and_half_precision_works():
    pos_embed = torch.randn(1, 1 + 25, 8)
    torch.testing.assert_close(
        positional.resample_grid(pos_embed, 5, 5),
        pos_embed,
        rtol=0,
        atol=1e-6,
    )
    half = positional.resample_grid(pos_embed.bfloat16(), 5, 7)
    assert half.dtype == torch.bfloat16 and half.shape == (1, 1 + 49, 8)


def test_resample_grid_errors():
    with pytest.raises(ValueError, match="need 65"):
        positional.resample_grid(torch.randn(1, 64, 8), 8, 12)
    with pytest.raises(ValueError, match="expected pos_embed"):
        positional.resample_grid(torch.randn(2, 65, 8), 8, 12)
    with pytest.raises(ValueError, match="positive"):
        positional.resample_grid(torch.randn(1, 65, 8), 8, 0)


def test_a_vit_runs_at_a_higher_resolution_with_resampled_positions():
    """The fine-tuning recipe: a ViT for 32x32 images loaded into one for 48x48, positions resampled."""
    torch.manual_seed(0)
    small = vit.ViT(
        img_size=32,
        patch_size=4,
        num_classes=10,
        dim=16,
        depth=1,
        num_heads=2,
        mlp_dim=32,
    ).eval()
    large = vit.ViT(
        img_size=48,
        patch_size=4,
        num_classes=10,
        dim=16,
        depth=1,
        num_heads=2,
        mlp_dim=32,
    ).eval()
    state = small.state_dict()
    state["pos_embed"] = positional.resample_grid(state["pos_embed"], 8, 12)
    large.load_state_dict(state)
    assert large(torch.randn(2, 3, 48, 48)).shape == (2, 10)
    assert torch.equal(large.pos_embed[:, 0], small.pos_embed[:, 0]), (
        "the CLS row is carried over as it is"
    )
    assert torch.equal(
        large.patch_embed.proj.weight, small.patch_embed.proj.weight
    )


# ------------------------------------------------------------------ the benchmark, tiny
def test_position_extrapolation_benchmark_quick(tmp_path, monkeypatch):
    from course_utils.experiments import position_extrapolation as bench

    monkeypatch.setattr(
        "course_utils.results.RESULTS_DIR", tmp_path / "results"
    )
    # no --out-dir: prints only, never replaces the stored result
    data = bench.run(["--quick"])
    assert not (tmp_path / "results").exists()
    assert data["quick"] and data["seeds"] == [0]

    bench.run(["--quick", "--out-dir", str(tmp_path)])
    saved = json.loads(
        (tmp_path / "ch05_position_extrapolation.json").read_text()
    )
    data, prov = saved["data"], saved["provenance"]
    assert (
        prov["command"]
        == "python -m course_utils.experiments.position_extrapolation --quick"
    )
    assert (
        set(data["accuracy"]) == set(bench.VARIANTS) == set(data["finetune"])
    )
    for variant, by_length in data["accuracy"].items():
        assert set(by_length) == {str(n) for n in bench.EVAL_LENGTHS}
        assert by_length[str(bench.TRAIN_LENGTH)]["new_positions"] is None
        for row in by_length.values():
            for part in ("all", "seen_positions"):
                assert (
                    0.0
                    <= row[part]["min"]
                    <= row[part]["mean"]
                    <= row[part]["max"]
                    <= 1.0
                )
        assert len(data["finetune"][variant]) == len(
            data["training"]["finetune_checkpoints"]
        )
    # At the training length the two ways of extending a learned table are the same model.
    learned = [
        data["accuracy"][v][str(bench.TRAIN_LENGTH)]["all"]["per_seed"]
        for v in ("learned_interpolated", "learned_new_rows")
    ]
    assert learned[0] == learned[1]


def test_the_benchmark_extends_a_learned_table_as_it_says():
    from course_utils.experiments import position_extrapolation as bench

    torch.manual_seed(0)
    model = bench.CopyModel(bench.TRAIN_LENGTH)
    trained = model.pos.weight.detach()
    interpolated = bench.extended(
        model, "learned_interpolated", 32, seed=1
    ).pos.weight.detach()
    new_rows = bench.extended(
        model, "learned_new_rows", 32, seed=1
    ).pos.weight.detach()
    torch.testing.assert_close(
        interpolated, positional.interpolate_positions(trained, 32)
    )
    assert torch.equal(new_rows[: bench.TRAIN_LENGTH], trained)
    # drawn like LearnedPositionalEmbedding's init (std 0.02)
    assert float(new_rows[bench.TRAIN_LENGTH :].std()) < 0.03
    with pytest.raises(ValueError, match="only 16 are learned"):
        model(torch.zeros(1, 17, dtype=torch.long))
    tokens, targets = bench.copy_batch(
        3, 10, generator=torch.Generator().manual_seed(0)
    )
    assert (targets[:, : bench.K] == -100).all() and torch.equal(
        targets[:, bench.K :], tokens[:, : -bench.K]
    )
