"""Chapter 06's decoders beyond greedy: the key-value cache (``Seq2SeqTransformer.decode_step``,
``greedy_decode_cached``) against the full recomputation, beam search against a plain-Python
beam search, the stand-in model of the beam-search exercise, and the cache benchmark at a tiny size."""

from __future__ import annotations

import heapq
import json
import math

import pytest
import torch

from course_utils.grading import doubles as beam_doubles
from course_utils.models.transformer import Seq2SeqTransformer
from course_utils.references.decoding import (
    beam_search_scored,
    greedy_decode,
    greedy_decode_cached,
)
from course_utils.training import seq2seq_task

PAD, BOS, EOS = 0, 1, 2
TOL = {torch.float32: 1e-5, torch.float64: 1e-12}


def _random_model(
    seed: int, norm_first: bool, dtype=torch.float32, eos_bias: float = 0.0
) -> Seq2SeqTransformer:
    torch.manual_seed(seed)
    model = (
        Seq2SeqTransformer(
            13,
            13,
            d_model=32,
            num_heads=4,
            d_ff=64,
            norm_first=norm_first,
            max_len=40,
        )
        .to(dtype)
        .eval()
    )
    with torch.no_grad():
        # EOS more likely: sequences end at different steps
        model.out.bias[EOS] += eos_bias
    return model


def _sources(seed: int, batch: int = 8, n: int = 7) -> torch.Tensor:
    src = torch.randint(
        3, 13, (batch, n), generator=torch.Generator().manual_seed(seed)
    )
    src[1, 3:] = PAD  # source padding, masked in cross-attention
    src[min(5, batch - 1), 5:] = PAD
    return src


def _step_by_step(model, ys, src):
    """The logits of decode_step fed ys[:, 0], ys[:, 1], ... and of the full recomputation, per step."""
    memory, keep, cache = model.encode(src), src != PAD, None
    pairs = []
    with torch.no_grad():
        for t in range(ys.shape[1]):
            step, cache = model.decode_step(ys[:, t], memory, keep, cache)
            pairs.append(
                (step, model.decode(ys[:, : t + 1], memory, keep)[:, -1])
            )
    return pairs, cache


