"""The course's trainer: the one optimisation loop behind every model the course trains.

``Trainer`` owns the small steps: ``step(loss)`` (backward, clipping, optimiser, schedule),
``train_epoch`` (one pass over a classifier's batches), ``evaluate``, ``save``/``resume`` (a
checkpoint written atomically).  Chapter 04's toy task, chapter 06's sequence task and the
sweeps' range test train through ``step``; ``train`` below runs a CIFAR-10 ``Recipe`` with
all of them:

    python -m course_utils.cli.train --recipe cpu --out runs/cpu            # train, resume if interrupted
    torchrun --nproc_per_node 2 -m course_utils.cli.train --recipe cpu ...  # DistributedDataParallel

Features: AdamW or SGD with Nesterov momentum (no weight decay on norms, biases and what the
model's ``no_weight_decay()`` names), linear warmup + cosine decay per step, label smoothing, MixUp/CutMix, gradient
clipping, evaluation on each image and its mirror (``eval_flip``) and shifted views at test time
(``test_shifts``), mixed precision (``amp="auto"`` measures bf16 against float32 on the CPU and keeps
the faster; bf16/fp16 on CUDA), optional ``torch.compile``, tqdm progress bars,
``history.json``/``history.csv`` and a plot of the curves, a checkpoint after every epoch and
automatic resume (restart the same command and it continues; a killed run loses at most one
epoch).

Model selection uses the validation split carved from the training set; the test set is
evaluated once, at the end, with the weights of the best validation epoch.
"""
from __future__ import annotations

import csv
import dataclasses
import os
import time
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .. import files
from ..references.regularization import cutmix_batch, mixup_batch
from ..references.schedules import noam_lr, warmup_cosine_lr
from ..references.vit import count_parameters
from ..results import machine
from ..runtime import pick_device, seed_everything
from . import data as cdata
from .recipes import RECIPES, Recipe, as_stored, build_model

__all__ = ["Trainer", "train", "evaluate", "lr_factor", "parameter_groups", "choose_amp", "subset", "plot_history"]


