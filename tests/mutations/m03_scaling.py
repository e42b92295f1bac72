"""Chapter 03: classic mistakes with the scale, masks, the online softmax and top-k attention."""
from tests.mutations import Mutation

CHAPTER = "03_scaling"

_MASK_BEFORE = '''    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))       # blocked: exp(-inf) = 0
    weights = torch.softmax(scores, dim=-1)
    weights = torch.nan_to_num(weights, nan=0.0)                # all-blocked rows: 0/0 -> 0'''
_MASK_AFTER = '''    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights * mask'''

MUTATIONS = [
    # scaled_dot_product_attention
    Mutation("scaled_dot_product_attention", "sdpa-no-scale",
             "scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)", "scores = q @ k.transpose(-2, -1)"),
    Mutation("scaled_dot_product_attention", "sdpa-scale-by-d_k",
             "scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)", "scores = q @ k.transpose(-2, -1) / d_k"),
    Mutation("scaled_dot_product_attention", "sdpa-scale-by-sqrt-d_v", "d_k = q.shape[-1]", "d_k = v.shape[-1]"),
    Mutation("scaled_dot_product_attention", "sdpa-mask-after-softmax", _MASK_BEFORE, _MASK_AFTER),
    Mutation("scaled_dot_product_attention", "sdpa-mask-inverted",
             'scores.masked_fill(~mask, float("-inf"))', 'scores.masked_fill(mask, float("-inf"))'),
    Mutation("scaled_dot_product_attention", "sdpa-empty-row-nan",
             "    weights = torch.nan_to_num(weights, nan=0.0)                # all-blocked rows: 0/0 -> 0\n", ""),
    Mutation("scaled_dot_product_attention", "sdpa-fill-minus-1e10",
             'scores.masked_fill(~mask, float("-inf"))', "scores.masked_fill(~mask, -1e10)"),
    # chunked_attention
    Mutation("chunked_attention", "chunked-sum-not-rescaled",
             "run_sum = run_sum * correction + p.sum(dim=-1, keepdim=True)",
             "run_sum = run_sum + p.sum(dim=-1, keepdim=True)"),
    Mutation("chunked_attention", "chunked-output-not-rescaled",
             "out = out * correction + p @ v_blk", "out = out + p @ v_blk"),
    Mutation("chunked_attention", "chunked-no-scale",
             "q = q / math.sqrt(q.shape[-1])", "q = q"),
    Mutation("chunked_attention", "chunked-holds-all-scores",
             "s = q @ k_blk.transpose(-2, -1)", "s = (q @ k.transpose(-2, -1))[..., start:start + chunk_size]"),
    # topk_attention
    Mutation("topk_attention", "topk-no-renormalisation",
             'weights = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)',
             "weights = torch.softmax(scores, dim=-1) * keep"),
    Mutation("topk_attention", "topk-renormalised-over-queries",
             'weights = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)',
             "weights = torch.softmax(scores, dim=-1) * keep\n    weights = weights / weights.sum(dim=-2, keepdim=True)"),
    Mutation("topk_attention", "topk-keeps-k-plus-1",
             "top_k = min(top_k, scores.shape[-1])", "top_k = min(top_k + 1, scores.shape[-1])"),
    Mutation("topk_attention", "topk-unscaled",
             "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])", "scores = q @ k.transpose(-2, -1)"),
]
