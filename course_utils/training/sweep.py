"""Hyperparameter sweeps with the course trainer, the machinery: ablations, a learning-rate range
test and an Optuna search, all resumable.  What chapter 08 sweeps (its budgets, ladder, levers,
method and search space) and the results it writes are ``course_utils.experiments.sweep``'s.

A **budget** fixes what every run of a sweep may spend (training images, epochs) and the
recipe it starts from; a **change** is a named set of overrides (``apply_overrides``' dict form)
and ``variants`` turns lists of changes into the variants of an ablation, in three parts:

- the *ladder*: changes made one at a time from the budget's recipe, each keeping the previous ones;
- the *levers*: single changes to the ladder's last step, one at a time;
- the *method*: changes made one at a time from the budget's recipe again (another path).

Runs select on the validation split and never touch the test set (a full run's one test-set
evaluation is the trainer's).  Each run trains in ``<root>/<budget>/<variant>/seed<k>/`` with
the trainer's per-epoch checkpoint, so an interrupted sweep restarted with the same command
skips finished runs and resumes the interrupted one from its last epoch.  The search keeps its
trials in an SQLite file beside them and continues up to ``trials``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import warnings
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

from ..references.vit import count_parameters
from ..results import code_version, machine, read_result, write_result
from ..runtime import seed_everything
from . import data as cdata
from .precision import choose_amp
from .compute import epochs_for, flops_per_image
from .recipes import (
    Recipe,
    apply_overrides,
    as_stored,
    build_model,
    from_stored,
)
from .trainer import Trainer, train

__all__ = [
    "Budget",
    "Change",
    "Param",
    "Variants",
    "variants",
    "ladder_top",
    "load_budget_data",
    "adopt",
    "ablation",
    "collect",
    "clean_history",
    "run_record",
    "recipe_change",
    "flops_of",
    "lr_range_test",
    "search",
    "SWEEP_DIR",
]

SWEEP_DIR = Path("runs/sweep")
# the split every budget uses: CIFAR-10's training images, of which VAL_SIZE become the validation set
CIFAR10_TRAIN, VAL_SIZE = 50_000, 5_000
# how results name that validation set
SPLIT_ABOUT = f"{VAL_SIZE:,} images carved from the training set"

# (name, what changes, overrides for apply_overrides)
Change = tuple[str, str, dict]
# variant name -> (part: "ladder", "lever" or "method"; what changes; the recipe)
Variants = dict[str, tuple[str, str, Recipe]]


@dataclasses.dataclass(frozen=True)
class Budget:
    """What each run of a sweep may spend, and the recipe its changes start from."""

    name: str
    base: Recipe
    train_images: int | None  # None: the whole training split
    # when set, every variant trains the whole epochs that come nearest to spending this many FLOPs
    # (``compute.epochs_for``), so a change that makes an image cheaper buys more epochs, and the
    # base's epochs are not used; ``flops_about`` says where the number comes from
    flops: float | None = None
    flops_about: str = ""

    @property
    def images(self) -> int:
        """Training images per epoch (the whole split: CIFAR-10's training set less the validation)."""
        return self.train_images or CIFAR10_TRAIN - VAL_SIZE

    @property
    def about(self) -> str:
        """What a run spends, computed from the recipe (never typed by hand)."""
        images = (
            f"{self.train_images:,} training images"
            if self.train_images
            else "the whole training split"
        )
        kw = self.base.model_kwargs
        model = (
            f"a {count_parameters(build_model(self.base)):,}-parameter plain ViT (patch {kw['patch_size']}, "
            f"dim {kw['dim']}, depth {kw['depth']})"
        )
        if self.flops:
            return (
                f"{images}, {self.flops / 1e12:,.0f} TFLOP of training per run ({self.flops_about}), "
                f"from {model}"
            )
        return f"{images}, {self.base.epochs} epochs, {model}"


@dataclasses.dataclass(frozen=True)
class Param:
    """One setting the search draws: Optuna's ``name`` for it, its range, drawn on a log scale or
    not, and the override it sets (``key``, in ``apply_overrides``' spelling; default: ``name``)."""

    name: str
    low: float
    high: float
    log: bool = False
    key: str | None = None


def variants(
    budget: Budget,
    ladder: list[Change],
    levers: list[Change] = (),
    method: list[Change] = (),
) -> Variants:
    """Every variant of an ablation, in table order: the ladder's steps (each on top of the previous,
    from ``budget.base``), the levers (each on the ladder's last step) and the method's steps (each on
    top of the previous, from ``budget.base``).  Variant ``v``'s recipe is named ``<budget>/<v>``."""
    out: Variants = {}

    def climb(part: str, changes: list[Change], recipe: Recipe) -> None:
        for name, about, overrides in changes:
            recipe = apply_overrides(
                recipe, overrides, name=f"{budget.name}/{name}"
            )
            out[name] = (part, about, recipe)

    climb("ladder", ladder, budget.base)
    top = ladder_top(budget, out, ladder)
    for name, about, overrides in levers:
        out[name] = (
            "lever",
            about,
            apply_overrides(top, overrides, name=f"{budget.name}/{name}"),
        )
    climb("method", method, budget.base)
    if budget.flops:
        for name, (part, about, recipe) in out.items():
            epochs = epochs_for(
                budget.flops, flops_of(recipe), budget.images
            )
            out[name] = (
                part,
                about,
                dataclasses.replace(recipe, epochs=epochs),
            )
    return out


@functools.lru_cache(maxsize=None)
def _flops_of(stored: str) -> float:
    return flops_per_image(from_stored(json.loads(stored)))


def flops_of(recipe: Recipe) -> float:
    """``compute.flops_per_image``, counted once per recipe (epochs and seed aside) in a process."""
    key = as_stored(dataclasses.replace(recipe, name="", seed=0, epochs=1))
    return _flops_of(json.dumps(key, sort_keys=True))


def ladder_top(
    budget: Budget, table: Variants, ladder: list[Change]
) -> Recipe:
    """The ladder's last step (the budget's recipe when the ladder is empty)."""
    return table[ladder[-1][0]][2] if ladder else budget.base


def load_budget_data(budget: Budget, seed: int = 0) -> cdata.Split:
    """The standard split (VAL_SIZE validation images carved from training), training set cut to the budget."""
    split = cdata.split_validation(
        cdata.load_cifar10(), val_size=VAL_SIZE, seed=0
    )
    if budget.train_images is None:
        return split
    idx = torch.randperm(
        len(split.train_images),
        generator=torch.Generator().manual_seed(seed),
    )[: budget.train_images]
    return dataclasses.replace(
        split,
        train_images=split.train_images[idx],
        train_labels=split.train_labels[idx],
    )


def run_record(summary: dict, about: str, part: str) -> dict:
    """A finished run's ``summary.json`` as a results file records it: its best and last epochs, its
    history and recipe, the part of the table it belongs to and what it changes (``about``)."""
    hist = summary["history"]
    best = max(hist, key=lambda h: h["val_acc"])
    return {
        "part": part,
        "about": about,
        "best_val_acc": best["val_acc"],
        "best_epoch": best["epoch"],
        "final_train_acc": hist[-1]["train_acc"],
        # the training images as they are (the recipe's clean_train_eval): what the diagnosis reads
        "final_clean_train_acc": hist[-1].get("clean_train_acc"),
        "final_val_acc": hist[-1]["val_acc"],
        "min_val_loss": min(h["val_loss"] for h in hist),
        "final_val_loss": hist[-1]["val_loss"],
        "train_time_s": summary["train_time_s"],
        "parameters": summary["parameters"],
        "amp": summary["amp"],
        "recipe": summary["recipe"],
        "history": hist,
        "adopted_from": summary.get("adopted_from"),
        "hardware": summary.get("hardware"),
    }


def adopt(recipe: Recipe, source: Path, run_dir: Path) -> None:
    """Count a finished run made elsewhere (e.g. chapter 07's ``runs/ch07_vit_cpu``) as this variant's run.

    Only if its recipe is this variant's, field for field (the name aside), and it trained on the
    same split; half an hour of CPU is not spent twice on the same numbers.
    """
    source = Path(source)
    path = source / "summary.json"
    if not path.exists():
        raise FileNotFoundError(
            f"cannot adopt {source}: no summary.json there (is the run finished?)"
        )
    summary = json.loads(path.read_text())
    try:
        theirs = as_stored(summary["recipe"], leave_out=("name",))
    except ValueError as err:
        raise ValueError(
            f"cannot adopt {source} as {recipe.name}: {err}"
        ) from None
    ours = as_stored(recipe, leave_out=("name",))
    differ = sorted(
        k for k in set(theirs) | set(ours) if theirs.get(k) != ours.get(k)
    )
    if (
        differ
        or summary.get("fast")
        or summary["epochs_done"] != summary["epochs"]
    ):
        raise ValueError(
            f"cannot adopt {source} as {recipe.name}: recipe differs in {differ}"
            if differ
            else f"cannot adopt {source}: a fast-mode or unfinished run"
        )
    run_dir.mkdir(parents=True, exist_ok=True)
    summary["adopted_from"] = str(source)
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=1))


