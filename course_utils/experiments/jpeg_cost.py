"""What one more JPEG generation costs a trained model (chapter 08, question 1).

    python -m course_utils.experiments.jpeg_cost                       # the gpu_fast run's weights
    python -m course_utils.experiments.jpeg_cost --run ch08_gpu_fast --weights runs/gpu_fast/best_model.pt

The course's CIFAR-10 is a JPEG copy: the published accuracies are on the original images, which
this machine does not have, so the copy's cost cannot be read directly.  What can be measured is
the cost of the same step once more: every test image of the copy is encoded again with its own
quantisation tables and chroma subsampling (Pillow's ``quality="keep"``, the copy's own quality)
and decoded the way the course's loader decodes it.  A trained model is evaluated on both test
sets (one view, the same weights and images, so the comparison is paired), and the result holds:

- the quality the copy was written at, estimated from its luminance table against the standard
  (IJG) tables;
- how far the second generation moves the pixels (PSNR against the copy);
- the test accuracy on each generation, the images that flip between right and wrong, and the
  paired difference with its 95% interval (normal approximation over the 10,000 paired images;
  McNemar's exact p-value beside it).

What it does not measure: the first generation (original -> copy) quantises the original's DCT
coefficients for the first time, while a second generation with the same tables finds most
coefficients already on the grid, so it moves fewer pixels (compare its PSNR with the copy's
quality) and its cost reads as a lower bound of the copy's cost, not an estimate of it.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import math
import sys
import tarfile
import time
from pathlib import Path

import torch

from ..results import read_result, write_result
from ..training import data as cdata
from ..training.recipes import build_model, from_stored

COMMAND = "python -m course_utils.experiments.jpeg_cost"
RESULT = "ch08_jpeg_cost"
# the IJG standard luminance table (ITU-T T.81, Annex K), in natural (row-major) order
IJG_LUMINANCE = [
    16, 11, 10, 16, 24, 40, 51, 61,
    12, 12, 14, 19, 26, 58, 60, 55,
    14, 13, 16, 24, 40, 57, 69, 56,
    14, 17, 22, 29, 51, 87, 80, 62,
    18, 22, 37, 56, 68, 109, 103, 77,
    24, 35, 55, 64, 81, 104, 113, 92,
    49, 64, 78, 87, 103, 121, 120, 101,
    72, 92, 95, 98, 112, 100, 103, 99,
]  # fmt: skip


def ijg_table(quality: int) -> list[int]:
    """The luminance table libjpeg writes at ``quality`` (1-100)."""
    scale = 5000 // quality if quality < 50 else 200 - 2 * quality
    return [min(255, max(1, (q * scale + 50) // 100)) for q in IJG_LUMINANCE]


def estimate_quality(table: list[int]) -> tuple[int, int]:
    """The IJG quality whose luminance table is nearest ``table`` (64 entries, natural order), and
    the sum of absolute differences at it (0: an exact match)."""
    errors = {
        q: sum(abs(a - b) for a, b in zip(ijg_table(q), table))
        for q in range(1, 101)
    }
    best = min(errors, key=errors.get)
    return best, errors[best]


def test_files(archive: Path) -> list[tuple[int, bytes]]:
    """``(label, jpeg bytes)`` of every test image, in the loader's order (class, then file name)."""
    found: dict[str, list[tuple[str, bytes]]] = {}
    with tarfile.open(archive, mode="r|*") as tar:
        for m in tar:
            parts = Path(m.name).parts
            if m.isfile() and len(parts) >= 3 and parts[-3] == "test":
                found.setdefault(parts[-2], []).append(
                    (parts[-1], tar.extractfile(m).read())
                )
    missing = [c for c in cdata.CLASSES if c not in found]
    if missing:
        raise FileNotFoundError(
            f"{archive}: no test/<class>/ images for {missing}; pass the JPEG copy's .tar.gz"
        )
    return [
        (label, blob)
        for label, cls in enumerate(cdata.CLASSES)
        for _, blob in sorted(found[cls], key=lambda item: item[0])
    ]


def encode_again(blob: bytes) -> tuple[bytes, list[int]]:
    """``blob`` encoded once more with its own tables and subsampling; and its luminance table."""
    from PIL import Image

    with Image.open(io.BytesIO(blob)) as image:
        table = list(image.quantization[0])
        out = io.BytesIO()
        image.save(out, format="JPEG", quality="keep")
    return out.getvalue(), table


def psnr(a: torch.Tensor, b: torch.Tensor) -> float:
    """Peak signal-to-noise ratio (dB) between two uint8 image batches."""
    mse = (a.double() - b.double()).pow(2).mean().item()
    return math.inf if mse == 0 else 10 * math.log10(255**2 / mse)


