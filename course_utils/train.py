"""The course's trainer: one loop for chapter 07, chapter 08 and the command line.

    python -m course_utils.train --recipe cpu --out runs/cpu            # train, resume if interrupted
    torchrun --nproc_per_node 2 -m course_utils.train --recipe cpu ...  # DistributedDataParallel

Features: AdamW (no weight decay on norms, biases, CLS and position embeddings), linear warmup
+ cosine decay per step, label smoothing, MixUp/CutMix, gradient clipping, mixed precision
(``amp="auto"`` measures bf16 against float32 on the CPU and keeps the faster; bf16/fp16 on
CUDA), optional ``torch.compile``, tqdm progress bars, ``history.json``/``history.csv`` and a
plot of the curves, a checkpoint written atomically after every epoch and automatic resume
(restart the same command and it continues; a killed run loses at most one epoch).

Model selection uses the validation split carved from the training set; the test set is
evaluated once, at the end, with the weights of the best validation epoch.
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from . import data as cdata
from .regularization import cutmix_batch, mixup_batch, soft_cross_entropy
from .results import machine
from .runtime import pick_device, seed_everything
from .schedules import noam_lr, warmup_cosine_lr
from .vit import ViT, count_parameters


@dataclasses.dataclass
class Recipe:
    """Everything that defines a training run (saved in the checkpoint; resume must match)."""

    name: str
    model: str = "vit"  # "vit" or "resnet" (ResNet-20, course_utils.resnet)
    model_kwargs: dict = dataclasses.field(default_factory=dict)
    epochs: int = 10
    batch_size: int = 128
    lr: float = 1e-3
    weight_decay: float = 0.05
    warmup_epochs: float = 1.0
    schedule: str = "cosine"  # "cosine" (warmup + cosine), "noam" (warmup + 1/sqrt(step)) or "constant"
    label_smoothing: float = 0.1
    grad_clip: float | None = 1.0
    augment: bool = True
    policy: str | None = None  # "trivial", "randaugment", "autoaugment" or None
    mixup_alpha: float = 0.0
    cutmix_alpha: float = 0.0
    amp: str = "auto"  # "auto", "bf16", "fp16" or "none"
    compile: bool = False
    channels_last: bool = False
    val_size: int = 5000
    seed: int = 0
    eval_batch_size: int = 500
    # fast mode (CI, grading): train on a subset for a few epochs
    fast_train: int = 2000
    fast_eval: int = 500
    fast_epochs: int = 2

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


CIFAR_VIT = dict(img_size=32, num_classes=10)
RECIPES: dict[str, Recipe] = {
    # Meant for 2 CPU cores and about half an hour (results/ch07_vit_cpu.json records the machine
    # and the time it took): a convolutional tokenizer (the inductive-bias
    # lever of Compact Convolutional Transformers: 3x3 convs and 2x2 pools down to a 4x4 grid of
    # 16 tokens) feeding a small pre-norm ViT.  A finer grid (patch 4: 64 tokens) costs more per
    # image (attention is quadratic in the number of tokens), so fewer epochs fit in the half hour.
    "cpu": Recipe(
        name="cpu",
        model_kwargs=dict(CIFAR_VIT, patch_size=8, dim=192, depth=4, num_heads=3, mlp_dim=384,
                          stem_channels=(32, 64, 128), dropout=0.0),
        epochs=22, batch_size=128, lr=2e-3, weight_decay=0.05, warmup_epochs=1, label_smoothing=0.1,
        grad_clip=1.0, augment=True, policy=None, amp="auto", channels_last=True,
    ),
    # One GPU: a ViT-S-like model (patch 4 on 32x32 gives 64 tokens) with the DeiT-style
    # recipe (AdamW, warmup + cosine, label smoothing, TrivialAugment, MixUp/CutMix) for many
    # epochs; see chapter 08 for the literature it stands on.
    "gpu": Recipe(
        name="gpu",
        model_kwargs=dict(CIFAR_VIT, patch_size=4, dim=384, depth=7, num_heads=6, mlp_dim=1152,
                          stem_channels=(96, 192), dropout=0.0),
        epochs=300, batch_size=256, lr=1e-3, weight_decay=0.05, warmup_epochs=10, label_smoothing=0.1,
        grad_clip=1.0, augment=True, policy="trivial", mixup_alpha=0.8, cutmix_alpha=1.0, amp="auto",
        compile=True, channels_last=True, eval_batch_size=1000,
    ),
    # Seconds on a CPU: for tests and fast mode.
    "smoke": Recipe(
        name="smoke",
        model_kwargs=dict(CIFAR_VIT, patch_size=8, dim=32, depth=1, num_heads=2, mlp_dim=64),
        epochs=3, batch_size=64, lr=3e-3, warmup_epochs=0.5, amp="none",
        fast_train=512, fast_eval=256, fast_epochs=3,
    ),
}


# ------------------------------------------------------------------ building blocks
def build_model(recipe: Recipe) -> nn.Module:
    if recipe.model == "vit":
        return ViT(**recipe.model_kwargs)
    if recipe.model == "resnet":
        from .resnet import cifar_resnet

        return cifar_resnet(depth=20, num_classes=recipe.model_kwargs.get("num_classes", 10))
    raise ValueError(f"unknown model {recipe.model!r}: choose 'vit' or 'resnet'")


def lr_factor(schedule: str, total_steps: int, warmup_steps: int) -> Callable[[int], float]:
    """Multiplier of the recipe's ``lr`` at each step (for ``LambdaLR``)."""
    if schedule == "cosine":
        return lambda step: warmup_cosine_lr(step, total_steps, warmup_steps, 1.0)
    if schedule == "noam":
        # Shaped like the Transformer paper's schedule, rescaled so that its peak (at the end of
        # the warmup) is the recipe's lr: d_model only sets the scale, which lr already does.
        w = max(warmup_steps, 1)
        return lambda step: noam_lr(step + 1, 1, w) / noam_lr(w, 1, w)
    if schedule == "constant":
        return lambda step: min(1.0, (step + 1) / warmup_steps) if warmup_steps else 1.0
    raise ValueError(f"unknown schedule {schedule!r}: choose 'cosine', 'noam' or 'constant'")


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Decay matrices and conv kernels only; norms, biases and embeddings stay undecayed."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (no_decay if p.dim() < 2 or name.endswith(("cls_token", "pos_embed")) else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def choose_amp(recipe: Recipe, model: nn.Module, device: torch.device, log: Callable) -> torch.dtype | None:
    """The autocast dtype: measured on the CPU for "auto" (bf16 only when it is faster)."""
    if recipe.amp == "none":
        return None
    if recipe.amp == "bf16":
        return torch.bfloat16
    if recipe.amp == "fp16":
        return torch.float16
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if device.type != "cpu":
        return None
    timings = {}
    with torch.random.fork_rng(devices=[]):  # the probe must not move the (restored) RNG stream
        x = torch.randn(min(recipe.batch_size, 64), 3, 32, 32, device=device)
        y = torch.randint(0, 10, (len(x),), device=device)
        if recipe.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        for dtype in (None, torch.bfloat16):
            timings[dtype] = _time_steps(model, x, y, dtype)
    chosen = torch.bfloat16 if timings[torch.bfloat16] < 0.9 * timings[None] else None
    log(f"amp=auto on CPU: float32 {timings[None]:.2f}s vs bf16 {timings[torch.bfloat16]:.2f}s "
        f"for 3 steps -> {'bf16' if chosen else 'float32'}")
    return chosen