def ablation(
    budget: Budget,
    table: Variants,
    seeds: list[int],
    only: list[str] | None = None,
    result: str | None = None,
    log: Callable[[str], None] = print,
    split: cdata.Split | None = None,
    root: Path = SWEEP_DIR,
    adopted: dict[str, Path] | None = None,
) -> dict:
    """Run (or resume) every variant of ``table`` (``variants``) x seed; merge all finished runs
    into ``results/<result>.json``.

    ``split`` replaces the budget's data (tests); runs live under ``root/<budget>/``.
    ``adopted`` maps a variant to a finished run directory with the same recipe (see `adopt`).
    """
    commit = code_version()  # the code that runs, even if the checkout changes before the sweep ends
    unknown = (set(only or []) | set(adopted or {})) - set(table)
    if unknown:
        raise ValueError(
            f"unknown variants {sorted(unknown)}; choose from {list(table)}"
        )
    root = Path(root) / budget.name
    for name, source in (adopted or {}).items():
        _, _, recipe = table[name]
        if not (
            Path(source) / "summary.json"
        ).exists() and name in _recorded_runs(budget, result):
            log(
                f"== {name}: {source} is not in this checkout; keeping its run recorded in results/{result}.json"
            )
            continue
        if not (Path(source) / "summary.json").exists():
            raise FileNotFoundError(
                f"cannot adopt {source} as {name}: it holds no finished run (summary.json) and "
                f"no run of {name} is recorded; make the run first (for the cpu budget: "
                "make train-cpu) or leave out --adopt"
            )
        seed = json.loads((Path(source) / "summary.json").read_text())[
            "recipe"
        ]["seed"]
        if not (root / name / f"seed{seed}" / "summary.json").exists():
            adopt(
                dataclasses.replace(recipe, seed=seed),
                Path(source),
                root / name / f"seed{seed}",
            )
            log(f"== {name} (seed {seed}): adopted {source}")
    recorded = _recorded_runs(budget, result)
    split = split if split is not None else load_budget_data(budget)
    for name, (_, about, recipe) in table.items():
        if only and name not in only:
            continue
        for seed in seeds:
            run_dir = root / name / f"seed{seed}"
            if (run_dir / "summary.json").exists():
                continue
            record = recorded.get(name, {}).get(str(seed))
            if record and not recipe_change(record["recipe"], recipe):
                # made on another checkout or machine (runs/ is not committed): not made twice
                log(
                    f"== {name} (seed {seed}): recorded in results/{result}.json"
                )
                continue
            log(f"== {name} (seed {seed}): {about}")
            train(
                dataclasses.replace(recipe, seed=seed),
                run_dir,
                data=split,
                evaluate_test=False,
                log=log,
            )
    return collect(
        budget,
        table,
        result,
        log,
        root=root,
        dataset=split.source,
        git_commit=commit,
    )


