"""Chapter 08: classic mistakes in reading curves, schedules, label smoothing and MixUp, and correct
answers written the ways learners write them."""

from tests.mutations import Mutation

CHAPTER = "08_tuning"
_OVER = 'if last["val_loss"] > (1 + rise) * lowest_val_loss or last["train_acc"] - last["val_acc"] > gap:'
_LOWEST = 'lowest_val_loss = min(h["val_loss"] for h in history)'
_WARM = "return base_lr * step / warmup_steps"
_PROGRESS = "progress = (step - warmup_steps) / (total_steps - warmup_steps)"
_NOAM = (
    "return d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)"
)
_SMOOTH = """    smooth = torch.full_like(log_probs, epsilon / k)
    smooth.scatter_(-1, targets.unsqueeze(-1), 1 - epsilon + epsilon / k)"""
_XMIX = "x_mixed = lam * x + (1 - lam) * x[perm]"
_YMIX = "y_mixed = lam * y_onehot + (1 - lam) * y_onehot[perm]"

_HALF = "half = t_quantile((1 + level) / 2, n - 1) * sd / math.sqrt(n)"
_SD = "sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))"
_D = "d = [float(c) - float(r) for c, r in zip(changed, reference)]"
_LENGTH = """    if len(changed) != len(reference):
        raise ValueError(f"{len(changed)} changed values but {len(reference)} reference values: give one per seed")
"""
_IMPORT = "from course_utils.references.stats import t_quantile\n"

