"""Chapter 03: classic mistakes with the scale, masks, the online softmax and top-k attention,
and correct answers written differently from the reference."""

from tests.mutations import Mutation

CHAPTER = "03_scaling"

_MASK_BEFORE = """    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))       # blocked: exp(-inf) = 0
    weights = torch.softmax(scores, dim=-1)
    weights = torch.nan_to_num(weights, nan=0.0)                # all-blocked rows: 0/0 -> 0"""
_MASK_AFTER = """    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights * mask"""

_CHUNK_LOOP_START = "    for start in range(0, n, chunk_size):"

MUTATIONS = [
    # scaled_dot_product_attention
    Mutation(
        "scaled_dot_product_attention",
        "sdpa-no-scale",
        "scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)",
        "scores = q @ k.transpose(-2, -1)",
    ),
    Mutation(
        "scaled_dot_product_attention",
        "sdpa-scale-by-d_v",
        "d_k = q.shape[-1]",
        "d_k = v.shape[-1]",
    ),
    Mutation(
        "scaled_dot_product_attention",
        "sdpa-blocked-scores-zero",
        'scores = scores.masked_fill(~mask, float("-inf"))',
        "scores = scores.masked_fill(~mask, 0.0)",
    ),
    Mutation(
        "scaled_dot_product_attention",
        "sdpa-scale-by-d_k",
        "scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)",
        "scores = q @ k.transpose(-2, -1) / d_k",
    ),
    Mutation(
        "scaled_dot_product_attention",
        "sdpa-scale-by-sqrt-d_v",
        "d_k = q.shape[-1]",
        "d_k = v.shape[-1]",
    ),
    Mutation(
        "scaled_dot_product_attention",
        "sdpa-mask-after-softmax",
        _MASK_BEFORE,
        _MASK_AFTER,
    ),
    Mutation(
        "scaled_dot_product_attention",
        "sdpa-mask-inverted",
        'scores.masked_fill(~mask, float("-inf"))',
        'scores.masked_fill(mask, float("-inf"))',
    ),
    Mutation(
        "scaled_dot_product_attention",
        "sdpa-empty-row-nan",
        "    weights = torch.nan_to_num(weights, nan=0.0)                # all-blocked rows: 0/0 -> 0\n",
        "",
    ),
    Mutation(
        "scaled_dot_product_attention",
        "sdpa-fill-minus-1e10",
        'scores.masked_fill(~mask, float("-inf"))',
        "scores.masked_fill(~mask, -1e10)",
    ),
    # the slides' -1e9: blocked rows become uniform instead of zero
    Mutation(
        "scaled_dot_product_attention",
        "sdpa-fill-minus-1e9",
        'scores.masked_fill(~mask, float("-inf"))',
        "scores.masked_fill(mask == 0, -1e9)",
    ),
    # a mask that only works when it already has the full (..., m, n) shape
    Mutation(
        "scaled_dot_product_attention",
        "sdpa-mask-needs-full-shape",
        'scores = scores.masked_fill(~mask, float("-inf"))',
        'scores = scores.masked_fill(~mask.reshape(scores.shape), float("-inf"))',
    ),
    # chunked_attention
    # right whenever some score of each query is near or above 0; 0 / 0 when all are far below
    Mutation(
        "chunked_attention",
        "chunked-max-starts-at-zero",
        'run_max = torch.full((*batch, m, 1), float("-inf"), dtype=q.dtype, device=q.device)',
        "run_max = torch.zeros((*batch, m, 1), dtype=q.dtype, device=q.device)",
    ),
    Mutation(
        "chunked_attention",
        "chunked-sum-not-rescaled",
        "run_sum = run_sum * correction + p.sum(dim=-1, keepdim=True)",
        "run_sum = run_sum + p.sum(dim=-1, keepdim=True)",
    ),
    Mutation(
        "chunked_attention",
        "chunked-output-not-rescaled",
        "out = out * correction + p @ v_blk",
        "out = out + p @ v_blk",
    ),
    Mutation(
        "chunked_attention",
        "chunked-no-scale",
        "q = q / math.sqrt(q.shape[-1])",
        "q = q",
    ),
    Mutation(
        "chunked_attention",
        "chunked-holds-all-scores",
        "s = q @ k_blk.transpose(-2, -1)",
        "s = (q @ k.transpose(-2, -1))[..., start:start + chunk_size]",
    ),
    # chunks over the queries, each with a full softmax over every key
    Mutation(
        "chunked_attention",
        "chunked-over-queries",
        None,
        """def chunked_attention(q, k, v, chunk_size=128):
    q = q / math.sqrt(q.shape[-1])
    outs = []
    for start in range(0, q.shape[-2], chunk_size):
        s = q[..., start:start + chunk_size, :] @ k.transpose(-2, -1)
        outs.append(torch.softmax(s, dim=-1) @ v)
    return torch.cat(outs, dim=-2)
""",
    ),
    # one query at a time, against all keys: never an (m, n) matrix, but no online softmax either
    Mutation(
        "chunked_attention",
        "chunked-one-query-at-a-time",
        None,
        """def chunked_attention(q, k, v, chunk_size=128):
    q = q / math.sqrt(q.shape[-1])
    rows = [torch.softmax(q[..., i:i + 1, :] @ k.transpose(-2, -1), dim=-1) @ v for i in range(q.shape[-2])]
    return torch.cat(rows, dim=-2)
""",
    ),
    # a full (m, n) score matrix for each batch element in turn
    Mutation(
        "chunked_attention",
        "chunked-full-matrix-per-batch-element",
        None,
        """def chunked_attention(q, k, v, chunk_size=128):
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    q, k, v = (t.expand(*batch, *t.shape[-2:]).reshape(-1, *t.shape[-2:]) for t in (q, k, v))
    outs = []
    for b in range(q.shape[0]):
        w = torch.softmax(q[b] @ k[b].T / math.sqrt(q.shape[-1]), dim=-1)
        outs.append(w @ v[b])
    return torch.stack(outs).reshape(*batch, q.shape[-2], v.shape[-1])
""",
    ),
    # all blocks at once: the keys reshaped into blocks, every block's scores computed together
    Mutation(
        "chunked_attention",
        "chunked-all-blocks-at-once",
        None,
        """def chunked_attention(q, k, v, chunk_size=128):
    q = q / math.sqrt(q.shape[-1])
    blocks = [q @ k_blk.transpose(-2, -1) for k_blk in k.split(chunk_size, dim=-2)]
    s = torch.stack([b.amax(dim=-1) for b in blocks], dim=-1).amax(dim=-1, keepdim=True)
    p = torch.cat([torch.exp(b - s) for b in blocks], dim=-1)
    return (p @ v) / p.sum(dim=-1, keepdim=True)
""",
    ),
    # two passes over the keys: the global max first, then the sums
    Mutation(
        "chunked_attention",
        "chunked-two-pass",
        None,
        """def chunked_attention(q, k, v, chunk_size=128):
    q = q / math.sqrt(q.shape[-1])
    n = k.shape[-2]
    top = None
    for start in range(0, n, chunk_size):                  # pass 1: the global max
        s = q @ k[..., start:start + chunk_size, :].transpose(-2, -1)
        block_max = s.amax(dim=-1, keepdim=True)
        top = block_max if top is None else torch.maximum(top, block_max)
    total, out = 0.0, 0.0
    for start in range(0, n, chunk_size):                  # pass 2: the sums, the same scores again
        s = q @ k[..., start:start + chunk_size, :].transpose(-2, -1)
        p = torch.exp(s - top)
        total = total + p.sum(dim=-1, keepdim=True)
        out = out + p @ v[..., start:start + chunk_size, :]
    return out / total
""",
    ),
    # a running max, but the exponentials are never shifted by it
    Mutation(
        "chunked_attention",
        "chunked-exp-without-max",
        "p = torch.exp(s - new_max)",
        "p = torch.exp(s)",
    ),
    # topk_attention
    Mutation(
        "topk_attention",
        "topk-no-renormalisation",
        'weights = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)',
        "weights = torch.softmax(scores, dim=-1) * keep",
    ),
    Mutation(
        "topk_attention",
        "topk-renormalised-over-queries",
        'weights = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)',
        "weights = torch.softmax(scores, dim=-1) * keep\n    weights = weights / weights.sum(dim=-2, keepdim=True)",
    ),
    Mutation(
        "topk_attention",
        "topk-keeps-k-plus-1",
        "top_k = min(top_k, scores.shape[-1])",
        "top_k = min(top_k + 1, scores.shape[-1])",
    ),
    Mutation(
        "topk_attention",
        "topk-unscaled",
        "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])",
        "scores = q @ k.transpose(-2, -1)",
    ),
    # the mask built on the CPU whatever the input's device (the indices copied there): right on a
    # CPU, refused by a GPU; graders without a GPU catch it on simulated CUDA tensors
    Mutation(
        "topk_attention",
        "topk-mask-built-on-cpu",
        "keep = torch.zeros_like(scores, dtype=torch.bool).scatter(-1, idx, True)",
        "keep = torch.zeros(scores.shape, dtype=torch.bool).scatter(-1, idx.cpu(), True)",
    ),
    # the smallest top_k scores instead of the largest
    Mutation(
        "topk_attention",
        "topk-smallest",
        "idx = scores.topk(top_k, dim=-1).indices",
        "idx = scores.topk(top_k, dim=-1, largest=False).indices",
    ),
    # top_k over the queries instead of the keys
    Mutation(
        "topk_attention",
        "topk-over-queries",
        None,
        """def topk_attention(q, k, v, top_k):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    top_k = min(top_k, scores.shape[-2])
    idx = scores.topk(top_k, dim=-2).indices
    keep = torch.zeros_like(scores, dtype=torch.bool).scatter(-2, idx, True)
    weights = torch.nan_to_num(torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1), nan=0.0)
    return weights @ v, weights
""",
    ),
]