def _recorded_runs(budget: Budget, result: str | None) -> dict:
    """The runs ``results/<result>.json`` holds for this budget ({} if there is no such file).

    A record from before runs carried their own ``hardware`` gets the file's (the machine of the
    command that wrote it, which made every run in it until a second machine added one).
    """
    if not result:
        return {}
    try:
        stored = read_result(result)
    except FileNotFoundError:
        return {}
    data = stored["data"]
    if data.get("budget") != budget.name:
        raise ValueError(
            f"results/{result}.json holds the {data.get('budget')!r} budget, not {budget.name!r}: "
            "choose another --result name"
        )
    made_on = machine(stored["provenance"].get("hardware", {}))
    for seeds in data["runs"].values():
        for record in seeds.values():
            record.setdefault("hardware", made_on or None)
    return data["runs"]


# Fields that only the test set's evaluation reads: an ablation, which never touches the test set,
# runs the same whatever they hold.
_TEST_ONLY = ("test_shifts",)


def recipe_change(stored: dict, recipe: Recipe) -> list[str]:
    """The fields (training or validation) in which a stored run's recipe differs from ``recipe``."""
    leave_out = ("name", "seed") + _TEST_ONLY
    theirs, ours = (
        as_stored(stored, leave_out=leave_out),
        as_stored(recipe, leave_out=leave_out),
    )
    return sorted(
        k for k in set(theirs) | set(ours) if theirs.get(k) != ours.get(k)
    )


