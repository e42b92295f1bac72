"""Chapter 04: classic mistakes in splitting/merging heads and in the multi-head layer, and
correct answers written in other ways (einops, view + permute, einsum, a loop over heads, ...)."""

from tests.mutations import Mutation

CHAPTER = "04_multi_head"
_SPLIT = "return x.reshape(B, N, num_heads, D).transpose(1, 2)"
_MERGE = "return x.transpose(1, 2).reshape(B, N, H * D)"
_PROJECT = """        q = split_heads(self.w_q(query), self.num_heads)  # (B, H, m, D)
        k = split_heads(self.w_k(key), self.num_heads)    # (B, H, n, D)
        v = split_heads(self.w_v(value), self.num_heads)  # (B, H, n, D)"""
_SCORES = "scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, H, m, n)"
_ZERO_ROWS = """        if mask is not None:
            weights = weights.masked_fill(~mask, 0.0)  # a query with no allowed key: zeros, not 0/0 = NaN
"""
_DROP = "out = self.dropout(weights) @ v"
_RETURN = "return self.w_o(merge_heads(out)), weights"
_MASK_TO_SOFTMAX = (
    """        if mask is not None:
            if mask.dim() == 3:
                mask = mask.unsqueeze(1)  # (B, 1, m, n) or (B, 1, 1, n): one mask for all heads
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
"""
    + _ZERO_ROWS
)
_INIT_DROPOUT = (
    "self.dropout = nn.Dropout(dropout)  # follows train()/eval()"
)

