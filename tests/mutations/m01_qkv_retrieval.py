"""Chapter 01: classic mistakes with softmax, the single-query lookup and the batched form."""
from tests.mutations import Mutation

CHAPTER = "01_qkv_retrieval"
MUTATIONS = [
    Mutation("softmax", "softmax-no-max",
             "shifted = x - x.amax(dim=dim, keepdim=True)", "shifted = x"),
    Mutation("softmax", "softmax-last-dim-always",
             "shifted = x - x.amax(dim=dim, keepdim=True)", "dim = -1\n    shifted = x - x.amax(dim=dim, keepdim=True)"),
    Mutation("prediction", "prediction-wrong", 'prediction = "C"', 'prediction = "D"'),
    Mutation("attention_pool", "pool-unnormalised",
             "weights = softmax(scores, dim=-1)", "weights = scores.exp()"),
    Mutation("attend", "attend-scores-transposed",
             "scores = queries @ keys.transpose(-2, -1)", "scores = keys @ queries.transpose(-2, -1)"),
    Mutation("attend", "attend-keys-dot-T",
             "scores = queries @ keys.transpose(-2, -1)", "scores = queries @ keys.T"),
]