VARIANTS = [
    Mutation(
        "scaled_dot_product_attention",
        "sdpa-scaled-query-where-softmax-method",
        None,
        """def scaled_dot_product_attention(q, k, v, mask=None):
    q = q * q.size(-1) ** -0.5                       # scale the queries, not the scores
    scores = torch.einsum("...md,...nd->...mn", q, k)
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(float("-inf"), device=scores.device))
    weights = scores.softmax(-1)
    weights = torch.where(torch.isnan(weights), torch.zeros_like(weights), weights)
    return torch.matmul(weights, v), weights
""",
    ),
    # scaled_dot_product_attention
    Mutation(
        "scaled_dot_product_attention",
        "sdpa-where-and-zero-empty-rows",
        None,
        """def scaled_dot_product_attention(q, k, v, mask=None):
    scores = torch.einsum("...md,...nd->...mn", q, k) / q.shape[-1] ** 0.5
    if mask is None:
        weights = torch.softmax(scores, dim=-1)
    else:
        scores = torch.where(mask, scores, torch.tensor(float("-inf"), dtype=scores.dtype, device=scores.device))
        weights = torch.softmax(scores, dim=-1)
        weights = torch.where(mask.any(dim=-1, keepdim=True), weights, torch.zeros_like(weights))
    return torch.einsum("...mn,...nd->...md", weights, v), weights
""",
    ),
    Mutation(
        "scaled_dot_product_attention",
        "sdpa-finfo-min-times-mask-float64",
        None,
        """def scaled_dot_product_attention(q, k, v, mask=None):
    print("shapes", q.shape, k.shape, v.shape)
    qd, kd, vd = q.double(), k.double(), v.double()
    scores = qd @ kd.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    if mask is not None:
        e = e * mask
    total = e.sum(dim=-1, keepdim=True)
    weights = torch.where(total > 0, e / total.clamp_min(1e-300), torch.zeros_like(e))
    return (weights @ vd).to(q.dtype), weights.to(q.dtype)
""",
    ),
    Mutation(
        "scaled_dot_product_attention",
        "sdpa-logsumexp-warns",
        None,
        """import warnings

def scaled_dot_product_attention(q, k, v, mask=None):
    warnings.warn("my attention is slow")
    scores = q @ k.mT / math.sqrt(k.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), -math.inf)
    lse = torch.logsumexp(scores, dim=-1, keepdim=True)
    weights = torch.exp(scores - lse).nan_to_num(0.0)
    return weights @ v, weights
""",
    ),
    # chunked_attention
    Mutation(
        "chunked_attention",
        "chunked-list-of-chunks-from-first-block",
        None,
        """def chunked_attention(q, k, v, chunk_size=128):
    scale = 1 / math.sqrt(q.shape[-1])
    run_max = run_sum = out = None
    for k_blk, v_blk in zip(torch.split(k, chunk_size, dim=-2), torch.split(v, chunk_size, dim=-2)):
        s = (q @ k_blk.transpose(-2, -1)) * scale
        blk_max = s.max(dim=-1, keepdim=True).values
        if run_max is None:
            run_max = blk_max
            p = (s - run_max).exp()
            run_sum, out = p.sum(-1, keepdim=True), p @ v_blk
            continue
        new_max = torch.max(run_max, blk_max)
        alpha = (run_max - new_max).exp()
        p = (s - new_max).exp()
        run_sum = alpha * run_sum + p.sum(-1, keepdim=True)
        out = alpha * out + p @ v_blk
        run_max = new_max
    print("processed", k.shape[-2], "keys")
    return out / run_sum
""",
    ),
    Mutation(
        "chunked_attention",
        "chunked-einsum",
        None,
        """def chunked_attention(q, k, v, chunk_size=128):
    q = q * q.shape[-1] ** -0.5
    m_run = torch.full(q.shape[:-1] + (1,), -float("inf"), dtype=q.dtype, device=q.device)
    l_run = torch.zeros_like(m_run)
    o_run = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype, device=q.device)
    for i in range(0, k.shape[-2], chunk_size):
        s = torch.einsum("...md,...cd->...mc", q, k[..., i:i + chunk_size, :])
        m_new = torch.maximum(m_run, s.amax(-1, keepdim=True))
        p = torch.exp(s - m_new)
        c = torch.exp(m_run - m_new)
        l_run = c * l_run + p.sum(-1, keepdim=True)
        o_run = c * o_run + torch.einsum("...mc,...cd->...md", p, v[..., i:i + chunk_size, :])
        m_run = m_new
    return o_run / l_run
""",
    ),
    Mutation(
        "chunked_attention",
        "chunked-float64-accumulators",
        None,
        """def chunked_attention(q, k, v, chunk_size=128):
    dtype = q.dtype
    q, k, v = q.double() / math.sqrt(q.shape[-1]), k.double(), v.double()
    M = L = O = None
    for start in range(0, k.shape[-2], chunk_size):
        s = q @ k[..., start:start + chunk_size, :].transpose(-2, -1)
        M_new = s.amax(-1, keepdim=True) if M is None else torch.maximum(M, s.amax(-1, keepdim=True))
        p = torch.exp(s - M_new)
        if M is None:
            L, O = p.sum(-1, keepdim=True), p @ v[..., start:start + chunk_size, :]
        else:
            L = L * torch.exp(M - M_new) + p.sum(-1, keepdim=True)
            O = O * torch.exp(M - M_new) + p @ v[..., start:start + chunk_size, :]
        M = M_new
    return (O / L).to(dtype)
""",
    ),
    # topk_attention
    Mutation(
        "topk_attention",
        "topk-kth-value-threshold",
        None,
        """def topk_attention(q, k, v, top_k):
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    kth = scores.topk(min(top_k, scores.shape[-1]), dim=-1).values[..., -1:]
    weights = torch.softmax(torch.where(scores >= kth, scores, float("-inf")), dim=-1)
    return weights @ v, weights
""",
    ),
    Mutation(
        "topk_attention",
        "topk-sort-float64-prints",
        None,
        """def topk_attention(q, k, v, top_k):
    scores = (q.double() / math.sqrt(q.shape[-1])) @ k.double().transpose(-2, -1)
    order = scores.argsort(dim=-1, descending=True)
    ranks = order.argsort(dim=-1)                   # rank of every key, 0 = best
    keep = ranks < top_k
    e = torch.exp(scores - scores.amax(-1, keepdim=True)) * keep
    weights = (e / e.sum(-1, keepdim=True)).to(q.dtype)
    print("kept per query:", keep.sum(-1).flatten()[:3].tolist())
    return weights @ v, weights
""",
    ),
]