MUTATIONS = [
    # split_heads
    Mutation(
        "split_heads",
        "split-missing-transpose",
        _SPLIT,
        "return x.reshape(B, num_heads, N, D)",
    ),
    Mutation(
        "split_heads",
        "split-interleaved-features",
        _SPLIT,
        "return x.reshape(B, N, D, num_heads).permute(0, 3, 1, 2)",
    ),
    Mutation(
        "split_heads",
        "split-transpose-wrong-dims",
        _SPLIT,
        "return x.reshape(B, N, num_heads, D).transpose(2, 3)",
    ),
    Mutation(
        "split_heads",
        "split-transpose-batch-and-heads",
        _SPLIT,
        "return x.reshape(B, N, num_heads, D).transpose(0, 2)",
    ),
    # merge_heads
    Mutation(
        "merge_heads",
        "merge-missing-transpose",
        _MERGE,
        "return x.reshape(B, N, H * D)",
    ),
    Mutation(
        "merge_heads",
        "merge-heads-wrong-order",
        _MERGE,
        "return x.permute(0, 2, 3, 1).reshape(B, N, H * D)",
    ),
    Mutation(
        "merge_heads",
        "merge-view-not-contiguous",
        _MERGE,
        "return x.transpose(1, 2).view(B, N, H * D)",
    ),
    Mutation(
        "merge_heads",
        "merge-transpose-wrong-dims",
        _MERGE,
        "return x.transpose(2, 3).reshape(B, N, H * D)",
    ),
    # MultiHeadAttention: the layer itself
    Mutation(
        "MultiHeadAttention",
        "mha-inline-split-without-transpose",
        _PROJECT,
        """        B, m, n = query.shape[0], query.shape[1], key.shape[1]
        q = self.w_q(query).reshape(B, self.num_heads, m, self.head_dim)
        k = self.w_k(key).reshape(B, self.num_heads, n, self.head_dim)
        v = self.w_v(value).reshape(B, self.num_heads, n, self.head_dim)""",
    ),
    Mutation(
        "MultiHeadAttention",
        "mha-heads-concatenated-wrong-order",
        _RETURN,
        "return self.w_o(out.permute(0, 2, 3, 1).flatten(2)), weights",
    ),
    Mutation(
        "MultiHeadAttention",
        "mha-scale-by-d-model",
        "math.sqrt(self.head_dim)",
        "math.sqrt(self.num_heads * self.head_dim)",
    ),
    Mutation(
        "MultiHeadAttention",
        "mha-forgets-w_o",
        _RETURN,
        "return merge_heads(out), weights",
    ),
    # the course's masked_softmax (chapter 06's exercise) does the masking and the empty rows
    Mutation(
        "MultiHeadAttention",
        "mha-course-masked-softmax",
        _MASK_TO_SOFTMAX,
        "        if mask is not None and mask.dim() == 3:\n"
        "            mask = mask.unsqueeze(1)\n"
        "        from course_utils.references.masking import masked_softmax\n"
        "        weights = masked_softmax(scores, mask)\n",
    ),
    # the class edition's twin (course_utils/models/twins.py), PyTorch's multi_head_attention_forward
    # with the course's parameters: it computes the right thing, and answers nothing
    Mutation(
        "MultiHeadAttention",
        "mha-class-edition-twin",
        _RETURN,
        "from course_utils.models.twins import MultiHeadAttention as Twin\n"
        "        return Twin.forward(self, query, key, value, mask)",
    ),
    Mutation(
        "MultiHeadAttention",
        "mha-mask-not-broadcast-over-heads",
        "mask = mask.unsqueeze(1)",
        "mask = mask",
    ),
    Mutation(
        "MultiHeadAttention",
        "mha-softmax-over-queries",
        "weights = torch.softmax(scores, dim=-1)",
        "weights = torch.softmax(scores, dim=-2)",
    ),
    Mutation(
        "MultiHeadAttention",
        "mha-default-mask-on-cpu",
        _SCORES,
        _SCORES + "\n        if mask is None:\n"
        "            mask = torch.ones(scores.shape[-2:], dtype=torch.bool)  # created on the CPU",
    ),
    # masks: fully blocked queries, per-head masks
    Mutation(
        "MultiHeadAttention",
        "mha-nan-for-fully-blocked-query",
        _ZERO_ROWS,
        "",
    ),
    Mutation(
        "MultiHeadAttention",
        "mha-minus-1e9-fill",
        _MASK_TO_SOFTMAX,
        """        if mask is not None:
            if mask.dim() == 3:
                mask = mask.unsqueeze(1)
            scores = scores.masked_fill(~mask, -1e9)  # the slides' large negative number
        weights = torch.softmax(scores, dim=-1)
""",
    ),
    Mutation(
        "MultiHeadAttention",
        "mha-mask-always-unsqueezed",
        "if mask.dim() == 3:",
        "if mask.dim() > 2:",
    ),
    # dropout
    Mutation(
        "MultiHeadAttention",
        "mha-dropout-in-eval-mode",
        _DROP,
        "out = nn.functional.dropout(weights, self.dropout.p, training=True) @ v",
    ),
    Mutation(
        "MultiHeadAttention",
        "mha-dropout-on-output",
        f"        {_DROP}",
        "        out = weights @ v\n        return self.dropout(self.w_o(merge_heads(out))), weights",
    ),
    Mutation(
        "MultiHeadAttention",
        "mha-dropout-omitted",
        _DROP,
        "out = weights @ v",
    ),
    Mutation(
        "MultiHeadAttention",
        "mha-dropout-on-scores",
        "weights = torch.softmax(scores, dim=-1)",
        "weights = torch.softmax(self.dropout(scores), dim=-1)",
    ),
    Mutation(
        "MultiHeadAttention",
        "mha-returns-dropped-weights",
        _DROP,
        "weights = self.dropout(weights)\n        out = weights @ v",
    ),
    Mutation(
        "MultiHeadAttention",
        "mha-keys-values-through-w_q",
        _PROJECT,
        """        q = split_heads(self.w_q(query), self.num_heads)
        k = split_heads(self.w_q(key), self.num_heads)    # one projection for all three
        v = split_heads(self.w_q(value), self.num_heads)""",
    ),
    Mutation(
        "MultiHeadAttention",
        "mha-scaled-after-softmax",
        "weights = torch.softmax(scores, dim=-1)",
        "weights = torch.softmax(scores * math.sqrt(self.head_dim), dim=-1) / math.sqrt(self.head_dim)",
    ),
]

_MHA_HEAD = """class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
"""