def collect(
    budget: Budget,
    table: Variants,
    result: str | None,
    log: Callable[[str], None] = print,
    *,
    root: Path,
    dataset: str,
    git_commit: str | None = None,
) -> dict:
    """Gather every finished run of ``table``'s variants under ``root`` (any seeds) into one result.

    Runs already recorded in ``results/<result>.json`` whose run directory is not under ``root``
    (``runs/`` is not committed, so a fresh clone has none) are kept: adding a seed never drops
    the half-hour runs made on another checkout.  A run directory wins over its old record.
    """
    recorded = _recorded_runs(budget, result)
    runs: dict = {}
    wall = 0.0
    for name, (part, about, recipe) in table.items():
        found = {}
        for path in sorted((root / name).glob("seed*/summary.json")):
            summary = json.loads(path.read_text())
            found[path.parent.name[4:]] = run_record(summary, about, part)
        for seed, record in recorded.get(name, {}).items():
            if seed in found:
                continue
            differ = recipe_change(record["recipe"], recipe)
            if differ:  # the variant has been redefined since: its old runs are another variant's
                log(
                    f"{name} (seed {seed}): dropped from results/{result}.json (the variant's recipe has changed "
                    f"since, in {differ})"
                )
                continue
            # the variant's words as they are now
            found[seed] = {
                **record,
                "about": about,
                "part": part,
            }
            log(
                f"{name} (seed {seed}): kept from results/{result}.json (no run directory here)"
            )
        for seed in sorted(found, key=int):
            runs.setdefault(name, {})[seed] = found[seed]
            wall += found[seed]["train_time_s"]
    out = {
        "budget": budget.name,
        "budget_about": budget.about,
        "order": list(runs),
        "runs": runs,
        "selection": f"best validation accuracy over epochs ({SPLIT_ABOUT}); "
        "the test set is not used by the sweep",
    }
    for name, seeds in runs.items():
        accs = [r["best_val_acc"] for r in seeds.values()]
        log(
            f"{name:16s} val acc "
            + " ".join(f"{a:.4f}" for a in accs)
            + f"  ({seeds[next(iter(seeds))]['about']})"
        )
    if result and runs:
        write_result(
            result,
            out,
            dataset=dataset,
            split=f"validation ({SPLIT_ABOUT})",
            wall_time_s=wall,
            git_commit=git_commit,
        )
    return out


