"""Chapter 01: classic mistakes with softmax, the single-query lookup and the batched form,
and correct answers written the ways learners write them."""
from tests.mutations import Mutation

CHAPTER = "01_qkv_retrieval"

_SOFTMAX_MAX = "shifted = x - x.amax(dim=dim, keepdim=True)"
_POOL_SCORES = "scores = keys @ query                # (n,): e_i = q . k_i"
_POOL_CONTEXT = "context = weights @ values           # (d_v,): c = sum_i alpha_i v_i"
_ATTEND_SCORES = "scores = queries @ keys.transpose(-2, -1)"

MUTATIONS = [
    # softmax
    Mutation("softmax", "softmax-no-max", _SOFTMAX_MAX, "shifted = x"),
    Mutation("softmax", "softmax-last-dim-always", _SOFTMAX_MAX, f"dim = -1\n    {_SOFTMAX_MAX}"),
    # right for 1-D and 2-D inputs, where dim=1 is the last dim; wrong for 3-D ones
    Mutation("softmax", "softmax-default-dim-1", "def softmax(x, dim=-1):", "def softmax(x, dim=1):"),
    # the max taken along `dim` but put back along the last dim: breaks for dim != -1
    Mutation("softmax", "softmax-max-unsqueezed-last", _SOFTMAX_MAX,
             "shifted = x - x.max(dim=dim).values.unsqueeze(-1)"),
    # the global max is a constant, so the formula is right, but a row far below the global
    # max underflows to 0 / 0: fails only on inputs of magnitude ~1e4
    Mutation("softmax", "softmax-global-max", _SOFTMAX_MAX, "shifted = x - x.max()"),
    Mutation("softmax", "softmax-in-place", _SOFTMAX_MAX,
             "x -= x.amax(dim=dim, keepdim=True)  # changes the caller's tensor\n    shifted = x"),
    # attention_pool
    Mutation("attention_pool", "pool-unnormalised",
             "weights = softmax(scores, dim=-1)", "weights = scores.exp()"),
    Mutation("attention_pool", "pool-scaled", _POOL_SCORES,
             "scores = keys @ query / math.sqrt(query.shape[-1])"),
    # a running sum started on the CPU: right values and dtype, wrong device on a GPU
    Mutation("attention_pool", "pool-cpu-accumulator", _POOL_CONTEXT,
             "context = torch.zeros(values.shape[-1], dtype=values.dtype)\n"
             "    for i in range(values.shape[0]):\n"
             "        context = context + weights[i] * values[i]"),
    Mutation("attention_pool", "pool-sum-of-values", _POOL_CONTEXT,
             "context = (weights @ values) / weights.shape[0]"),
    # attend
    Mutation("attend", "attend-scores-transposed", _ATTEND_SCORES, "scores = keys @ queries.transpose(-2, -1)"),
    Mutation("attend", "attend-keys-dot-T", _ATTEND_SCORES, "scores = queries @ keys.T"),
    # chapter 3's scale, one chapter early: nearly right, but not this chapter's attend
    Mutation("attend", "attend-scaled", _ATTEND_SCORES,
             "scores = queries @ keys.transpose(-2, -1) / math.sqrt(queries.shape[-1])"),
    Mutation("attend", "attend-over-queries",
             "weights = softmax(scores, dim=-1)", "weights = softmax(scores, dim=-2)"),
    Mutation("attend", "attend-transpose-in-place", _ATTEND_SCORES,
             "scores = queries @ keys.transpose_(-2, -1)  # transposes the caller's keys"),
    Mutation("attend", "attend-cpu-accumulator", None,
             "def attend(queries, keys, values):\n"
             "    scores = queries @ keys.transpose(-2, -1)\n"
             "    weights = softmax(scores, dim=-1)\n"
             "    context = torch.zeros(*weights.shape[:-1], values.shape[-1], dtype=values.dtype)  # on the CPU\n"
             "    for j in range(values.shape[-2]):  # add up the values one key at a time\n"
             "        context = context + weights[..., :, j:j + 1] * values[..., j:j + 1, :]\n"
             "    return context, weights\n"),
]