MUTATIONS = [
    # paired_interval
    Mutation(
        "paired_interval",
        "paired-normal-quantile",
        _HALF,
        "half = 1.96 * sd / math.sqrt(n)",
    ),
    Mutation(
        "paired_interval",
        "paired-population-sd",
        _SD,
        "sd = math.sqrt(sum((x - mean) ** 2 for x in d) / n)",
    ),
    Mutation(
        "paired_interval",
        "paired-level-ignored",
        _HALF,
        "half = t_quantile(0.975, n - 1) * sd / math.sqrt(n)",
    ),
    Mutation(
        "paired_interval",
        "paired-one-sided-quantile",
        _HALF,
        "half = t_quantile(level, n - 1) * sd / math.sqrt(n)",
    ),
    Mutation(
        "paired_interval",
        "paired-n-degrees-of-freedom",
        _HALF,
        "half = t_quantile((1 + level) / 2, n) * sd / math.sqrt(n)",
    ),
    Mutation(
        "paired_interval",
        "paired-no-sqrt-n",
        _HALF,
        "half = t_quantile((1 + level) / 2, n - 1) * sd",
    ),
    Mutation(
        "paired_interval",
        "paired-reversed-difference",
        _D,
        "d = [float(r) - float(c) for c, r in zip(changed, reference)]",
    ),
    Mutation("paired_interval", "paired-no-length-check", _LENGTH, ""),
    Mutation(
        "paired_interval",
        "paired-two-separate-means",
        None,
        _IMPORT
        + """
def paired_interval(changed, reference, level=0.95):
    if len(changed) != len(reference) or len(changed) < 2:
        raise ValueError("one value per seed on each side, at least two seeds")
    n = len(changed)
    mc, mr = sum(changed) / n, sum(reference) / n
    vc = sum((x - mc) ** 2 for x in changed) / (n - 1)
    vr = sum((x - mr) ** 2 for x in reference) / (n - 1)
    mean = mc - mr
    half = t_quantile((1 + level) / 2, n - 1) * math.sqrt(vc / n + vr / n)
    low, high = mean - half, mean + half
    return mean, low, high, "higher" if low > 0 else "lower" if high < 0 else "inside the noise"
""",
    ),
    # diagnose_curves
    Mutation(
        "diagnose_curves",
        "diagnose-rise-from-first-epoch",
        _LOWEST,
        'lowest_val_loss = history[0]["val_loss"]',
    ),
    Mutation(
        "diagnose_curves",
        "diagnose-rise-from-previous-epoch",
        _LOWEST,
        'lowest_val_loss = history[-2]["val_loss"] if len(history) > 1 else last["val_loss"]',
    ),
    Mutation(
        "diagnose_curves",
        "diagnose-absolute-gap",
        _OVER,
        'if last["val_loss"] > (1 + rise) * lowest_val_loss or abs(last["train_acc"] - last["val_acc"]) > gap:',
    ),
    Mutation(
        "diagnose_curves",
        "diagnose-gap-reversed",
        _OVER,
        'if last["val_loss"] > (1 + rise) * lowest_val_loss or last["val_acc"] - last["train_acc"] > gap:',
    ),
    Mutation(
        "diagnose_curves",
        "diagnose-gap-on-losses",
        _OVER,
        'if last["val_loss"] > (1 + rise) * lowest_val_loss or last["val_loss"] - last["train_loss"] > gap:',
    ),
    Mutation(
        "diagnose_curves",
        "diagnose-underfit-on-val-acc",
        'if last["train_acc"] < target:',
        'if last["val_acc"] < target:',
    ),
    Mutation(
        "diagnose_curves",
        "diagnose-underfit-checked-first",
        "    last = history[-1]\n",
        '    last = history[-1]\n    if last["train_acc"] < target:\n'
        '        return "under-fitting"\n',
    ),
    Mutation(
        "diagnose_curves",
        "diagnose-verdicts-swapped",
        None,
        """\
def diagnose_curves(history, target=0.7, gap=0.10, rise=0.10):
    last = history[-1]
    lowest_val_loss = min(h["val_loss"] for h in history)
    if last["val_loss"] > (1 + rise) * lowest_val_loss or last["train_acc"] - last["val_acc"] > gap:
        return "under-fitting"
    if last["train_acc"] < target:
        return "over-fitting"
    return "good fit"
""",
    ),
    Mutation(
        "diagnose_curves",
        "diagnose-fixed-thresholds",
        _OVER,
        'if last["val_loss"] > 1.1 * lowest_val_loss or last["train_acc"] - last["val_acc"] > 0.1:',
    ),
    Mutation(
        "diagnose_curves",
        "diagnose-absolute-rise",
        _OVER,
        'if last["val_loss"] - lowest_val_loss > rise or last["train_acc"] - last["val_acc"] > gap:',
    ),
    Mutation(
        "diagnose_curves",
        "diagnose-gap-against-best-val-acc",
        _OVER,
        'if last["val_loss"] > (1 + rise) * lowest_val_loss or '
        'last["train_acc"] - max(h["val_acc"] for h in history) > gap:',
    ),
    Mutation(
        "diagnose_curves",
        "diagnose-underfit-on-best-train-acc",
        'if last["train_acc"] < target:',
        'if max(h["train_acc"] for h in history) < target:',
    ),
    Mutation(
        "diagnose_curves",
        "diagnose-pops-its-history",
        "    last = history[-1]\n",
        "    last = history.pop()\n",
    ),
    # warmup_cosine_lr
    Mutation(
        "warmup_cosine_lr",
        "warmup-off-by-one",
        _WARM,
        "return base_lr * (step + 1) / warmup_steps",
    ),
    Mutation(
        "warmup_cosine_lr",
        "warmup-divides-by-zero",
        "if step < warmup_steps:",
        "if step <= warmup_steps:",
    ),
    Mutation(
        "warmup_cosine_lr",
        "cosine-misses-its-end",
        _PROGRESS,
        "progress = (step - warmup_steps) / total_steps",
    ),
    Mutation(
        "warmup_cosine_lr",
        "cosine-from-step-zero",
        _PROGRESS,
        "progress = step / total_steps",
    ),
    Mutation(
        "warmup_cosine_lr",
        "cosine-full-period",
        "math.cos(math.pi * progress)",
        "math.cos(2 * math.pi * progress)",
    ),
    # noam_lr
    Mutation(
        "noam_lr",
        "noam-warmup-exponent",
        _NOAM,
        "return d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -0.5)",
    ),
    Mutation(
        "noam_lr",
        "noam-decay-exponent",
        _NOAM,
        "return d_model ** -0.5 * min(step ** -1.5, step * warmup_steps ** -1.5)",
    ),
    Mutation(
        "noam_lr",
        "noam-d-model-positive",
        _NOAM,
        "return d_model ** 0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)",
    ),
    Mutation(
        "noam_lr",
        "noam-without-d-model",
        _NOAM,
        "return min(step ** -0.5, step * warmup_steps ** -1.5)",
    ),
    Mutation(
        "noam_lr",
        "noam-max",
        _NOAM,
        "return d_model ** -0.5 * max(step ** -0.5, step * warmup_steps ** -1.5)",
    ),
    # label_smoothing_cross_entropy
    Mutation(
        "label_smoothing_cross_entropy",
        "smoothing-over-k-minus-1",
        _SMOOTH,
        """    smooth = torch.full_like(log_probs, epsilon / (k - 1))
    smooth.scatter_(-1, targets.unsqueeze(-1), 1 - epsilon)""",
    ),
    Mutation(
        "label_smoothing_cross_entropy",
        "smoothing-mean-over-classes",
        "return -(smooth * log_probs).sum(dim=-1).mean()",
        "return -(smooth * log_probs).mean()",
    ),
    Mutation(
        "label_smoothing_cross_entropy",
        "smoothing-log-of-softmax",
        "log_probs = F.log_softmax(logits, dim=-1)",
        "log_probs = torch.log(torch.softmax(logits, dim=-1))",
    ),
    Mutation(
        "label_smoothing_cross_entropy",
        "smoothing-calls-cross-entropy",
        "k = logits.shape[-1]",
        "return F.cross_entropy(logits, targets, label_smoothing=epsilon)",
    ),
    Mutation(
        "label_smoothing_cross_entropy",
        "smoothing-sum-over-batch",
        "return -(smooth * log_probs).sum(dim=-1).mean()",
        "return -(smooth * log_probs).sum()",
    ),
    # F.one_hot(...) * (1 - epsilon) has PyTorch's default dtype: a float32 target inside a float64 loss
    Mutation(
        "label_smoothing_cross_entropy",
        "smoothing-float32-target",
        None,
        """\
def label_smoothing_cross_entropy(logits, targets, epsilon):
    k = logits.shape[-1]
    target = F.one_hot(targets, k) * (1 - epsilon) + epsilon / k
    return -(target * F.log_softmax(logits, dim=-1)).sum(dim=-1).mean()
""",
    ),
    # the target built on the CPU: fails on the meta device (and on a GPU)
    Mutation(
        "label_smoothing_cross_entropy",
        "smoothing-target-on-cpu",
        _SMOOTH,
        """\
    smooth = torch.zeros(logits.shape[0], k, dtype=logits.dtype)
    smooth[torch.arange(len(targets)), targets] = 1.0
    smooth = smooth * (1 - epsilon) + epsilon / k""",
    ),
    Mutation(
        "label_smoothing_cross_entropy",
        "smoothing-returns-float",
        "return -(smooth * log_probs).sum(dim=-1).mean()",
        "return -(smooth * log_probs).sum(dim=-1).mean().item()",
    ),
    # mixup_batch
    Mutation(
        "mixup_batch", "mixup-labels-not-mixed", _YMIX, "y_mixed = y_onehot"
    ),
    Mutation(
        "mixup_batch",
        "mixup-lam-on-partner",
        _XMIX,
        "x_mixed = (1 - lam) * x + lam * x[perm]",
    ),
    Mutation(
        "mixup_batch",
        "mixup-labels-lam-swapped",
        _YMIX,
        "y_mixed = (1 - lam) * y_onehot + lam * y_onehot[perm]",
    ),
    Mutation(
        "mixup_batch",
        "mixup-in-place",
        _XMIX,
        "x_mixed = x.mul_(lam).add_((1 - lam) * x[perm])",
    ),
    Mutation(
        "mixup_batch",
        "mixup-in-place-after-partner",
        _XMIX,
        "x_mixed = x.mul_(lam).add_((1 - lam) * x[perm].clone())",
    ),
    Mutation(
        "mixup_batch",
        "mixup-buffer-on-cpu",
        _XMIX,
        """x_mixed = torch.zeros(x.shape, dtype=x.dtype)
    x_mixed += lam * x + (1 - lam) * x[perm]""",
    ),
    Mutation(
        "mixup_batch",
        "mixup-images-flipped-batch",
        _XMIX,
        "x_mixed = lam * x + (1 - lam) * x.flip(0)",
    ),
    Mutation(
        "mixup_batch",
        "mixup-images-own-permutation",
        _XMIX,
        "x_mixed = lam * x + (1 - lam) * x[torch.randperm(x.shape[0], device=x.device)]",
    ),
    Mutation(
        "noam_lr",
        "noam-step-plus-one",
        _NOAM,
        "step = step + 1  # as if steps counted from 0\n    " + _NOAM,
    ),
    Mutation(
        "label_smoothing_cross_entropy",
        "smoothing-kl-div",
        None,
        """def label_smoothing_cross_entropy(logits, targets, epsilon):
    k = logits.shape[-1]
    target = torch.full_like(logits, epsilon / k).scatter(-1, targets.unsqueeze(-1), 1 - epsilon + epsilon / k)
    # KL(target || p): the cross-entropy minus the targets' entropy, a different number
    return F.kl_div(F.log_softmax(logits, dim=-1), target, reduction="batchmean")
""",
    ),
    Mutation(
        "warmup_cosine_lr",
        "warmup-cosine-to-base-over-ten",
        None,
        """def warmup_cosine_lr(step, total_steps, warmup_steps, base_lr):
    if step < warmup_steps:
        return base_lr * step / warmup_steps
    progress = (step - warmup_steps) / (total_steps - warmup_steps)
    min_lr = 0.1 * base_lr  # a floor, as some libraries add
    return min_lr + (base_lr - min_lr) * 0.5 * (1 + math.cos(math.pi * progress))
""",
    ),
]

