"""The course's trainer: the one optimisation step behind every model the course trains, and the
run loop that trains a CIFAR-10 ``Recipe`` with it.

``Trainer`` owns the small steps: ``step(loss)``/``update(loss)`` (backward, clipping, optimiser,
schedule: the only ``.backward()`` of the package), ``train_epoch`` (one pass over a classifier's
batches), ``save``/``resume`` (a checkpoint written atomically).  Chapter 04's toy task, chapter 06's
sequence task and the sweeps' range test train through ``step``; ``train`` below runs a recipe:

    python -m course_utils.cli.train --recipe cpu --out runs/cpu            # train, resume if interrupted
    torchrun --nproc_per_node 2 -m course_utils.cli.train --recipe cpu ...  # DistributedDataParallel

What ``train`` puts together lives beside it: ``optim`` (AdamW or SGD, the warm-up schedules),
``precision`` (``amp="auto"`` measures bf16 against float32 on the CPU), ``evaluation`` (mirrored and
shifted views at test time), ``checkpoint`` (what a resume needs, the history files, the result
file) and ``data``.  Here: the MixUp/CutMix and label-smoothing targets (``mixer``, the one place a
training target is built), the epoch loop, DistributedDataParallel under torchrun, optional
``torch.compile``, and automatic resume (restart the same command and it continues; a killed run
loses at most one epoch).

Model selection uses the validation split carved from the training set; the test set is
evaluated once, at the end, with the weights of the best validation epoch.
"""

from __future__ import annotations

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
from ..references.vit import count_parameters
from ..results import machine
from ..runtime import pick_device, seed_everything
from . import data as cdata
from .checkpoint import RunState, resumable, write_history, write_run_result
from .compute import flops_per_image
from .evaluation import evaluate, final_test
from .optim import lr_factor, make_optimizer
from .precision import choose_amp
from .recipes import Recipe, build_model

__all__ = ["Trainer", "train"]

# (x (B, ...), y (B,)) -> (x, target (B, classes))
Mix = Callable[[Tensor, Tensor], tuple[Tensor, Tensor]]