VARIANTS = [
    # softmax
    Mutation("softmax", "softmax-logsumexp", None,
             "def softmax(x, dim=-1):\n"
             "    return (x - torch.logsumexp(x, dim=dim, keepdim=True)).exp()\n"),
    Mutation("softmax", "softmax-float64-inside", None,
             "def softmax(x, dim=-1):\n"
             "    x64 = x.to(torch.float64)\n"
             "    e = torch.exp(x64 - x64.max(dim=dim, keepdim=True).values)\n"
             "    return (e / e.sum(dim=dim, keepdim=True)).to(x.dtype)\n"),
    Mutation("softmax", "softmax-prints-and-warns", None,
             "import sys, warnings\n"
             "def softmax(x, dim=-1):\n"
             "    print('softmax of shape', tuple(x.shape), 'along', dim)\n"
             "    print('debugging on stderr', file=sys.stderr)\n"
             "    warnings.warn('softmax: a note from the learner')\n"
             "    m, _ = torch.max(x, dim=dim, keepdim=True)\n"
             "    e = torch.exp(x - m)\n"
             "    return e / torch.sum(e, dim=dim, keepdim=True)\n"),
    Mutation("softmax", "softmax-move-dim-last", None,
             "def softmax(x, dim=-1):\n"
             "    t = x.movedim(dim, -1)\n"
             "    e = (t - t.max(-1, keepdim=True).values).exp()\n"
             "    e.div_(e.sum(-1, keepdim=True))  # in place on its own tensor: allowed\n"
             "    return e.movedim(-1, dim)\n"),
    Mutation("softmax", "softmax-log-domain", None,
             "def softmax(x, dim=-1):\n"
             "    m = x.amax(dim=dim, keepdim=True)\n"
             "    log_z = m + torch.log(torch.sum(torch.exp(x - m), dim=dim, keepdim=True))\n"
             "    return torch.exp(x - log_z)\n"),
    # attention_pool
    Mutation("attention_pool", "pool-einsum", None,
             "def attention_pool(query, keys, values):\n"
             "    weights = softmax(torch.einsum('nd,d->n', keys, query))\n"
             "    return torch.einsum('n,nv->v', weights, values), weights\n"),
    Mutation("attention_pool", "pool-loop", None,
             "def attention_pool(query, keys, values):\n"
             "    scores = torch.stack([torch.dot(query, k) for k in keys])\n"
             "    weights = torch.exp(scores - scores.max())\n"
             "    weights = weights / weights.sum()\n"
             "    context = sum(w * v for w, v in zip(weights, values))\n"
             "    return context, weights\n"),
    Mutation("attention_pool", "pool-broadcast-float64", None,
             "def attention_pool(query, keys, values):\n"
             "    q, k, v = query.double(), keys.double(), values.double()\n"
             "    weights = torch.softmax((k * q).sum(dim=1), dim=0)\n"
             "    context = (weights[:, None] * v).sum(dim=0)\n"
             "    return context.to(values.dtype), weights.to(keys.dtype)\n"),
    Mutation("attention_pool", "pool-mv", None,
             "def attention_pool(query, keys, values):\n"
             "    weights = softmax(torch.mv(keys, query), dim=0)\n"
             "    return torch.matmul(values.T, weights), weights\n"),
    # attend
    Mutation("attend", "attend-einsum", None,
             "def attend(queries, keys, values):\n"
             "    weights = softmax(torch.einsum('...md,...nd->...mn', queries, keys), dim=-1)\n"
             "    return torch.einsum('...mn,...nv->...mv', weights, values), weights\n"),
    Mutation("attend", "attend-loop-over-queries", None,
             "def attend(queries, keys, values):\n"
             "    rows = []\n"
             "    for i in range(queries.shape[-2]):\n"
             "        q = queries[..., i, :].unsqueeze(-2)            # (..., 1, d)\n"
             "        rows.append(softmax((q * keys).sum(-1), dim=-1))  # (..., n)\n"
             "    weights = torch.stack(rows, dim=-2)\n"
             "    return torch.matmul(weights, values), weights\n"),
    Mutation("attend", "attend-bmm", None,
             "def attend(queries, keys, values):\n"
             "    *batch, m, d = queries.shape\n"
             "    n, dv = keys.shape[-2], values.shape[-1]\n"
             "    q, k, v = queries.reshape(-1, m, d), keys.reshape(-1, n, d), values.reshape(-1, n, dv)\n"
             "    weights = softmax(torch.bmm(q, k.transpose(1, 2)), dim=-1)\n"
             "    context = torch.bmm(weights, v)\n"
             "    return context.reshape(*batch, m, dv), weights.reshape(*batch, m, n)\n"),
    Mutation("attend", "attend-matmul-float64", None,
             "def attend(queries, keys, values):\n"
             "    scores = torch.matmul(queries.double(), keys.double().mT)\n"
             "    weights = torch.softmax(scores, dim=-1)\n"
             "    return torch.matmul(weights, values.double()).to(values.dtype), weights.to(queries.dtype)\n"),
    Mutation("attend", "attend-swapaxes-softmax-method", None,
             "def attend(queries, keys, values):\n"
             "    weights = (queries @ keys.swapaxes(-1, -2)).softmax(dim=-1)\n"
             "    return weights @ values, weights\n"),
]