def predictions(
    model: torch.nn.Module, images: torch.Tensor, batch: int = 500
) -> torch.Tensor:
    """The model's class for each uint8 image ``(N, 3, 32, 32)``, one view."""
    model.eval()
    out = []
    with torch.no_grad():
        for start in range(0, len(images), batch):
            x = cdata.normalize(images[start : start + batch])
            out.append(model(x).argmax(-1))
    return torch.cat(out)


def sign_test_p(k: int, n: int) -> float:
    """Two-sided exact p-value of ``k`` or fewer of ``n`` fair coin flips landing one way
    (McNemar's exact test on ``n`` discordant pairs, ``k`` of them the rarer way)."""
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(k, n - k) + 1))
    return min(1.0, 2 * tail / 2**n)


def paired(right_a: torch.Tensor, right_b: torch.Tensor) -> dict:
    """The accuracy difference b - a over the same images, its 95% interval and McNemar's exact p."""
    n = len(right_a)
    gained = int((~right_a & right_b).sum())  # wrong on a, right on b
    lost = int((right_a & ~right_b).sum())
    diff = (gained - lost) / n
    se = math.sqrt(max(gained + lost - (gained - lost) ** 2 / n, 0)) / n
    return {
        "images": n,
        "right_then_wrong": lost,
        "wrong_then_right": gained,
        "difference": diff,
        "interval_95": [diff - 1.96 * se, diff + 1.96 * se],
        "mcnemar_exact_p": sign_test_p(min(gained, lost), gained + lost),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=COMMAND,
        description=__doc__.split("\n")[0],
    )
    parser.add_argument(
        "--run",
        default="ch08_gpu_fast",
        help="the result file of the run whose weights are read (its recipe builds the model)",
    )
    parser.add_argument("--weights", default="runs/gpu_fast/best_model.pt")
    parser.add_argument(
        "--archive",
        default=None,
        help="the JPEG copy (default: COURSE_CIFAR10 or ../shared/data/cifar10-jpeg.tar.gz)",
    )
    parser.add_argument("--limit", type=int, default=None, help="tests")
    parser.add_argument("--result", default=RESULT)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    archive = Path(args.archive) if args.archive else cdata.jpeg_archive()
    if archive is None or not archive.is_file():
        parser.error(
            "no JPEG copy of CIFAR-10 found: pass --archive PATH.tar.gz or set COURSE_CIFAR10"
        )
    weights = Path(args.weights)
    if not weights.is_file():
        parser.error(
            f"{weights}: no such weights file; `make gpu-window` brings a run's best_model.pt back"
        )
    run = read_result(args.run)
    recipe = from_stored(run["data"]["recipe"])
    model = build_model(recipe)
    state = torch.load(weights, map_location="cpu", weights_only=True)
    # a compiled model's weights carry its wrapper's prefix
    model.load_state_dict(
        {k.removeprefix("_orig_mod."): v for k, v in state.items()}
    )

    files = test_files(archive)[: args.limit]
    labels = torch.tensor([label for label, _ in files])
    again, tables = zip(*(encode_again(blob) for _, blob in files))
    first = cdata.decode_jpegs([blob for _, blob in files])
    second = cdata.decode_jpegs(list(again))
    qualities = {estimate_quality(t) for t in tables}
    print(
        f"{len(files)} test images; quality (IJG table, error): {sorted(qualities)}; "
        f"second generation PSNR {psnr(first, second):.1f} dB",
        flush=True,
    )
    right = {}
    for name, images in (("copy", first), ("again", second)):
        right[name] = predictions(model, images) == labels
        print(
            f"{name}: test accuracy {right[name].float().mean():.4f}",
            flush=True,
        )
    data = {
        "run": args.run,
        "run_commit": run["provenance"]["git_commit"],
        "weights_sha256": hashlib.sha256(weights.read_bytes()).hexdigest(),
        "views": 1,
        "precision": "float32",
        "quality_ijg": sorted(q for q, _ in qualities),
        "quality_table_error": max(e for _, e in qualities),
        "psnr_second_generation_db": psnr(first, second),
        "pixels_changed": float((first != second).float().mean()),
        "test_acc_copy": float(right["copy"].float().mean()),
        "test_acc_again": float(right["again"].float().mean()),
        "again_minus_copy": paired(right["copy"], right["again"]),
    }
    p = data["again_minus_copy"]
    print(
        f"again - copy: {100 * p['difference']:+.2f} points, 95% interval "
        f"[{100 * p['interval_95'][0]:+.2f}, {100 * p['interval_95'][1]:+.2f}]; "
        f"{p['right_then_wrong']} images right then wrong, {p['wrong_then_right']} wrong then right; "
        f"McNemar p = {p['mcnemar_exact_p']:.3g}"
    )
    write_result(
        args.result,
        data,
        dataset="CIFAR-10, JPEG copy (test split) and its re-encoding",
        split="test (the run's weights were chosen on validation)",
        wall_time_s=time.perf_counter() - start,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
