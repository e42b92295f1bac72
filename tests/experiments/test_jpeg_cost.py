"""What one more JPEG generation costs: the quality estimate, the paired reading, the whole path."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import torch

from course_utils.experiments import jpeg_cost
from course_utils.experiments.recipes import RECIPES
from course_utils.training.recipes import apply_overrides, build_model

ROOT = Path(__file__).resolve().parents[2]


def _jpeg(quality: int, seed: int) -> bytes:
    from PIL import Image

    g = torch.Generator().manual_seed(seed)
    # smooth images with some texture: what JPEG is made for
    base = torch.rand(3, 4, 4, generator=g)
    img = torch.nn.functional.interpolate(
        base[None], size=32, mode="bilinear"
    )[0]
    img = (img + 0.1 * torch.rand(3, 32, 32, generator=g)).clamp(0, 1)
    array = (255 * img).byte().permute(1, 2, 0).numpy()
    out = io.BytesIO()
    Image.fromarray(array).save(out, format="JPEG", quality=quality)
    return out.getvalue()


@pytest.mark.parametrize("quality", [30, 50, 75, 90])
def test_the_quality_is_read_back_from_the_tables_pillow_writes(quality):
    from PIL import Image

    with Image.open(io.BytesIO(_jpeg(quality, 0))) as image:
        table = list(image.quantization[0])
    assert jpeg_cost.ijg_table(50) == jpeg_cost.IJG_LUMINANCE
    assert jpeg_cost.ijg_table(quality) == table, (
        "Pillow writes libjpeg's scaled table, in natural order"
    )
    assert jpeg_cost.estimate_quality(table) == (quality, 0)


def test_encoding_again_keeps_the_tables_and_moves_pixels_little():
    from PIL import Image

    blob = _jpeg(75, 1)
    again, table = jpeg_cost.encode_again(blob)
    with Image.open(io.BytesIO(again)) as image:
        assert list(image.quantization[0]) == table
    first, second = jpeg_cost.cdata.decode_jpegs([blob, again])
    assert first.shape == (3, 32, 32)
    assert jpeg_cost.psnr(first[None], second[None]) > 30


def test_the_paired_reading_counts_flips_and_its_interval():
    copy = torch.tensor([True] * 90 + [False] * 10)
    again = copy.clone()
    again[:6] = False  # six right -> wrong
    again[90:92] = True  # two wrong -> right
    p = jpeg_cost.paired(copy, again)
    assert (p["right_then_wrong"], p["wrong_then_right"]) == (6, 2)
    assert p["difference"] == pytest.approx(-0.04)
    low, high = p["interval_95"]
    assert low < -0.04 < high < 0.0 + 0.02
    # the sign test: 2 or fewer of 8 discordant pairs one way, two-sided
    assert p["mcnemar_exact_p"] == pytest.approx(2 * (1 + 8 + 28) / 256)
    assert jpeg_cost.sign_test_p(0, 0) == 1.0
    assert jpeg_cost.sign_test_p(5, 10) == 1.0


def test_the_whole_path_on_a_small_archive(tmp_path):
    archive = tmp_path / "copy.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for c, cls in enumerate(jpeg_cost.cdata.CLASSES):
            for i in range(2):
                blob = _jpeg(80, 10 * c + i)
                info = tarfile.TarInfo(
                    f"cifar10-jpeg/test/{cls}/{i:04d}.jpg"
                )
                info.size = len(blob)
                tar.addfile(info, io.BytesIO(blob))
    results = tmp_path / "results"
    results.mkdir()
    recipe = apply_overrides(
        RECIPES["gpu_fast"],
        ['model_kwargs={"dim": 32, "depth": 1, "num_heads": 2}'],
    )
    (results / "tiny_run.json").write_text(
        json.dumps(
            {
                "provenance": {"git_commit": "0" * 40},
                "data": {"recipe": recipe.to_dict()},
            }
        )
    )
    torch.save(build_model(recipe).state_dict(), tmp_path / "w.pt")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "course_utils.experiments.jpeg_cost",
            "--run",
            "tiny_run",
            "--weights",
            str(tmp_path / "w.pt"),
            "--archive",
            str(archive),
            "--result",
            "tiny_cost",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "COURSE_RESULTS_DIR": str(results),
        },
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    data = json.loads((results / "tiny_cost.json").read_text())["data"]
    assert data["quality_ijg"] == [80] and data["quality_table_error"] == 0
    p = data["again_minus_copy"]
    assert p["images"] == 20
    assert data["test_acc_again"] - data["test_acc_copy"] == pytest.approx(
        p["difference"]
    )


def test_missing_weights_are_named_with_the_fix(tmp_path):
    with pytest.raises(SystemExit):
        jpeg_cost.main(
            ["--weights", str(tmp_path / "none.pt"), "--archive", __file__]
        )