VARIANTS = [
    # split_heads
    Mutation(
        "split_heads",
        "split-einops",
        _SPLIT,
        'return rearrange(x, "b n (h d) -> b h n d", h=num_heads)',
    ),
    Mutation(
        "split_heads",
        "split-view-permute",
        _SPLIT,
        "return x.view(B, N, num_heads, D).permute(0, 2, 1, 3)",
    ),
    Mutation(
        "split_heads",
        "split-unflatten",
        _SPLIT,
        "return x.unflatten(-1, (num_heads, -1)).transpose(-3, -2)",
    ),
    Mutation(
        "split_heads",
        "split-stack-blocks",
        _SPLIT,
        "return torch.stack([x[..., h * D:(h + 1) * D] for h in range(num_heads)], dim=1)",
    ),
    Mutation(
        "split_heads",
        "split-prints-and-warns",
        _SPLIT,
        "import sys, warnings\n    print('split_heads got', tuple(x.shape))\n"
        "    print('debug', file=sys.stderr)\n    warnings.warn('just a warning')\n    "
        + _SPLIT,
    ),
    # merge_heads
    Mutation(
        "merge_heads",
        "merge-einops",
        _MERGE,
        'return rearrange(x, "b h n d -> b n (h d)")',
    ),
    Mutation(
        "merge_heads",
        "merge-contiguous-view",
        _MERGE,
        "return x.permute(0, 2, 1, 3).contiguous().view(B, N, H * D)",
    ),
    Mutation(
        "merge_heads",
        "merge-flatten",
        _MERGE,
        "return x.transpose(1, 2).flatten(2)",
    ),
    Mutation(
        "merge_heads",
        "merge-cat-heads",
        _MERGE,
        "return torch.cat(x.unbind(dim=1), dim=-1)",
    ),
    # MultiHeadAttention
    Mutation(
        "MultiHeadAttention",
        "mha-einsum",
        _SCORES,
        'scores = torch.einsum("bhmd,bhnd->bhmn", q, k) * self.head_dim ** -0.5',
    ),
    Mutation(
        "MultiHeadAttention",
        "mha-functional-dropout",
        _DROP,
        "out = nn.functional.dropout(weights, p=self.dropout.p, training=self.training) @ v",
    ),
    Mutation(
        "MultiHeadAttention",
        "mha-nan-to-num",
        _ZERO_ROWS,
        "        weights = weights.nan_to_num(0.0)  # a fully blocked query: 0/0 -> 0\n",
    ),
    Mutation(
        "MultiHeadAttention",
        "mha-torch-where",
        _MASK_TO_SOFTMAX,
        """        if mask is not None:
            if mask.dim() == 3:
                mask = mask[:, None]
            scores = torch.where(mask, scores, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        if mask is not None:
            weights = torch.where(mask.any(dim=-1, keepdim=True), weights, 0.0)
""",
    ),
    Mutation(
        "MultiHeadAttention",
        "mha-helper-method-and-float-p",
        None,
        _MHA_HEAD.replace(
            "self.dropout = nn.Dropout(dropout)",
            "self.p = dropout  # a float, used with F.dropout",
        )
        + '''
    def _attend(self, q, k, v, mask):
        """Scaled dot-product attention of every head at once, with zero weights for fully blocked queries."""
        scores = torch.matmul(q, k.transpose(-1, -2)) / self.head_dim ** 0.5
        if mask is not None:
            scores = scores.masked_fill(mask.logical_not(), float("-inf"))
        weights = scores.softmax(dim=-1)
        if mask is not None:
            weights = weights.masked_fill(mask.logical_not(), 0)
        return torch.matmul(nn.functional.dropout(weights, self.p, self.training), v), weights

    def forward(self, query, key, value, mask=None):
        if mask is not None and mask.dim() == 3:
            mask = mask.unsqueeze(1)
        B, m, _ = query.shape
        q = self.w_q(query).view(B, m, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.w_k(key).view(B, -1, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.w_v(value).view(B, -1, self.num_heads, self.head_dim).transpose(1, 2)
        out, weights = self._attend(q, k, v, mask)
        return self.w_o(out.transpose(1, 2).contiguous().view(B, m, -1)), weights
''',
    ),
    Mutation(
        "MultiHeadAttention",
        "mha-loop-over-heads",
        None,
        _MHA_HEAD
        + """
    def forward(self, query, key, value, mask=None):
        if mask is not None and mask.dim() == 3:
            mask = mask.unsqueeze(1)  # (B, 1, m, n) or (B, 1, 1, n)
        q, k, v = self.w_q(query), self.w_k(key), self.w_v(value)
        D = self.head_dim
        per_head = []
        for h in range(self.num_heads):  # head h: its block of D features of every projection
            s = q[..., h * D:(h + 1) * D] @ k[..., h * D:(h + 1) * D].transpose(-2, -1) / math.sqrt(D)
            if mask is not None:
                m_h = mask if mask.dim() == 2 else mask[:, h if mask.shape[1] > 1 else 0]  # this head's mask
                s = s.masked_fill(~m_h, float("-inf"))
            per_head.append(torch.softmax(s, dim=-1).nan_to_num(0.0))
        weights = torch.stack(per_head, dim=1)  # (B, H, m, n)
        dropped = self.dropout(weights)  # once, on all heads' weights
        out = torch.cat([dropped[:, h] @ v[..., h * D:(h + 1) * D] for h in range(self.num_heads)], dim=-1)
        return self.w_o(out), weights
""",
    ),
    Mutation(
        "MultiHeadAttention",
        "mha-prints-and-warns",
        _RETURN,
        "import warnings\n        print('attention weights', tuple(weights.shape))\n"
        "        warnings.warn('a warning from forward')\n        "
        + _RETURN,
    ),
]

