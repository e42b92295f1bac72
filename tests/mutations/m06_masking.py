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
    # combined_mask
    Mutation("combined_mask", "combined-no-heads-dim",
             "padding_mask(lengths, max_len)[:, None, None, :]", "padding_mask(lengths, max_len)[:, None, :]"),
    Mutation("combined_mask", "combined-masks-queries-not-keys",
             "padding_mask(lengths, max_len)[:, None, None, :]", "padding_mask(lengths, max_len)[:, None, :, None]"),
    Mutation("combined_mask", "combined-or-instead-of-and",
             "return real_keys & no_future", "return real_keys | no_future"),
    # layernorm_answer, prenorm_answer
    Mutation("layernorm_answer", "layernorm-wrong", 'layernorm_answer = "B"', 'layernorm_answer = "C"'),
    Mutation("prenorm_answer", "prenorm-wrong", 'prenorm_answer = "B"', 'prenorm_answer = "D"'),
    # greedy_decode
    Mutation("greedy_decode", "greedy-ignores-eos",
             "        finished |= next_token == eos_id\n", ""),
    Mutation("greedy_decode", "greedy-no-early-stop",
             "        if finished.all():\n            break\n", ""),
    Mutation("greedy_decode", "greedy-first-position",
             "logits[:, -1].argmax(dim=-1)", "logits[:, 0].argmax(dim=-1)"),
    Mutation("greedy_decode", "greedy-no-source-mask",
             "model.decode(ys, memory, src_keep)", "model.decode(ys, memory, None)"),
]
