"""Chapter 05: classic mistakes in the sinusoidal encoding (including the lecture slides' own) and
in the learned position embedding."""
from tests.mutations import Mutation

CHAPTER = "05_positional_encoding"
_SIN_LINE = "pe[pos, i] = math.sin(pos / (10000 ** (i / d_model)))"
_COS_LINE = "pe[pos, i + 1] = math.cos(pos / (10000 ** (i / d_model)))  # same frequency as its sine"
_FILL = "pe[:, 0::2] = torch.sin(angle)\n    pe[:, 1::2] = torch.cos(angle)"

MUTATIONS = [
    # fixed_slides_encoding: the spot-the-bug exercise, fixed only halfway or wrongly
    Mutation("fixed_slides_encoding", "slides-cosine-still-2i-plus-2", _COS_LINE,
             "pe[pos, i + 1] = math.cos(pos / (10000 ** ((2 * (i + 1)) / d_model)))"),
    Mutation("fixed_slides_encoding", "slides-cosine-i-plus-1-over-d", _COS_LINE,
             "pe[pos, i + 1] = math.cos(pos / (10000 ** ((i + 1) / d_model)))"),
    Mutation("fixed_slides_encoding", "slides-sine-still-2i", _SIN_LINE,
             "pe[pos, i] = math.sin(pos / (10000 ** ((2 * i) / d_model)))"),
    # sinusoidal_encoding
    Mutation("sinusoidal_encoding", "sin-cos-swapped", _FILL,
             "pe[:, 0::2] = torch.cos(angle)\n    pe[:, 1::2] = torch.sin(angle)"),
    Mutation("sinusoidal_encoding", "slides-exponent-bug", _FILL,
             "pe[:, 0::2] = torch.sin(position / base ** (2 * two_i / d_model))\n"
             "    pe[:, 1::2] = torch.cos(position / base ** (2 * (two_i + 1) / d_model))"),
    Mutation("sinusoidal_encoding", "exponent-i-over-d",
             "two_i = torch.arange(0, d_model, 2, dtype=torch.float64)",
             "two_i = torch.arange(0, d_model // 2, dtype=torch.float64)"),
    Mutation("sinusoidal_encoding", "concatenated-not-interleaved", _FILL,
             "pe = torch.cat([torch.sin(angle), torch.cos(angle)], dim=-1)"),
    Mutation("sinusoidal_encoding", "base-ignored",
             "angle = position / base ** (two_i / d_model)", "angle = position / 10000.0 ** (two_i / d_model)"),
    # LearnedPositionalEmbedding
    Mutation("LearnedPositionalEmbedding", "learned-not-trainable-buffer",
             "self.weight = nn.Parameter(0.02 * torch.randn(num_positions, d_model))",
             "self.register_buffer(\"weight\", 0.02 * torch.randn(num_positions, d_model))"),
    Mutation("LearnedPositionalEmbedding", "learned-requires-grad-false",
             "self.weight = nn.Parameter(0.02 * torch.randn(num_positions, d_model))",
             "self.weight = nn.Parameter(0.02 * torch.randn(num_positions, d_model), requires_grad=False)"),
    Mutation("LearnedPositionalEmbedding", "learned-last-n-rows",
             "return x + self.weight[:n]", "return x + self.weight[-n:]"),
    Mutation("LearnedPositionalEmbedding", "learned-sequence-axis-1",
             "n = x.shape[-2]", "n = x.shape[1]"),
]
