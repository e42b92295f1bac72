"""Chapter 05: classic mistakes in the sinusoidal encoding (including the lecture slides' own) and
in the learned position embedding, and correct answers written in other ways."""

from tests.mutations import Mutation

CHAPTER = "05_positional_encoding"
_SIN_LINE = "pe[pos, i] = math.sin(pos / (10000 ** (i / d_model)))"
_COS_LINE = "pe[pos, i + 1] = math.cos(pos / (10000 ** (i / d_model)))  # same frequency as its sine"
_FILL = "pe[:, 0::2] = torch.sin(angle)\n    pe[:, 1::2] = torch.cos(angle)"

MUTATIONS = [
    # fixed_slides_encoding: the spot-the-bug exercise, fixed only halfway or wrongly
    Mutation(
        "fixed_slides_encoding",
        "slides-cosine-still-2i-plus-2",
        _COS_LINE,
        "pe[pos, i + 1] = math.cos(pos / (10000 ** ((2 * (i + 1)) / d_model)))",
    ),
    Mutation(
        "fixed_slides_encoding",
        "slides-cosine-i-plus-1-over-d",
        _COS_LINE,
        "pe[pos, i + 1] = math.cos(pos / (10000 ** ((i + 1) / d_model)))",
    ),
    Mutation(
        "fixed_slides_encoding",
        "slides-sine-still-2i",
        _SIN_LINE,
        "pe[pos, i] = math.sin(pos / (10000 ** ((2 * i) / d_model)))",
    ),
    # sinusoidal_encoding
    Mutation(
        "sinusoidal_encoding",
        "sin-cos-swapped",
        _FILL,
        "pe[:, 0::2] = torch.cos(angle)\n    pe[:, 1::2] = torch.sin(angle)",
    ),
    Mutation(
        "sinusoidal_encoding",
        "slides-exponent-bug",
        _FILL,
        "pe[:, 0::2] = torch.sin(position / base ** (2 * two_i / d_model))\n"
        "    pe[:, 1::2] = torch.cos(position / base ** (2 * (two_i + 1) / d_model))",
    ),
    Mutation(
        "sinusoidal_encoding",
        "exponent-i-over-d",
        "two_i = torch.arange(0, d_model, 2, dtype=torch.float64)",
        "two_i = torch.arange(0, d_model // 2, dtype=torch.float64)",
    ),
    Mutation(
        "sinusoidal_encoding",
        "concatenated-not-interleaved",
        _FILL,
        "pe = torch.cat([torch.sin(angle), torch.cos(angle)], dim=-1)",
    ),
    Mutation(
        "sinusoidal_encoding",
        "base-ignored",
        "angle = position / base ** (two_i / d_model)",
        "angle = position / 10000.0 ** (two_i / d_model)",
    ),
    Mutation(
        "sinusoidal_encoding",
        "sin-positions-from-1",
        "position = torch.arange(num_positions, dtype=torch.float64)[:, None]",
        "position = torch.arange(1, num_positions + 1, dtype=torch.float64)[:, None]",
    ),
    Mutation(
        "sinusoidal_encoding",
        "sin-angle-multiplied",
        "angle = position / base ** (two_i / d_model)",
        "angle = position * base ** (-two_i / d_model) * base",
    ),
    # LearnedPositionalEmbedding
    Mutation(
        "LearnedPositionalEmbedding",
        "learned-not-trainable-buffer",
        "self.weight = nn.Parameter(0.02 * torch.randn(num_positions, d_model))",
        'self.register_buffer("weight", 0.02 * torch.randn(num_positions, d_model))',
    ),
    Mutation(
        "LearnedPositionalEmbedding",
        "learned-requires-grad-false",
        "self.weight = nn.Parameter(0.02 * torch.randn(num_positions, d_model))",
        "self.weight = nn.Parameter(0.02 * torch.randn(num_positions, d_model), requires_grad=False)",
    ),
    Mutation(
        "LearnedPositionalEmbedding",
        "learned-last-n-rows",
        "return x + self.weight[:n]",
        "return x + self.weight[-n:]",
    ),
    Mutation(
        "LearnedPositionalEmbedding",
        "learned-sequence-axis-1",
        "n = x.shape[-2]",
        "n = x.shape[1]",
    ),
    Mutation(
        "LearnedPositionalEmbedding",
        "learned-adds-in-place",
        "return x + self.weight[:n]",
        "x += self.weight[:n]\n        return x",
    ),
    Mutation(
        "LearnedPositionalEmbedding",
        "learned-table-created-on-cpu",
        "return x + self.weight[:n]",
        "positions = torch.zeros(n, x.shape[-1], dtype=x.dtype) + self.weight[:n]  # zeros on the CPU\n"
        "        return x + positions",
    ),
    Mutation(
        "LearnedPositionalEmbedding",
        "learned-adds-whole-table",
        "return x + self.weight[:n]",
        "return x + self.weight[:n].sum(0)",
    ),
    Mutation(
        "LearnedPositionalEmbedding",
        "learned-always-adds-batch-axis",
        "return x + self.weight[:n]",
        "return x + self.weight[:n].unsqueeze(0)  # (1, n, d): wrong for x (n, d)",
    ),
]