def _time_steps(model: nn.Module, x: Tensor, y: Tensor, dtype: torch.dtype | None) -> float:
    """Seconds for 3 forward/backward steps (after one warm-up); the model is left unchanged."""
    state = {k: v.clone() for k, v in model.state_dict().items()}
    for i in range(4):
        if i == 1:
            start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype is not None):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
    elapsed = time.perf_counter() - start
    model.zero_grad(set_to_none=True)
    model.load_state_dict(state)
    return elapsed


@torch.no_grad()
def evaluate(model: nn.Module, loader, amp_dtype=None, device=None, *, confusion: bool = False,
             num_classes: int = 10) -> dict:
    """Mean loss and accuracy over a loader; with ``confusion`` also the confusion matrix
    (``confusion[true][predicted]`` counts, a list of lists)."""
    model.eval()
    total, correct, loss_sum = 0, 0, 0.0
    matrix = torch.zeros(num_classes, num_classes, dtype=torch.long)
    for x, y in loader:
        with torch.autocast(x.device.type, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
            logits = model(x)
        loss_sum += F.cross_entropy(logits.float(), y, reduction="sum").item()
        pred = logits.argmax(-1)
        correct += (pred == y).sum().item()
        total += len(y)
        if confusion:
            matrix += torch.bincount((y * num_classes + pred).cpu(), minlength=num_classes ** 2).view_as(matrix)
    out = {"loss": loss_sum / total, "acc": correct / total}
    if confusion:
        out["confusion"] = matrix.tolist()
    return out


def subset(data: cdata.Split, n_train: int, n_eval: int, seed: int = 0) -> cdata.Split:
    """A seeded random subset of every split (the stored order is sorted by class)."""
    g = torch.Generator().manual_seed(seed)

    def pick(images, labels, n):
        idx = torch.randperm(len(images), generator=g)[:n]
        return images[idx], labels[idx]

    tr, va, te = (pick(data.train_images, data.train_labels, n_train), pick(data.val_images, data.val_labels, n_eval),
                  pick(data.test_images, data.test_labels, n_eval))
    return cdata.Split(*tr, *va, *te, source=data.source)


def _atomic_save(obj: Any, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)  # a kill during save leaves the previous checkpoint intact


def _write_history(out: Path, history: list[dict]) -> None:
    (out / "history.json.tmp").write_text(json.dumps(history, indent=1))
    os.replace(out / "history.json.tmp", out / "history.json")
    if history:
        with open(out / "history.csv", "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(history[0]))
            writer.writeheader()
            writer.writerows(history)


def plot_history(history: list[dict], path: Path | None = None, title: str = ""):
    """Loss and accuracy curves (train vs validation) per epoch; saved to ``path`` if given.

    Built on a bare ``Figure`` (no pyplot state, no backend switch), so saving a plot from a
    notebook leaves its inline figures alone; Jupyter displays the returned figure.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 3.2))
    a, b = fig.subplots(1, 2)
    epochs = [h["epoch"] for h in history]
    a.plot(epochs, [h["train_loss"] for h in history], label="train")
    a.plot(epochs, [h["val_loss"] for h in history], label="validation")
    a.set_xlabel("epoch"), a.set_ylabel("loss"), a.legend()
    b.plot(epochs, [h["train_acc"] for h in history], label="train")
    b.plot(epochs, [h["val_acc"] for h in history], label="validation")
    b.set_xlabel("epoch"), b.set_ylabel("accuracy"), b.legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


# ------------------------------------------------------------------ distributed
def _distributed() -> tuple[int, int, int]:
    """(rank, world size, local rank), initialising the process group under torchrun."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return 0, 1, 0
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return dist.get_rank(), world, int(os.environ.get("LOCAL_RANK", "0"))


def _barrier(world: int) -> None:
    if world > 1:
        import torch.distributed as dist

        dist.barrier()


# ------------------------------------------------------------------ the loop
def train(recipe: Recipe | str, out_dir: str | Path, *, fast: bool = False, data: cdata.Split | None = None,
          device: str | torch.device | None = None, result_name: str | None = None,
          log: Callable[[str], None] = print, max_epochs_this_call: int | None = None,
          evaluate_test: bool = True, on_epoch: Callable[[dict], None] | None = None) -> dict:
    """Train ``recipe`` into ``out_dir`` (resuming from its checkpoint) and return the summary.

    ``fast`` trains on a subset (``fast_train`` images, ``fast_epochs`` epochs), falling back
    to synthetic data when CIFAR-10 is absent.  ``result_name`` also writes
    ``results/<result_name>.json`` with provenance.  ``max_epochs_this_call`` stops early
    (the checkpoint lets the next call continue), e.g. to show resuming.  ``evaluate_test=False``
    skips the test set (sweeps compare on validation only).  ``on_epoch(record)`` is called after
    each epoch's checkpoint; it may raise to stop the run (e.g. a search pruning a trial).
    """
    recipe = RECIPES[recipe] if isinstance(recipe, str) else recipe
    rank, world, local_rank = _distributed()
    from .results import code_version

    code_at_start = code_version()  # the code that runs, even if the checkout changes meanwhile
    main_process = rank == 0
    if not main_process:
        log = lambda *_: None  # noqa: E731  (one process reports)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if device is None:
        device = torch.device("cuda", local_rank) if torch.cuda.is_available() and world > 1 else pick_device()
    device = torch.device(device)
    seed_everything(recipe.seed)

    epochs = recipe.fast_epochs if fast else recipe.epochs
    if data is None:
        raw = cdata.load_cifar10(allow_synthetic=fast)
        data = cdata.split_validation(raw, val_size=min(recipe.val_size, len(raw.train_images) // 5), seed=recipe.seed)
    if fast:
        data = subset(data, recipe.fast_train, recipe.fast_eval, seed=recipe.seed)

    model = build_model(recipe).to(device)
    if recipe.channels_last:
        model = model.to(memory_format=torch.channels_last)
    loader = cdata.BatchLoader(data.train_images, data.train_labels, recipe.batch_size, shuffle=True,
                               augment=recipe.augment, policy=recipe.policy, drop_last=True, device=device,
                               seed=recipe.seed, rank=rank, world_size=world, channels_last=recipe.channels_last)
    val_loader = cdata.BatchLoader(data.val_images, data.val_labels, recipe.eval_batch_size, device=device,
                                   channels_last=recipe.channels_last)
    steps_per_epoch = len(loader)
    total_steps = epochs * steps_per_epoch
    warmup_steps = min(int(recipe.warmup_epochs * steps_per_epoch), total_steps - 1)
    optimizer = torch.optim.AdamW(parameter_groups(model, recipe.weight_decay), lr=recipe.lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor(recipe.schedule, total_steps, warmup_steps))

    state = {"epoch": 0, "history": [], "best_val": -1.0, "best_state": None, "elapsed": 0.0}
    mix_gen = torch.Generator().manual_seed(recipe.seed + 1)  # MixUp/CutMix draws, saved with the checkpoint
    ckpt_path = out / "checkpoint.pt"
    if ckpt_path.exists():
        ckpt = torch.load(ckpt_path, map_location=device, weights_only=False)
        if ckpt["recipe"] != recipe.to_dict() or ckpt["fast"] != fast:
            raise RuntimeError(f"{ckpt_path} belongs to a different recipe or mode; use another --out folder "
                               "or delete the checkpoint to start over")
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        scheduler.load_state_dict(ckpt["scheduler"])
        torch.set_rng_state(ckpt["rng"])
        mix_gen.set_state(ckpt["mix_rng"])
        state = {k: ckpt[k] for k in state}
        log(f"resuming {recipe.name} from epoch {state['epoch']} ({ckpt_path})")

    amp_dtype = choose_amp(recipe, model, device, log)
    scaler = torch.amp.GradScaler("cuda", enabled=amp_dtype == torch.float16 and device.type == "cuda")
    train_model: nn.Module = model
    if world > 1:
        from torch.nn.parallel import DistributedDataParallel

        train_model = DistributedDataParallel(model, device_ids=[local_rank] if device.type == "cuda" else None)
    if recipe.compile:
        train_model = torch.compile(train_model)

    if state["epoch"] == 0:
        log(f"{recipe.name}: {count_parameters(model) / 1e6:.2f}M parameters, {len(data.train_images)} training "
            f"images ({data.source}), {epochs} epochs x {steps_per_epoch} steps, device {device}, world {world}")
    stop_at = epochs if max_epochs_this_call is None else min(epochs, state["epoch"] + max_epochs_this_call)
    # Plain tqdm (not tqdm.auto): in a terminal a live bar, elsewhere (notebooks, CI logs) none,
    # so stored notebook outputs hold the epoch lines only, not widget state.
    from tqdm import tqdm

    for epoch in range(state["epoch"], stop_at):
        start = time.perf_counter()
        train_model.train()
        loader.set_epoch(epoch)
        seen, correct, loss_sum = 0, 0, 0.0
        bar = tqdm(loader, desc=f"epoch {epoch + 1}/{epochs}", leave=False, disable=None if main_process else True)
        for x, y in bar:
            target = F.one_hot(y, 10).float()
            if recipe.mixup_alpha or recipe.cutmix_alpha:
                perm = torch.randperm(len(x), generator=mix_gen).to(device)
                use_cutmix = recipe.cutmix_alpha and (not recipe.mixup_alpha or torch.rand(1, generator=mix_gen) < 0.5)
                alpha = recipe.cutmix_alpha if use_cutmix else recipe.mixup_alpha
                lam = float(torch.distributions.Beta(alpha, alpha).sample())
                x, target = (cutmix_batch(x, target, lam, perm, generator=mix_gen) if use_cutmix
                             else mixup_batch(x, target, lam, perm))
            target = target * (1 - recipe.label_smoothing) + recipe.label_smoothing / target.shape[-1]
            with torch.autocast(device.type, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
                logits = train_model(x)
            loss = soft_cross_entropy(logits.float(), target)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            if recipe.grad_clip:
                scaler.unscale_(optimizer)
                nn.utils.clip_grad_norm_(model.parameters(), recipe.grad_clip)
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            seen += len(y)
            loss_sum += loss.item() * len(y)
            correct += (logits.argmax(-1) == y).sum().item()
            bar.set_postfix(loss=f"{loss_sum / seen:.3f}", acc=f"{correct / seen:.3f}")
        train_time = time.perf_counter() - start
        if main_process:
            val = evaluate(model, val_loader, amp_dtype, device)
            state["elapsed"] += time.perf_counter() - start
            record = {"epoch": epoch + 1, "train_loss": loss_sum / seen, "train_acc": correct / seen,
                      "val_loss": val["loss"], "val_acc": val["acc"], "lr": scheduler.get_last_lr()[0],
                      "epoch_time_s": round(time.perf_counter() - start, 2),
                      "train_images_per_s": round(seen * world / train_time, 1),
                      "elapsed_s": round(state["elapsed"], 2)}
            state["history"].append(record)
            if val["acc"] > state["best_val"]:
                state["best_val"] = val["acc"]
                state["best_state"] = {k: v.detach().clone() for k, v in model.state_dict().items()}
            state["epoch"] = epoch + 1
            _atomic_save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                          "scheduler": scheduler.state_dict(), "rng": torch.get_rng_state(), "mix_rng": mix_gen.get_state(),
                          "recipe": recipe.to_dict(), "fast": fast, **state}, ckpt_path)
            _write_history(out, state["history"])
            log(f"epoch {epoch + 1:3d}/{epochs}  train loss {record['train_loss']:.3f} acc {record['train_acc']:.3f}  "
                f"val loss {val['loss']:.3f} acc {val['acc']:.3f}  {record['epoch_time_s']:.0f}s "
                f"({record['train_images_per_s']:.0f} img/s)")
            if on_epoch is not None:
                on_epoch(record)
        else:
            state["epoch"] = epoch + 1
        _barrier(world)

    summary: dict = {"recipe": recipe.to_dict(), "fast": fast, "epochs_done": state["epoch"], "epochs": epochs,
                     "history": state["history"], "best_val_acc": state["best_val"], "dataset": data.source,
                     "train_images": len(data.train_images), "val_images": len(data.val_images),
                     "parameters": count_parameters(model), "train_time_s": round(state["elapsed"], 1),
                     "amp": str(amp_dtype).replace("torch.", "") if amp_dtype else "float32", "world_size": world,
                     # the machine that finished the run: minutes mean little without it
                     "hardware": machine()}
    if state["epoch"] < epochs or not main_process:
        return summary  # stopped early on purpose (resume later) or not the reporting process
    if not evaluate_test:
        best_epoch = max(state["history"], key=lambda h: h["val_acc"])["epoch"]
        summary.update({"best_epoch": best_epoch, "time_to_best_s": next(
            h["elapsed_s"] for h in state["history"] if h["epoch"] == best_epoch)})
        (out / "summary.json").write_text(json.dumps(summary, indent=1))
        return summary
    best_epoch = max(state["history"], key=lambda h: h["val_acc"])["epoch"]
    model.load_state_dict(state["best_state"])
    test_loader = cdata.BatchLoader(data.test_images, data.test_labels, recipe.eval_batch_size, device=device,
                                    channels_last=recipe.channels_last)
    test = evaluate(model, test_loader, amp_dtype, device, confusion=True)  # once, with the best-validation weights
    summary.update({"best_epoch": best_epoch, "test_acc": test["acc"], "test_loss": test["loss"],
                    "test_confusion": test["confusion"], "classes": list(cdata.CLASSES),
                    "time_to_best_s": next(h["elapsed_s"] for h in state["history"] if h["epoch"] == best_epoch)})
    torch.save(model.state_dict(), out / "best_model.pt")
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    plot_history(state["history"], out / "curves.png", title=f"{recipe.name}: {data.source}")
    log(f"done: best validation accuracy {state['best_val']:.4f} at epoch {best_epoch}; "
        f"test accuracy {test['acc']:.4f} ({data.source}); {state['elapsed'] / 60:.1f} min")
    if result_name:
        from .results import RESULTS_DIR, write_result

        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        # The trained weights, in half precision, so the book can show what the model attends to.
        torch.save({k: (v.half() if v.is_floating_point() else v) for k, v in model.state_dict().items()},
                   RESULTS_DIR / f"{result_name}_model.pth")
        path = write_result(result_name, summary, dataset=data.source, split="validation (5,000 images carved "
                            "from the training set)" if not fast else "validation subset (fast mode)",
                            wall_time_s=state["elapsed"], git_commit=code_at_start)
        log(f"result written to {path}")
    return summary


def apply_overrides(recipe: Recipe, items: list[str]) -> Recipe:
    """``recipe`` with ``KEY=VALUE`` overrides applied, each checked against the field's type.

    A value is read as JSON (``lr=1e-3``, ``epochs=30``, ``augment=false``,
    ``model_kwargs={"dim": 256}``); a bare word that is not JSON is a string
    (``policy=trivial``); ``None`` (or ``null``) clears an optional field.  An int is accepted
    where a float is expected.  Raises ValueError naming the field and what it expects.
    """
    fields = {f.name: f for f in dataclasses.fields(recipe)}
    changes = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep:
            raise ValueError(f"--set {item!r}: expected KEY=VALUE, e.g. lr=1e-3")
        if key not in fields:
            raise ValueError(f"--set {key}: no such recipe field; the fields are {', '.join(sorted(fields))}")
        if text in ("None", "null"):
            value = None
        else:
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                value = text  # a bare word: policy=trivial, schedule=cosine
        declared = str(fields[key].type)
        optional = "None" in declared or getattr(recipe, key) is None
        if value is None:
            if not optional:
                raise ValueError(f"--set {key}=None: {key} is not optional (type {declared})")
        else:
            base = declared.split("|")[0].strip()
            expected = {"bool": bool, "int": int, "float": float, "str": str, "dict": dict}.get(base)
            if expected is float and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            if expected is not None and (not isinstance(value, expected) or
                                         (expected is int and isinstance(value, bool))):
                raise ValueError(f"--set {key}={text}: {key} expects {declared}, got {type(value).__name__}")
        changes[key] = value
    return dataclasses.replace(recipe, **changes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", default="cpu", choices=sorted(RECIPES))
    parser.add_argument("--out", default=None, help="run folder (checkpoint, history); default runs/<recipe>")
    parser.add_argument("--fast", action="store_true", help="subset and few epochs (CI, grading)")
    parser.add_argument("--result", default=None, help="also write results/<RESULT>.json")
    parser.add_argument("--epochs", type=int, default=None, help="override the recipe's epochs")
    parser.add_argument("--model", default=None, choices=["vit", "resnet"], help="override the recipe's model")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="override recipe fields, e.g. --set lr=1e-3 policy=trivial")
    parser.add_argument("--device", default=None)
    parser.add_argument("--stop-after", type=int, default=None, help="train at most this many epochs now")
    args = parser.parse_args(argv)
    recipe = dataclasses.replace(RECIPES[args.recipe])
    if args.epochs:
        recipe.epochs = args.epochs
    if args.model:
        recipe.model = args.model
    try:
        recipe = apply_overrides(recipe, args.set)
    except ValueError as exc:
        parser.error(str(exc))
    out = args.out or f"runs/{recipe.name}"
    train(recipe, out, fast=args.fast, result_name=args.result, device=args.device,
          max_epochs_this_call=args.stop_after)
    return 0


if __name__ == "__main__":
    sys.exit(main())
