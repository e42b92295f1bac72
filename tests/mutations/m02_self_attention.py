"""Chapter 02: classic mistakes with unparameterised self-attention and a learned head,
and correct answers written the ways learners write them."""

from tests.mutations import Mutation

CHAPTER = "02_self_attention"

_SA_SCORES = "scores = x @ x.transpose(-2, -1)"
_HEAD_QKV = "q, k, v = self.W_q(x), self.W_k(x), self.W_v(x)"
_HEAD_SCORES = "scores = q @ k.transpose(-2, -1)"
_HEAD_INIT = """        self.W_q = nn.Linear(d_model, d_k, bias=False)
        self.W_k = nn.Linear(d_model, d_k, bias=False)
        self.W_v = nn.Linear(d_model, d_v, bias=False)"""


def _head(init: str, forward: str, header: str = "") -> str:
    """A whole SelfAttentionHead cell from the bodies of __init__ and forward."""
    return (
        f"{header}class SelfAttentionHead(nn.Module):\n"
        "    def __init__(self, d_model, d_k, d_v):\n"
        "        super().__init__()\n"
        f"{init}\n\n"
        "    def forward(self, x):\n"
        f"{forward}\n"
    )


MUTATIONS = [
    # self_attention
    Mutation(
        "self_attention",
        "sa-softmax-over-queries",
        "weights = torch.softmax(scores, dim=-1)   # row i",
        "weights = torch.softmax(scores, dim=-2)   # row i",
    ),
    Mutation(
        "self_attention",
        "sa-no-batch-support",
        _SA_SCORES,
        "scores = x @ x.transpose(1, 2)",
    ),
    Mutation(
        "self_attention",
        "sa-scaled-too-early",
        _SA_SCORES,
        "scores = x @ x.transpose(-2, -1) / math.sqrt(x.shape[-1])",
    ),
    # a placeholder mask made on the CPU: right values, breaks on a GPU
    Mutation(
        "self_attention",
        "sa-cpu-mask",
        _SA_SCORES,
        "scores = x @ x.transpose(-2, -1) + torch.zeros(x.shape[-2], x.shape[-2])  # no mask yet",
    ),
    # right values, but one sequence becomes a batch of one in the caller's tensor too
    Mutation(
        "self_attention",
        "sa-unsqueeze-in-place",
        None,
        "def self_attention(x):\n"
        "    if x.dim() == 2:\n"
        "        x.unsqueeze_(0)  # treat one sequence as a batch of one\n"
        "        out, weights = self_attention(x)\n"
        "        return out[0], weights[0]\n"
        "    weights = torch.softmax(x @ x.transpose(-2, -1), dim=-1)\n"
        "    return weights @ x, weights\n",
    ),
    # SelfAttentionHead
    Mutation(
        "SelfAttentionHead",
        "head-softmax-dim-1",
        "weights = torch.softmax(scores, dim=-1)",
        "weights = torch.softmax(scores, dim=1)",
    ),
    Mutation(
        "SelfAttentionHead",
        "head-W_q-for-keys",
        _HEAD_QKV,
        "q, k, v = self.W_q(x), self.W_q(x), self.W_v(x)",
    ),
    Mutation(
        "SelfAttentionHead",
        "head-with-bias",
        "self.W_k = nn.Linear(d_model, d_k, bias=False)",
        "self.W_k = nn.Linear(d_model, d_k)",
    ),
    Mutation(
        "SelfAttentionHead",
        "head-all-bias",
        _HEAD_INIT,
        "        self.W_q = nn.Linear(d_model, d_k)\n"
        "        self.W_k = nn.Linear(d_model, d_k)\n"
        "        self.W_v = nn.Linear(d_model, d_v)",
    ),
    Mutation(
        "SelfAttentionHead",
        "head-no-batch-support",
        _HEAD_SCORES,
        "scores = q @ k.transpose(1, 2)",
    ),
    Mutation(
        "SelfAttentionHead",
        "head-keys-dot-T",
        _HEAD_SCORES,
        "scores = q @ k.T",
    ),
    Mutation(
        "SelfAttentionHead",
        "head-scaled",
        _HEAD_SCORES,
        "scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])",
    ),
    # x @ weight instead of x @ weight.T: only runs when d_model == d_k == d_v
    Mutation(
        "SelfAttentionHead",
        "head-weight-not-transposed",
        _HEAD_QKV,
        "q, k, v = x @ self.W_q.weight, x @ self.W_k.weight, x @ self.W_v.weight",
    ),
    Mutation(
        "SelfAttentionHead",
        "head-parameters-not-linear",
        None,
        _head(
            "        self.W_q = nn.Parameter(torch.randn(d_model, d_k))\n"
            "        self.W_k = nn.Parameter(torch.randn(d_model, d_k))\n"
            "        self.W_v = nn.Parameter(torch.randn(d_model, d_v))",
            "        q, k, v = x @ self.W_q, x @ self.W_k, x @ self.W_v\n"
            "        weights = torch.softmax(q @ k.transpose(-2, -1), dim=-1)\n"
            "        return weights @ v, weights",
        ),
    ),
    # a placeholder mask made on the CPU inside forward: right values, breaks on a GPU
    Mutation(
        "SelfAttentionHead",
        "head-cpu-mask",
        _HEAD_SCORES,
        "n = x.shape[-2]\n"
        "        scores = q @ k.transpose(-2, -1) + torch.zeros(n, n)  # no mask yet",
    ),
    # adds a batch dim to the caller's tensor in place
    Mutation(
        "SelfAttentionHead",
        "head-unsqueeze-in-place",
        _HEAD_QKV,
        "if x.dim() == 2:\n"
        "            x.unsqueeze_(0)\n"
        "        q, k, v = self.W_q(x), self.W_k(x), self.W_v(x)",
    ),
]