_SIN_BODY = """    position = torch.arange(num_positions, dtype=torch.float64)[:, None]  # (P, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)              # 2i = 0, 2, 4, ...: one per pair
    angle = position / base ** (two_i / d_model)                          # (P, d_model / 2)
    pe = torch.zeros(num_positions, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe.float()"""
_LEARNED_INIT = (
    "self.weight = nn.Parameter(0.02 * torch.randn(num_positions, d_model))"
)

VARIANTS = [
    # fixed_slides_encoding
    Mutation(
        "fixed_slides_encoding",
        "slides-exp-log",
        _SIN_LINE + "\n            " + _COS_LINE,
        "freq = math.exp(-math.log(10000.0) * i / d_model)\n"
        "            pe[pos, i] = math.sin(pos * freq)\n            pe[pos, i + 1] = math.cos(pos * freq)",
    ),
    Mutation(
        "fixed_slides_encoding",
        "slides-torch-float32",
        _SIN_LINE + "\n            " + _COS_LINE,
        "angle = torch.tensor(pos / 10000 ** (i / d_model))\n"
        "            pe[pos, i], pe[pos, i + 1] = torch.sin(angle), torch.cos(angle)",
    ),
    # sinusoidal_encoding
    Mutation(
        "sinusoidal_encoding",
        "sin-exp-log-float32",
        _SIN_BODY,
        """    position = torch.arange(num_positions).unsqueeze(1).float()
    div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(base) / d_model))
    pe = torch.zeros(num_positions, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe""",
    ),
    Mutation(
        "sinusoidal_encoding",
        "sin-outer-stack",
        _SIN_BODY,
        """    freqs = 1.0 / base ** (torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    angle = torch.outer(torch.arange(num_positions, dtype=torch.float32), freqs)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(1)  # (P, d/2, 2) -> sin, cos interleaved""",
    ),
    Mutation(
        "sinusoidal_encoding",
        "sin-float64-returned",
        _SIN_BODY,
        _SIN_BODY.replace("return pe.float()", "return pe"),
    ),
    Mutation(
        "sinusoidal_encoding",
        "sin-python-loop",
        _SIN_BODY,
        """    pe = torch.zeros(num_positions, d_model)
    for p in range(num_positions):
        for i in range(d_model // 2):
            angle = p / base ** (2 * i / d_model)
            pe[p, 2 * i] = math.sin(angle)
            pe[p, 2 * i + 1] = math.cos(angle)
    return pe""",
    ),
    Mutation(
        "sinusoidal_encoding",
        "sin-prints-and-warns",
        _SIN_BODY,
        """    import sys, warnings
    print("building", num_positions, "positions")
    print("debug", file=sys.stderr)
    warnings.warn("a warning the answer triggers")
"""
        + _SIN_BODY,
    ),
    # LearnedPositionalEmbedding
    Mutation(
        "LearnedPositionalEmbedding",
        "learned-randn-std-1",
        _LEARNED_INIT,
        "self.weight = nn.Parameter(torch.randn(num_positions, d_model))  # the lab report's init",
    ),
    Mutation(
        "LearnedPositionalEmbedding",
        "learned-zeros-init",
        _LEARNED_INIT,
        "self.weight = nn.Parameter(torch.zeros(num_positions, d_model))",
    ),
    Mutation(
        "LearnedPositionalEmbedding",
        "learned-trunc-normal",
        _LEARNED_INIT,
        "self.weight = nn.Parameter(torch.empty(num_positions, d_model))\n"
        "        nn.init.trunc_normal_(self.weight, std=0.02)",
    ),
    Mutation(
        "LearnedPositionalEmbedding",
        "learned-narrow",
        "return x + self.weight[:n]",
        "return x + self.weight.narrow(0, 0, n).to(x.dtype)",
    ),
    Mutation(
        "LearnedPositionalEmbedding",
        "learned-nn-embedding",
        None,
        """class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, num_positions, d_model):
        super().__init__()
        self.table = nn.Embedding(num_positions, d_model)

    @property
    def weight(self):
        return self.table.weight

    def forward(self, x):
        print("positions:", x.shape[-2])
        positions = torch.arange(x.shape[-2], device=x.device)
        return x + self.table(positions)
""",
    ),
    Mutation(
        "sinusoidal_encoding",
        "sin-numpy",
        _SIN_BODY,
        """    import numpy as np
    pos = np.arange(num_positions)[:, np.newaxis]
    i = np.arange(d_model)[np.newaxis, :]
    angle_rates = 1 / np.power(base, (2 * (i // 2)) / np.float32(d_model))
    angles = pos * angle_rates
    angles[:, 0::2] = np.sin(angles[:, 0::2])
    angles[:, 1::2] = np.cos(angles[:, 1::2])
    return torch.from_numpy(angles)""",
    ),
    Mutation(
        "LearnedPositionalEmbedding",
        "learned-index-select",
        "return x + self.weight[:n]",
        "idx = torch.arange(n, device=x.device)\n        return x + self.weight.index_select(0, idx)",
    ),
    Mutation(
        "LearnedPositionalEmbedding",
        "learned-expand-as",
        "return x + self.weight[:n]",
        "return torch.add(x, self.weight[:n].expand_as(x))",
    ),
]

