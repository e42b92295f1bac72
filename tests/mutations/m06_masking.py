"""Chapter 06: the classic masking mistakes (off-by-one, inverted meaning, NaN rows, float16,
masks that miss the heads), decoders that ignore end-of-sequence, and beam searches that are
greedy in disguise, let finished hypotheses move, or mix up the beams of a batch."""

from tests.mutations import Mutation

CHAPTER = "06_masking"
MUTATIONS = [
    # padding_mask
    Mutation(
        "padding_mask",
        "padding-le-instead-of-lt",
        "positions[None, :] < lengths[:, None]",
        "positions[None, :] <= lengths[:, None]",
    ),
    Mutation(
        "padding_mask",
        "padding-inverted-meaning",
        "positions[None, :] < lengths[:, None]",
        "positions[None, :] >= lengths[:, None]",
    ),
    Mutation(
        "padding_mask",
        "padding-transposed",
        "positions[None, :] < lengths[:, None]",
        "positions[:, None] < lengths[None, :]",
    ),
    # positions created on the CPU: fails for lengths on another device
    Mutation(
        "padding_mask",
        "padding-arange-on-cpu",
        "torch.arange(max_len, device=lengths.device)",
        "torch.arange(max_len)",
    ),
    Mutation(
        "padding_mask",
        "padding-returns-long",
        "positions[None, :] < lengths[:, None]",
        "(positions[None, :] < lengths[:, None]).long()",
    ),
    # causal_mask
    Mutation(
        "causal_mask",
        "causal-diagonal-blocked",
        "index[None, :] <= index[:, None]",
        "index[None, :] < index[:, None]",
    ),
    Mutation(
        "causal_mask",
        "causal-one-future-token-leaks",
        "index[None, :] <= index[:, None]",
        "index[None, :] <= index[:, None] + 1",
    ),
    Mutation(
        "causal_mask",
        "causal-upper-triangle",
        "index[None, :] <= index[:, None]",
        "index[None, :] >= index[:, None]",
    ),
    Mutation(
        "causal_mask",
        "causal-float-tril",
        "index = torch.arange(n)\n    return index[None, :] <= index[:, None]",
        "return torch.tril(torch.ones(n, n))  # float 1/0, not bool",
    ),
    # masked_softmax
    Mutation(
        "masked_softmax",
        "softmax-nan-for-empty-rows",
        "lowest = torch.finfo(scores.dtype).min",
        'lowest = float("-inf")',
    ),
    Mutation(
        "masked_softmax",
        "softmax-multiplies-scores-by-mask",
        None,
        """def masked_softmax(scores, mask, dim=-1):
    return torch.softmax(scores * mask, dim=dim)  # blocked scores become 0, not excluded
""",
    ),
    Mutation(
        "masked_softmax",
        "softmax-uniform-empty-rows",
        "    e = e * mask",
        "    e = e",
    ),
    Mutation(
        "masked_softmax",
        "softmax-inverted-mask",
        "scores.masked_fill(~mask, lowest)",
        "scores.masked_fill(mask, lowest)",
    ),
    Mutation(
        "masked_softmax",
        "softmax-mask-after-softmax",
        "    lowest = torch.finfo(scores.dtype).min",
        "    return torch.softmax(scores, dim=dim) * mask\n    lowest = torch.finfo(scores.dtype).min",
    ),
    Mutation(
        "masked_softmax",
        "softmax-minus-1e9-overflows-float16",
        "lowest = torch.finfo(scores.dtype).min",
        "lowest = -1e9",
    ),
    # the slides' recipe: -1e9 and a plain softmax, so a row with nothing allowed is uniform, not zero
    Mutation(
        "masked_softmax",
        "softmax-minus-1e9-uniform-empty-rows",
        None,
        """def masked_softmax(scores, mask, dim=-1):
    return torch.softmax(scores.masked_fill(mask == 0, -1e9), dim=dim)
""",
    ),
    # -inf and a plain softmax: NaN in a row with nothing allowed
    Mutation(
        "masked_softmax",
        "softmax-minus-inf-nan-rows",
        None,
        """def masked_softmax(scores, mask, dim=-1):
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=dim)
""",
    ),
    # always the last dim, whatever `dim` says
    Mutation(
        "masked_softmax",
        "softmax-ignores-dim",
        "amax(dim=dim, keepdim=True)",
        "amax(dim=-1, keepdim=True)",
    ),
    # combined_mask
    Mutation(
        "combined_mask",
        "combined-no-heads-dim",
        "padding_mask(lengths, max_len)[:, None, None, :]",
        "padding_mask(lengths, max_len)[:, None, :]",
    ),
    Mutation(
        "combined_mask",
        "combined-masks-queries-not-keys",
        "padding_mask(lengths, max_len)[:, None, None, :]",
        "padding_mask(lengths, max_len)[:, None, :, None]",
    ),
    Mutation(
        "combined_mask",
        "combined-or-instead-of-and",
        "return real_keys & no_future",
        "return real_keys | no_future",
    ),
    # greedy_decode
    Mutation(
        "greedy_decode",
        "greedy-ignores-eos",
        "        finished |= next_token == eos_id\n",
        "",
    ),
    Mutation(
        "greedy_decode",
        "greedy-no-early-stop",
        "        if finished.all():\n            break\n",
        "",
    ),
    Mutation(
        "greedy_decode",
        "greedy-first-position",
        "logits[:, -1].argmax(dim=-1)",
        "logits[:, 0].argmax(dim=-1)",
    ),
    Mutation(
        "greedy_decode",
        "greedy-no-source-mask",
        "model.decode(ys, memory, src_keep)",
        "model.decode(ys, memory, None)",
    ),
    # finished sequences keep writing the model's tokens instead of padding
    Mutation(
        "greedy_decode",
        "greedy-no-padding-after-eos",
        "        next_token[finished] = pad_id                         # finished sequences only grow padding\n",
        "",
    ),
    # beam_search
    # top-k within each hypothesis instead of over all k * V candidates: k greedy searches side by side
    Mutation(
        "beam_search",
        "beam-topk-per-hypothesis",
        "        top_scores, top_index = candidates.reshape(B, k * V).topk(k, dim=-1)   # the k best of k*V, per source\n",
        "        top_scores, top_token = candidates.max(dim=-1)          # each hypothesis keeps its own best extension\n"
        "        top_scores = top_scores.reshape(B, k)\n"
        "        top_index = torch.arange(k, device=src.device) * V + top_token.reshape(B, k)\n",
    ),
    # every copy of <bos> is live: the first step fills the beam with k copies of one hypothesis
    Mutation(
        "beam_search",
        "beam-all-copies-live",
        "    scores[:, 0] = 0.0                                           # k copies of <bos>, but only the first is live\n",
        "    scores = torch.zeros(B, k, device=src.device)\n",
    ),
    # finished hypotheses go on growing real tokens (and their scores change)
    Mutation(
        "beam_search",
        "beam-finished-keep-growing",
        "        logp = torch.where(finished[:, None], frozen, logp)\n",
        "",
    ),
    # finished hypotheses grow padding, but pay the model's log-probability of padding for it
    Mutation(
        "beam_search",
        "beam-finished-pay-for-padding",
        "frozen[:, pad_id] = 0.0",
        "frozen[:, pad_id] = logp[:, pad_id]",
    ),
    # the parent row without the source's offset: every source continues source 0's beam
    Mutation(
        "beam_search",
        "beam-parent-without-batch-offset",
        "parent = (first_row + top_index // V).reshape(-1)",
        "parent = (top_index // V).reshape(-1)",
    ),
    # ranked by the last token's log-probability instead of the running sum
    Mutation(
        "beam_search",
        "beam-score-last-step-only",
        "candidates = scores.reshape(B * k, 1) + logp",
        "candidates = logp",
    ),
    # the last row of the beam (its worst hypothesis) instead of the best
    Mutation(
        "beam_search",
        "beam-returns-last-row",
        "best = first_row[:, 0] + scores.argmax(dim=-1)",
        "best = first_row[:, 0] + k - 1",
    ),
    # the finished flags stay with the rows instead of following their hypotheses to the new rows
    Mutation(
        "beam_search",
        "beam-finished-not-reordered",
        "finished = finished[parent] | (token == eos_id)",
        "finished = finished | (token == eos_id)",
    ),
]