# ------------------------------------------------------------------ the key-value cache
def test_cached_greedy_gives_the_trained_models_tokens():
    model = seq2seq_task.load_trained_model()
    src = seq2seq_task.make_heldout(
        64, seq2seq_task.TaskConfig(), seed=3
    ).src  # padded, lengths 3..12
    full = greedy_decode(model, src, 13, BOS, EOS, PAD)
    assert torch.equal(
        greedy_decode_cached(model, src, 13, BOS, EOS, PAD), full
    )
    assert torch.equal(
        greedy_decode_cached(model, src, 4, BOS, EOS, PAD), full[:, :5]
    )
    for step, whole in _step_by_step(model, full, src)[0]:
        torch.testing.assert_close(step, whole, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("norm_first", [True, False])
# seeds whose outputs end at different steps
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_cached_greedy_equals_greedy_on_random_models(
    seed, norm_first, dtype
):
    model = _random_model(seed, norm_first, dtype, eos_bias=0.5)
    src = _sources(seed)
    full = greedy_decode(model, src, 20, BOS, EOS, PAD)
    ends = (full == EOS).int().argmax(dim=1)
    assert (full == EOS).any() and len(
        set(ends[(full == EOS).any(dim=1)].tolist())
    ) > 1, (
        "the test should cover sequences that end at different steps (and then get padding as input)"
    )
    assert torch.equal(
        greedy_decode_cached(model, src, 20, BOS, EOS, PAD), full
    )
    pairs, cache = _step_by_step(model, full, src)
    for t, (step, whole) in enumerate(pairs):
        torch.testing.assert_close(
            step, whole, atol=TOL[dtype], rtol=TOL[dtype], msg=f"step {t}"
        )
    heads, head_dim = 4, 8
    assert cache.length == full.shape[1]
    for layer in cache.layers:
        assert (
            layer.self_k.shape
            == layer.self_v.shape
            == (8, heads, full.shape[1], head_dim)
        )
        assert (
            layer.cross_k.shape
            == layer.cross_v.shape
            == (8, heads, src.shape[1], head_dim)
        )


@pytest.mark.parametrize("norm_first", [True, False])
def test_each_cached_step_matches_the_full_pass_on_any_prefix_with_padding(
    norm_first,
):
    """Teacher-forced, not greedy: arbitrary tokens, padding after an EOS and inside the prefix."""
    model = _random_model(4, norm_first)
    src = _sources(4, batch=4)
    tgt = torch.randint(
        3, 13, (4, 9), generator=torch.Generator().manual_seed(9)
    )
    tgt[:, 0] = BOS
    # a finished sequence: padding as decoder input
    tgt[0, 3], tgt[0, 4:] = (
        EOS,
        PAD,
    )
    tgt[2, 5] = PAD  # padding in the middle, masked as a key from then on
    for t, (step, whole) in enumerate(_step_by_step(model, tgt, src)[0]):
        torch.testing.assert_close(
            step, whole, atol=1e-5, rtol=1e-5, msg=f"step {t}"
        )


def test_decode_step_without_source_padding_and_beyond_max_len():
    model = _random_model(5, True)
    src = torch.randint(
        3, 13, (2, 4), generator=torch.Generator().manual_seed(5)
    )
    memory = model.encode(src)
    ys = torch.full((2, 1), BOS)
    cache = None
    with torch.no_grad():
        for t in range(model.max_len):
            logits, cache = model.decode_step(ys[:, -1], memory, None, cache)
            if t == 2:
                torch.testing.assert_close(
                    logits,
                    model.decode(ys, memory, None)[:, -1],
                    atol=1e-5,
                    rtol=1e-5,
                )
            ys = torch.cat([ys, logits.argmax(-1, keepdim=True)], dim=1)
        with pytest.raises(ValueError, match="max_len"):
            model.decode_step(ys[:, -1], memory, None, cache)


# ------------------------------------------------------------------ beam search
def _python_beam_search(model, src, max_new_tokens, beam_size):
    """Beam search in plain Python, float64 scores: one source at a time, lists and heapq."""
    memory, keep = model.encode(src), src != PAD
    outputs = []
    for b in range(src.shape[0]):
        beam = [(0.0, [BOS], False)]
        for _ in range(max_new_tokens):
            if all(done for _, _, done in beam):
                break
            ys = torch.tensor([tokens for _, tokens, _ in beam])
            h = len(beam)
            with torch.no_grad():
                logits = model.decode(
                    ys,
                    memory[b : b + 1].expand(h, -1, -1),
                    keep[b : b + 1].expand(h, -1),
                )[:, -1]
            logp = torch.log_softmax(logits.double(), dim=-1).tolist()
            candidates = []
            for (score, tokens, done), row in zip(beam, logp):
                if done:
                    candidates.append((score, tokens + [PAD], True))
                else:
                    candidates += [
                        (score + lp, tokens + [t], t == EOS)
                        for t, lp in enumerate(row)
                    ]
            beam = heapq.nlargest(beam_size, candidates, key=lambda c: c[0])
        outputs.append(max(beam, key=lambda c: c[0]))
    return outputs


@pytest.mark.parametrize("beam_size", [1, 2, 3, 5])
def test_beam_search_agrees_with_a_plain_python_beam_search(beam_size):
    cases = [
        (
            beam_doubles.ScriptedModel(),
            torch.tensor([[3], [4], [5], [6], [7]]),
            8,
        ),
        (_random_model(5, True, eos_bias=0.5), _sources(5, batch=5), 9),
        (
            seq2seq_task.load_trained_model(),
            seq2seq_task.make_heldout(
                6, seq2seq_task.TaskConfig(), seed=2
            ).src,
            13,
        ),
    ]
    for model, src, steps in cases:
        out, scores = beam_search_scored(
            model, src, steps, BOS, EOS, PAD, beam_size=beam_size
        )
        plain = _python_beam_search(model, src, steps, beam_size)
        for b, (score, tokens, _) in enumerate(plain):
            assert (
                out[b, : len(tokens)].tolist() == tokens
                and (out[b, len(tokens) :] == PAD).all()
            )
            assert math.isclose(
                scores[b].item(), score, rel_tol=1e-5, abs_tol=1e-5
            )


def test_the_stand_in_models_scripts_say_what_their_comments_say():
    model = beam_doubles.ScriptedModel()
    prob = lambda script, path: math.exp(  # noqa: E731
        beam_doubles.path_log_prob(script, path)
    )
    expected = {  # first source token: (greedy, beam_size=2, beam_size=3), tokens after BOS
        3: ([3, 5, EOS], [4, 5, EOS], [4, 5, EOS]),
        4: ([3, 4, 7, EOS], [EOS], [EOS]),
        5: ([5, 3, EOS], [6, 8, 9, EOS], [6, 8, 9, EOS]),
        6: ([3, 7, EOS], [3, 7, EOS], [5, 6, EOS]),
    }
    for key, (greedy, beam2, beam3) in expected.items():
        src = torch.tensor([[key]])
        assert (
            greedy_decode(model, src, 8, BOS, EOS, PAD)[0].tolist()
            == [BOS] + greedy
        )
        for k, want in ((1, greedy), (2, beam2), (3, beam3)):
            out, score = beam_search_scored(
                model, src, 8, BOS, EOS, PAD, beam_size=k
            )
            assert (
                out[0, : len(want) + 1].tolist() == [BOS] + want
                and (out[0, len(want) + 1 :] == PAD).all()
            )
            assert math.isclose(
                score.exp().item(),
                prob(beam_doubles.SCRIPTS[key], want),
                rel_tol=1e-5,
            )
    assert math.isclose(prob(beam_doubles.GREEDY_TRAP, [4, 5, EOS]), 0.342)
    assert math.isclose(prob(beam_doubles.EARLY_END, [EOS]), 0.4)
    # a decoder that keeps extending a finished output writes the junk token
    assert (
        beam_doubles.next_token_probs(beam_doubles.EARLY_END, (EOS,))
        .argmax()
        .item()
        == beam_doubles.JUNK
    )
    # every distribution sums to 1 and has no tied entries
    for script in beam_doubles.SCRIPTS.values():
        for prefix in [*script, (9,), (EOS,), (EOS, PAD)]:
            p = beam_doubles.next_token_probs(script, prefix)
            assert math.isclose(p.sum().item(), 1.0) and len(
                set(p.tolist())
            ) == len(p)


def test_beam_search_mutations_edit_the_solution_cell():
    from tests.helpers import solution_notebook
    from tests.mutations.m06_masking import MUTATIONS, VARIANTS

    cell = next(
        c
        for c in solution_notebook("06_masking").cells
        if c.metadata.get("nbgrader", {}).get("grade_id") == "beam_search"
    )
    mine = [m for m in MUTATIONS + VARIANTS if m.exercise == "beam_search"]
    assert (
        sum(m in MUTATIONS for m in mine) >= 6
        and sum(m in VARIANTS for m in mine) >= 4
    )
    for m in mine:
        assert m.old is None or cell.source.count(m.old) == 1, (
            f"{m.name}: its old text must occur exactly once"
        )


# ------------------------------------------------------------------ the benchmark
def test_kv_cache_benchmark_smoke(tmp_path):
    from benchmarks import kv_cache

    threads = torch.get_num_threads()
    try:
        assert (
            kv_cache.main(
                [
                    "--quick",
                    "--repeats",
                    "1",
                    "--batch",
                    "2",
                    "--out-dir",
                    str(tmp_path),
                ]
            )
            == 0
        )
    finally:
        torch.set_num_threads(threads)
    record = json.loads((tmp_path / "bench_kv_cache.json").read_text())
    assert record["provenance"]["command"].startswith(
        "python -m benchmarks.kv_cache"
    )
    rows = record["data"]["rows"]
    assert [r["new_tokens"] for r in rows] == kv_cache.QUICK_LENGTHS
    for r in rows:
        assert (
            r["same_tokens"] and r["uncached_ms"] > 0 and r["cached_ms"] > 0
        )
        low, high = r["cached_over_uncached_range"]
        assert low <= high
        assert (
            r["uncached_ms_range"][0]
            <= r["uncached_ms"]
            <= r["uncached_ms_range"][1]
        )


@pytest.mark.parametrize("noise", [0.0, 0.01, 0.02])
def test_greedy_exact_match_from_one_pass_equals_step_by_step_greedy_decoding(
    noise,
):
    """Training reads greedy decoding's accuracy off one teacher-forced pass: the same hits as
    decoding, on the trained model and on copies of it made worse by noise (some hits, some misses)."""
    model = seq2seq_task.load_trained_model()
    with torch.no_grad():
        g = torch.Generator().manual_seed(3)
        for p in model.parameters():
            p.add_(noise * torch.randn(p.shape, generator=g))
    data = seq2seq_task.make_heldout(200, seq2seq_task.TaskConfig(), seed=17)
    decoded = seq2seq_task.evaluate_decoding(model, data, "greedy").hits
    one_pass = seq2seq_task.greedy_exact_match(model, data, batch_size=80)
    assert torch.equal(one_pass, decoded)
    if noise:
        assert 0 < int(decoded.sum()) < len(decoded), (
            "the noise should leave some hits and some misses"
        )