VARIANTS = [
    # self_attention
    Mutation(
        "self_attention",
        "sa-einsum",
        None,
        "def self_attention(x):\n"
        "    weights = torch.einsum('...id,...jd->...ij', x, x).softmax(dim=-1)\n"
        "    return torch.einsum('...ij,...jd->...id', weights, x), weights\n",
    ),
    Mutation(
        "self_attention",
        "sa-bmm-reshape",
        None,
        "def self_attention(x):\n"
        "    *batch, n, d = x.shape\n"
        "    flat = x.reshape(-1, n, d)\n"
        "    weights = torch.softmax(torch.bmm(flat, flat.transpose(1, 2)), dim=2)\n"
        "    return torch.bmm(weights, flat).reshape(*batch, n, d), weights.reshape(*batch, n, n)\n",
    ),
    Mutation(
        "self_attention",
        "sa-float64-inside",
        None,
        "def self_attention(x):\n"
        "    x64 = x.double()\n"
        "    scores = torch.matmul(x64, x64.mT)\n"
        "    e = (scores - scores.amax(-1, keepdim=True)).exp()\n"
        "    weights = e / e.sum(-1, keepdim=True)\n"
        "    return (weights @ x64).to(x.dtype), weights.to(x.dtype)\n",
    ),
    Mutation(
        "self_attention",
        "sa-loop-over-tokens",
        None,
        "def self_attention(x):\n"
        "    rows = [torch.softmax((x * x[..., i:i + 1, :]).sum(-1), dim=-1) for i in range(x.shape[-2])]\n"
        "    weights = torch.stack(rows, dim=-2)\n"
        "    return weights @ x, weights\n",
    ),
    Mutation(
        "self_attention",
        "sa-prints-and-warns",
        None,
        "import sys, warnings\n"
        "def self_attention(x):\n"
        "    print('self_attention on', tuple(x.shape))\n"
        "    print('stderr too', file=sys.stderr)\n"
        "    warnings.warn('self_attention: unscaled scores')\n"
        "    weights = torch.nn.functional.softmax(x @ x.transpose(-1, -2), dim=-1)\n"
        "    return weights @ x, weights\n",
    ),
    # SelfAttentionHead
    Mutation(
        "SelfAttentionHead",
        "head-extra-buffers-and-helpers",
        None,
        _head(
            "        self.d_model, self.d_k, self.d_v = d_model, d_k, d_v\n"
            "        self.W_v = nn.Linear(d_model, d_v, bias=False)  # another order than the reference\n"
            "        self.W_k = nn.Linear(d_model, d_k, bias=False)\n"
            "        self.W_q = nn.Linear(d_model, d_k, bias=False)\n"
            "        self.softmax = nn.Softmax(dim=-1)\n"
            "        self.register_buffer('calls', torch.zeros((), dtype=torch.long))\n"
            "        self.register_buffer('temperature', torch.ones(()), persistent=False)",
            "        self.calls += 1\n"
            "        q, k, v = self._project(x)\n"
            "        weights = self.softmax(self._scores(q, k) / self.temperature)\n"
            "        return weights @ v, weights\n\n"
            "    def _project(self, x):\n"
            "        return self.W_q(x), self.W_k(x), self.W_v(x)\n\n"
            "    def _scores(self, q, k):\n"
            "        return q @ k.transpose(-2, -1)",
        ),
    ),
    Mutation(
        "SelfAttentionHead",
        "head-einsum-weights",
        None,
        _head(
            _HEAD_INIT,
            "        q = torch.einsum('...nm,km->...nk', x, self.W_q.weight)\n"
            "        k = torch.einsum('...nm,km->...nk', x, self.W_k.weight)\n"
            "        v = torch.einsum('...nm,km->...nk', x, self.W_v.weight)\n"
            "        weights = torch.einsum('...ik,...jk->...ij', q, k).softmax(-1)\n"
            "        return torch.einsum('...ij,...jv->...iv', weights, v), weights",
        ),
    ),
    Mutation(
        "SelfAttentionHead",
        "head-functional-float64",
        None,
        _head(
            _HEAD_INIT,
            "        x64 = x.double()\n"
            "        q, k, v = (F.linear(x64, m.weight.double()) for m in (self.W_q, self.W_k, self.W_v))\n"
            "        weights = F.softmax(q @ k.mT, dim=-1)\n"
            "        return (weights @ v).to(x.dtype), weights.to(x.dtype)",
            header="import torch.nn.functional as F\n",
        ),
    ),
    Mutation(
        "SelfAttentionHead",
        "head-bmm-prints-and-warns",
        None,
        _head(
            _HEAD_INIT,
            "        print('head input', tuple(x.shape))\n"
            "        warnings.warn('SelfAttentionHead: a note from the learner')\n"
            "        *batch, n, _ = x.shape\n"
            "        q, k, v = (m(x).reshape(-1, n, m.out_features) for m in (self.W_q, self.W_k, self.W_v))\n"
            "        weights = torch.softmax(torch.bmm(q, k.transpose(1, 2)), dim=-1)\n"
            "        out = torch.bmm(weights, v)\n"
            "        return out.reshape(*batch, n, out.shape[-1]), weights.reshape(*batch, n, n)",
            header="import warnings\n",
        ),
    ),
    Mutation(
        "SelfAttentionHead",
        "head-own-stable-softmax",
        _HEAD_SCORES + "                   # (..., n, n), unscaled\n"
        "        weights = torch.softmax(scores, dim=-1)            # each query's weights over the keys",
        "scores = torch.matmul(q, k.transpose(-2, -1))\n"
        "        scores = scores - scores.amax(dim=-1, keepdim=True)\n"
        "        weights = scores.exp()\n"
        "        weights /= weights.sum(dim=-1, keepdim=True)  # in place on its own tensor: allowed",
    ),
]