VARIANTS = [
    Mutation(
        "padding_mask",
        "padding-le-length-minus-one",
        None,
        """def padding_mask(lengths, max_len):
    last = lengths.long() - 1                      # index of each sequence's last real token
    return torch.arange(max_len, device=lengths.device).unsqueeze(0) <= last.unsqueeze(1)
""",
    ),
    Mutation(
        "causal_mask",
        "causal-ge-unsqueeze",
        None,
        """def causal_mask(n):
    i = torch.arange(n)
    return i.unsqueeze(1) >= i.unsqueeze(0)   # query row i sees keys j <= i
""",
    ),
    Mutation(
        "masked_softmax",
        "softmax-inf-fill-then-any",
        None,
        """def masked_softmax(scores, mask, dim=-1):
    filled = scores.masked_fill(~mask, float("-inf"))
    empty = ~mask.any(dim=dim, keepdim=True)          # rows with nothing allowed
    filled = filled.masked_fill(empty, 0.0)            # softmax of zeros, zeroed below: no NaN
    return torch.softmax(filled, dim=dim) * mask
""",
    ),
    Mutation(
        "combined_mask",
        "combined-logical-and",
        None,
        """def combined_mask(lengths, max_len):
    keys = padding_mask(lengths, max_len).unsqueeze(1).unsqueeze(2)
    return torch.logical_and(keys, causal_mask(max_len).to(keys.device))
""",
    ),
    Mutation(
        "padding_mask",
        "padding-expand-unsqueeze",
        None,
        """def padding_mask(lengths, max_len):
    steps = torch.arange(max_len, device=lengths.device).expand(lengths.shape[0], max_len)
    return steps < lengths.unsqueeze(1)
""",
    ),
    Mutation(
        "padding_mask",
        "padding-loop-prints",
        None,
        """def padding_mask(lengths, max_len):
    print("lengths:", lengths)
    rows = [torch.arange(max_len, device=lengths.device) < length for length in lengths]
    return torch.stack(rows) if rows else torch.zeros(0, max_len, dtype=torch.bool, device=lengths.device)
""",
    ),
    Mutation(
        "causal_mask",
        "causal-tril",
        None,
        """def causal_mask(n):
    return torch.tril(torch.ones(n, n, dtype=torch.bool))
""",
    ),
    Mutation(
        "causal_mask",
        "causal-not-triu",
        None,
        """def causal_mask(n):
    return ~torch.ones(n, n).triu(diagonal=1).bool()
""",
    ),
    Mutation(
        "masked_softmax",
        "softmax-minus-inf-nan-to-num",
        None,
        """def masked_softmax(scores, mask, dim=-1):
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=dim)
    return torch.nan_to_num(weights, nan=0.0)
""",
    ),
    Mutation(
        "masked_softmax",
        "softmax-float64-where-warns",
        None,
        """import warnings

def masked_softmax(scores, mask, dim=-1):
    warnings.warn("computing in float64")
    s = scores.double()
    s = torch.where(mask, s, torch.finfo(torch.float64).min)
    e = torch.exp(s - s.amax(dim=dim, keepdim=True))
    e = torch.where(mask, e, torch.zeros_like(e))
    total = e.sum(dim=dim, keepdim=True)
    w = torch.where(total > 0, e / torch.where(total > 0, total, torch.ones_like(total)), torch.zeros_like(e))
    return w.to(scores.dtype)
""",
    ),
    Mutation(
        "masked_softmax",
        "softmax-logsumexp",
        None,
        """def masked_softmax(scores, mask, dim=-1):
    filled = scores.masked_fill(mask.logical_not(), -math.inf)
    lse = torch.logsumexp(filled, dim=dim, keepdim=True)
    return torch.exp(filled - lse).masked_fill(~mask, 0.0).nan_to_num(0.0)
""",
    ),
    Mutation(
        "combined_mask",
        "combined-unsqueeze",
        None,
        """def combined_mask(lengths, max_len):
    keys = padding_mask(lengths, max_len).unsqueeze(1).unsqueeze(1)
    return torch.logical_and(keys, causal_mask(max_len).to(lengths.device)[None, None])
""",
    ),
    Mutation(
        "greedy_decode",
        "greedy-list-where-prints",
        None,
        """def greedy_decode(model, src, max_new_tokens, bos_id, eos_id, pad_id):
    memory = model.encode(src)
    ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    step = 0
    while step < max_new_tokens and not bool(done.all()):
        logits = model.decode(ys, memory, src.ne(pad_id))
        token = torch.where(done, torch.full_like(done, pad_id, dtype=torch.long), logits[:, -1, :].argmax(-1))
        ys = torch.cat((ys, token.unsqueeze(-1)), dim=-1)
        done = done | (token == eos_id)
        step += 1
        print("step", step, "finished", int(done.sum()))
    return ys
""",
    ),
    # beam_search: one source at a time, the hypotheses as a growing tensor; prints its progress
    Mutation(
        "beam_search",
        "beam-loop-over-sources-prints",
        None,
        """def beam_search(model, src, max_new_tokens, bos_id, eos_id, pad_id, beam_size=4):
    outputs = []
    for b in range(src.shape[0]):
        one = src[b:b + 1]
        memory, keep = model.encode(one), one != pad_id
        ys = torch.full((1, 1), bos_id, dtype=torch.long, device=src.device)    # (h, t): h = 1 at the start
        scores = torch.zeros(1, device=src.device)
        done = torch.zeros(1, dtype=torch.bool, device=src.device)
        steps = 0
        while steps < max_new_tokens and not bool(done.all()):
            h = ys.shape[0]
            logits = model.decode(ys, memory.expand(h, -1, -1), keep.expand(h, -1))[:, -1]
            logp = logits.float().log_softmax(dim=-1)
            vocab = logp.shape[-1]
            only_pad = torch.full((vocab,), float("-inf"), device=src.device)
            only_pad[pad_id] = 0.0
            logp = torch.where(done[:, None], only_pad, logp)
            flat = (scores[:, None] + logp).flatten()
            scores, index = flat.topk(beam_size)
            rows, tokens = index // vocab, index % vocab
            ys = torch.cat([ys[rows], tokens[:, None]], dim=1)
            done = done[rows] | (tokens == eos_id)
            steps += 1
        print(f"source {b}: {steps} steps, best score {scores.max().item():.3f}")
        outputs.append(ys[scores.argmax()])
    width = max(o.shape[0] for o in outputs)
    return torch.stack([torch.cat([o, o.new_full((width - o.shape[0],), pad_id)]) for o in outputs])
""",
    ),
    # beam_search: plain Python lists of (score, tokens, finished) and heapq.nlargest; warns
    Mutation(
        "beam_search",
        "beam-heapq-lists-warns",
        None,
        """import heapq
import warnings

def beam_search(model, src, max_new_tokens, bos_id, eos_id, pad_id, beam_size=4):
    warnings.warn("a beam search in Python lists: slow, but clear")
    memory, keep = model.encode(src), src != pad_id
    beams = [[(0.0, [bos_id], False)] for _ in range(src.shape[0])]   # per source: (score, tokens, finished)
    for _ in range(max_new_tokens):
        if all(done for beam in beams for _, _, done in beam):
            break
        owner = [b for b, beam in enumerate(beams) for _ in beam]
        ys = torch.tensor([tokens for beam in beams for _, tokens, _ in beam], dtype=torch.long, device=src.device)
        logits = model.decode(ys, memory[owner], keep[owner])[:, -1]
        logp = torch.log_softmax(logits.float(), dim=-1).tolist()
        row, new_beams = 0, []
        for beam in beams:
            candidates = []
            for score, tokens, done in beam:
                if done:
                    candidates.append((score, tokens + [pad_id], True))
                else:
                    candidates += [(score + lp, tokens + [t], t == eos_id) for t, lp in enumerate(logp[row])]
                row += 1
            new_beams.append(heapq.nlargest(beam_size, candidates, key=lambda c: c[0]))
        beams = new_beams
    best = [max(beam, key=lambda c: c[0])[1] for beam in beams]
    return torch.tensor(best, dtype=torch.long, device=src.device)
""",
    ),
    # beam_search: the scores in float64
    Mutation(
        "beam_search",
        "beam-float64-scores",
        "logp = torch.log_softmax(logits.float(), dim=-1)",
        "logp = torch.log_softmax(logits.double(), dim=-1)",
    ),
    # beam_search: log-softmax as logits - logsumexp, views instead of reshapes, the first row of the
    # (sorted) beam as the best
    Mutation(
        "beam_search",
        "beam-logsumexp-first-row",
        None,
        """def beam_search(model, src, max_new_tokens, bos_id, eos_id, pad_id, beam_size=4):
    batch, k, device = src.shape[0], beam_size, src.device
    memory = model.encode(src)
    memory = memory[:, None].expand(-1, k, *memory.shape[1:]).reshape(batch * k, *memory.shape[1:])
    keep = (src != pad_id)[:, None].expand(-1, k, -1).reshape(batch * k, -1)
    ys = torch.full((batch * k, 1), bos_id, dtype=torch.long, device=device)
    score = torch.zeros(batch, k, device=device).masked_fill(torch.arange(k, device=device) > 0, -math.inf)
    done = torch.zeros(batch, k, dtype=torch.bool, device=device)
    for _ in range(max_new_tokens):
        if done.all():
            break
        z = model.decode(ys, memory, keep)[:, -1, :].float()
        logp = (z - torch.logsumexp(z, dim=-1, keepdim=True)).view(batch, k, -1)
        vocab = logp.shape[-1]
        pad_only = torch.arange(vocab, device=device) != pad_id
        logp = logp.masked_fill(done[..., None] & pad_only, -math.inf).masked_fill(done[..., None] & ~pad_only, 0.0)
        score, flat = (score[..., None] + logp).view(batch, k * vocab).topk(k, dim=1)
        parent = torch.div(flat, vocab, rounding_mode="floor")
        token = flat - parent * vocab
        rows = (parent + k * torch.arange(batch, device=device)[:, None]).view(-1)
        ys = torch.cat([ys[rows], token.view(-1, 1)], dim=1)
        done = done.view(-1)[rows].view(batch, k) | (token == eos_id)
    return ys.view(batch, k, -1)[:, 0]
""",
    ),
]

