"""Training-data throughput: the course's batch pipeline vs the usual per-image PIL DataLoader.

    python -m benchmarks.data_pipeline            # writes results/bench_data_pipeline.json

Both deliver normalised, randomly cropped (padding 4) and flipped 32x32 CIFAR-10 batches of
256 to the training loop on the CPU:

- baseline: torchvision's classic recipe, one PIL image at a time in 2 worker processes
  (``RandomCrop(32, padding=4)``, ``RandomHorizontalFlip``, ``ToTensor``, ``Normalize``);
- course: ``course_utils.training.data.BatchLoader`` (uint8 tensors in memory, one gather per batch).

The two are measured alternately in one run (after a warm-up batch each) and the median of
the repeats is reported with their ratio.
"""

from __future__ import annotations

import statistics
import time

import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms

from course_utils.training import data as cdata
from course_utils.results import write_result

BATCH, BATCHES, REPEATS = 256, 30, 3


class PILCifar(Dataset):
    """How torchvision's CIFAR10 serves images: HWC uint8 arrays turned into PIL per item."""

    def __init__(
        self, images: torch.Tensor, labels: torch.Tensor, transform
    ):
        self.arrays = images.permute(0, 2, 3, 1).numpy()
        self.labels = labels.tolist()
        self.transform = transform

    def __len__(self):
        return len(self.arrays)

    def __getitem__(self, i):
        return self.transform(Image.fromarray(self.arrays[i])), self.labels[
            i
        ]


def _rate(batches) -> float:
    it = iter(batches)
    # warm-up: worker start-up and first allocation are not throughput
    next(it)
    start = time.perf_counter()
    n = 0
    for _ in range(BATCHES):
        x, _ = next(it)
        n += len(x)
    return n / (time.perf_counter() - start)


def main() -> dict:
    data = cdata.load_cifar10()
    images, labels = data.train_images, data.train_labels
    tf = transforms.Compose(
        [
            transforms.RandomCrop(32, padding=4),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize(cdata.MEAN, cdata.STD),
        ]
    )
    baseline, course = [], []
    wall = time.perf_counter()
    for r in range(REPEATS):
        loader = DataLoader(
            PILCifar(images, labels, tf),
            batch_size=BATCH,
            shuffle=True,
            num_workers=2,
            drop_last=True,
        )
        baseline.append(_rate(loader))
        del loader
        course.append(
            _rate(
                cdata.BatchLoader(
                    images,
                    labels,
                    BATCH,
                    shuffle=True,
                    augment=True,
                    drop_last=True,
                    seed=r,
                )
            )
        )
        print(
            f"repeat {r + 1}: PIL DataLoader {baseline[-1]:8.0f} img/s   course BatchLoader {course[-1]:8.0f} img/s"
        )
    b, c = statistics.median(baseline), statistics.median(course)
    result = {
        "batch_size": BATCH,
        "batches_timed": BATCHES,
        "repeats": REPEATS,
        "pil_dataloader_2_workers_img_per_s": round(b, 1),
        "course_batchloader_img_per_s": round(c, 1),
        "ratio_course_over_pil": round(c / b, 2),
        "all_pil": baseline,
        "all_course": course,
    }
    print(
        f"median: PIL DataLoader {b:.0f} img/s, course {c:.0f} img/s, ratio {c / b:.1f}x (target >= 3x)"
    )
    write_result(
        "bench_data_pipeline",
        result,
        dataset=data.source,
        wall_time_s=time.perf_counter() - wall,
    )
    return result


if __name__ == "__main__":
    main()