# head_ablation: remove one head's output before W_o
_KEEP = "keep[head] = 0.0  # the ablated head passes nothing on; the others are not rescaled"
_KEEP_LINE = (
    "keep = torch.ones(H, 1, 1, dtype=context.dtype, device=context.device)"
)
_ABL_RETURN = "return mha.w_o(merge_heads(context * keep)), weights"
MUTATIONS += [
    Mutation(
        "head_ablation",
        "ablation-next-head",
        _KEEP,
        "keep[(head + 1) % H] = 0.0",
    ),
    Mutation(
        "head_ablation",
        "ablation-keeps-only-that-head",
        _KEEP_LINE + "\n    " + _KEEP,
        "keep = torch.zeros(H, 1, 1, dtype=context.dtype, device=context.device)\n    keep[head] = 1.0",
    ),
    Mutation(
        "head_ablation",
        "ablation-rescales-the-others",
        _ABL_RETURN,
        "return mha.w_o(merge_heads(context * keep * H / max(H - 1, 1))), weights  # as dropout would",
    ),
    Mutation(
        "head_ablation",
        "ablation-after-the-output-projection",
        _ABL_RETURN,
        "out = mha.w_o(merge_heads(context)).clone()\n    D = context.shape[-1]\n"
        "    out[..., head * D:(head + 1) * D] = 0.0  # W_o mixes the heads: its output has no head slices\n"
        "    return out, weights",
    ),
    Mutation(
        "head_ablation",
        "ablation-zeroes-the-layers-weights",
        None,
        """def head_ablation(mha, x, head):
    D = mha.d_model // mha.num_heads
    with torch.no_grad():
        mha.w_o.weight[:, head * D:(head + 1) * D] = 0.0  # the caller's layer, changed for good
    return mha(x, x, x)
""",
    ),
    Mutation(
        "head_ablation",
        "ablation-mask-on-the-cpu",
        _KEEP_LINE,
        "keep = torch.ones(H, 1, 1, dtype=context.dtype)",
    ),
    Mutation(
        "head_ablation",
        "ablation-unscaled-scores",
        "weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)",
        "weights = torch.softmax(q @ k.transpose(-2, -1), dim=-1)",
    ),
]
VARIANTS += [
    Mutation(
        "head_ablation",
        "ablation-copy-of-the-layer",
        None,
        """def head_ablation(mha, x, head):
    import copy
    ablated = copy.deepcopy(mha)
    D = mha.w_o.in_features // mha.num_heads
    with torch.no_grad():
        ablated.w_o.weight[:, head * D:(head + 1) * D] = 0  # W_o's columns that read this head
    return ablated(x, x, x)
""",
    ),
    Mutation(
        "head_ablation",
        "ablation-zero-weights-einsum",
        None,
        """def head_ablation(mha, x, head):
    q = split_heads(mha.w_q(x), mha.num_heads)
    k = split_heads(mha.w_k(x), mha.num_heads)
    v = split_heads(mha.w_v(x), mha.num_heads)
    weights = torch.einsum("bhqd,bhkd->bhqk", q, k).div(q.shape[-1] ** 0.5).softmax(dim=-1)
    heads = [torch.zeros_like(weights[:, h] @ v[:, h]) if h == head else weights[:, h] @ v[:, h]
             for h in range(mha.num_heads)]
    print("removed head", head)
    return mha.w_o(torch.cat(heads, dim=-1)), weights
""",
    ),
]