# rotary_embedding (RoPE): the usual wrong turns, and correct answers written other ways
_ROPE_PAIRS = "rotated = torch.stack([even * cos + odd * sin, odd * cos - even * sin], dim=-1)"
_ROPE_DEFAULT = "positions = torch.arange(n, device=x.device)"
_ROPE_BODY = """    n, d = x.shape[-2], x.shape[-1]
    if positions is None:
        positions = torch.arange(n, device=x.device)
    two_i = torch.arange(0, d, 2, dtype=torch.float64, device=x.device)  # one per pair
    p = positions.to(device=x.device, dtype=torch.float64)[:, None]  # (n, 1)
    angle = p * base ** (-two_i / d)  # (n, d/2), in float64
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    rotated = torch.stack([even * cos + odd * sin, odd * cos - even * sin], dim=-1)
    return rotated.flatten(-2)  # (..., n, d/2, 2) -> (..., n, d): pairs side by side again"""

MUTATIONS += [
    Mutation(
        "rotary_embedding",
        "rope-roformer-direction",
        _ROPE_PAIRS,
        "rotated = torch.stack([even * cos - odd * sin, odd * cos + even * sin], dim=-1)",
    ),
    Mutation(
        "rotary_embedding",
        "rope-rotate-half",
        _ROPE_BODY,
        _ROPE_BODY.replace(
            "even, odd = x[..., 0::2], x[..., 1::2]",
            "even, odd = x[..., : d // 2], x[..., d // 2:]",
        ).replace(
            "rotated = torch.stack([even * cos + odd * sin, odd * cos - even * sin], dim=-1)\n"
            "    return rotated.flatten(-2)  # (..., n, d/2, 2) -> (..., n, d): pairs side by side again",
            "return torch.cat([even * cos + odd * sin, odd * cos - even * sin], dim=-1)",
        ),
    ),
    Mutation(
        "rotary_embedding",
        "rope-exponent-i-over-d",
        "two_i = torch.arange(0, d, 2, dtype=torch.float64, device=x.device)",
        "two_i = torch.arange(0, d // 2, dtype=torch.float64, device=x.device)",
    ),
    Mutation(
        "rotary_embedding",
        "rope-positions-from-1",
        _ROPE_DEFAULT,
        "positions = torch.arange(1, n + 1, device=x.device)",
    ),
    Mutation(
        "rotary_embedding",
        "rope-positions-ignored",
        "if positions is None:",
        "if True:",
    ),
    Mutation(
        "rotary_embedding",
        "rope-sin-cos-swapped",
        _ROPE_PAIRS,
        "rotated = torch.stack([even * sin + odd * cos, odd * sin - even * cos], dim=-1)",
    ),
    Mutation(
        "rotary_embedding",
        "rope-angles-on-cpu",
        _ROPE_BODY,
        _ROPE_BODY.replace(
            "torch.arange(n, device=x.device)", "torch.arange(n)"
        )
        .replace(
            "dtype=torch.float64, device=x.device)  # one per pair",
            "dtype=torch.float64)  # one per pair",
        )
        .replace(
            "positions.to(device=x.device, dtype=torch.float64)",
            "positions.to(dtype=torch.float64)",
        )
        .replace(
            "angle.cos().to(x.dtype), angle.sin().to(x.dtype)",
            "angle.cos().float(), angle.sin().float()",
        ),
    ),
    Mutation(
        "rotary_embedding",
        "rope-rotates-x-in-place",
        _ROPE_PAIRS
        + "\n    return rotated.flatten(-2)  # (..., n, d/2, 2) -> (..., n, d): pairs side by side again",
        "x[..., 0::2], x[..., 1::2] = even * cos + odd * sin, odd * cos - even * sin\n    return x",
    ),
    Mutation(
        "rotary_embedding",
        "rope-float32-angles-for-float64",
        "p = positions.to(device=x.device, dtype=torch.float64)[:, None]  # (n, 1)\n"
        "    angle = p * base ** (-two_i / d)  # (n, d/2), in float64",
        "p = positions.to(device=x.device, dtype=torch.float32)[:, None]\n"
        "    angle = p * base ** (-two_i.float() / d)  # float32 angles, whatever x's dtype",
    ),
]

