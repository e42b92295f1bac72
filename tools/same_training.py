"""Does training still give the same numbers?  Hashes of a smoke run, one process and two (DDP).

Run it once against each checkout and compare the printed hashes (they must match bit for bit):

    PYTHONPATH=/tmp/trainer_before .venv/bin/python tools/same_training.py   # the code before a change
    PYTHONPATH=. .venv/bin/python tools/same_training.py                     # the code after it

Give both the same data: a checkout finds CIFAR-10 beside itself (``../shared/data``) or through
``COURSE_CIFAR10``, and one that finds none trains on the synthetic stand-in, so a worktree in
``/tmp`` needs ``COURSE_CIFAR10=...`` to be compared with the main checkout.

Run it as a script path (not ``-m tools.same_training``): ``python -m`` puts the current folder first
on ``sys.path``, ahead of ``PYTHONPATH``, and would import this checkout's ``course_utils`` whatever
``PYTHONPATH`` says.  The first line printed is the ``course_utils`` that was imported.

Each variant trains the ``smoke`` recipe in fast mode with a fixed seed, built here field by field
(not read from the recipe table, which may move or change between the two checkouts), in a fresh
process: once alone and once as two DistributedDataParallel processes (``torch.distributed.run``,
gloo on the CPU; the trainer reads torchrun's environment).  Every process runs one thread, so the
float arithmetic is the same from run to run.  Printed per run: the sha256 of the last epoch's model
state_dict (``checkpoint.pt``), of the best-validation weights the test used (``best_model.pt``), of
the history's numbers without its clock readings, and of the summary without its times and machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

# The history's and summary's clock readings: they differ from run to run whatever the code does.
TIMES = {
    "epoch_time_s",
    "train_images_per_s",
    "elapsed_s",
    "train_time_s",
    "time_to_best_s",
    "hardware",
}
VARIANTS = ("smoke", "mixed")


def recipe(variant: str):
    """``smoke`` as the recipe table defines it at c09bbee; ``mixed`` adds the optional parts of a run
    (MixUp and CutMix for the first two thirds, TrivialAugment, mirrored and shifted test views, the
    clean training pass) so that each of them is compared too."""
    from course_utils.training.recipes import Recipe

    smoke = Recipe(
        name="smoke",
        model_kwargs=dict(
            img_size=32,
            num_classes=10,
            patch_size=8,
            dim=32,
            depth=1,
            num_heads=2,
            mlp_dim=64,
        ),
        epochs=3,
        batch_size=64,
        lr=3e-3,
        warmup_epochs=0.5,
        amp="none",
        fast_train=512,
        fast_eval=256,
        fast_epochs=3,
    )
    if variant == "smoke":
        return smoke
    return dataclasses.replace(
        smoke,
        name="smoke_mixed",
        mixup_alpha=0.8,
        cutmix_alpha=1.0,
        mix_until=0.67,
        policy="trivial",
        eval_flip=True,
        test_shifts=((1, 0), (0, -1)),
        clean_train_eval=128,
    )


def data(variant: str):
    """``smoke`` loads its data as the trainer does (CIFAR-10 where a copy is found, else the synthetic
    stand-in); ``mixed`` hands the trainer a synthetic split (the ``data=`` path)."""
    if variant == "smoke":
        return None
    from course_utils.training import data as cdata

    return cdata.split_validation(
        cdata.synthetic_cifar(n_train=1200, n_test=300, seed=3),
        val_size=200,
        seed=0,
    )


def _sha_state(state: dict) -> str:
    """sha256 over every entry's name, dtype, shape and bytes, in name order."""
    import torch

    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name]
        h.update(name.encode())
        if isinstance(t, torch.Tensor):
            t = t.detach().cpu().contiguous()
            h.update(f"{t.dtype}{tuple(t.shape)}".encode())
            h.update(
                t.view(torch.uint8).numpy().tobytes() if t.numel() else b""
            )
        else:
            h.update(repr(t).encode())
    return h.hexdigest()


def _sha_json(value) -> str:
    # json writes floats with repr: exact, so equal hashes mean equal numbers
    return hashlib.sha256(
        json.dumps(value, sort_keys=True).encode()
    ).hexdigest()


def worker(variant: str, out: Path) -> None:
    """Train one variant into ``out`` and (on rank 0) write ``out/hashes.json``."""
    import torch

    import course_utils
    from course_utils.training.trainer import train

    torch.set_num_threads(1)
    summary = train(
        recipe(variant),
        out / "run",
        fast=True,
        data=data(variant),
        device="cpu",
        log=lambda *_: None,
    )
    if int(os.environ.get("RANK", "0")) == 0:
        run = out / "run"
        last = torch.load(
            run / "checkpoint.pt", map_location="cpu", weights_only=False
        )
        history = [
            {k: v for k, v in h.items() if k not in TIMES}
            for h in last["history"]
        ]
        stable = {k: v for k, v in summary.items() if k not in TIMES}
        stable["history"] = [
            {k: v for k, v in h.items() if k not in TIMES}
            for h in summary["history"]
        ]
        hashes = {
            "course_utils": course_utils.__file__,
            "world_size": summary["world_size"],
            "final_model": _sha_state(last["model"]),
            "best_model": _sha_state(
                torch.load(run / "best_model.pt", map_location="cpu")
            ),
            "history": _sha_json(history),
            "summary": _sha_json(stable),
            "test_acc": summary.get("test_acc"),
            "last_train_loss": history[-1]["train_loss"],
        }
        (out / "hashes.json").write_text(json.dumps(hashes, indent=1))
    if (
        torch.distributed.is_available()
        and torch.distributed.is_initialized()
    ):
        torch.distributed.destroy_process_group()


def _run(variant: str, processes: int, root: Path) -> dict:
    out = root / f"{variant}_{processes}"
    out.mkdir(parents=True)
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    # a single run must not think it is one of several
    env.pop("WORLD_SIZE", None)
    me = [
        str(Path(__file__).resolve()),
        "--worker",
        variant,
        "--out",
        str(out),
    ]
    if processes == 1:
        cmd = [sys.executable, *me]
    else:
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            str(processes),
            *me,
        ]
    proc = subprocess.run(
        cmd, env=env, capture_output=True, text=True, timeout=900
    )
    if proc.returncode != 0:
        raise SystemExit(
            f"{' '.join(cmd)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
        )
    return json.loads((out / "hashes.json").read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument(
        "--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS)
    )
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.out)
        return 0
    import course_utils

    print(f"course_utils: {course_utils.__file__}")
    with tempfile.TemporaryDirectory(prefix="same_training_") as tmp:
        for variant in args.variants:
            for processes in (1, 2):
                h = _run(variant, processes, Path(tmp))
                assert Path(h["course_utils"]) == Path(
                    course_utils.__file__
                ), (h["course_utils"], course_utils.__file__)
                print(
                    f"{variant:6s} world {h['world_size']}: final_model {h['final_model']}\n"
                    f"{'':15s} best_model  {h['best_model']}\n"
                    f"{'':15s} history     {h['history']}\n"
                    f"{'':15s} summary     {h['summary']}  (test_acc {h['test_acc']}, "
                    f"last train loss {h['last_train_loss']!r})",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