# attention_backward: the gradients by hand
_GRAD_S = "grad_s = a * (grad_a - (grad_a * a).sum(dim=-1, keepdim=True))"
_BACKWARD_BODY = """    scale = 1.0 / math.sqrt(q.shape[-1])
    a = torch.softmax(q @ k.transpose(-2, -1) * scale, dim=-1)  # (..., m, n)
    grad_v = a.transpose(-2, -1) @ grad_out  # (..., n, d_v): out = a v
    grad_a = grad_out @ v.transpose(-2, -1)  # (..., m, n)
    # each row: (diag(a) - a a^T) grad_a = a * (grad_a - (a . grad_a))
    grad_s = a * (grad_a - (grad_a * a).sum(dim=-1, keepdim=True))
    grad_q = grad_s @ k * scale  # (..., m, d_k): s = q k^T / sqrt(d_k)
    grad_k = grad_s.transpose(-2, -1) @ q * scale  # (..., n, d_k)
    return grad_q, grad_k, grad_v"""

MUTATIONS += [
    Mutation(
        "attention_backward",
        "backward-elementwise-softmax-derivative",
        _GRAD_S,
        "grad_s = grad_a * a * (1 - a)  # the diagonal of the Jacobian only",
    ),
    Mutation(
        "attention_backward",
        "backward-row-sum-over-queries",
        _GRAD_S,
        "grad_s = a * (grad_a - (grad_a * a).sum(dim=-2, keepdim=True))",
    ),
    Mutation(
        "attention_backward",
        "backward-no-scale",
        "grad_q = grad_s @ k * scale  # (..., m, d_k): s = q k^T / sqrt(d_k)\n"
        "    grad_k = grad_s.transpose(-2, -1) @ q * scale  # (..., n, d_k)",
        "grad_q = grad_s @ k\n    grad_k = grad_s.transpose(-2, -1) @ q",
    ),
    Mutation(
        "attention_backward",
        "backward-grad-k-from-k",
        "grad_k = grad_s.transpose(-2, -1) @ q * scale",
        "grad_k = grad_s.transpose(-2, -1) @ k * scale",
    ),
    Mutation(
        "attention_backward",
        "backward-grad-v-transposed",
        "grad_v = a.transpose(-2, -1) @ grad_out",
        "grad_v = grad_out.transpose(-2, -1) @ a  # (d_v, n)",
    ),
    Mutation(
        "attention_backward",
        "backward-through-autograd",
        _BACKWARD_BODY,
        """    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out = torch.softmax(leaves[0] @ leaves[1].transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ leaves[2]
    return torch.autograd.grad(out, leaves, grad_out)""",
    ),
]