def clean_history(history: list[dict]) -> list[dict]:
    """A run's history with the clean training accuracy and loss (``Recipe.clean_train_eval``: training
    images as they are) in place of the batches' own, which mixing and strong augmentation lower:
    what ``diagnose_curves`` should read.  Raises ValueError for a run that did not measure them."""
    if not history or any("clean_train_acc" not in h for h in history):
        raise ValueError(
            "this history has no clean training accuracy: train with the recipe's clean_train_eval "
            "set (e.g. --set clean_train_eval=5000)"
        )
    return [
        {
            **h,
            "train_acc": h["clean_train_acc"],
            "train_loss": h["clean_train_loss"],
        }
        for h in history
    ]


def lr_range_test(
    recipe: Recipe,
    split: cdata.Split,
    *,
    min_lr: float = 1e-5,
    max_lr: float = 1.0,
    steps: int = 200,
    seed: int = 0,
    log: Callable[[str], None] = print,
) -> dict:
    """Smith's learning-rate range test: raise the lr geometrically each step, record the loss.

    Stops early once the smoothed loss exceeds 4x its minimum (the lr is past divergence).
    Returns ``{"lr": [...], "loss": [...], "smoothed": [...], "suggested_lr": float}``.
    """
    seed_everything(seed)
    model = build_model(recipe)
    model.train()
    # bf16 only where this CPU does it natively
    amp = choose_amp(recipe, model, torch.device("cpu"), log)
    trainer = Trainer(
        model,
        torch.optim.AdamW(
            model.parameters(), lr=min_lr, weight_decay=recipe.weight_decay
        ),
        amp_dtype=amp,
    )
    loader = cdata.BatchLoader(
        split.train_images,
        split.train_labels,
        recipe.batch_size,
        shuffle=True,
        augment=recipe.augment,
        crop_padding=recipe.crop_padding,
        drop_last=True,
        seed=seed,
    )
    factor = (max_lr / min_lr) ** (1 / (steps - 1))
    lrs, losses, smoothed, avg, best = [], [], [], 0.0, math.inf
    batches = iter(())
    for step in range(steps):
        lr = min_lr * factor**step
        trainer.set_lr(lr)
        try:
            x, y = next(batches)
        except StopIteration:
            loader.set_epoch(step)
            batches = iter(loader)
            x, y = next(batches)
        with trainer.autocast():
            loss = F.cross_entropy(model(x).float(), y)
        trainer.step(loss)
        avg = 0.9 * avg + 0.1 * loss.item()
        # bias-corrected exponential moving average
        smooth = avg / (1 - 0.9 ** (step + 1))
        lrs.append(lr), losses.append(loss.item()), smoothed.append(smooth)
        best = min(best, smooth)
        if step > 10 and (smooth > 4 * best or not math.isfinite(smooth)):
            break
    # A common heuristic: a tenth of the lr at the lowest smoothed loss.
    at_min = lrs[min(range(len(smoothed)), key=smoothed.__getitem__)]
    return {
        "lr": lrs,
        "loss": losses,
        "smoothed": smoothed,
        "lr_at_min_loss": at_min,
        "suggested_lr": at_min / 10,
    }


