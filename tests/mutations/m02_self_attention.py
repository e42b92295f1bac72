"""Chapter 02: classic mistakes with unparameterised self-attention and a learned head."""
from tests.mutations import Mutation

CHAPTER = "02_self_attention"
MUTATIONS = [
    Mutation("self_attention", "sa-softmax-over-queries",
             "weights = torch.softmax(scores, dim=-1)   # row i", "weights = torch.softmax(scores, dim=-2)   # row i"),
    Mutation("self_attention", "sa-no-batch-support",
             "scores = x @ x.transpose(-2, -1)", "scores = x @ x.transpose(1, 2)"),
    Mutation("self_attention", "sa-scaled-too-early",
             "scores = x @ x.transpose(-2, -1)", "scores = x @ x.transpose(-2, -1) / math.sqrt(x.shape[-1])"),
    Mutation("SelfAttentionHead", "head-softmax-dim-1",
             "weights = torch.softmax(scores, dim=-1)", "weights = torch.softmax(scores, dim=1)"),
    Mutation("SelfAttentionHead", "head-W_q-for-keys",
             "q, k, v = self.W_q(x), self.W_k(x), self.W_v(x)", "q, k, v = self.W_q(x), self.W_q(x), self.W_v(x)"),
    Mutation("SelfAttentionHead", "head-with-bias",
             "self.W_k = nn.Linear(d_model, d_k, bias=False)", "self.W_k = nn.Linear(d_model, d_k)"),
    Mutation("SelfAttentionHead", "head-no-batch-support",
             "scores = q @ k.transpose(-2, -1)", "scores = q @ k.transpose(1, 2)"),
    Mutation("SelfAttentionHead", "head-keys-dot-T",
             "scores = q @ k.transpose(-2, -1)", "scores = q @ k.T"),
    Mutation("SelfAttentionHead", "head-scaled",
             "scores = q @ k.transpose(-2, -1)", "scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])"),
    Mutation("predict_word_order", "predict-neighbours-matter", 'prediction = "A"', 'prediction = "B"'),
]
