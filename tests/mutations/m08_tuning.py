"""Chapter 08: classic mistakes in reading curves, schedules, label smoothing and MixUp."""
from tests.mutations import Mutation

CHAPTER = "08_tuning"
_OVER = 'if last["val_loss"] > (1 + rise) * lowest_val_loss or last["train_acc"] - last["val_acc"] > gap:'
_WARM = "return base_lr * step / warmup_steps"
_PROGRESS = "progress = (step - warmup_steps) / (total_steps - warmup_steps)"
_NOAM = "return d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)"
_SMOOTH = """    smooth = torch.full_like(log_probs, epsilon / k)
    smooth.scatter_(-1, targets.unsqueeze(-1), 1 - epsilon + epsilon / k)"""
_XMIX = "x_mixed = lam * x + (1 - lam) * x[perm]"
_YMIX = "y_mixed = lam * y_onehot + (1 - lam) * y_onehot[perm]"

MUTATIONS = [
    # diagnose_curves
    Mutation("diagnose_curves", "diagnose-rise-from-first-epoch", 'lowest_val_loss = min(h["val_loss"] for h in history)',
             'lowest_val_loss = history[0]["val_loss"]'),
    Mutation("diagnose_curves", "diagnose-absolute-gap", _OVER,
             'if last["val_loss"] > (1 + rise) * lowest_val_loss or abs(last["train_acc"] - last["val_acc"]) > gap:'),
    Mutation("diagnose_curves", "diagnose-underfit-on-val-acc", 'if last["train_acc"] < target:',
             'if last["val_acc"] < target:'),
    Mutation("diagnose_curves", "diagnose-underfit-checked-first",
             '    last = history[-1]\n', '    last = history[-1]\n    if last["train_acc"] < target:\n'
             '        return "under-fitting"\n'),
    Mutation("diagnose_curves", "diagnose-fixed-thresholds", _OVER,
             'if last["val_loss"] > 1.1 * lowest_val_loss or last["train_acc"] - last["val_acc"] > 0.1:'),
    # warmup_cosine_lr
    Mutation("warmup_cosine_lr", "warmup-off-by-one", _WARM, "return base_lr * (step + 1) / warmup_steps"),
    Mutation("warmup_cosine_lr", "cosine-misses-its-end", _PROGRESS, "progress = (step - warmup_steps) / total_steps"),
    Mutation("warmup_cosine_lr", "cosine-from-step-zero", _PROGRESS, "progress = step / total_steps"),
    # noam_lr
    Mutation("noam_lr", "noam-warmup-exponent", _NOAM, "return d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -0.5)"),
    Mutation("noam_lr", "noam-decay-exponent", _NOAM, "return d_model ** -0.5 * min(step ** -1.5, step * warmup_steps ** -1.5)"),
    Mutation("noam_lr", "noam-d-model-positive", _NOAM, "return d_model ** 0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)"),
    # label_smoothing_cross_entropy
    Mutation("label_smoothing_cross_entropy", "smoothing-over-k-minus-1", _SMOOTH,
             """    smooth = torch.full_like(log_probs, epsilon / (k - 1))
    smooth.scatter_(-1, targets.unsqueeze(-1), 1 - epsilon)"""),
    Mutation("label_smoothing_cross_entropy", "smoothing-mean-over-classes", "return -(smooth * log_probs).sum(dim=-1).mean()",
             "return -(smooth * log_probs).mean()"),
    Mutation("label_smoothing_cross_entropy", "smoothing-log-of-softmax", "log_probs = F.log_softmax(logits, dim=-1)",
             "log_probs = torch.log(torch.softmax(logits, dim=-1))"),
    Mutation("label_smoothing_cross_entropy", "smoothing-calls-cross-entropy", "k = logits.shape[-1]",
             "return F.cross_entropy(logits, targets, label_smoothing=epsilon)"),
    Mutation("label_smoothing_cross_entropy", "smoothing-sum-over-batch", "return -(smooth * log_probs).sum(dim=-1).mean()",
             "return -(smooth * log_probs).sum()"),
    # mixup_batch
    Mutation("mixup_batch", "mixup-labels-not-mixed", _YMIX, "y_mixed = y_onehot"),
    Mutation("mixup_batch", "mixup-lam-on-partner", _XMIX, "x_mixed = (1 - lam) * x + lam * x[perm]"),
    Mutation("mixup_batch", "mixup-labels-lam-swapped", _YMIX, "y_mixed = (1 - lam) * y_onehot + lam * y_onehot[perm]"),
    Mutation("mixup_batch", "mixup-in-place", _XMIX, "x_mixed = x.mul_(lam).add_((1 - lam) * x[perm])"),
]