# ------------------------------------------------------------------ the steps
class Trainer:
    """One model, its optimiser and its schedule; each method is one small step of training.

    ``lr_factor(step)`` multiplies the optimiser's base learning rate (``LambdaLR``);
    ``grad_clip`` clips the global gradient norm; ``amp_dtype`` (bf16/fp16) turns on autocast,
    with a gradient scaler for fp16 on CUDA.  ``net`` is what runs the forward pass when it is
    not ``model`` itself (a ``DistributedDataParallel`` or compiled wrapper).
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, *,
                 lr_factor: Callable[[int], float] | None = None, grad_clip: float | None = None,
                 amp_dtype: torch.dtype | None = None, net: nn.Module | None = None, eval_flip: bool = False):
        self.model, self.optimizer, self.grad_clip, self.amp_dtype = model, optimizer, grad_clip, amp_dtype
        self.eval_flip = eval_flip
        self.net = model if net is None else net  # not `net or model`: a compiled module has no truth value
        self.device = next(model.parameters()).device
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor) if lr_factor else None
        self.scaler = torch.amp.GradScaler("cuda", enabled=amp_dtype == torch.float16 and self.device.type == "cuda")

    def autocast(self):
        """The forward pass's precision: ``amp_dtype`` where set, float32 otherwise."""
        return torch.autocast(self.device.type, dtype=self.amp_dtype or torch.float32,
                              enabled=self.amp_dtype is not None)

    def set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def step(self, loss: Tensor) -> float:
        """Backward, clip, update, advance the schedule; returns the loss as a float."""
        self.update(loss)
        return loss.item()

    def update(self, loss: Tensor) -> None:
        """``step`` without reading the loss back: on a GPU, reading a value makes the host wait for
        the device, and the next batch's work cannot be queued meanwhile."""
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        if self.grad_clip:
            self.scaler.unscale_(self.optimizer)
            nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        if self.scheduler is not None:
            self.scheduler.step()

    def train_epoch(self, batches, *, mix: Callable[[Tensor, Tensor], tuple[Tensor, Tensor]] | None = None,
                    desc: str = "", show: bool = True) -> dict:
        """One pass of a classifier over ``batches`` of ``(x (B, ...), y (B,))``.

        ``mix(x, y) -> (x, target (B, classes))`` makes the soft targets (MixUp/CutMix, label
        smoothing); without it the targets are one-hot.  Returns the mean loss, the accuracy
        against ``y``, the number of examples and the seconds it took.
        """
        # Plain tqdm (not tqdm.auto): in a terminal a live bar, elsewhere (notebooks, CI logs)
        # none, so stored notebook outputs hold the epoch lines only, not widget state.
        from tqdm import tqdm

        start = time.perf_counter()
        self.net.train()
        seen = 0
        # the sums stay on the device and are read once, at the end (and for a live bar every 25 steps)
        loss_sum = torch.zeros((), dtype=torch.float32 if self.device.type == "mps" else torch.float64,
                               device=self.device)  # Apple's GPUs have no float64
        correct = torch.zeros((), dtype=torch.int64, device=self.device)
        bar = tqdm(batches, desc=desc, leave=False, disable=None if show else True)
        for i, (x, y) in enumerate(bar):
            if mix is not None:
                x, target = mix(x, y)
            with self.autocast():
                logits = self.net(x)
            if mix is None:
                target = F.one_hot(y, logits.shape[-1]).float()
            # PyTorch's cross-entropy against a distribution (chapter 08's soft_cross_entropy, computed
            # by the library: the class edition, which replays the course's functions, trains with it too)
            loss = F.cross_entropy(logits.float(), target)
            self.update(loss)
            loss_sum += loss.detach().to(loss_sum.dtype) * len(y)
            correct += (logits.argmax(-1) == y).sum()
            seen += len(y)
            if not bar.disable and i % 25 == 0:
                bar.set_postfix(loss=f"{loss_sum.item() / seen:.3f}", acc=f"{correct.item() / seen:.3f}")
        return {"loss": loss_sum.item() / seen, "acc": correct.item() / seen, "seen": seen,
                "seconds": time.perf_counter() - start}

    def evaluate(self, batches, *, confusion: bool = False, flip: bool | None = None,
                 shifts: tuple = ()) -> dict:
        """``evaluate`` with the trainer's precision; ``flip`` defaults to the trainer's ``eval_flip``."""
        return evaluate(self.model, batches, self.amp_dtype, confusion=confusion,
                        flip=self.eval_flip if flip is None else flip, shifts=shifts)

    def state_dict(self) -> dict:
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict() if self.scheduler else None,
                "scaler": self.scaler.state_dict(), "rng": torch.get_rng_state()}

    def save(self, path: str | Path, **extra: Any) -> None:
        """A checkpoint of everything a resume needs, plus ``extra``; atomic, so a kill during the
        save leaves the previous checkpoint intact."""
        files.torch_save({**self.state_dict(), **extra}, path)

    def resume(self, path: str | Path) -> dict:
        """Load a checkpoint written by ``save``; returns it (with the ``extra`` entries)."""
        ckpt = torch.load(path, map_location=self.device, weights_only=False)
        self.model.load_state_dict(ckpt["model"])
        self.optimizer.load_state_dict(ckpt["optimizer"])
        if self.scheduler is not None and ckpt.get("scheduler") is not None:
            self.scheduler.load_state_dict(ckpt["scheduler"])
        if ckpt.get("scaler"):
            self.scaler.load_state_dict(ckpt["scaler"])
        torch.set_rng_state(ckpt["rng"])
        return ckpt