VARIANTS += [
    Mutation(
        "rotary_embedding",
        "rope-complex-numbers",
        _ROPE_BODY,
        """    n, d = x.shape[-2], x.shape[-1]
    if positions is None:
        positions = torch.arange(n, device=x.device)
    freqs = base ** (-torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d)
    angle = torch.outer(positions.to(device=x.device, dtype=torch.float64), freqs)  # (n, d/2)
    turn = torch.polar(torch.ones_like(angle), -angle)  # e^{-i angle}: (e + i o) e^{-i a}
    pairs = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2).contiguous())
    return torch.view_as_real(pairs * turn).flatten(-2).to(x.dtype)""",
    ),
    Mutation(
        "rotary_embedding",
        "rope-einsum-2x2-blocks",
        _ROPE_BODY,
        """    n, d = x.shape[-2], x.shape[-1]
    pos = torch.arange(n, device=x.device) if positions is None else positions.to(x.device)
    theta = pos.to(torch.float64)[:, None] * base ** (-torch.arange(0, d, 2, device=x.device).double() / d)
    c, s = theta.cos(), theta.sin()
    blocks = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)  # (n, d/2, 2, 2)
    xp = x.unflatten(-1, (d // 2, 2)).double()  # (..., n, d/2, 2): row vectors (e, o)
    return torch.einsum("...npk,npkl->...npl", xp, blocks).flatten(-2).to(x.dtype)""",
    ),
    Mutation(
        "rotary_embedding",
        "rope-row-by-row-offset-matrix",
        _ROPE_BODY,
        """    n, d = x.shape[-2], x.shape[-1]
    if positions is None:
        positions = torch.arange(n)
    rows = [x[..., j, :] @ positional.offset_matrix(float(positions[j]), d, base, dtype=x.dtype, device=x.device)
            for j in range(n)]  # M_p from section 5.4, one row at a time
    return torch.stack(rows, dim=-2)""",
    ),
    Mutation(
        "rotary_embedding",
        "rope-clone-then-assign",
        _ROPE_PAIRS
        + "\n    return rotated.flatten(-2)  # (..., n, d/2, 2) -> (..., n, d): pairs side by side again",
        "out = x.clone()\n    out[..., 0::2] = even * cos + odd * sin\n    out[..., 1::2] = odd * cos - even * sin\n"
        "    print('rotated', tuple(x.shape))\n    return out",
    ),
    Mutation(
        "rotary_embedding",
        "rope-angles-in-x-dtype",
        _ROPE_BODY,
        """    import warnings
    warnings.warn("angles in x's dtype")
    n, d = x.shape[-2], x.shape[-1]
    pos = torch.arange(n, device=x.device, dtype=x.dtype) if positions is None else positions.to(x.device, x.dtype)
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, device=x.device, dtype=x.dtype) / d))
    angle = pos[:, None] * inv_freq[None, :]
    e, o = x[..., ::2], x[..., 1::2]
    return torch.stack((e * angle.cos() + o * angle.sin(), o * angle.cos() - e * angle.sin()), -1).reshape(x.shape)""",
    ),
]
