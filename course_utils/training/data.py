"""CIFAR-10 for the course: loading, caching, a seeded validation split (and seeded subsets of one,
for fast mode), and batch loading with augmentation on whole batches of tensors (on the training device).

Where the images come from, in order (``load_cifar10``):

1. ``root`` (or ``$COURSE_CIFAR10``) pointing at torchvision's format (``cifar-10-batches-py``),
   at an image-folder copy (``train/<class>/*.jpg``, ``test/<class>/*.jpg``) or at a
   ``.tar.gz`` of one (like ``cifar10-jpeg.tar.gz``);
2. a copy found in the usual places (the course cache, ``../shared/data`` beside the project);
3. ``download=True``: torchvision downloads the original and checks its MD5.

Image folders are decoded once and cached as a uint8 tensor file in the course cache
(``$COURSE_CACHE`` or ``~/.cache/attention-course``).  A synthetic stand-in exists for CI and
grading fast mode only: ``load_cifar10(allow_synthetic=True)`` uses it when no real copy is
found, and says so loudly.
"""

from __future__ import annotations

import dataclasses
import hashlib
import tarfile
import warnings
from pathlib import Path
from typing import Iterator, Literal, get_args

import torch
import torch.nn.functional as F
from torch import Tensor

from .. import settings
from ..files import torch_save
from ..results import checkout_root

CLASSES = (
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
)
# per-channel statistics of the CIFAR-10 training set
MEAN = (
    0.4914,
    0.4822,
    0.4465,
)
STD = (0.2470, 0.2435, 0.2616)


