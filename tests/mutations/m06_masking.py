"""Chapter 06: the classic masking mistakes (off-by-one, inverted meaning, NaN rows, float16,
masks that miss the heads) and decoders that ignore end-of-sequence."""
from tests.mutations import Mutation

CHAPTER = "06_masking"
MUTATIONS = [
    # padding_mask
    Mutation("padding_mask", "padding-le-instead-of-lt",
             "positions[None, :] < lengths[:, None]", "positions[None, :] <= lengths[:, None]"),
    Mutation("padding_mask", "padding-inverted-meaning",
             "positions[None, :] < lengths[:, None]", "positions[None, :] >= lengths[:, None]"),
    Mutation("padding_mask", "padding-transposed",
             "positions[None, :] < lengths[:, None]", "positions[:, None] < lengths[None, :]"),
    # positions created on the CPU: fails for lengths on another device
    Mutation("padding_mask", "padding-arange-on-cpu",
             "torch.arange(max_len, device=lengths.device)", "torch.arange(max_len)"),
    # causal_mask
    Mutation("causal_mask", "causal-diagonal-blocked",
             "index[None, :] <= index[:, None]", "index[None, :] < index[:, None]"),
    Mutation("causal_mask", "causal-one-future-token-leaks",
             "index[None, :] <= index[:, None]", "index[None, :] <= index[:, None] + 1"),
    Mutation("causal_mask", "causal-upper-triangle",
             "index[None, :] <= index[:, None]", "index[None, :] >= index[:, None]"),
    # masked_softmax
    Mutation("masked_softmax", "softmax-nan-for-empty-rows",
             "lowest = torch.finfo(scores.dtype).min", 'lowest = float("-inf")'),
    Mutation("masked_softmax", "softmax-uniform-empty-rows",
             "    e = e * mask", "    e = e"),
    Mutation("masked_softmax", "softmax-inverted-mask",
             "scores.masked_fill(~mask, lowest)", "scores.masked_fill(mask, lowest)"),
    Mutation("masked_softmax", "softmax-mask-after-softmax",
             "    lowest = torch.finfo(scores.dtype).min",
             "    return torch.softmax(scores, dim=dim) * mask\n    lowest = torch.finfo(scores.dtype).min"),
    Mutation("masked_softmax", "softmax-minus-1e9-overflows-float16",
             "lowest = torch.finfo(scores.dtype).min", "lowest = -1e9"),
    # the slides' recipe: -1e9 and a plain softmax, so a row with nothing allowed is uniform, not zero
    Mutation("masked_softmax", "softmax-minus-1e9-uniform-empty-rows", None, '''def masked_softmax(scores, mask, dim=-1):
    return torch.softmax(scores.masked_fill(mask == 0, -1e9), dim=dim)
'''),
    # -inf and a plain softmax: NaN in a row with nothing allowed
    Mutation("masked_softmax", "softmax-minus-inf-nan-rows", None, '''def masked_softmax(scores, mask, dim=-1):
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=dim)
'''),
    # always the last dim, whatever `dim` says
    Mutation("masked_softmax", "softmax-ignores-dim", "amax(dim=dim, keepdim=True)", "amax(dim=-1, keepdim=True)"),
    # combined_mask
    Mutation("combined_mask", "combined-no-heads-dim",
             "padding_mask(lengths, max_len)[:, None, None, :]", "padding_mask(lengths, max_len)[:, None, :]"),
    Mutation("combined_mask", "combined-masks-queries-not-keys",
             "padding_mask(lengths, max_len)[:, None, None, :]", "padding_mask(lengths, max_len)[:, None, :, None]"),
    Mutation("combined_mask", "combined-or-instead-of-and",
             "return real_keys & no_future", "return real_keys | no_future"),
    # greedy_decode
    Mutation("greedy_decode", "greedy-ignores-eos",
             "        finished |= next_token == eos_id\n", ""),
    Mutation("greedy_decode", "greedy-no-early-stop",
             "        if finished.all():\n            break\n", ""),
    Mutation("greedy_decode", "greedy-first-position",
             "logits[:, -1].argmax(dim=-1)", "logits[:, 0].argmax(dim=-1)"),
    Mutation("greedy_decode", "greedy-no-source-mask",
             "model.decode(ys, memory, src_keep)", "model.decode(ys, memory, None)"),
    # finished sequences keep writing the model's tokens instead of padding
    Mutation("greedy_decode", "greedy-no-padding-after-eos",
             "        next_token[finished] = pad_id                         # finished sequences only grow padding\n", ""),
]

VARIANTS = [
    Mutation("padding_mask", "padding-expand-unsqueeze", None, '''def padding_mask(lengths, max_len):
    steps = torch.arange(max_len, device=lengths.device).expand(lengths.shape[0], max_len)
    return steps < lengths.unsqueeze(1)
'''),
    Mutation("padding_mask", "padding-loop-prints", None, '''def padding_mask(lengths, max_len):
    print("lengths:", lengths)
    rows = [torch.arange(max_len, device=lengths.device) < length for length in lengths]
    return torch.stack(rows) if rows else torch.zeros(0, max_len, dtype=torch.bool, device=lengths.device)
'''),
    Mutation("causal_mask", "causal-tril", None, '''def causal_mask(n):
    return torch.tril(torch.ones(n, n, dtype=torch.bool))
'''),
    Mutation("causal_mask", "causal-not-triu", None, '''def causal_mask(n):
    return ~torch.ones(n, n).triu(diagonal=1).bool()
'''),
    Mutation("masked_softmax", "softmax-minus-inf-nan-to-num", None, '''def masked_softmax(scores, mask, dim=-1):
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=dim)
    return torch.nan_to_num(weights, nan=0.0)
'''),
    Mutation("masked_softmax", "softmax-float64-where-warns", None, '''import warnings

def masked_softmax(scores, mask, dim=-1):
    warnings.warn("computing in float64")
    s = scores.double()
    s = torch.where(mask, s, torch.finfo(torch.float64).min)
    e = torch.exp(s - s.amax(dim=dim, keepdim=True))
    e = torch.where(mask, e, torch.zeros_like(e))
    total = e.sum(dim=dim, keepdim=True)
    w = torch.where(total > 0, e / torch.where(total > 0, total, torch.ones_like(total)), torch.zeros_like(e))
    return w.to(scores.dtype)
'''),
    Mutation("masked_softmax", "softmax-logsumexp", None, '''def masked_softmax(scores, mask, dim=-1):
    filled = scores.masked_fill(mask.logical_not(), -math.inf)
    lse = torch.logsumexp(filled, dim=dim, keepdim=True)
    return torch.exp(filled - lse).masked_fill(~mask, 0.0).nan_to_num(0.0)
'''),
    Mutation("combined_mask", "combined-unsqueeze", None, '''def combined_mask(lengths, max_len):
    keys = padding_mask(lengths, max_len).unsqueeze(1).unsqueeze(1)
    return torch.logical_and(keys, causal_mask(max_len).to(lengths.device)[None, None])
'''),
    Mutation("greedy_decode", "greedy-list-where-prints", None, '''def greedy_decode(model, src, max_new_tokens, bos_id, eos_id, pad_id):
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
'''),
]
