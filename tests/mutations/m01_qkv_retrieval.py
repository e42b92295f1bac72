"""Chapter 01: classic mistakes with softmax, the single-query lookup, the batched form and the
additive score, and correct answers written the ways learners write them."""

from tests.mutations import Mutation

CHAPTER = "01_qkv_retrieval"

_SOFTMAX_MAX = "shifted = x - x.amax(dim=dim, keepdim=True)"
_POOL_SCORES = "scores = keys @ query                # (n,): e_i = q . k_i"
_POOL_CONTEXT = (
    "context = weights @ values           # (d_v,): c = sum_i alpha_i v_i"
)
_ATTEND_SCORES = "scores = queries @ keys.transpose(-2, -1)"
_ADD_Q = "q_proj = queries @ W_q.T"
_ADD_K = "k_proj = keys @ W_k.T"
_ADD_PAIRS = (
    "features = torch.tanh(q_proj.unsqueeze(-2) + k_proj.unsqueeze(-3))"
)
_ADD_SCORES = "scores = features @ w_v"
_ADD_WEIGHTS = "weights = softmax(scores, dim=-1)"
_ADD_CONTEXT = "context = weights @ values"

MUTATIONS = [
    # softmax
    Mutation("softmax", "softmax-no-max", _SOFTMAX_MAX, "shifted = x"),
    Mutation(
        "softmax",
        "softmax-last-dim-always",
        _SOFTMAX_MAX,
        f"dim = -1\n    {_SOFTMAX_MAX}",
    ),
    # right for 1-D and 2-D inputs, where dim=1 is the last dim; wrong for 3-D ones
    Mutation(
        "softmax",
        "softmax-default-dim-1",
        "def softmax(x, dim=-1):",
        "def softmax(x, dim=1):",
    ),
    # the max taken along `dim` but put back along the last dim: breaks for dim != -1
    Mutation(
        "softmax",
        "softmax-max-unsqueezed-last",
        _SOFTMAX_MAX,
        "shifted = x - x.max(dim=dim).values.unsqueeze(-1)",
    ),
    # the global max is a constant, so the formula is right, but a row far below the global
    # max underflows to 0 / 0: fails only on inputs of magnitude ~1e4
    Mutation(
        "softmax",
        "softmax-global-max",
        _SOFTMAX_MAX,
        "shifted = x - x.max()",
    ),
    # the library's softmax under names the first forbidden list missed
    Mutation(
        "softmax",
        "softmax-special-log-softmax",
        None,
        "def softmax(x, dim=-1):\n    return torch.special.log_softmax(x, dim=dim).exp()\n",
    ),
    Mutation(
        "softmax",
        "softmax-private-op",
        None,
        "def softmax(x, dim=-1):\n    return torch._softmax(x, dim, False)\n",
    ),
    Mutation(
        "softmax",
        "softmax-aten-op",
        None,
        "def softmax(x, dim=-1):\n    return torch.ops.aten._softmax(x, dim, False)\n",
    ),
    Mutation(
        "softmax",
        "softmax-aten-log-op",
        None,
        "def softmax(x, dim=-1):\n    return torch.ops.aten._log_softmax.default(x, dim, False).exp()\n",
    ),
    Mutation(
        "softmax",
        "softmax-in-place",
        _SOFTMAX_MAX,
        "x -= x.amax(dim=dim, keepdim=True)  # changes the caller's tensor\n    shifted = x",
    ),
    # attention_pool
    Mutation(
        "attention_pool",
        "pool-unnormalised",
        "weights = softmax(scores, dim=-1)",
        "weights = scores.exp()",
    ),
    Mutation(
        "attention_pool",
        "pool-scaled",
        _POOL_SCORES,
        "scores = keys @ query / math.sqrt(query.shape[-1])",
    ),
    # a running sum started on the CPU: right values and dtype, wrong device on a GPU
    Mutation(
        "attention_pool",
        "pool-cpu-accumulator",
        _POOL_CONTEXT,
        "context = torch.zeros(values.shape[-1], dtype=values.dtype)\n"
        "    for i in range(values.shape[0]):\n"
        "        context = context + weights[i] * values[i]",
    ),
    Mutation(
        "attention_pool",
        "pool-sum-of-values",
        _POOL_CONTEXT,
        "context = (weights @ values) / weights.shape[0]",
    ),
    # attend
    Mutation(
        "attend",
        "attend-scores-transposed",
        _ATTEND_SCORES,
        "scores = keys @ queries.transpose(-2, -1)",
    ),
    Mutation(
        "attend",
        "attend-keys-dot-T",
        _ATTEND_SCORES,
        "scores = queries @ keys.T",
    ),
    # chapter 3's scale, one chapter early: nearly right, but not this chapter's attend
    Mutation(
        "attend",
        "attend-scaled",
        _ATTEND_SCORES,
        "scores = queries @ keys.transpose(-2, -1) / math.sqrt(queries.shape[-1])",
    ),
    Mutation(
        "attend",
        "attend-over-queries",
        "weights = softmax(scores, dim=-1)",
        "weights = softmax(scores, dim=-2)",
    ),
    Mutation(
        "attend",
        "attend-transpose-in-place",
        _ATTEND_SCORES,
        "scores = queries @ keys.transpose_(-2, -1)  # transposes the caller's keys",
    ),
    Mutation(
        "attend",
        "attend-cpu-accumulator",
        None,
        "def attend(queries, keys, values):\n"
        "    scores = queries @ keys.transpose(-2, -1)\n"
        "    weights = softmax(scores, dim=-1)\n"
        "    context = torch.zeros(*weights.shape[:-1], values.shape[-1], dtype=values.dtype)  # on the CPU\n"
        "    for j in range(values.shape[-2]):  # add up the values one key at a time\n"
        "        context = context + weights[..., :, j:j + 1] * values[..., j:j + 1, :]\n"
        "    return context, weights\n",
    ),
    # additive_attention
    Mutation(
        "additive_attention",
        "additive-softmax-over-queries",
        _ADD_WEIGHTS,
        "weights = softmax(scores, dim=-2)",
    ),
    # the score becomes a query part plus a key part: the softmax cancels the first, and every
    # query gets the same weights
    Mutation(
        "additive_attention",
        "additive-no-tanh",
        _ADD_PAIRS,
        "features = q_proj.unsqueeze(-2) + k_proj.unsqueeze(-3)",
    ),
    Mutation(
        "additive_attention",
        "additive-wv-inside-tanh",
        f"{_ADD_PAIRS}  # (..., m, 1, h) + (..., 1, n, h)\n"
        f"    {_ADD_SCORES}",
        "features = q_proj.unsqueeze(-2) + k_proj.unsqueeze(-3)\n"
        "    scores = torch.tanh(features @ w_v)",
    ),
    # runs only where h == d_q: the tests make them differ
    Mutation(
        "additive_attention",
        "additive-wq-not-transposed",
        _ADD_Q,
        "q_proj = queries @ W_q",
    ),
    # runs only where d_q == d_k: the tests make them differ
    Mutation(
        "additive_attention",
        "additive-wq-wk-swapped",
        f"{_ADD_Q}                # (..., m, h): W_q q_i for every query\n    {_ADD_K}",
        "q_proj = queries @ W_k.T\n    k_proj = keys @ W_q.T",
    ),
    # no new axes: (m, h) + (n, h) pairs query i with key i only (and fails unless m == n)
    Mutation(
        "additive_attention",
        "additive-diagonal-pairs",
        _ADD_PAIRS,
        "features = torch.tanh(q_proj + k_proj)",
    ),
    # the new axes the wrong way round: (n, m) scores, a softmax over the queries; runs only where m == n
    Mutation(
        "additive_attention",
        "additive-axes-swapped",
        _ADD_PAIRS,
        "features = torch.tanh(q_proj.unsqueeze(-3) + k_proj.unsqueeze(-2))",
    ),
    Mutation(
        "additive_attention",
        "additive-sum-not-wv",
        _ADD_SCORES,
        "scores = features.sum(dim=-1)",
    ),
    # right weights, but the context is read with the raw scores
    Mutation(
        "additive_attention",
        "additive-context-from-scores",
        _ADD_CONTEXT,
        "context = scores @ values",
    ),
    # unsqueeze_ reshapes the caller's w_v to (h, 1)
    Mutation(
        "additive_attention",
        "additive-unsqueeze-in-place",
        _ADD_SCORES,
        "scores = (features @ w_v.unsqueeze_(-1)).squeeze(-1)",
    ),
]