VARIANTS = [
    # paired_interval, written other ways
    Mutation(
        "paired_interval",
        "paired-statistics-module",
        None,
        _IMPORT
        + """import statistics


def paired_interval(changed, reference, level=0.95):
    if len(changed) != len(reference):
        raise ValueError("changed and reference must hold one value per seed each")
    d = [c - r for c, r in zip(changed, reference)]
    sd = statistics.stdev(d)  # raises statistics.StatisticsError (a ValueError) for a single pair
    mean = statistics.fmean(d)
    h = t_quantile(0.5 + level / 2, len(d) - 1) * sd / len(d) ** 0.5
    print(f"mean difference {mean:+.4f} +- {h:.4f}")
    if mean - h > 0:
        return mean, mean - h, mean + h, "higher"
    if mean + h < 0:
        return mean, mean - h, mean + h, "lower"
    return mean, mean - h, mean + h, "inside the noise"
""",
    ),
    Mutation(
        "paired_interval",
        "paired-torch-float32",
        None,
        _IMPORT
        + """import warnings


def paired_interval(changed, reference, level=0.95):
    c, r = torch.tensor(changed), torch.tensor(reference)  # float32
    if c.shape != r.shape or c.numel() < 2:
        raise ValueError(f"need two lists of the same length >= 2, got {c.numel()} and {r.numel()} values")
    warnings.warn("float32 is enough for accuracies")
    d = c - r
    se = d.std() / d.numel() ** 0.5  # torch.std divides by n - 1
    t = t_quantile((1 + level) / 2, d.numel() - 1)
    low, high = d.mean() - t * se, d.mean() + t * se
    verdict = "higher" if low > 0 else ("lower" if high < 0 else "inside the noise")
    return d.mean(), low, high, verdict
""",
    ),
    Mutation(
        "paired_interval",
        "paired-numpy-t-statistic",
        None,
        _IMPORT
        + """import numpy as np


def paired_interval(changed, reference, level=0.95):
    changed, reference = np.asarray(changed, dtype=np.float64), np.asarray(reference, dtype=np.float64)
    if changed.shape != reference.shape:
        raise ValueError("pair the seeds: the two arrays differ in length")
    if changed.size < 2:
        raise ValueError("at least two seeds")
    d = changed - reference
    se = d.std(ddof=1) / np.sqrt(d.size)
    t_crit = t_quantile(1 - (1 - level) / 2, d.size - 1)
    t_stat = d.mean() / se
    verdict = "higher" if t_stat > t_crit else "lower" if t_stat < -t_crit else "inside the noise"
    return float(d.mean()), float(d.mean() - t_crit * se), float(d.mean() + t_crit * se), verdict
""",
    ),
    Mutation(
        "paired_interval",
        "paired-dict-and-list",
        None,
        _IMPORT
        + """
def paired_interval(changed, reference, level=0.95):
    pairs = list(zip(changed, reference, strict=True)) if len(changed) == len(reference) else None
    if pairs is None:
        raise ValueError("lengths differ")
    if len(pairs) == 1:
        raise ValueError("one seed only")
    result = {}
    diffs = []
    for a, b in pairs:
        diffs.append(a - b)
    n = len(diffs)
    result["mean"] = sum(diffs) / n
    var = 0.0
    for x in diffs:
        var += (x - result["mean"]) ** 2
    var /= n - 1
    width = t_quantile((1 + level) / 2, n - 1) * (var / n) ** 0.5
    result["low"], result["high"] = result["mean"] - width, result["mean"] + width
    result["verdict"] = ("higher" if result["low"] > 0 else "lower" if result["high"] < 0 else "inside the noise")
    return [result["mean"], result["low"], result["high"], result["verdict"]]
""",
    ),
    # diagnose_curves: the same three rules, written other ways
    Mutation(
        "diagnose_curves",
        "diagnose-ratio-and-elif",
        None,
        """\
def diagnose_curves(history, target=0.7, gap=0.10, rise=0.10):
    final = history[-1]
    best_val_loss = min(epoch["val_loss"] for epoch in history)
    loss_rose = final["val_loss"] / best_val_loss - 1 > rise
    acc_gap = final["train_acc"] - final["val_acc"]
    if loss_rose or acc_gap > gap:
        return "over-fitting"
    elif final["train_acc"] < target:
        return "under-fitting"
    else:
        return "good fit"
""",
    ),
    Mutation(
        "diagnose_curves",
        "diagnose-loop-prints-and-warns",
        None,
        """\
import warnings


def diagnose_curves(history, target=0.7, gap=0.10, rise=0.10):
    lowest = float("inf")
    for epoch in history:
        lowest = min(lowest, epoch["val_loss"])
    last = history[-1]
    print("judging the last epoch:", last)
    warnings.warn("diagnose_curves only looks at the last epoch")
    verdict = "good fit"
    if last["train_acc"] < target:
        verdict = "under-fitting"
    if last["val_loss"] - lowest > rise * lowest or last["train_acc"] > last["val_acc"] + gap:
        verdict = "over-fitting"
    return verdict
""",
    ),
    Mutation(
        "diagnose_curves",
        "diagnose-numpy",
        None,
        """\
import numpy as np


def diagnose_curves(history, target=0.7, gap=0.10, rise=0.10):
    val_loss = np.array([h["val_loss"] for h in history])
    train_acc, val_acc = history[-1]["train_acc"], history[-1]["val_acc"]
    over = bool(val_loss[-1] > (1 + rise) * val_loss.min()) or (train_acc - val_acc > gap)
    return "over-fitting" if over else ("under-fitting" if train_acc < target else "good fit")
""",
    ),
    # warmup_cosine_lr
    Mutation(
        "warmup_cosine_lr",
        "warmup-cosine-torch-float32",
        None,
        """\
import torch


def warmup_cosine_lr(step, total_steps, warmup_steps, base_lr):
    if step < warmup_steps:
        return base_lr * step / warmup_steps
    progress = torch.tensor((step - warmup_steps) / (total_steps - warmup_steps))
    return base_lr * 0.5 * (1 + torch.cos(torch.pi * progress))
""",
    ),
    Mutation(
        "warmup_cosine_lr",
        "warmup-guarded-and-prints",
        None,
        """\
def warmup_cosine_lr(step, total_steps, warmup_steps, base_lr):
    if warmup_steps > 0 and step < warmup_steps:
        lr = base_lr * (step / warmup_steps)
    else:
        t = (step - warmup_steps) / max(1, total_steps - warmup_steps)
        lr = base_lr * (1.0 + math.cos(t * math.pi)) / 2
    print(f"step {step}: lr {lr:.3e}")
    return lr
""",
    ),
    Mutation(
        "warmup_cosine_lr",
        "warmup-numpy-float32-item",
        None,
        """\
import numpy as np


def warmup_cosine_lr(step, total_steps, warmup_steps, base_lr):
    warm = np.float32(step) / np.float32(warmup_steps) if step < warmup_steps else None
    if warm is not None:
        return float(base_lr * warm)
    progress = np.float32(step - warmup_steps) / np.float32(total_steps - warmup_steps)
    return float(np.float32(base_lr) * np.float32(0.5) * (1 + np.cos(np.float32(np.pi) * progress)))
""",
    ),
    # noam_lr
    Mutation(
        "noam_lr",
        "noam-torch-minimum-float32",
        None,
        """\
import torch


def noam_lr(step, d_model, warmup_steps):
    s = torch.tensor(float(step))
    return d_model ** -0.5 * torch.minimum(s.rsqrt(), s * warmup_steps ** -1.5)
""",
    ),
    Mutation(
        "noam_lr",
        "noam-sqrt-branches",
        None,
        """\
def noam_lr(step, d_model, warmup_steps):
    if step < warmup_steps:
        rate = step / (warmup_steps * math.sqrt(warmup_steps))
    else:
        rate = 1 / math.sqrt(step)
    return rate / math.sqrt(d_model)
""",
    ),
    # label_smoothing_cross_entropy
    Mutation(
        "label_smoothing_cross_entropy",
        "smoothing-nll-plus-uniform",
        None,
        """\
def label_smoothing_cross_entropy(logits, targets, epsilon):
    log_probs = F.log_softmax(logits, dim=-1)
    nll = -log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    uniform = -log_probs.mean(dim=-1)
    return ((1 - epsilon) * nll + epsilon * uniform).mean()
""",
    ),
    Mutation(
        "label_smoothing_cross_entropy",
        "smoothing-one-hot-sum",
        None,
        """\
def label_smoothing_cross_entropy(logits, targets, epsilon):
    k = logits.shape[-1]
    one_hot = F.one_hot(targets, num_classes=k).to(logits.dtype)
    target = (1 - epsilon) * one_hot + epsilon / k
    return torch.sum(-target * torch.log_softmax(logits, dim=1), dim=1).mean()
""",
    ),
    Mutation(
        "label_smoothing_cross_entropy",
        "smoothing-logsumexp-float64-inside",
        None,
        """\
def label_smoothing_cross_entropy(logits, targets, epsilon):
    z = logits.double()
    log_probs = z - torch.logsumexp(z, dim=-1, keepdim=True)
    k = z.shape[-1]
    target = torch.zeros_like(z).scatter(-1, targets[:, None], 1.0) * (1 - epsilon) + epsilon / k
    return (-(target * log_probs).sum(-1)).mean().to(logits.dtype)
""",
    ),
    Mutation(
        "label_smoothing_cross_entropy",
        "smoothing-log-of-softmax-clamped",
        None,
        """\
def label_smoothing_cross_entropy(logits, targets, epsilon):
    k = logits.shape[-1]
    probs = torch.softmax(logits - logits.max(dim=-1, keepdim=True).values, dim=-1)
    log_probs = torch.where(probs > 0, probs.log(), F.log_softmax(logits, dim=-1))
    target = torch.full_like(logits, epsilon / k)
    target[torch.arange(len(targets), device=logits.device), targets] += 1 - epsilon
    return -(target * log_probs).sum(-1).mean()
""",
    ),
    # mixup_batch
    Mutation(
        "mixup_batch",
        "mixup-lerp",
        None,
        """\
def mixup_batch(x, y_onehot, lam, perm):
    return torch.lerp(x[perm], x, lam), torch.lerp(y_onehot[perm], y_onehot, lam)
""",
    ),
    Mutation(
        "mixup_batch",
        "mixup-index-select",
        None,
        """\
def mixup_batch(x, y_onehot, lam, perm):
    partner_x = x.index_select(0, perm)
    partner_y = torch.index_select(y_onehot, 0, perm)
    x_mixed = lam * x + (1.0 - lam) * partner_x
    y_mixed = lam * y_onehot + (1.0 - lam) * partner_y
    return x_mixed, y_mixed
""",
    ),
    Mutation(
        "mixup_batch",
        "mixup-clone-then-in-place",
        None,
        """\
def mixup_batch(x, y_onehot, lam, perm):
    x_mixed = x.clone().mul_(lam).add_(x[perm], alpha=1 - lam)
    y_mixed = y_onehot.clone()
    y_mixed.mul_(lam)
    y_mixed += (1 - lam) * y_onehot[perm]
    print("mixed a batch of", x.shape[0], "with lam", lam)
    return x_mixed, y_mixed
""",
    ),
    Mutation(
        "noam_lr",
        "noam-divides-by-warmup",
        _NOAM,
        "return min(step ** -0.5, step / warmup_steps ** 1.5) / math.sqrt(d_model)",
    ),
    Mutation(
        "label_smoothing_cross_entropy",
        "smoothing-mixture-of-two-losses",
        None,
        """def label_smoothing_cross_entropy(logits, targets, epsilon):
    log_p = torch.log_softmax(logits.double(), dim=1)
    nll = -log_p.gather(1, targets.view(-1, 1)).squeeze(1)   # the hard label's loss
    uniform = -log_p.mean(dim=1)                              # the uniform target's loss
    return ((1 - epsilon) * nll + epsilon * uniform).mean().to(logits.dtype)
""",
    ),
    Mutation(
        "mixup_batch",
        "mixup-torch-lerp-tuple-list",
        None,
        """def mixup_batch(x, y_onehot, lam, perm):
    out = []
    for t in (x, y_onehot):
        out.append(torch.lerp(t[perm], t, lam))  # t[perm] + lam * (t - t[perm])
    return tuple(out)
""",
    ),
]