# ------------------------------------------------------------------ the steps
class Trainer:
    """One model, its optimiser and its schedule; each method is one small step of training.

    ``lr_factor(step)`` multiplies the optimiser's base learning rate (``LambdaLR``);
    ``grad_clip`` clips the global gradient norm; ``amp_dtype`` (bf16/fp16) turns on autocast,
    with a gradient scaler for fp16 on CUDA.  ``net`` is what runs the forward pass when it is
    not ``model`` itself (a ``DistributedDataParallel`` or compiled wrapper).  ``ema_decay`` keeps
    an exponential moving average of ``model``'s weights and buffers, updated after every step
    (``torch.optim.swa_utils.AveragedModel``); ``evaluated`` is the network to measure: the
    average where there is one, ``model`` otherwise.
    """

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        *,
        lr_factor: Callable[[int], float] | None = None,
        grad_clip: float | None = None,
        amp_dtype: torch.dtype | None = None,
        net: nn.Module | None = None,
        ema_decay: float | None = None,
    ):
        self.model, self.optimizer, self.grad_clip, self.amp_dtype = (
            model,
            optimizer,
            grad_clip,
            amp_dtype,
        )
        # not `net or model`: a compiled module has no truth value
        self.net = model if net is None else net
        self.device = next(model.parameters()).device
        self.scheduler = (
            torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)
            if lr_factor
            else None
        )
        self.scaler = torch.amp.GradScaler(
            "cuda",
            enabled=amp_dtype == torch.float16
            and self.device.type == "cuda",
        )
        self.ema = (
            None
            if ema_decay is None
            else torch.optim.swa_utils.AveragedModel(
                model,
                multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(
                    ema_decay
                ),
                # BatchNorm's running statistics are averaged with the weights they belong to
                use_buffers=True,
            )
        )

    @property
    def evaluated(self) -> nn.Module:
        """The network whose accuracy counts: the moving average when there is one, else ``model``."""
        return self.model if self.ema is None else self.ema.module

    def autocast(self):
        """The forward pass's precision: ``amp_dtype`` where set, float32 otherwise."""
        return torch.autocast(
            self.device.type,
            dtype=self.amp_dtype or torch.float32,
            enabled=self.amp_dtype is not None,
        )

    def set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def step(self, loss: Tensor) -> float:
        """Backward, clip, update, advance the schedule; returns the loss (a 0-dim tensor) as a float."""
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
        if self.ema is not None:
            self.ema.update_parameters(self.model)
        if self.scheduler is not None:
            self.scheduler.step()

    def train_epoch(
        self, batches, *, mix: Mix, desc: str = "", show: bool = True
    ) -> dict:
        """One pass of a classifier over ``batches`` of ``(x (B, ...), y (B,))``.

        ``mix(x, y) -> (x, target (B, classes))`` makes the (soft) targets: ``train``'s ``mixer``
        (MixUp/CutMix, label smoothing).  Returns the mean loss, the accuracy against ``y``, the
        number of examples and the seconds it took.
        """
        # Plain tqdm (not tqdm.auto): in a terminal a live bar, elsewhere (notebooks, CI logs)
        # none, so stored notebook outputs hold the epoch lines only, not widget state.
        from tqdm import tqdm

        start = time.perf_counter()
        self.net.train()
        seen = 0
        # the sums stay on the device and are read once, at the end (and for a live bar every 25 steps)
        # Apple's GPUs have no float64
        loss_sum = torch.zeros(
            (),
            dtype=torch.float32
            if self.device.type == "mps"
            else torch.float64,
            device=self.device,
        )
        correct = torch.zeros((), dtype=torch.int64, device=self.device)
        bar = tqdm(
            batches, desc=desc, leave=False, disable=None if show else True
        )
        for i, (x, y) in enumerate(bar):
            x, target = mix(x, y)
            with self.autocast():
                logits = self.net(x)  # (B, classes)
            # PyTorch's cross-entropy against a distribution (chapter 08's soft_cross_entropy, computed
            # by the library: the class edition, which replays the course's functions, trains with it too)
            loss = F.cross_entropy(logits.float(), target)
            self.update(loss)
            loss_sum += loss.detach().to(loss_sum.dtype) * len(y)
            correct += (logits.argmax(-1) == y).sum()
            seen += len(y)
            if not bar.disable and i % 25 == 0:
                bar.set_postfix(
                    loss=f"{loss_sum.item() / seen:.3f}",
                    acc=f"{correct.item() / seen:.3f}",
                )
        return {
            "loss": loss_sum.item() / seen,
            "acc": correct.item() / seen,
            "seen": seen,
            "seconds": time.perf_counter() - start,
        }

    def state_dict(self) -> dict:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict()
            if self.scheduler
            else None,
            "scaler": self.scaler.state_dict(),
            "ema": self.ema.state_dict() if self.ema is not None else None,
            "rng": torch.get_rng_state(),
        }

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
        if self.ema is not None:
            self.ema.load_state_dict(ckpt["ema"])
        torch.set_rng_state(ckpt["rng"])
        return ckpt