def cache_dir() -> Path:
    path = Path(settings.get("COURSE_CACHE"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclasses.dataclass
class ImageData:
    """uint8 images ``(N, 3, 32, 32)`` and int64 labels ``(N,)`` for train and test."""

    train_images: Tensor
    train_labels: Tensor
    test_images: Tensor
    test_labels: Tensor
    source: str  # what the book must say about the data, e.g. "CIFAR-10, JPEG copy"
    classes: tuple = CLASSES

    def __post_init__(self):
        for name in ("train_images", "test_images"):
            t = getattr(self, name)
            if t.dtype != torch.uint8 or t.dim() != 4 or t.shape[1] != 3:
                raise ValueError(
                    f"ImageData.{name} must be uint8 (N, 3, H, W), got {t.dtype} {tuple(t.shape)}"
                )
        if len(self.train_images) != len(self.train_labels) or len(
            self.test_images
        ) != len(self.test_labels):
            raise ValueError("ImageData: images and labels differ in number")


@dataclasses.dataclass
class Split:
    """A train/validation split carved from the training set; the test set stays untouched."""

    train_images: Tensor
    train_labels: Tensor
    val_images: Tensor
    val_labels: Tensor
    test_images: Tensor
    test_labels: Tensor
    source: str


# ------------------------------------------------------------------ readers
def _from_torchvision(root: Path, download: bool) -> ImageData:
    from torchvision.datasets import CIFAR10

    parts = []
    for train in (True, False):
        # download verifies the MD5
        ds = CIFAR10(str(root), train=train, download=download)
        parts.append(
            (
                torch.from_numpy(ds.data).permute(0, 3, 1, 2).contiguous(),
                torch.tensor(ds.targets),
            )
        )
    return ImageData(
        parts[0][0],
        parts[0][1],
        parts[1][0],
        parts[1][1],
        source="CIFAR-10 (original release)",
    )


def decode_jpegs(blobs: list[bytes]) -> Tensor:
    """JPEG files' bytes -> uint8 RGB images ``(N, 3, H, W)`` (torchvision's decoder)."""
    from torchvision.io import ImageReadMode, decode_jpeg

    data = [torch.frombuffer(bytearray(b), dtype=torch.uint8) for b in blobs]
    out = []
    for start in range(0, len(data), 2048):
        out += decode_jpeg(
            data[start : start + 2048], mode=ImageReadMode.RGB
        )
    return torch.stack(out)


def _collect_folder_files(members: Iterator[tuple[str, callable]]) -> dict:
    """Group (path, read) pairs by split and class; keeps a deterministic order."""
    found: dict = {"train": {}, "test": {}}
    for path, read in members:
        parts = Path(path).parts
        if len(parts) < 3 or not parts[-1].lower().endswith(
            (".jpg", ".jpeg", ".png")
        ):
            continue
        split, cls = parts[-3], parts[-2]
        if split in found and cls in CLASSES:
            found[split].setdefault(cls, []).append((parts[-1], read))
    return found


def _from_image_folder(path: Path) -> ImageData:
    """Decode ``train/<class>/*.jpg`` and ``test/<class>/*.jpg`` from a folder or a .tar.gz."""
    if path.is_file():
        # One streaming pass in archive order: random access into a .tar.gz re-inflates from the start.
        members = []
        with tarfile.open(path, mode="r|*") as tar:
            for m in tar:
                if m.isfile():
                    blob = tar.extractfile(m).read()
                    members.append((m.name, (lambda blob=blob: blob)))
        data = _assemble(_collect_folder_files(iter(members)))
    else:
        files = [
            (str(p.relative_to(path)), (lambda p=p: p.read_bytes()))
            for p in path.rglob("*")
            if p.is_file()
        ]
        data = _assemble(_collect_folder_files(iter(files)))
    return data


def _assemble(found: dict) -> ImageData:
    tensors = {}
    for split in ("train", "test"):
        missing = [c for c in CLASSES if c not in found[split]]
        if missing:
            raise FileNotFoundError(
                f"image folder: no {split}/<class>/ images for classes {missing}"
            )
        blobs, labels = [], []
        for label, cls in enumerate(CLASSES):
            for _, read in sorted(
                found[split][cls], key=lambda item: item[0]
            ):
                blobs.append(read())
                labels.append(label)
        tensors[split] = (decode_jpegs(blobs), torch.tensor(labels))
    return ImageData(
        *tensors["train"], *tensors["test"], source="CIFAR-10, JPEG copy"
    )


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def _cached(path: Path) -> ImageData:
    """Decode an image-folder copy once; later calls read the uint8 tensor file."""
    key = (
        _file_digest(path)
        if path.is_file()
        else hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    )
    target = cache_dir() / f"cifar10-folder-{key}.pt"
    if target.exists():
        blob = torch.load(target, weights_only=True)
        return ImageData(**blob)
    print(f"Decoding {path} once into {target} (about a minute)...")
    data = _from_image_folder(path)
    # atomic: an interrupted decode leaves no half-written cache
    torch_save(
        dataclasses.asdict(data) | {"classes": list(data.classes)}, target
    )
    return data


def _candidates() -> list[Path]:
    env = settings.get("COURSE_CIFAR10")
    places = [Path(env)] if env else []
    places += [cache_dir() / "cifar-10-batches-py", cache_dir()]
    checkout = checkout_root()
    # a copy beside the repository, as the course's machines keep it
    if checkout is not None:
        places.append(
            checkout.parent / "shared" / "data" / "cifar10-jpeg.tar.gz"
        )
    return places


def jpeg_archive() -> Path | None:
    """The JPEG copy's ``.tar.gz`` where ``load_cifar10`` would find it, or None."""
    return next(
        (
            p
            for p in _candidates()
            if p.is_file() and p.name.endswith((".tar.gz", ".tgz"))
        ),
        None,
    )


def _load_path(path: Path, download: bool) -> ImageData | None:
    if path.is_dir() and (path / "cifar-10-batches-py").is_dir():
        return _from_torchvision(path, download=False)
    if path.is_dir() and path.name == "cifar-10-batches-py":
        return _from_torchvision(path.parent, download=False)
    if path.is_file() and path.name.endswith((".tar.gz", ".tgz", ".tar")):
        return _cached(path)
    if (
        path.is_dir()
        and (path / "train").is_dir()
        and (path / "test").is_dir()
    ):
        return _cached(path)
    if path.is_dir() and (path / "cifar10-jpeg" / "train").is_dir():
        return _cached(path / "cifar10-jpeg")
    return None


def load_cifar10(
    root: str | Path | None = None,
    *,
    download: bool = False,
    allow_synthetic: bool = False,
) -> ImageData:
    """CIFAR-10 as uint8 tensors (see the module docstring for where it looks)."""
    if root is not None:
        data = _load_path(Path(root), download)
        if data is not None:
            return data
        if download:
            return _from_torchvision(Path(root), download=True)
        raise FileNotFoundError(
            f"No CIFAR-10 at {root}: expected torchvision's cifar-10-batches-py, an image folder with "
            "train/<class>/ and test/<class>/, or a .tar.gz of one. Pass download=True to fetch the original."
        )
    for path in _candidates():
        if path.exists():
            data = _load_path(path, download)
            if data is not None:
                return data
    if download:
        return _from_torchvision(cache_dir(), download=True)
    if allow_synthetic:
        warnings.warn(
            "CIFAR-10 not found: using a SYNTHETIC stand-in (fast mode only). "
            "Numbers from this run say nothing about CIFAR-10.",
            stacklevel=2,
        )
        print(
            "*** SYNTHETIC DATA: CIFAR-10 was not found; results are not CIFAR-10 results ***"
        )
        return synthetic_cifar()
    raise FileNotFoundError(
        "CIFAR-10 not found. Either run `python -m course_utils.cli.data --download` on a machine with "
        "internet (torchvision downloads it and checks its MD5 into ~/.cache/attention-course), or set "
        "COURSE_CIFAR10 to a copy (torchvision's cifar-10-batches-py folder, an image folder, or a .tar.gz)."
    )


def synthetic_cifar(
    n_train: int = 2000, n_test: int = 500, seed: int = 0
) -> ImageData:
    """Learnable fake CIFAR: each class is a coloured, oriented stripe pattern plus noise."""
    g = torch.Generator().manual_seed(seed)

    def make(n: int) -> tuple[Tensor, Tensor]:
        labels = torch.randint(0, 10, (n,), generator=g)
        yy, xx = torch.meshgrid(
            torch.arange(32.0), torch.arange(32.0), indexing="ij"
        )
        angle = labels.float()[:, None, None] * (torch.pi / 10)
        wave = torch.sin(
            (xx * torch.cos(angle) + yy * torch.sin(angle)) * 0.6
        )
        colour = torch.stack(
            [(labels % 3) / 2, (labels % 5) / 4, (labels % 2).float()], 1
        )[:, :, None, None]
        img = (
            0.5
            + 0.35 * wave[:, None] * (0.5 + colour)
            + 0.15 * torch.randn(n, 3, 32, 32, generator=g)
        )
        return (img.clamp(0, 1) * 255).to(torch.uint8), labels

    tr, te = make(n_train), make(n_test)
    return ImageData(*tr, *te, source="synthetic stand-in (not CIFAR-10)")


def split_validation(
    data: ImageData, val_size: int = 5000, seed: int = 0
) -> Split:
    """Carve a seeded, class-stratified validation set out of the training set."""
    g = torch.Generator().manual_seed(seed)
    labels = data.train_labels
    per_class = val_size // len(data.classes)
    val_idx = []
    for c in range(len(data.classes)):
        idx = (labels == c).nonzero().flatten()
        val_idx.append(
            idx[torch.randperm(len(idx), generator=g)[:per_class]]
        )
    val_idx = torch.cat(val_idx)
    keep = torch.ones(len(labels), dtype=torch.bool)
    keep[val_idx] = False
    return Split(
        data.train_images[keep],
        labels[keep],
        data.train_images[val_idx],
        labels[val_idx],
        data.test_images,
        data.test_labels,
        data.source,
    )


def subset(
    data: Split, n_train: int, n_eval: int | None, seed: int = 0
) -> Split:
    """A seeded random subset of every split (the stored order is sorted by class): ``n_train``
    training images, ``n_eval`` validation and test images each; with ``n_eval=None`` only the
    training split is cut and validation and test stay whole.  Fast mode trains on one."""
    g = torch.Generator().manual_seed(seed)

    def pick(images, labels, n):
        if n is None:
            return images, labels
        idx = torch.randperm(len(images), generator=g)[:n]
        return images[idx], labels[idx]

    # one generator, drawn in this order (train, validation, test): the same seed picks the same images
    tr, va, te = (
        pick(data.train_images, data.train_labels, n_train),
        pick(data.val_images, data.val_labels, n_eval),
        pick(data.test_images, data.test_labels, n_eval),
    )
    return Split(*tr, *va, *te, source=data.source)


# ------------------------------------------------------------------ batches and augmentation
def normalize(images: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
    """uint8 ``(B, 3, H, W)`` -> float, scaled to [0, 1] and standardised per channel."""
    std = torch.tensor(STD, dtype=torch.float64).view(1, 3, 1, 1)
    mean = torch.tensor(MEAN, dtype=torch.float64).view(1, 3, 1, 1)
    # (x / 255 - mean) / std as one multiply-add on a fresh float copy: two passes instead of four.
    # The constants are made on the CPU and copied without waiting (a tensor made directly on a GPU
    # from Python numbers makes the host wait for the device to finish its queue).
    scale, shift = (
        (1 / (255 * std)).to(dtype).to(images.device, non_blocking=True),
        (-mean / std).to(dtype).to(images.device, non_blocking=True),
    )
    return images.to(dtype).mul_(scale).add_(shift)


def random_crop_flip(
    images: Tensor,
    *,
    padding: int = 4,
    flip: bool = True,
    mirror: Tensor | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Per-image random crop (after zero padding) and horizontal flip, for a whole batch at once.

    ``images`` ``(B, C, H, W)`` of any dtype -> same shape and dtype.  ``mirror`` (bool ``(B,)``)
    says which images to flip instead of the random draw (with ``flip``, each image with
    probability 1/2).
    Every output pixel is read with one ``gather`` from the padded batch (flat index
    ``row * width + col``), so the cost is a single pass over the batch, not B small copies.
    """
    if images.dim() != 4:
        raise ValueError(
            f"random_crop_flip: expected images (B, C, H, W), got shape {tuple(images.shape)}"
        )
    b, c, h, w = images.shape
    gen_device = (
        generator.device if generator is not None else torch.device("cpu")
    )
    padded = torch.nn.functional.pad(images, (padding,) * 4)
    # non_blocking: the host queues the copies and goes on (a blocking copy waits for the device's queue)
    dy = torch.randint(
        0, 2 * padding + 1, (b,), generator=generator, device=gen_device
    ).to(images.device, non_blocking=True)
    dx = torch.randint(
        0, 2 * padding + 1, (b,), generator=generator, device=gen_device
    ).to(images.device, non_blocking=True)
    # (B, H)
    rows = dy[:, None] + torch.arange(h, device=images.device)[None, :]
    # (B, W)
    cols = dx[:, None] + torch.arange(w, device=images.device)[None, :]
    if mirror is not None and (
        mirror.shape != (b,) or mirror.dtype != torch.bool
    ):
        raise ValueError(
            f"random_crop_flip: mirror must be bool ({b},), one per image, got "
            f"{mirror.dtype} {tuple(mirror.shape)}"
        )
    if flip:
        # drawn even when ``mirror`` is given, so that the generator's later draws (the next
        # batches' crops) are the same either way
        drawn = (
            torch.rand(b, generator=generator, device=gen_device).to(
                images.device, non_blocking=True
            )
            < 0.5
        )
        mirror = drawn if mirror is None else mirror.to(images.device)
    if mirror is not None:
        cols = torch.where(mirror[:, None], cols.flip(1), cols)
    # (B, 1, H*W)
    index = (rows[:, :, None] * (w + 2 * padding) + cols[:, None, :]).view(
        b, 1, h * w
    )
    return (
        padded.flatten(2)
        .gather(2, index.expand(b, c, h * w))
        .view(b, c, h, w)
    )


def translate(images: Tensor, dy: int, dx: int) -> Tensor:
    """Normalised ``images (B, 3, H, W)`` moved ``dy`` pixels down and ``dx`` right; same shape.

    The pixels moved in are black, as in ``random_crop_flip``'s zero padding (black in
    ``normalize``'s units), so a shifted view looks like a crop the model met in training.
    """
    if dy == 0 and dx == 0:
        return images
    b, c, h, w = images.shape
    p = max(abs(dy), abs(dx))
    black = normalize(
        torch.zeros(1, c, 1, 1, dtype=torch.uint8, device=images.device),
        images.dtype,
    )
    padded = torch.nn.functional.pad(images - black, (p,) * 4) + black
    layout = (
        torch.channels_last
        if images.is_contiguous(memory_format=torch.channels_last)
        else torch.contiguous_format
    )
    return padded[:, :, p - dy : p - dy + h, p - dx : p - dx + w].contiguous(
        memory_format=layout
    )


class BatchLoader:
    """Batches from uint8 tensors: shuffle (seeded per epoch), move to ``device``, augment, normalise.

    Iterating yields ``(images float (B, 3, H, W), labels (B,))``.  ``set_epoch(e)`` makes the
    order depend only on (seed, epoch), so a resumed run sees the same batches.  With
    ``rank``/``world_size`` each process takes its share of every global batch (DDP).

    ``flip`` (with ``augment``): "random" mirrors each image with probability 1/2 in every epoch;
    "alternate" draws each image's orientation once (seeded) and turns it over every epoch, so
    any two consecutive epochs show every image both ways round (Jordan, 2024, "94% on CIFAR-10
    in 3.29 seconds": for short runs it does what a few more epochs of random flips do).
    ``size`` (None, or a side the trainer sets per epoch): batches downsized to ``(B, 3, size, size)``.
    """

    def __init__(
        self,
        images: Tensor,
        labels: Tensor,
        batch_size: int,
        *,
        shuffle: bool = False,
        augment: bool = False,
        crop_padding: int = 4,
        policy: str | None = None,
        flip: FlipName = "random",
        drop_last: bool = False,
        device: torch.device | str = "cpu",
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        channels_last: bool = False,
    ):
        if images.dtype != torch.uint8:
            raise TypeError(
                f"BatchLoader: images must be uint8 (N, 3, H, W), got {images.dtype}"
            )
        if batch_size % world_size:
            raise ValueError(
                f"BatchLoader: global batch {batch_size} is not divisible by {world_size} processes"
            )
        self.device = torch.device(device)
        # Off the CPU, the whole uint8 set moves once (CIFAR-10's training split is about 150 MB):
        # each batch is then gathered on the device instead of copied from the host.
        self.images, self.labels = (
            images.to(self.device),
            labels.to(self.device),
        )
        self.batch_size, self.shuffle, self.augment, self.drop_last = (
            batch_size,
            shuffle,
            augment,
            drop_last,
        )
        self.crop_padding = crop_padding
        # None: batches at the images' size; a side: downsized to side x side after augmentation
        # (progressive resizing; the trainer sets it each epoch)
        self.size: int | None = None
        self.policy = _policy(policy)
        if flip not in FLIPS:
            raise ValueError(
                f"BatchLoader: flip={flip!r} is not one of {FLIPS} (e.g. flip='alternate')"
            )
        self.flip = flip
        self._first_mirror: Tensor | None = None
        self.seed, self.rank, self.world_size = seed, rank, world_size
        self.channels_last = channels_last
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _mirror(self, idx: Tensor) -> Tensor:
        """ "alternate" flips: bool ``(len(idx),)``, each image's first orientation turned over in
        odd epochs (the first orientations come from their own seeded stream, and
        ``random_crop_flip`` still makes its own draw, so the orders and crops stay those of
        "random")."""
        if self._first_mirror is None:
            g = torch.Generator().manual_seed(self.seed * 1_000_003 - 1)
            self._first_mirror = (
                torch.rand(len(self.images), generator=g) < 0.5
            ).to(self.device)
        return self._first_mirror[idx] ^ bool(self.epoch % 2)

    def __len__(self) -> int:
        n = len(self.images)
        return (
            n // self.batch_size
            if self.drop_last
            else -(-n // self.batch_size)
        )

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        order = (
            torch.randperm(len(self.images), generator=g)
            if self.shuffle
            else torch.arange(len(self.images))
        )
        order = order.to(self.device)
        for i in range(len(self)):
            idx = order[i * self.batch_size : (i + 1) * self.batch_size]
            idx = (
                idx[self.rank :: self.world_size]
                if self.world_size > 1
                else idx
            )
            x, y = self.images[idx], self.labels[idx]
            if self.augment:
                x = random_crop_flip(
                    x,
                    padding=self.crop_padding,
                    mirror=self._mirror(idx)
                    if self.flip == "alternate"
                    else None,
                    generator=g,
                )
                if self.policy is not None:
                    x = self.policy(x, g)
            x = normalize(x)
            if self.size is not None:
                # antialiased: the small image averages the pixels it replaces
                x = F.interpolate(
                    x,
                    size=(self.size, self.size),
                    mode="bilinear",
                    align_corners=False,
                    antialias=True,
                )
            if self.channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            yield x, y


def evaluation_loader(
    images: Tensor, labels: Tensor, recipe, device: torch.device | str
) -> BatchLoader:
    """How validation, test and clean training images are read: in order, unaugmented, in batches of
    ``recipe.eval_batch_size`` and in the recipe's memory format (``recipe``: a ``Recipe``, or
    anything with ``eval_batch_size`` and ``channels_last``)."""
    return BatchLoader(
        images,
        labels,
        recipe.eval_batch_size,
        device=device,
        channels_last=recipe.channels_last,
    )


# How training images are mirrored: see ``BatchLoader``.
FlipName = Literal["random", "alternate"]
FLIPS: tuple[str, ...] = get_args(FlipName)

# The augmentation policies a recipe or loader may name (besides None): see ``_policy``.
PolicyName = Literal["trivial", "report", "randaugment", "autoaugment"]
POLICIES: tuple[str, ...] = get_args(PolicyName)


def _policy(name: str | None):
    """``policy(images uint8 (B, 3, H, W), generator) -> images``, or None.

    "trivial" is ``augment.trivial_augment``: an operation and strength per image, drawn from the
    loader's seeded generator; "report" is ``augment.rotate_and_jitter`` (the lab report's rotation
    and colour jitter), drawn the same way.  torchvision's RandAugment and AutoAugment draw one choice per call for
    everything they are given, so they run on groups of 16 images (the batch stays varied) and draw
    from torch's global generator.
    """
    if name in (None, "none"):
        return None
    if name == "trivial":
        from .augment import trivial_augment

        return trivial_augment
    # the lab report's RandomRotation(15) and ColorJitter(0.2, 0.2, 0.2), per image
    if name == "report":
        from .augment import rotate_and_jitter

        return rotate_and_jitter
    from torchvision.transforms import v2

    policies = {"randaugment": v2.RandAugment, "autoaugment": v2.AutoAugment}
    if name not in policies:
        raise ValueError(
            f"unknown augmentation policy {name!r}; choose from {', '.join(POLICIES)} or None"
        )
    policy = policies[name]()
    return lambda x, generator: torch.cat(
        [policy(chunk) for chunk in x.split(16)]
    )