VARIANTS = [
    # softmax
    Mutation(
        "softmax",
        "softmax-logsumexp",
        None,
        "def softmax(x, dim=-1):\n"
        "    return (x - torch.logsumexp(x, dim=dim, keepdim=True)).exp()\n",
    ),
    Mutation(
        "softmax",
        "softmax-float64-inside",
        None,
        "def softmax(x, dim=-1):\n"
        "    x64 = x.to(torch.float64)\n"
        "    e = torch.exp(x64 - x64.max(dim=dim, keepdim=True).values)\n"
        "    return (e / e.sum(dim=dim, keepdim=True)).to(x.dtype)\n",
    ),
    Mutation(
        "softmax",
        "softmax-prints-and-warns",
        None,
        "import sys, warnings\n"
        "def softmax(x, dim=-1):\n"
        "    print('softmax of shape', tuple(x.shape), 'along', dim)\n"
        "    print('debugging on stderr', file=sys.stderr)\n"
        "    warnings.warn('softmax: a note from the learner')\n"
        "    m, _ = torch.max(x, dim=dim, keepdim=True)\n"
        "    e = torch.exp(x - m)\n"
        "    return e / torch.sum(e, dim=dim, keepdim=True)\n",
    ),
    Mutation(
        "softmax",
        "softmax-move-dim-last",
        None,
        "def softmax(x, dim=-1):\n"
        "    t = x.movedim(dim, -1)\n"
        "    e = (t - t.max(-1, keepdim=True).values).exp()\n"
        "    e.div_(e.sum(-1, keepdim=True))  # in place on its own tensor: allowed\n"
        "    return e.movedim(-1, dim)\n",
    ),
    Mutation(
        "softmax",
        "softmax-log-domain",
        None,
        "def softmax(x, dim=-1):\n"
        "    m = x.amax(dim=dim, keepdim=True)\n"
        "    log_z = m + torch.log(torch.sum(torch.exp(x - m), dim=dim, keepdim=True))\n"
        "    return torch.exp(x - log_z)\n",
    ),
    # attention_pool
    Mutation(
        "attention_pool",
        "pool-einsum",
        None,
        "def attention_pool(query, keys, values):\n"
        "    weights = softmax(torch.einsum('nd,d->n', keys, query))\n"
        "    return torch.einsum('n,nv->v', weights, values), weights\n",
    ),
    Mutation(
        "attention_pool",
        "pool-loop",
        None,
        "def attention_pool(query, keys, values):\n"
        "    scores = torch.stack([torch.dot(query, k) for k in keys])\n"
        "    weights = torch.exp(scores - scores.max())\n"
        "    weights = weights / weights.sum()\n"
        "    context = sum(w * v for w, v in zip(weights, values))\n"
        "    return context, weights\n",
    ),
    Mutation(
        "attention_pool",
        "pool-broadcast-float64",
        None,
        "def attention_pool(query, keys, values):\n"
        "    q, k, v = query.double(), keys.double(), values.double()\n"
        "    weights = torch.softmax((k * q).sum(dim=1), dim=0)\n"
        "    context = (weights[:, None] * v).sum(dim=0)\n"
        "    return context.to(values.dtype), weights.to(keys.dtype)\n",
    ),
    Mutation(
        "attention_pool",
        "pool-mv",
        None,
        "def attention_pool(query, keys, values):\n"
        "    weights = softmax(torch.mv(keys, query), dim=0)\n"
        "    return torch.matmul(values.T, weights), weights\n",
    ),
    # attend
    Mutation(
        "attend",
        "attend-einsum",
        None,
        "def attend(queries, keys, values):\n"
        "    weights = softmax(torch.einsum('...md,...nd->...mn', queries, keys), dim=-1)\n"
        "    return torch.einsum('...mn,...nv->...mv', weights, values), weights\n",
    ),
    Mutation(
        "attend",
        "attend-loop-over-queries",
        None,
        "def attend(queries, keys, values):\n"
        "    rows = []\n"
        "    for i in range(queries.shape[-2]):\n"
        "        q = queries[..., i, :].unsqueeze(-2)            # (..., 1, d)\n"
        "        rows.append(softmax((q * keys).sum(-1), dim=-1))  # (..., n)\n"
        "    weights = torch.stack(rows, dim=-2)\n"
        "    return torch.matmul(weights, values), weights\n",
    ),
    Mutation(
        "attend",
        "attend-bmm",
        None,
        "def attend(queries, keys, values):\n"
        "    *batch, m, d = queries.shape\n"
        "    n, dv = keys.shape[-2], values.shape[-1]\n"
        "    q, k, v = queries.reshape(-1, m, d), keys.reshape(-1, n, d), values.reshape(-1, n, dv)\n"
        "    weights = softmax(torch.bmm(q, k.transpose(1, 2)), dim=-1)\n"
        "    context = torch.bmm(weights, v)\n"
        "    return context.reshape(*batch, m, dv), weights.reshape(*batch, m, n)\n",
    ),
    Mutation(
        "attend",
        "attend-matmul-float64",
        None,
        "def attend(queries, keys, values):\n"
        "    scores = torch.matmul(queries.double(), keys.double().mT)\n"
        "    weights = torch.softmax(scores, dim=-1)\n"
        "    return torch.matmul(weights, values.double()).to(values.dtype), weights.to(queries.dtype)\n",
    ),
    Mutation(
        "attend",
        "attend-swapaxes-softmax-method",
        None,
        "def attend(queries, keys, values):\n"
        "    weights = (queries @ keys.swapaxes(-1, -2)).softmax(dim=-1)\n"
        "    return weights @ values, weights\n",
    ),
    # additive_attention
    Mutation(
        "additive_attention",
        "additive-einsum",
        None,
        "def additive_attention(queries, keys, values, W_q, W_k, w_v):\n"
        "    q = torch.einsum('...md,hd->...mh', queries, W_q)\n"
        "    k = torch.einsum('...nd,hd->...nh', keys, W_k)\n"
        "    scores = torch.einsum('...mnh,h->...mn', torch.tanh(q[..., :, None, :] + k[..., None, :, :]), w_v)\n"
        "    weights = softmax(scores, dim=-1)\n"
        "    return torch.einsum('...mn,...nv->...mv', weights, values), weights\n",
    ),
    Mutation(
        "additive_attention",
        "additive-loop-over-queries",
        None,
        "def additive_attention(queries, keys, values, W_q, W_k, w_v):\n"
        "    k = keys @ W_k.T                                # (..., n, h)\n"
        "    rows = []\n"
        "    for i in range(queries.shape[-2]):\n"
        "        q_i = queries[..., i:i + 1, :] @ W_q.T       # (..., 1, h)\n"
        "        rows.append(torch.tanh(q_i + k) @ w_v)       # (..., n)\n"
        "    weights = softmax(torch.stack(rows, dim=-2), dim=-1)\n"
        "    return weights @ values, weights\n",
    ),
    Mutation(
        "additive_attention",
        "additive-float64-inside",
        None,
        "def additive_attention(queries, keys, values, W_q, W_k, w_v):\n"
        "    q, k, v = queries.double(), keys.double(), values.double()\n"
        "    Wq, Wk, wv = W_q.double(), W_k.double(), w_v.double()\n"
        "    e = torch.tanh((q @ Wq.T)[..., :, None, :] + (k @ Wk.T)[..., None, :, :]) @ wv\n"
        "    weights = torch.softmax(e, dim=-1)\n"
        "    return (weights @ v).to(values.dtype), weights.to(queries.dtype)\n",
    ),
    Mutation(
        "additive_attention",
        "additive-functional-linear",
        None,
        "import torch.nn.functional as F\n"
        "def additive_attention(queries, keys, values, W_q, W_k, w_v):\n"
        "    q = F.linear(queries, W_q).unsqueeze(-2)         # (..., m, 1, h)\n"
        "    k = F.linear(keys, W_k).unsqueeze(-3)            # (..., 1, n, h)\n"
        "    scores = F.linear(torch.tanh(q + k), w_v.unsqueeze(0)).squeeze(-1)\n"
        "    weights = softmax(scores, dim=-1)\n"
        "    return torch.matmul(weights, values), weights\n",
    ),
    # Bahdanau's own form: one matrix on the concatenation [q; k]
    Mutation(
        "additive_attention",
        "additive-concatenation",
        None,
        "def additive_attention(queries, keys, values, W_q, W_k, w_v):\n"
        "    m, n = queries.shape[-2], keys.shape[-2]\n"
        "    q = queries.unsqueeze(-2).expand(*queries.shape[:-2], m, n, queries.shape[-1])\n"
        "    k = keys.unsqueeze(-3).expand(*keys.shape[:-2], m, n, keys.shape[-1])\n"
        "    pairs = torch.cat([q, k], dim=-1)                # (..., m, n, d_q + d_k)\n"
        "    W = torch.cat([W_q, W_k], dim=1)                 # (h, d_q + d_k)\n"
        "    weights = softmax(torch.tanh(pairs @ W.T) @ w_v, dim=-1)\n"
        "    return weights @ values, weights\n",
    ),
    Mutation(
        "additive_attention",
        "additive-prints-and-warns",
        None,
        "import sys, warnings\n"
        "def additive_attention(queries, keys, values, W_q, W_k, w_v):\n"
        "    print('queries', tuple(queries.shape), 'keys', tuple(keys.shape), 'hidden units', w_v.shape[0])\n"
        "    print('debugging on stderr', file=sys.stderr)\n"
        "    warnings.warn('additive_attention: a note from the learner')\n"
        "    hidden = torch.tanh((queries @ W_q.transpose(0, 1))[..., :, None, :]\n"
        "                        + (keys @ W_k.transpose(0, 1))[..., None, :, :])\n"
        "    weights = softmax((hidden * w_v).sum(dim=-1), dim=-1)\n"
        "    return weights @ values, weights\n",
    ),
]