VARIANTS += [
    Mutation(
        "attention_backward",
        "backward-explicit-jacobian",
        _GRAD_S,
        "jac = torch.diag_embed(a) - a.unsqueeze(-1) * a.unsqueeze(-2)  # (..., m, n, n), symmetric\n"
        "    grad_s = (jac @ grad_a.unsqueeze(-1)).squeeze(-1)",
    ),
    Mutation(
        "attention_backward",
        "backward-einsum-float64-own-softmax",
        _BACKWARD_BODY,
        """    print("backward for", tuple(q.shape))
    qd, kd, vd, gd = (t.double() for t in (q, k, v, grad_out))
    s = torch.einsum("...md,...nd->...mn", qd, kd) / qd.shape[-1] ** 0.5
    e = torch.exp(s - s.amax(dim=-1, keepdim=True))
    a = e / e.sum(dim=-1, keepdim=True)
    ga = torch.einsum("...me,...ne->...mn", gd, vd)
    dot = torch.einsum("...mn,...mn->...m", ga, a).unsqueeze(-1)
    gs = a * (ga - dot) / qd.shape[-1] ** 0.5
    out = (torch.einsum("...mn,...nd->...md", gs, kd), torch.einsum("...mn,...md->...nd", gs, qd),
           torch.einsum("...mn,...me->...ne", a, gd))
    return tuple(t.to(q.dtype) for t in out)""",
    ),
    Mutation(
        "attention_backward",
        "backward-list-then-tuple",
        "return grad_q, grad_k, grad_v",
        "grads = [grad_q, grad_k, grad_v]\n    return tuple(grads)",
    ),
]
