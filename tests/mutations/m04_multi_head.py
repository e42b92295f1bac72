"""Chapter 04: classic mistakes in splitting/merging heads and in the multi-head layer."""
from tests.mutations import Mutation

CHAPTER = "04_multi_head"
_SPLIT = "return x.reshape(B, N, num_heads, D).transpose(1, 2)"
_MERGE = "return x.transpose(1, 2).reshape(B, N, H * D)"
_PROJECT = """        q = split_heads(self.w_q(query), self.num_heads)  # (B, H, m, D)
        k = split_heads(self.w_k(key), self.num_heads)    # (B, H, n, D)
        v = split_heads(self.w_v(value), self.num_heads)  # (B, H, n, D)"""

MUTATIONS = [
    # split_heads
    Mutation("split_heads", "split-missing-transpose", _SPLIT, "return x.reshape(B, num_heads, N, D)"),
    Mutation("split_heads", "split-interleaved-features", _SPLIT,
             "return x.reshape(B, N, D, num_heads).permute(0, 3, 1, 2)"),
    # merge_heads
    Mutation("merge_heads", "merge-missing-transpose", _MERGE, "return x.reshape(B, N, H * D)"),
    Mutation("merge_heads", "merge-heads-wrong-order", _MERGE, "return x.permute(0, 2, 3, 1).reshape(B, N, H * D)"),
    # MultiHeadAttention
    Mutation("MultiHeadAttention", "mha-inline-split-without-transpose", _PROJECT,
             """        B, m, n = query.shape[0], query.shape[1], key.shape[1]
        q = self.w_q(query).reshape(B, self.num_heads, m, self.head_dim)
        k = self.w_k(key).reshape(B, self.num_heads, n, self.head_dim)
        v = self.w_v(value).reshape(B, self.num_heads, n, self.head_dim)"""),
    Mutation("MultiHeadAttention", "mha-heads-concatenated-wrong-order",
             "return self.w_o(merge_heads(out)), weights",
             "return self.w_o(out.permute(0, 2, 3, 1).flatten(2)), weights"),
    Mutation("MultiHeadAttention", "mha-scale-by-d-model",
             "math.sqrt(self.head_dim)", "math.sqrt(self.num_heads * self.head_dim)"),
    Mutation("MultiHeadAttention", "mha-forgets-w_o",
             "return self.w_o(merge_heads(out)), weights", "return merge_heads(out), weights"),
    Mutation("MultiHeadAttention", "mha-mask-not-broadcast-over-heads",
             "mask = mask.unsqueeze(1)", "mask = mask"),
    Mutation("MultiHeadAttention", "mha-dropout-in-eval-mode",
             "out = self.dropout(weights) @ v",
             "out = nn.functional.dropout(weights, self.dropout.p, training=True) @ v"),
]