def lr_factor(schedule: str, total_steps: int, warmup_steps: int) -> Callable[[int], float]:
    """Multiplier of the base ``lr`` at each step (for ``LambdaLR``).

    Every warm-up is linear from 0 at step 0 (chapter 08's ``warmup_cosine_lr``); Noam counts
    its steps from 1, as the Transformer paper does.
    """
    if schedule == "cosine":
        return lambda step: warmup_cosine_lr(step, total_steps, warmup_steps, 1.0)
    if schedule == "noam":
        # Shaped like the Transformer paper's schedule, rescaled so that its peak (at the end of
        # the warmup) is the recipe's lr: d_model only sets the scale, which lr already does.
        w = max(warmup_steps, 1)
        return lambda step: noam_lr(step + 1, 1, w) / noam_lr(w, 1, w)
    if schedule == "constant":  # the same warm-up as warmup_cosine_lr: 0 at step 0, 1 at warmup_steps
        return lambda step: min(1.0, step / warmup_steps) if warmup_steps else 1.0
    raise ValueError(f"unknown schedule {schedule!r}: choose 'cosine', 'noam' or 'constant'")


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Decay matrices and conv kernels only; norms, biases and the parameters the model names in
    ``no_weight_decay()`` (timm's convention: a ViT's CLS token and position embeddings) stay undecayed."""
    skip = set(model.no_weight_decay()) if hasattr(model, "no_weight_decay") else set()
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (no_decay if p.dim() < 2 or name in skip else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def make_optimizer(recipe: Recipe, model: nn.Module) -> torch.optim.Optimizer:
    """The recipe's optimiser over ``parameter_groups``: AdamW (the ViT's) or SGD with Nesterov
    momentum (a ResNet's standard choice, ``recipe.momentum``)."""
    groups = parameter_groups(model, recipe.weight_decay)
    # The fused kernels update every tensor in one pass (the same arithmetic), where the default on a
    # CPU loops over the tensors one by one: fewer, larger operations, which counts where steps are
    # short (the cpu recipe's small model on 2 cores).
    fused = all(p.is_floating_point() and p.device.type in ("cpu", "cuda") for p in model.parameters())
    if recipe.optimizer == "adamw":
        return torch.optim.AdamW(groups, lr=recipe.lr, fused=fused or None)
    if recipe.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=recipe.lr, momentum=recipe.momentum, nesterov=recipe.momentum > 0,
                               fused=fused or None)
    raise ValueError(f"unknown optimizer {recipe.optimizer!r}: choose 'adamw' or 'sgd'")


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
    timings: dict = {None: [], torch.bfloat16: []}
    with torch.random.fork_rng(devices=[]):  # the probe must not move the (restored) RNG stream
        x = torch.randn(min(recipe.batch_size, 64), 3, 32, 32, device=device)
        if recipe.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        # Three rounds in alternating order, the fastest of each kept: a moment when the machine is
        # busy slows one round of one dtype, and must not decide the precision of a long run.
        for r in range(3):
            for dtype in ((None, torch.bfloat16) if r % 2 == 0 else (torch.bfloat16, None)):
                timings[dtype].append(_time_steps(model, x, dtype))
    fp32, bf16 = min(timings[None]), min(timings[torch.bfloat16])
    chosen = torch.bfloat16 if bf16 < 0.9 * fp32 else None
    log(f"amp=auto on CPU: float32 {fp32:.2f}s vs bf16 {bf16:.2f}s for 3 steps (fastest of 3 rounds) "
        f"-> {'bf16' if chosen else 'float32'}")
    if chosen is None and recipe.name == "cpu":  # its epochs fill half an hour in bf16, not in float32
        log("this CPU trains faster in float32: the cpu recipe's epochs are set for native bf16; "
            "--recipe cpu_float32 fits the same half hour in float32")
    return chosen