def search(
    budget: Budget,
    start: Recipe,
    space: list[Param],
    trials: int,
    result: str | None,
    seed: int = 0,
    log: Callable[[str], None] = print,
    split: cdata.Split | None = None,
    root: Path = SWEEP_DIR,
    rerun_seeds: tuple[int, ...] = (1, 2, 3),
) -> dict:
    """Random search with successive-halving pruning (Optuna) over ``space``, each trial ``start``
    with the drawn settings; resumable (SQLite).

    The best completed trial won among many draws, so its accuracy is biased upwards: its
    settings are trained again, to the end, with each of ``rerun_seeds`` (fresh seeds, not the
    trial's), and those runs are what the result compares with ``start``.
    """
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    commit = code_version()
    top = start
    # One rung, at a third of the budget (the next, at three times that, would lie beyond the end),
    # and never before one epoch after the warm-up: while the lr still rises, a trial's accuracy
    # says more about how fast its rate rises than about where it will end.  The best third of
    # the trials at that rung go on to the end.
    first_rung = max(
        math.ceil(top.warmup_epochs) + 1, math.ceil(top.epochs / 3)
    )
    split = split if split is not None else load_budget_data(budget)
    root = Path(root) / budget.name / "search"
    root.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():  # heartbeats (which fail trials a killed run left "running") are "experimental"
        warnings.simplefilter(
            "ignore", optuna.exceptions.ExperimentalWarning
        )
        storage = optuna.storages.RDBStorage(
            f"sqlite:///{root / 'study.db'}",
            heartbeat_interval=60,
            grace_period=120,
        )
    study = optuna.create_study(
        study_name=f"{budget.name}-search-r{first_rung}",
        storage=storage,
        load_if_exists=True,
        direction="maximize",
        sampler=optuna.samplers.RandomSampler(seed=seed),
        pruner=optuna.pruners.SuccessiveHalvingPruner(
            min_resource=first_rung, reduction_factor=3
        ),
    )

    def recipe_for(params: dict) -> Recipe:
        return apply_overrides(
            top,
            {p.key or p.name: params[p.name] for p in space},
            name=f"{budget.name}/search",
        )

    def objective(trial: optuna.Trial) -> float:
        params = {
            p.name: trial.suggest_float(p.name, p.low, p.high, log=p.log)
            for p in space
        }

        def report(record: dict) -> None:
            trial.report(record["val_acc"], record["epoch"])
            if trial.should_prune():
                raise optuna.TrialPruned()

        summary = train(
            recipe_for(params),
            root / f"trial{trial.number}",
            data=split,
            evaluate_test=False,
            on_epoch=report,
            log=log,
        )
        return summary["best_val_acc"]

    done = sum(
        t.state
        in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
        for t in study.trials
    )
    if trials > done:
        study.optimize(objective, n_trials=trials - done)
    rows = [
        {
            "number": t.number,
            "state": t.state.name,
            "params": t.params,
            "val_acc_by_epoch": {
                str(k): v for k, v in sorted(t.intermediate_values.items())
            },
            "value": t.value,
            "seconds": (
                t.datetime_complete - t.datetime_start
            ).total_seconds()
            if t.datetime_complete
            else None,
        }
        for t in study.trials
    ]
    finished = [
        t
        for t in study.trials
        if t.state == optuna.trial.TrialState.COMPLETE
    ]
    reruns: dict[str, float] = {}
    rerun_time = 0.0
    if finished:
        # the winner again, with fresh seeds and no pruning
        for k in rerun_seeds:
            run_dir = root / f"best_trial{study.best_trial.number}_seed{k}"
            path = run_dir / "summary.json"
            if not path.exists():
                log(
                    f"== the best trial ({study.best_trial.number}) again, seed {k}"
                )
                train(
                    dataclasses.replace(
                        recipe_for(study.best_params), seed=k
                    ),
                    run_dir,
                    data=split,
                    evaluate_test=False,
                    log=log,
                )
            summary = json.loads(path.read_text())
            reruns[str(k)] = summary["best_val_acc"]
            rerun_time += summary["train_time_s"]
    out = {
        "budget": budget.name,
        "budget_about": budget.about,
        "sampler": "random (seeded)",
        "pruner": f"successive halving (one rung, after epoch {first_rung} of {top.epochs}: a third of the budget "
        f"and after the warm-up; the best third go on)",
        "first_rung": first_rung,
        "trials": rows,
        "best": (
            {
                "number": study.best_trial.number,
                "params": study.best_params,
                "val_acc": study.best_value,
                "reruns": reruns,
            }
            if finished
            else None
        ),
        "epochs_spent": sum(
            len(t.intermediate_values) for t in study.trials
        ),
        "epochs_without_pruning": len(study.trials) * top.epochs,
    }
    if result:
        write_result(
            result,
            out,
            dataset=split.source,
            split=f"validation ({SPLIT_ABOUT})",
            wall_time_s=sum(r["seconds"] or 0 for r in rows) + rerun_time,
            git_commit=commit,
        )
    return out