# choose_bandwidth: kernel regression as attention, its bandwidth chosen on validation data
_BW_SCORES = "scores = -(x_val[:, None] - x_train[None, :]) ** 2 / (2 * sigma ** 2)  # (m, n)"
_BW_ERROR = "errors.append(((prediction - y_val) ** 2).mean())"
MUTATIONS += [
    Mutation(
        "choose_bandwidth",
        "bw-chosen-on-training-points",
        _BW_SCORES + "\n"
        "        prediction = torch.softmax(scores, dim=-1) @ y_train  # (m,): attention pooling\n        "
        + _BW_ERROR,
        "scores = -(x_train[:, None] - x_train[None, :]) ** 2 / (2 * sigma ** 2)  # training points predict themselves\n"
        "        prediction = torch.softmax(scores, dim=-1) @ y_train\n"
        "        errors.append(((prediction - y_train) ** 2).mean())",
    ),
    Mutation(
        "choose_bandwidth",
        "bw-absolute-distance",
        _BW_SCORES,
        "scores = -(x_val[:, None] - x_train[None, :]).abs() / (2 * sigma ** 2)",
    ),
    Mutation(
        "choose_bandwidth",
        "bw-no-factor-2",
        _BW_SCORES,
        "scores = -(x_val[:, None] - x_train[None, :]) ** 2 / sigma ** 2",
    ),
    Mutation(
        "choose_bandwidth",
        "bw-sigma-not-squared",
        _BW_SCORES,
        "scores = -(x_val[:, None] - x_train[None, :]) ** 2 / (2 * sigma)",
    ),
    Mutation(
        "choose_bandwidth",
        "bw-softmax-over-validation-points",
        "prediction = torch.softmax(scores, dim=-1) @ y_train",
        "prediction = torch.softmax(scores, dim=0) @ y_train",
    ),
    Mutation(
        "choose_bandwidth",
        "bw-sum-of-squares",
        _BW_ERROR,
        "errors.append(((prediction - y_val) ** 2).sum())",
    ),
    Mutation(
        "choose_bandwidth",
        "bw-root-mean-square",
        _BW_ERROR,
        "errors.append(((prediction - y_val) ** 2).mean().sqrt())",
    ),
    Mutation(
        "choose_bandwidth",
        "bw-returns-the-index",
        "return sigmas[int(val_mse.argmin())], val_mse",
        "return int(val_mse.argmin()), val_mse",
    ),
    Mutation(
        "choose_bandwidth",
        "bw-largest-error",
        "return sigmas[int(val_mse.argmin())], val_mse",
        "return sigmas[int(val_mse.argmax())], val_mse",
    ),
    Mutation(
        "choose_bandwidth",
        "bw-last-of-a-tie",
        "return sigmas[int(val_mse.argmin())], val_mse",
        "lowest = val_mse.min()\n    return [s for s, e in zip(sigmas, val_mse) if e == lowest][-1], val_mse",
    ),
]
VARIANTS += [
    Mutation(
        "choose_bandwidth",
        "bw-loops-and-math",
        None,
        """def choose_bandwidth(x_train, y_train, x_val, y_val, sigmas):
    import math
    errors = []
    for sigma in sigmas:
        total = 0.0
        for xv, yv in zip(x_val.tolist(), y_val.tolist()):
            logits = [-(xv - xt) ** 2 / (2 * sigma ** 2) for xt in x_train.tolist()]
            top = max(logits)
            w = [math.exp(l - top) for l in logits]
            pred = sum(wi * yt for wi, yt in zip(w, y_train.tolist())) / sum(w)
            total += (pred - yv) ** 2
        errors.append(total / len(x_val))
    best = min(range(len(sigmas)), key=lambda i: errors[i])  # min keeps the first of equal values
    print("validation errors:", errors)
    return sigmas[best], errors  # a list of floats
""",
    ),
    Mutation(
        "choose_bandwidth",
        "bw-cdist-float64-tensor-grid",
        None,
        """def choose_bandwidth(x_train, y_train, x_val, y_val, sigmas):
    grid = torch.as_tensor(sigmas, dtype=torch.float64, device=x_val.device)
    d2 = torch.cdist(x_val.double()[:, None], x_train.double()[:, None]) ** 2  # (m, n)
    w = torch.softmax(-d2[None] / (2 * grid[:, None, None] ** 2), dim=-1)  # (S, m, n)
    mse = ((w @ y_train.double() - y_val.double()) ** 2).mean(dim=-1)  # (S,)
    return grid[mse.argmin()], mse.to(y_val.dtype)
""",
    ),
]