def _time_steps(model: nn.Module, x: Tensor, dtype: torch.dtype | None) -> float:
    """Seconds for 3 forward/backward steps (after one warm-up); the model is left unchanged."""
    state = {k: v.clone() for k, v in model.state_dict().items()}
    for i in range(4):
        if i == 1:
            start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype is not None):
            logits = model(x)
        y = torch.arange(len(x)) % logits.shape[-1]
        F.cross_entropy(logits.float(), y).backward()
    elapsed = time.perf_counter() - start
    model.zero_grad(set_to_none=True)
    model.load_state_dict(state)
    return elapsed


@torch.no_grad()
def evaluate(model: nn.Module, loader, amp_dtype=None, *, confusion: bool = False, flip: bool = False,
             shifts: tuple = ()) -> dict:
    """Mean loss and accuracy of a classifier over batches ``(x (B, C, H, W), y (B,))``; with
    ``confusion`` also the confusion matrix (``confusion[true][predicted]`` counts, a list of
    lists).  ``flip`` averages the logits of each image and its left-right mirror (the mirror is
    a training augmentation, so the model has learned both views); ``shifts``, pairs ``(dy, dx)``,
    adds the image moved by each (``data.translate``; the random crops of training move images
    too), with its mirror when ``flip``.  Images are in ``data.normalize``'s units."""
    model.eval()
    total, correct, loss_sum = 0, 0, 0.0
    matrix = None
    offsets = view_offsets(shifts)
    for x, y in loader:
        with torch.autocast(x.device.type, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
            views = [cdata.translate(x, dy, dx) for dy, dx in offsets]
            views += [v.flip(-1) for v in views] if flip else []
            logits = sum(model(v) for v in views) / len(views)
        num_classes = logits.shape[-1]
        if matrix is None:
            matrix = torch.zeros(num_classes, num_classes, dtype=torch.long)
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


def view_offsets(shifts) -> list[tuple[int, int]]:
    """The (dy, dx) of every unmirrored view ``evaluate`` averages: the image itself, then each shift."""
    return [(0, 0)] + [tuple(s) for s in shifts if tuple(s) != (0, 0)]


def subset(data: cdata.Split, n_train: int, n_eval: int | None, seed: int = 0) -> cdata.Split:
    """A seeded random subset of every split (the stored order is sorted by class); with
    ``n_eval=None`` only the training split is cut and validation and test stay whole."""
    g = torch.Generator().manual_seed(seed)

    def pick(images, labels, n):
        if n is None:
            return images, labels
        idx = torch.randperm(len(images), generator=g)[:n]
        return images[idx], labels[idx]

    tr, va, te = (pick(data.train_images, data.train_labels, n_train), pick(data.val_images, data.val_labels, n_eval),
                  pick(data.test_images, data.test_labels, n_eval))
    return cdata.Split(*tr, *va, *te, source=data.source)


def _write_history(out: Path, history: list[dict]) -> None:
    files.write_json(out / "history.json", history)
    if history:
        with files.atomic_path(out / "history.csv") as tmp, open(tmp, "w", newline="") as fh:
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


# ------------------------------------------------------------------ a CIFAR-10 run
def _mixer(recipe: Recipe, num_classes: int, generator: torch.Generator) -> Callable[[Tensor, Tensor], tuple]:
    """``mix(x, y) -> (x, soft targets)``: MixUp or CutMix when the recipe asks, then label smoothing."""

    def mix(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        target = F.one_hot(y, num_classes).float()
        if recipe.mixup_alpha or recipe.cutmix_alpha:
            perm = torch.randperm(len(x), generator=generator).to(x.device, non_blocking=True)
            use_cutmix = recipe.cutmix_alpha and (not recipe.mixup_alpha or torch.rand(1, generator=generator) < 0.5)
            alpha = recipe.cutmix_alpha if use_cutmix else recipe.mixup_alpha
            lam = float(torch.distributions.Beta(alpha, alpha).sample())
            x, target = (cutmix_batch(x, target, lam, perm, generator=generator) if use_cutmix
                         else mixup_batch(x, target, lam, perm))
        return x, target * (1 - recipe.label_smoothing) + recipe.label_smoothing / num_classes

    return mix


def _load_data(recipe: Recipe, data: cdata.Split | None, fast: bool) -> cdata.Split:
    if data is None:
        raw = cdata.load_cifar10(allow_synthetic=fast)
        data = cdata.split_validation(raw, val_size=min(recipe.val_size, len(raw.train_images) // 5), seed=recipe.seed)
    return subset(data, recipe.fast_train, recipe.fast_eval, seed=recipe.seed) if fast else data


def train(recipe: Recipe | str, out_dir: str | Path, *, fast: bool = False, data: cdata.Split | None = None,
          device: str | torch.device | None = None, result_name: str | None = None,
          log: Callable[[str], None] = print, max_epochs_this_call: int | None = None,
          evaluate_test: bool = True, on_epoch: Callable[[dict], None] | None = None,
          model: nn.Module | None = None, stop_after_s: float | None = None) -> dict:
    """Train ``recipe`` into ``out_dir`` (resuming from its checkpoint) and return the summary.

    ``model`` trains a network of your own (e.g. chapter 7's ``ViT``, ``images (B, 3, 32, 32) ->
    logits (B, 10)``) with the recipe's optimiser, schedule and data instead of the recipe's model.

    ``fast`` trains on a subset (``fast_train`` images, ``fast_epochs`` epochs), falling back
    to synthetic data when CIFAR-10 is absent.  ``result_name`` also writes
    ``results/<result_name>.json`` with provenance.  ``max_epochs_this_call`` stops early
    (the checkpoint lets the next call continue), e.g. to show resuming; ``stop_after_s`` stops after
    the epoch past which another like it would end later than that many seconds into this call (a
    machine lent for a fixed time: the next call continues).  ``evaluate_test=False``
    skips the test set (sweeps compare on validation only).  ``on_epoch(record)`` is called after
    each epoch's checkpoint; it may raise to stop the run (e.g. a search pruning a trial).
    """
    from ..results import code_version

    recipe = RECIPES[recipe] if isinstance(recipe, str) else recipe
    code_at_start = code_version()  # the code that runs, even if the checkout changes meanwhile
    rank, world, local_rank = _distributed()
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
    data = _load_data(recipe, data, fast)
    num_classes = len(cdata.CLASSES)

    model = (build_model(recipe) if model is None else model).to(device)
    if recipe.channels_last:
        model = model.to(memory_format=torch.channels_last)
    loader = cdata.BatchLoader(data.train_images, data.train_labels, recipe.batch_size, shuffle=True,
                               augment=recipe.augment, policy=recipe.policy, drop_last=True, device=device,
                               seed=recipe.seed, rank=rank, world_size=world, channels_last=recipe.channels_last)
    val_loader = cdata.BatchLoader(data.val_images, data.val_labels, recipe.eval_batch_size, device=device,
                                   channels_last=recipe.channels_last)
    clean = min(recipe.clean_train_eval, len(data.train_images))
    clean_loader = cdata.BatchLoader(data.train_images[:clean], data.train_labels[:clean], recipe.eval_batch_size,
                                     device=device, channels_last=recipe.channels_last) if clean else None
    total_steps = epochs * len(loader)
    warmup_steps = min(int(recipe.warmup_epochs * len(loader)), total_steps - 1)
    optimizer = make_optimizer(recipe, model)
    net: nn.Module = model
    if world > 1:
        from torch.nn.parallel import DistributedDataParallel

        net = DistributedDataParallel(model, device_ids=[local_rank] if device.type == "cuda" else None)
    if recipe.compile:
        net = torch.compile(net, mode=recipe.compile_mode)
    trainer = Trainer(model, optimizer, lr_factor=lr_factor(recipe.schedule, total_steps, warmup_steps),
                      grad_clip=recipe.grad_clip, amp_dtype=choose_amp(recipe, model, device, log), net=net,
                      eval_flip=recipe.eval_flip)

    state = {"epoch": 0, "history": [], "best_val": -1.0, "best_state": None, "elapsed": 0.0}
    mix_gen = torch.Generator().manual_seed(recipe.seed + 1)  # MixUp/CutMix draws, saved with the checkpoint
    ckpt_path = out / "checkpoint.pt"
    if ckpt_path.exists():
        ckpt = torch.load(ckpt_path, map_location="cpu", weights_only=False)
        # as_stored: a checkpoint written before a field was added has that field's default
        if as_stored(ckpt["recipe"]) != as_stored(recipe) or ckpt["fast"] != fast:
            raise RuntimeError(f"{ckpt_path} belongs to a different recipe or mode; use another --out folder "
                               "or delete the checkpoint to start over")
        ckpt = trainer.resume(ckpt_path)
        mix_gen.set_state(ckpt["mix_rng"])
        state = {k: ckpt[k] for k in state}
        log(f"resuming {recipe.name} from epoch {state['epoch']} ({ckpt_path})")
    mix = _mixer(recipe, num_classes, mix_gen)
    smooth_only = _mixer(dataclasses.replace(recipe, mixup_alpha=0.0, cutmix_alpha=0.0), num_classes, mix_gen)

    if state["epoch"] == 0:
        log(f"{recipe.name}: {count_parameters(model) / 1e6:.2f}M parameters, {len(data.train_images)} training "
            f"images ({data.source}), {epochs} epochs x {len(loader)} steps, device {device}, world {world}")
    stop_at = epochs if max_epochs_this_call is None else min(epochs, state["epoch"] + max_epochs_this_call)
    call_start = time.perf_counter()
    for epoch in range(state["epoch"], stop_at):
        start = time.perf_counter()
        loader.set_epoch(epoch)
        mixing = epoch < recipe.mix_until * epochs  # after that, label smoothing only
        fit = trainer.train_epoch(loader, mix=mix if mixing else smooth_only, desc=f"epoch {epoch + 1}/{epochs}",
                                  show=main_process)
        state["epoch"] = epoch + 1
        if main_process:
            val = trainer.evaluate(val_loader)
            state["elapsed"] += time.perf_counter() - start
            record = {"epoch": epoch + 1, "train_loss": fit["loss"], "train_acc": fit["acc"],
                      "val_loss": val["loss"], "val_acc": val["acc"], "lr": trainer.scheduler.get_last_lr()[0],
                      "epoch_time_s": round(time.perf_counter() - start, 2),
                      "train_images_per_s": round(fit["seen"] * world / fit["seconds"], 1),
                      "elapsed_s": round(state["elapsed"], 2)}
            if clean_loader is not None:  # after the clock: a diagnostic, not part of the training time
                seen = trainer.evaluate(clean_loader, flip=False)
                record.update(clean_train_loss=seen["loss"], clean_train_acc=seen["acc"])
            state["history"].append(record)
            if val["acc"] > state["best_val"]:
                state["best_val"] = val["acc"]
                state["best_state"] = {k: v.detach().clone() for k, v in model.state_dict().items()}
            trainer.save(ckpt_path, mix_rng=mix_gen.get_state(), recipe=recipe.to_dict(), fast=fast, **state)
            _write_history(out, state["history"])
            log(f"epoch {epoch + 1:3d}/{epochs}  train loss {record['train_loss']:.3f} acc {record['train_acc']:.3f}  "
                f"val loss {val['loss']:.3f} acc {val['acc']:.3f}  {record['epoch_time_s']:.0f}s "
                f"({record['train_images_per_s']:.0f} img/s)")
            if on_epoch is not None:
                on_epoch(record)
        _barrier(world)
        now = time.perf_counter()
        if stop_after_s is not None and epoch + 1 < stop_at and (now - call_start) + (now - start) > stop_after_s:
            log(f"stopping after epoch {epoch + 1}: another would end after {stop_after_s:.0f} s; "
                "run the same command again to continue from the checkpoint")
            break

    summary: dict = {"recipe": recipe.to_dict(), "fast": fast, "epochs_done": state["epoch"], "epochs": epochs,
                     "history": state["history"], "best_val_acc": state["best_val"], "dataset": data.source,
                     "train_images": len(data.train_images), "val_images": len(data.val_images),
                     "parameters": count_parameters(model), "train_time_s": round(state["elapsed"], 1),
                     "amp": str(trainer.amp_dtype).replace("torch.", "") if trainer.amp_dtype else "float32",
                     "world_size": world,
                     # the machine that finished the run: minutes mean little without it
                     "hardware": machine()}
    if state["epoch"] < epochs or not main_process:
        return summary  # stopped early on purpose (resume later) or not the reporting process
    best_epoch = max(state["history"], key=lambda h: h["val_acc"])["epoch"]
    summary.update({"best_epoch": best_epoch,
                    "time_to_best_s": next(h["elapsed_s"] for h in state["history"] if h["epoch"] == best_epoch)})
    if evaluate_test:
        _test_once(trainer, state["best_state"], data, recipe, summary, out, val_loader)
    files.write_json(out / "summary.json", summary)
    if not evaluate_test:
        return summary
    plot_history(state["history"], out / "curves.png", title=f"{recipe.name}: {data.source}")
    log(f"done: best validation accuracy {state['best_val']:.4f} at epoch {best_epoch}; "
        f"test accuracy {summary['test_acc']:.4f} ({data.source}); {state['elapsed'] / 60:.1f} min")
    if result_name:
        _write_run_result(result_name, model, summary, data, fast, state["elapsed"], code_at_start, log)
    return summary


def _test_once(trainer: Trainer, best_state: dict, data: cdata.Split, recipe: Recipe, summary: dict,
               out: Path, val_loader: cdata.BatchLoader) -> None:
    """The test set, evaluated once, with the best-validation weights (saved as ``out/best_model.pt``)."""
    trainer.model.load_state_dict(best_state)
    test_loader = cdata.BatchLoader(data.test_images, data.test_labels, recipe.eval_batch_size,
                                    device=trainer.device, channels_last=recipe.channels_last)
    test = trainer.evaluate(test_loader, confusion=True, shifts=recipe.test_shifts)
    summary.update({"test_acc": test["acc"], "test_loss": test["loss"], "test_confusion": test["confusion"],
                    "classes": list(cdata.CLASSES),
                    "test_views": len(view_offsets(recipe.test_shifts)) * (2 if recipe.eval_flip else 1)})
    # What the extra views add, measured on the same weights and images: the validation's views
    # (on the test and, for the shifts, on the validation images the shifts were chosen on) and one view.
    if recipe.test_shifts:
        summary["test_acc_flip"] = trainer.evaluate(test_loader)["acc"]
        summary["best_val_acc_test_views"] = trainer.evaluate(val_loader, shifts=recipe.test_shifts)["acc"]
    if trainer.eval_flip:
        summary["test_acc_single_view"] = trainer.evaluate(test_loader, flip=False)["acc"]
    files.torch_save(trainer.model.state_dict(), out / "best_model.pt")


def _write_run_result(name: str, model: nn.Module, summary: dict, data: cdata.Split, fast: bool, elapsed: float,
                      code: str, log: Callable) -> None:
    """``results/<name>.json`` and the trained weights in half precision (the book shows what the model attends to)."""
    from ..results import RESULTS_DIR, write_result

    files.torch_save({k: (v.half() if v.is_floating_point() else v) for k, v in model.state_dict().items()},
                     RESULTS_DIR / f"{name}_model.pth")
    path = write_result(name, summary, dataset=data.source, split="validation (5,000 images carved "
                        "from the training set)" if not fast else "validation subset (fast mode)",
                        wall_time_s=elapsed, git_commit=code)
    log(f"result written to {path}")