# cached_attention_step: one decoding step with a key-value cache
_STEP_SCORES = "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., 1, t + 1)"
_STEP_BODY = """    if cache is not None:  # the past positions' keys and values, then the newest
        k = torch.cat([cache[0], k], dim=-2)  # (..., t + 1, d_k)
        v = torch.cat([cache[1], v], dim=-2)  # (..., t + 1, d_v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., 1, t + 1)
    out = torch.softmax(scores, dim=-1) @ v
    return out, (k, v)  # new tensors: the caller's k and v are untouched"""
_STEP_RETURN = (
    "return out, (k, v)  # new tensors: the caller's k and v are untouched"
)

MUTATIONS += [
    Mutation(
        "cached_attention_step",
        "cache-attends-before-appending",
        _STEP_BODY,
        """    if cache is None:
        return v.clone(), (k, v)  # the first query sees only itself
    scores = q @ cache[0].transpose(-2, -1) / math.sqrt(q.shape[-1])  # the past only: its own key is missing
    out = torch.softmax(scores, dim=-1) @ cache[1]
    return out, (torch.cat([cache[0], k], dim=-2), torch.cat([cache[1], v], dim=-2))""",
    ),
    Mutation(
        "cached_attention_step",
        "cache-unscaled",
        _STEP_SCORES,
        "scores = q @ k.transpose(-2, -1)",
    ),
    Mutation(
        "cached_attention_step",
        "cache-scaled-by-length",
        _STEP_SCORES,
        "scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-2])",
    ),
    Mutation(
        "cached_attention_step",
        "cache-never-grows",
        _STEP_RETURN,
        "return out, cache if cache is not None else (k, v)",
    ),
    Mutation(
        "cached_attention_step",
        "cache-softmax-over-queries",
        "out = torch.softmax(scores, dim=-1) @ v",
        "out = torch.softmax(scores, dim=-2) @ v",
    ),
    Mutation(
        "cached_attention_step",
        "cache-only-last-key",
        "out = torch.softmax(scores, dim=-1) @ v",
        "out = torch.softmax(scores[..., -1:], dim=-1) @ v[..., -1:, :]",
    ),
    Mutation(
        "cached_attention_step",
        "cache-scales-q-in-place",
        _STEP_SCORES,
        "q /= math.sqrt(q.shape[-1])\n    scores = q @ k.transpose(-2, -1)",
    ),
]