# previous_token_head: a head wired by hand
_WIRE_Q = "W_q[vocab + p, p - 1] = c  # position p asks for slot p - 1 ..."
MUTATIONS += [
    Mutation(
        "previous_token_head",
        "wire-successor",
        _WIRE_Q,
        "W_q[vocab + p - 1, p] = c  # shifted the wrong way",
    ),
    Mutation(
        "previous_token_head", "wire-not-sharp-enough", "c = 20.0", "c = 3.0"
    ),
    Mutation(
        "previous_token_head",
        "wire-own-position",
        _WIRE_Q,
        "W_q[vocab + p, p] = c",
    ),
    Mutation(
        "previous_token_head",
        "wire-reads-tokens",
        None,
        """def previous_token_head(vocab, n):
    W_q = torch.zeros(vocab + n, vocab)
    W_k = torch.zeros(vocab + n, vocab)
    for t in range(vocab):
        W_q[t, (t - 1) % vocab] = 20.0  # token t asks for token t - 1: right only for 0, 1, 2, ...
        W_k[t, t] = 1.0
    return W_q, W_k
""",
    ),
    Mutation(
        "previous_token_head",
        "wire-one-map-for-both",
        "return W_q, W_k  # the token rows stay 0: the tokens play no part",
        "return W_q, W_q  # one shared map",
    ),
    Mutation(
        "previous_token_head",
        "wire-wrong-row-count",
        "W_q = torch.zeros(vocab + n, n, dtype=torch.float64)",
        "W_q = torch.zeros(n, n, dtype=torch.float64)",
    ),
]

VARIANTS += [
    Mutation(
        "previous_token_head",
        "wire-key-side-shift",
        None,
        '''def previous_token_head(vocab, n):
    """The key carries the shift: key j offers slot j + 1, query i asks for slot i."""
    import numpy as np
    W_q = np.zeros((vocab + n, n + 1), dtype=np.float32)
    W_k = np.zeros((vocab + n, n + 1), dtype=np.float32)
    W_q[vocab:, :n] = 50 * np.eye(n)
    W_k[vocab:, 1:] = np.eye(n)
    print("d_k =", n + 1)
    return torch.from_numpy(W_q), torch.from_numpy(W_k)
''',
    ),
    Mutation(
        "previous_token_head",
        "wire-shift-matrix-blocks",
        None,
        """def previous_token_head(vocab, n):
    shift = torch.diag(torch.ones(n - 1), diagonal=-1)  # row p has its 1 in column p - 1
    W_q = torch.cat([torch.zeros(vocab, n), 30.0 * shift])
    W_k = torch.cat([torch.zeros(vocab, n), torch.eye(n)])
    return (W_q, W_k)
""",
    ),
    Mutation(
        "previous_token_head",
        "wire-huge-score",
        "c = 20.0",
        "c = 1e4  # exp underflows to exactly 0 for the rivals",
    ),
]