# ------------------------------------------------------------------ the targets
def mixer(
    recipe: Recipe, num_classes: int, generator: torch.Generator
) -> Mix:
    """``mix(x (B, 3, H, W), y (B,)) -> (x, target (B, num_classes))``: one-hot targets, mixed with
    MixUp or CutMix when the recipe asks (``generator`` draws the pairs and strengths), then label-smoothed."""

    def mix(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        target = F.one_hot(y, num_classes).float()
        if recipe.mixup_alpha or recipe.cutmix_alpha:
            perm = torch.randperm(len(x), generator=generator).to(
                x.device, non_blocking=True
            )
            use_cutmix = recipe.cutmix_alpha and (
                not recipe.mixup_alpha
                or torch.rand(1, generator=generator) < 0.5
            )
            alpha = recipe.cutmix_alpha if use_cutmix else recipe.mixup_alpha
            lam = float(torch.distributions.Beta(alpha, alpha).sample())
            x, target = (
                cutmix_batch(x, target, lam, perm, generator=generator)
                if use_cutmix
                else mixup_batch(x, target, lam, perm)
            )
        return x, target * (
            1 - recipe.label_smoothing
        ) + recipe.label_smoothing / num_classes

    return mix


# ------------------------------------------------------------------ distributed
def _distributed() -> tuple[int, int, int]:
    """(rank, world size, local rank), initialising the process group under torchrun."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return 0, 1, 0
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group(
            "nccl" if torch.cuda.is_available() else "gloo"
        )
    return dist.get_rank(), world, int(os.environ.get("LOCAL_RANK", "0"))


def _barrier(world: int) -> None:
    if world > 1:
        import torch.distributed as dist

        dist.barrier()


# ------------------------------------------------------------------ a CIFAR-10 run
@dataclasses.dataclass
class _Run:
    """One call of ``train``: its recipe and options, and what ``_prepare`` built for them."""

    recipe: Recipe
    out: Path
    fast: bool
    log: Callable[[str], None]
    rank: int
    world: int
    data: cdata.Split
    epochs: int
    trainer: Trainer
    # the training batches, this process's share of each
    loader: cdata.BatchLoader
    val_loader: cdata.BatchLoader
    # the first clean_train_eval training images, unaltered
    clean_loader: cdata.BatchLoader | None
    mix_gen: torch.Generator  # MixUp/CutMix draws, saved with the checkpoint
    state: RunState = dataclasses.field(default_factory=RunState)

    @property
    def main(self) -> bool:
        # the one process that evaluates, saves and reports
        return self.rank == 0

    @property
    def ckpt_path(self) -> Path:
        return self.out / "checkpoint.pt"


def train(
    recipe: Recipe,
    out_dir: str | Path,
    *,
    fast: bool = False,
    data: cdata.Split | None = None,
    device: str | torch.device | None = None,
    result_name: str | None = None,
    log: Callable[[str], None] = print,
    max_epochs_this_call: int | None = None,
    evaluate_test: bool = True,
    on_epoch: Callable[[dict], None] | None = None,
    model: nn.Module | None = None,
    stop_after_s: float | None = None,
) -> dict:
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

    if not isinstance(recipe, Recipe):
        raise TypeError(
            f"train() takes a Recipe, not {type(recipe).__name__} {recipe!r}: look a name up "
            "first (RECIPES[name], course_utils.experiments.recipes)"
        )
    # the code that runs, even if the checkout changes meanwhile
    code_at_start = code_version()
    run = _prepare(recipe, Path(out_dir), fast, data, device, model, log)
    if resumable(run.ckpt_path, recipe, fast):
        _resume(run)
    _fit(run, max_epochs_this_call, stop_after_s, on_epoch)
    summary = _summary(run)
    if run.state.epoch < run.epochs or not run.main:
        return summary  # stopped early on purpose (resume later) or not the reporting process
    _finish(run, summary, evaluate_test)
    if evaluate_test and result_name:
        write_run_result(
            result_name,
            run.trainer.model,
            summary,
            run.data,
            fast,
            run.state.elapsed,
            code_at_start,
            run.log,
        )
    return summary


def _prepare(
    recipe: Recipe,
    out: Path,
    fast: bool,
    data: cdata.Split | None,
    device: str | torch.device | None,
    model: nn.Module | None,
    log: Callable[[str], None],
) -> _Run:
    """Processes, device, seed, data, model, batches and the ``Trainer``, in this order (the model's
    initial weights are the first draws after the seed)."""
    rank, world, local_rank = _distributed()
    if rank != 0:
        log = lambda *_: None  # noqa: E731  (one process reports)
    out.mkdir(parents=True, exist_ok=True)
    if device is None:
        device = (
            torch.device("cuda", local_rank)
            if torch.cuda.is_available() and world > 1
            else pick_device()
        )
    device = torch.device(device)
    if recipe.budget_s is not None and world > 1 and not fast:
        # each process would time its own first epoch, and they must agree on the count
        raise ValueError(
            f"recipe {recipe.name!r}: budget_s plans the epochs from one process's first epoch; "
            "run it in one process, or give a fixed count (--set budget_s=null epochs=N)"
        )
    seed_everything(recipe.seed)
    epochs = recipe.fast_epochs if fast else recipe.epochs
    data = _load_data(recipe, data, fast)
    model = (build_model(recipe) if model is None else model).to(device)
    # a data-dependent first layer (models.vit_fast.FastViT's whiten_stem), set before the optimiser
    # sees the parameters; a resumed run's checkpoint then overwrites it with the same filters
    init = getattr(model, "init_from_data", None)
    if init is not None:
        init(cdata.normalize(data.train_images[:INIT_IMAGES]).to(device))
    if recipe.channels_last:
        model = model.to(memory_format=torch.channels_last)
    loaders = _loaders(recipe, data, device, rank, world)
    trainer = _trainer(
        recipe,
        model,
        epochs * len(loaders[0]),
        len(loaders[0]),
        local_rank if world > 1 else None,
        log,
    )
    return _Run(
        recipe,
        out,
        fast,
        log,
        rank,
        world,
        data,
        epochs,
        trainer,
        *loaders,
        torch.Generator().manual_seed(recipe.seed + 1),
    )


def _load_data(
    recipe: Recipe, data: cdata.Split | None, fast: bool
) -> cdata.Split:
    if data is None:
        raw = cdata.load_cifar10(allow_synthetic=fast)
        data = cdata.split_validation(
            raw,
            val_size=min(recipe.val_size, len(raw.train_images) // 5),
            seed=recipe.seed,
        )
    return (
        cdata.subset(
            data, recipe.fast_train, recipe.fast_eval, seed=recipe.seed
        )
        if fast
        else data
    )


def _loaders(
    recipe: Recipe,
    data: cdata.Split,
    device: torch.device,
    rank: int,
    world: int,
) -> tuple[cdata.BatchLoader, cdata.BatchLoader, cdata.BatchLoader | None]:
    """The training batches (shuffled, augmented, each process's share), the validation batches and,
    when the recipe asks, the clean training batches."""
    loader = cdata.BatchLoader(
        data.train_images,
        data.train_labels,
        recipe.batch_size,
        shuffle=True,
        augment=recipe.augment,
        crop_padding=recipe.crop_padding,
        flip=recipe.flip,
        policy=recipe.policy,
        drop_last=True,
        device=device,
        seed=recipe.seed,
        rank=rank,
        world_size=world,
        channels_last=recipe.channels_last,
    )
    val_loader = cdata.evaluation_loader(
        data.val_images, data.val_labels, recipe, device
    )
    clean = min(recipe.clean_train_eval, len(data.train_images))
    clean_loader = (
        cdata.evaluation_loader(
            data.train_images[:clean],
            data.train_labels[:clean],
            recipe,
            device,
        )
        if clean
        else None
    )
    return loader, val_loader, clean_loader


def _trainer(
    recipe: Recipe,
    model: nn.Module,
    total_steps: int,
    steps_per_epoch: int,
    ddp_local_rank: int | None,
    log: Callable[[str], None],
) -> Trainer:
    """The recipe's optimiser, schedule and precision around ``model``; wrapped for DDP when
    ``ddp_local_rank`` is set (this process's GPU index under torchrun) and compiled when the recipe asks."""
    optimizer = make_optimizer(recipe, model)
    device = next(model.parameters()).device
    net: nn.Module = model
    if ddp_local_rank is not None:
        from torch.nn.parallel import DistributedDataParallel

        net = DistributedDataParallel(
            model,
            device_ids=[ddp_local_rank] if device.type == "cuda" else None,
        )
    if recipe.compile:
        net = torch.compile(net, mode=recipe.compile_mode)
    return Trainer(
        model,
        optimizer,
        lr_factor=_schedule(recipe, total_steps, steps_per_epoch),
        grad_clip=recipe.grad_clip,
        amp_dtype=choose_amp(recipe, model, device, log),
        net=net,
        ema_decay=recipe.ema_decay,
    )


def _schedule(
    recipe: Recipe, total_steps: int, steps_per_epoch: int
) -> Callable[[int], float]:
    """The recipe's learning-rate multiplier per step over ``total_steps``, its warm-up in epochs."""
    warmup_steps = min(
        int(recipe.warmup_epochs * steps_per_epoch), total_steps - 1
    )
    return lr_factor(recipe.schedule, total_steps, warmup_steps)


# training images a data-dependent initialisation reads (the first of the training split: the same
# under a seed, and enough for a 27x27 covariance several hundred thousand patches deep)
INIT_IMAGES = 5000


# A budgeted run trains the whole epochs that fit this share of its budget at its first epoch's
# pace: the epochs after the first run slower or faster on a shared machine, and the share keeps
# every one of the course's stored half-hour runs inside the budget, planned from its own first
# epoch at its own mean pace (tests/training/test_budget_epochs.py reads their histories; a new
# run that ran further behind its first epoch lowers it: 0.88 until cpu_stem122_b32's seed 0, whose
# epochs ran 16% slower on average than its first).
BUDGET_SHARE = 0.84


def planned_epochs(
    budget_s: float,
    first_epoch_s: float,
    cap: int,
    epoch_share: Callable[[int, int], float] | None = None,
) -> int:
    """Whole epochs of ``first_epoch_s`` seconds in ``BUDGET_SHARE`` of ``budget_s``, at least 1 (the
    epoch already done) and at most ``cap``.  ``epoch_share(e, n)``: epoch ``e``'s time as a share of
    the first's in a run of ``n`` epochs, where epochs differ (progressive resizing); None: all alike."""
    if epoch_share is None:
        return max(
            1, min(cap, int(BUDGET_SHARE * budget_s // first_epoch_s))
        )
    allowed = BUDGET_SHARE * budget_s
    epochs = 1
    # a run of n + 1 epochs takes longer than one of n (one more epoch of positive time), so the
    # first count that does not fit ends the search
    for n in range(2, cap + 1):
        if (
            first_epoch_s * sum(epoch_share(e, n) for e in range(n))
            > allowed
        ):
            break
        epochs = n
    return epochs


def progressive_share(
    recipe: Recipe, train_s: float, first_epoch_s: float
) -> Callable[[int, int], float]:
    """``planned_epochs``'s ``epoch_share`` for a progressively resized recipe whose first epoch took
    ``first_epoch_s``, ``train_s`` of them training (the rest, validation at full size, stays as it
    was): the training seconds scale with the FLOPs of an image at each epoch's size
    (``compute.flops_per_image``).  A smaller image saves at most its share of the FLOPs (the fixed
    costs of a step do not shrink with it), so a full-size epoch is estimated no faster than it runs
    and the plan errs short."""
    full = recipe.model_kwargs.get("img_size", 32)
    flops = {
        side: flops_per_image(recipe, side=side or full)
        for side in {None, *(side for side, _ in recipe.progressive)}
    }
    first = flops[recipe.train_size(0, recipe.epochs)]
    rest = first_epoch_s - train_s

    def share(epoch: int, epochs: int) -> float:
        size = recipe.train_size(epoch, epochs)
        return (train_s * flops[size] / first + rest) / first_epoch_s

    return share


def _plan(run: _Run, epochs: int) -> None:
    """Set a budgeted run's epoch count: the schedule is stretched over ``epochs`` from the next step
    on (the first epoch, a warm-up, took the same learning rates under any count)."""
    run.epochs = run.state.planned_epochs = epochs
    steps = len(run.loader)
    factor = _schedule(run.recipe, epochs * steps, steps)
    # LambdaLR keeps one multiplier per parameter group (decayed and not decayed: the same one)
    scheduler = run.trainer.scheduler
    scheduler.lr_lambdas = [factor] * len(scheduler.lr_lambdas)


def _resume(run: _Run) -> None:
    """Continue from the run's checkpoint: weights, optimiser, schedule, RNGs and ``RunState``."""
    ckpt = run.trainer.resume(run.ckpt_path)
    run.mix_gen.set_state(ckpt["mix_rng"])
    run.state = RunState.from_checkpoint(ckpt)
    if run.state.planned_epochs is not None:
        _plan(run, run.state.planned_epochs)
    run.log(
        f"resuming {run.recipe.name} from epoch {run.state.epoch} ({run.ckpt_path})"
    )


def _fit(
    run: _Run,
    max_epochs_this_call: int | None,
    stop_after_s: float | None,
    on_epoch: Callable[[dict], None] | None,
) -> None:
    """The epochs of this call: all that are left, ``max_epochs_this_call`` of them, or as many as end
    within ``stop_after_s``."""
    recipe, epochs = run.recipe, run.epochs
    num_classes = len(cdata.CLASSES)
    mix = mixer(recipe, num_classes, run.mix_gen)
    smooth_only = mixer(
        dataclasses.replace(recipe, mixup_alpha=0.0, cutmix_alpha=0.0),
        num_classes,
        run.mix_gen,
    )
    if run.state.epoch == 0:
        run.log(
            f"{recipe.name}: {count_parameters(run.trainer.model) / 1e6:.2f}M parameters, "
            f"{len(run.data.train_images)} training images ({run.data.source}), {epochs} epochs x "
            f"{len(run.loader)} steps, device {run.trainer.device}, world {run.world}"
        )
    first = run.state.epoch
    call_start = time.perf_counter()
    # run.epochs can shrink after the first epoch (a budgeted recipe's plan), so the end is re-read
    while run.state.epoch < (
        stop_at := (
            run.epochs
            if max_epochs_this_call is None
            else min(run.epochs, first + max_epochs_this_call)
        )
    ):
        epoch = run.state.epoch
        start = time.perf_counter()
        # after that, label smoothing only
        mixing = epoch < recipe.mix_until * run.epochs
        # after that, the images whole (set each epoch: a resumed run starts in either phase)
        run.loader.crop_padding = (
            recipe.crop_padding
            if epoch < recipe.crop_until * run.epochs
            else 0
        )
        run.loader.size = recipe.train_size(epoch, run.epochs)
        _epoch(run, epoch, mix if mixing else smooth_only, start, on_epoch)
        _barrier(run.world)
        now = time.perf_counter()
        if (
            stop_after_s is not None
            and epoch + 1 < stop_at
            and (now - call_start) + (now - start) > stop_after_s
        ):
            run.log(
                f"stopping after epoch {epoch + 1}: another would end after {stop_after_s:.0f} s; "
                "run the same command again to continue from the checkpoint"
            )
            break


def _epoch(
    run: _Run,
    epoch: int,
    mix: Mix,
    start: float,
    on_epoch: Callable[[dict], None] | None,
) -> None:
    """Train one epoch; the main process then evaluates, keeps the best weights, saves the checkpoint
    and the history (in this order: a kill between the two leaves the history one epoch behind)."""
    run.loader.set_epoch(epoch)
    fit = run.trainer.train_epoch(
        run.loader,
        mix=mix,
        desc=f"epoch {epoch + 1}/{run.epochs}",
        show=run.main,
    )
    state = run.state
    state.epoch = epoch + 1
    if not run.main:
        return
    record = _record(run, fit, start)
    if (
        run.recipe.budget_s is not None
        and not run.fast
        and state.planned_epochs is None
    ):
        if run.recipe.progressive:
            share = progressive_share(
                run.recipe, fit["seconds"], state.elapsed
            )
            epochs = planned_epochs(
                run.recipe.budget_s, state.elapsed, run.epochs, share
            )
            last = share(epochs - 1, epochs) * state.elapsed
            pace = f" (at {run.recipe.train_size(0, epochs)} px), its last estimated at {last:.1f} s"
        else:
            epochs = planned_epochs(
                run.recipe.budget_s, state.elapsed, run.epochs
            )
            pace = ""
        _plan(run, epochs)
        run.log(
            f"{run.recipe.name}: the first epoch took {state.elapsed:.1f} s{pace}, so {run.epochs} "
            f"epochs fit {BUDGET_SHARE:.0%} of the {run.recipe.budget_s:.0f} s budget (at most "
            f"{run.recipe.epochs}); the schedule now ends there"
        )
    state.history.append(record)
    if record["val_acc"] > state.best_val:
        state.best_val = record["val_acc"]
        # the weights that were measured (the moving average's, when the recipe keeps one)
        state.best_state = {
            k: v.detach().clone()
            for k, v in run.trainer.evaluated.state_dict().items()
        }
    run.trainer.save(
        run.ckpt_path,
        mix_rng=run.mix_gen.get_state(),
        recipe=run.recipe.to_dict(),
        fast=run.fast,
        **state.entries(),
    )
    write_history(run.out, state.history)
    run.log(
        f"epoch {epoch + 1:3d}/{run.epochs}  train loss {record['train_loss']:.3f} acc {record['train_acc']:.3f}  "
        f"val loss {record['val_loss']:.3f} acc {record['val_acc']:.3f}"
        + (
            f" (one view {record['val_acc_single_view']:.3f})"
            if "val_acc_single_view" in record
            else ""
        )
        + f"  {record['epoch_time_s']:.0f}s "
        f"({record['train_images_per_s']:.0f} img/s)"
    )
    if on_epoch is not None:
        on_epoch(record)


def _record(run: _Run, fit: dict, start: float) -> dict:
    """The epoch's history record: ``fit`` (``Trainer.train_epoch``'s numbers), the validation, the
    clocks (``start``: when the epoch began) and, when asked, the clean training accuracy."""
    trainer = run.trainer
    val = evaluate(
        trainer.evaluated,
        run.val_loader,
        trainer.amp_dtype,
        flip=run.recipe.eval_flip,
    )
    run.state.elapsed += time.perf_counter() - start
    record = {
        "epoch": run.state.epoch,
        "train_loss": fit["loss"],
        "train_acc": fit["acc"],
        "val_loss": val["loss"],
        "val_acc": val["acc"],
        # the image alone, from the same passes: what a single-view test reads
        **(
            {"val_acc_single_view": val["acc_single_view"]}
            if "acc_single_view" in val
            else {}
        ),
        "lr": trainer.scheduler.get_last_lr()[0],
        "epoch_time_s": round(time.perf_counter() - start, 2),
        "train_images_per_s": round(
            fit["seen"] * run.world / fit["seconds"], 1
        ),
        "elapsed_s": round(run.state.elapsed, 2),
    }
    # after the clock: a diagnostic, not part of the training time
    if run.clean_loader is not None:
        seen = evaluate(
            trainer.evaluated, run.clean_loader, trainer.amp_dtype
        )
        record.update(
            clean_train_loss=seen["loss"], clean_train_acc=seen["acc"]
        )
    return record


def _summary(run: _Run) -> dict:
    """What ``train`` returns (and, for a finished run, writes to ``summary.json``) so far."""
    amp = run.trainer.amp_dtype
    return {
        "recipe": run.recipe.to_dict(),
        "fast": run.fast,
        "epochs_done": run.state.epoch,
        "epochs": run.epochs,
        "history": run.state.history,
        "best_val_acc": run.state.best_val,
        "dataset": run.data.source,
        "train_images": len(run.data.train_images),
        "val_images": len(run.data.val_images),
        "parameters": count_parameters(run.trainer.model),
        "train_time_s": round(run.state.elapsed, 1),
        "amp": str(amp).replace("torch.", "") if amp else "float32",
        "world_size": run.world,
        # the machine that finished the run: minutes mean little without it
        "hardware": machine(),
    }


def _finish(run: _Run, summary: dict, evaluate_test: bool) -> None:
    """A finished run (main process): the best epoch, the test once, ``summary.json`` and the curves."""
    from ..plots import plot_history

    history = run.state.history
    best = max(history, key=lambda h: h["val_acc"])
    best_epoch = best["epoch"]
    summary.update(
        {
            "best_epoch": best_epoch,
            "time_to_best_s": best["elapsed_s"],
        }
    )
    if "val_acc_single_view" in best:
        # the chosen weights on one view of the validation images
        summary["best_val_acc_single_view"] = best["val_acc_single_view"]
    if run.trainer.ema is not None:
        # what the average adds, read on validation on the same run: the last epoch's weights as
        # trained (the history's val_acc is the average's)
        summary["val_acc_last_epoch_trained_weights"] = evaluate(
            run.trainer.model,
            run.val_loader,
            run.trainer.amp_dtype,
            flip=run.recipe.eval_flip,
        )["acc"]
    if evaluate_test:
        _test_once(
            run.trainer,
            run.state.best_state,
            run.data,
            run.recipe,
            summary,
            run.out,
            run.val_loader,
        )
    files.write_json(run.out / "summary.json", summary)
    if not evaluate_test:
        return
    plot_history(
        history,
        run.out / "curves.png",
        title=f"{run.recipe.name}: {run.data.source}",
    )
    run.log(
        f"done: best validation accuracy {run.state.best_val:.4f} at epoch {best_epoch}; "
        f"test accuracy {summary['test_acc']:.4f} ({run.data.source}); {run.state.elapsed / 60:.1f} min"
    )


def _test_once(
    trainer: Trainer,
    best_state: dict,
    data: cdata.Split,
    recipe: Recipe,
    summary: dict,
    out: Path,
    val_loader: cdata.BatchLoader,
) -> None:
    """The test set, evaluated once, with the best-validation weights (saved as ``out/best_model.pt``)."""
    trainer.model.load_state_dict(best_state)
    test_loader = cdata.evaluation_loader(
        data.test_images, data.test_labels, recipe, trainer.device
    )
    summary.update(
        final_test(
            trainer.model,
            test_loader,
            val_loader,
            trainer.amp_dtype,
            flip=recipe.eval_flip,
            shifts=recipe.test_shifts,
        )
    )
    files.torch_save(trainer.model.state_dict(), out / "best_model.pt")