VARIANTS += [
    Mutation(
        "cached_attention_step",
        "cache-dict-in-place-float64",
        _STEP_BODY,
        """    if cache is None:
        cache = {"k": k[..., :0, :], "v": v[..., :0, :]}
    cache["k"] = torch.cat((cache["k"], k), dim=-2)  # the same dict, updated: handed back by the caller
    cache["v"] = torch.cat((cache["v"], v), dim=-2)
    s = torch.einsum("...qd,...kd->...qk", q.double(), cache["k"].double()) / q.shape[-1] ** 0.5
    w = torch.exp(s - s.max(dim=-1, keepdim=True).values)
    w = w / w.sum(dim=-1, keepdim=True)
    return (w @ cache["v"].double()).to(v.dtype), cache""",
    ),
    Mutation(
        "cached_attention_step",
        "cache-list-of-steps",
        _STEP_BODY,
        """    steps = [] if cache is None else cache
    steps.append((k, v))  # a list of every position's key and value
    keys = torch.cat([kk for kk, _ in steps], dim=-2)
    values = torch.cat([vv for _, vv in steps], dim=-2)
    print("positions cached:", len(steps))
    weights = torch.softmax((q / math.sqrt(q.shape[-1])) @ keys.transpose(-2, -1), dim=-1)
    return weights @ values, steps""",
    ),
]
