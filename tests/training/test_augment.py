"""TrivialAugment on whole batches (course_utils.training.augment): every operation at every strength
gives what torchvision's own functional operation gives, each image keeps its own draw, the draws
follow the policy's distribution, and one training step's pipeline never waits for the device (on a
GPU, with CUDA's own check; everywhere, on PyTorch's shape-only ``meta`` device with a watcher)."""

from __future__ import annotations

import contextlib
import math

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torchvision.transforms.v2 import functional as TF

from course_utils.training import augment as A
from course_utils.training import data as cdata


def _images() -> torch.Tensor:
    """CIFAR-like uint8 images with the cases the operations treat specially: a flat image (autocontrast
    and equalize leave it), a black and a white one, one flat channel, and noise spanning 0..255."""
    g = torch.Generator().manual_seed(0)
    stripes = cdata.synthetic_cifar(n_train=20, n_test=1).train_images
    noise = torch.randint(
        0, 256, (6, 3, 32, 32), generator=g, dtype=torch.uint8
    )
    flat = torch.full((1, 3, 32, 32), 97, dtype=torch.uint8)
    one_flat_channel = noise[:1].clone()
    one_flat_channel[:, 1] = 200
    return torch.cat(
        [
            stripes,
            noise,
            flat,
            torch.zeros_like(flat),
            torch.full_like(flat, 255),
            one_flat_channel,
        ]
    )


def _torchvision(img: torch.Tensor, name: str, m: float) -> torch.Tensor:
    """What torchvision's TrivialAugmentWide does to one image for operation ``name`` at magnitude ``m``
    (its _apply_image_or_video_transform, written out with the public functional API)."""
    nearest = TF.InterpolationMode.NEAREST
    if name == "Identity":
        return img
    if name in ("ShearX", "ShearY"):
        shear = (
            [math.degrees(math.atan(m)), 0.0]
            if name == "ShearX"
            else [0.0, math.degrees(math.atan(m))]
        )
        return TF.affine(
            img,
            angle=0.0,
            translate=[0, 0],
            scale=1.0,
            shear=shear,
            interpolation=nearest,
            center=[0, 0],
        )
    if name in ("TranslateX", "TranslateY"):
        t = [int(m), 0] if name == "TranslateX" else [0, int(m)]
        return TF.affine(
            img,
            angle=0.0,
            translate=t,
            scale=1.0,
            shear=[0.0, 0.0],
            interpolation=nearest,
        )
    if name == "Rotate":
        return TF.rotate(img, angle=m, interpolation=nearest)
    colour = {
        "Brightness": TF.adjust_brightness,
        "Color": TF.adjust_saturation,
        "Contrast": TF.adjust_contrast,
        "Sharpness": TF.adjust_sharpness,
    }
    if name in colour:
        return colour[name](img, 1.0 + m)
    if name == "Posterize":
        return TF.posterize(img, int(m))
    if name == "Solarize":
        return TF.solarize(img, 255.0 * m)
    return {"AutoContrast": TF.autocontrast, "Equalize": TF.equalize}[name](
        img
    )


def _close(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    # Exact on the machines the course was built on; a CPU whose fused multiply-add rounds
    # differently may move a pixel by one level, never more, and rarely.
    diff = (got.int() - want.int()).abs()
    assert got.shape == want.shape and got.dtype == torch.uint8, what
    assert diff.max() <= 1 and (diff > 0).float().mean() <= 1e-3, (
        f"{what}: {int((diff > 0).sum())} pixels differ from torchvision, by up to {int(diff.max())}"
    )


@pytest.mark.parametrize("name", A.OPERATIONS)
def test_every_operation_at_every_level_matches_torchvision(name):
    images = _images()
    table = A.levels(name)
    strengths = (
        [0.0]
        if table is None
        else sorted(
            {
                s * float(v)
                for v in table
                for s in ((1, -1) if name in A.SIGNED else (1,))
            }
        )
    )
    k = A.OPERATIONS.index(name)
    for m in strengths:
        got = A.apply(
            images,
            torch.full((len(images),), k),
            torch.full((len(images),), m, dtype=torch.float64),
        )
        want = torch.stack([_torchvision(img, name, m) for img in images])
        _close(got, want, f"{name} at magnitude {m}")


def test_each_image_gets_its_own_operation():
    # 120 images: every operation drawn several times
    images = _images().repeat(4, 1, 1, 1)
    op, magnitude = A.draw(len(images), torch.Generator().manual_seed(3))
    assert len(set(op.tolist())) == len(A.OPERATIONS)
    got = A.apply(images, op, magnitude)
    want = torch.stack(
        [
            _torchvision(img, A.OPERATIONS[k], float(m))
            for img, k, m in zip(images, op, magnitude)
        ]
    )
    _close(got, want, "a batch of mixed operations")


def test_the_draws_follow_the_policy():
    n = 70_000
    op, magnitude = A.draw(n, torch.Generator().manual_seed(0))
    counts = torch.bincount(op, minlength=len(A.OPERATIONS)).double()
    expected = n / len(A.OPERATIONS)
    assert (counts - expected).abs().max() < 5 * math.sqrt(expected), (
        f"operations not uniform: {counts.tolist()}"
    )
    for k, name in enumerate(A.OPERATIONS):
        mine = magnitude[op == k]
        table = A.levels(name)
        if table is None:
            assert (mine == 0).all(), name
            continue
        assert set(mine.abs().unique().tolist()) <= set(
            table.abs().tolist()
        ), f"{name}: strengths off its table"
        if name in A.SIGNED:
            negative = (mine < 0).double().mean()
            assert abs(negative - 0.5 * (1 - 1 / A.LEVELS)) < 0.03, (
                f"{name}: {negative:.3f} negative"
            )
        else:
            assert (mine >= 0).all(), f"{name} has no sign"
        # every level is drawn, about equally often
        level_counts = torch.stack(
            [(mine.abs() == v).sum() for v in table.abs().unique()]
        )
        assert (
            len(level_counts) == len(table.abs().unique())
            and level_counts.min() > 0
        ), name


def test_seeded_generator_repeats_and_the_images_change():
    images = _images()
    a = A.trivial_augment(images, torch.Generator().manual_seed(5))
    b = A.trivial_augment(images, torch.Generator().manual_seed(5))
    c = A.trivial_augment(images, torch.Generator().manual_seed(6))
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert a.shape == images.shape and a.dtype == torch.uint8
    # an empty batch stays empty
    assert A.trivial_augment(images[:0]).shape == (
        0,
        3,
        32,
        32,
    )
    assert (a != images).flatten(1).any(1).float().mean() > 0.5, (
        "most images should be changed"
    )


def test_bad_input_names_the_problem():
    with pytest.raises(ValueError, match="uint8"):
        A.trivial_augment(torch.rand(4, 3, 32, 32))
    with pytest.raises(ValueError, match="CPU"):
        A.apply(
            _images(),
            torch.zeros(30, dtype=torch.int64).to("meta"),
            torch.zeros(30, dtype=torch.float64),
        )


def test_the_lab_reports_rotation_and_jitter_match_torchvision():
    """rotate_and_jitter draws per image what RandomRotation(15) and ColorJitter(0.2, 0.2, 0.2) draw
    (an angle, three factors, their order) and applies what torchvision's functional operations give."""
    images = _images().repeat(3, 1, 1, 1)
    got = A.rotate_and_jitter(images, torch.Generator().manual_seed(4))
    # the same draws, in the same order
    g, b = (
        torch.Generator().manual_seed(4),
        len(images),
    )
    angle = (torch.rand(b, generator=g, dtype=torch.float64) * 2 - 1) * 15
    factor = (
        1
        + (torch.rand(b, 3, generator=g, dtype=torch.float64) * 2 - 1) * 0.2
    )
    order = torch.rand(b, 3, generator=g).argsort(dim=1)
    assert len({tuple(o) for o in order.tolist()}) == 6, (
        "every order of the three should occur"
    )
    adjust = (TF.adjust_brightness, TF.adjust_contrast, TF.adjust_saturation)
    want = []
    for img, a, f, o in zip(
        images, angle.tolist(), factor.tolist(), order.tolist()
    ):
        x = TF.rotate(img, a, interpolation=TF.InterpolationMode.NEAREST)
        for j in o:
            x = adjust[j](x, f[j])
        want.append(x)
    _close(
        got,
        torch.stack(want),
        "rotation, then colour jitter in each image's order",
    )
    assert (got != images).flatten(1).any(1).float().mean() > 0.9
    with pytest.raises(ValueError, match="uint8"):
        A.rotate_and_jitter(torch.rand(2, 3, 32, 32))
    loader = cdata.BatchLoader(
        images,
        torch.zeros(b, dtype=torch.int64),
        30,
        augment=True,
        policy="report",
    )
    assert next(iter(loader))[0].shape == (30, 3, 32, 32)


def test_the_loader_applies_it_per_seed_and_epoch():
    data = cdata.synthetic_cifar(n_train=256, n_test=1)

    def batches(policy, epoch):
        loader = cdata.BatchLoader(
            data.train_images,
            data.train_labels,
            64,
            shuffle=True,
            augment=True,
            policy=policy,
            seed=1,
        )
        loader.set_epoch(epoch)
        return torch.cat([x for x, _ in loader])

    # a resumed run sees the same batches
    assert torch.equal(batches("trivial", 0), batches("trivial", 0))
    assert not torch.equal(batches("trivial", 0), batches("trivial", 1))
    assert not torch.equal(batches("trivial", 0), batches(None, 0))
    with pytest.raises(ValueError, match="trivial"):
        cdata.BatchLoader(
            data.train_images, data.train_labels, 64, policy="trivialaugment"
        )


class _WaitWatch(TorchDispatchMode):
    """Records what would make the host wait for a GPU, on a stand-in device (PyTorch's ``meta``, which
    keeps shapes and no values, so this runs on any machine): a copy from the CPU that is not
    ``non_blocking``, and a Python number written into a device tensor (``t[i] = 5.0``: on CUDA a
    blocking copy).  Reading a value back (``.item()``, ``.tolist()``, boolean-mask indexing,
    ``nonzero``) needs values, so on ``meta`` it raises by itself."""

    def __init__(self):
        super().__init__()
        self.waits: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        aten = torch.ops.aten
        if func is aten._to_copy.default:
            device = kwargs.get("device")
            if (
                args[0].device.type == "cpu"
                and device is not None
                and torch.device(device).type != "cpu"
                and not kwargs.get("non_blocking", False)
            ):
                self.waits.append(
                    f"a blocking copy of a {tuple(args[0].shape)} tensor to the device"
                )
        elif func is aten.copy_.default:
            non_blocking = (
                args[2]
                if len(args) > 2
                else kwargs.get("non_blocking", False)
            )
            if (
                args[1].device.type == "cpu"
                and args[0].device.type != "cpu"
                and not non_blocking
            ):
                self.waits.append(
                    f"a blocking copy_ of a {tuple(args[1].shape)} tensor into a device tensor"
                )
        elif (
            func is aten.scalar_tensor.default
            and torch.device(kwargs.get("device") or "cpu").type != "cpu"
        ):
            self.waits.append(
                f"the Python number {args[0]} written into a device tensor"
            )
        return func(*args, **kwargs)


def _gpu_recipe_step(device: torch.device, check) -> None:
    """Three steps of the gpu recipe's pipeline (loader, crop and flip, TrivialAugment, normalise,
    MixUp/CutMix, forward, backward, clipping, AdamW, schedule) on ``device``; ``check()`` is a context
    manager entered for the second and third steps (the first allocates and picks kernels)."""
    from course_utils.references.regularization import soft_cross_entropy
    from course_utils.experiments.recipes import RECIPES
    from course_utils.training.optim import lr_factor, make_optimizer
    from course_utils.training.recipes import build_model
    from course_utils.training.trainer import Trainer, mixer

    recipe = RECIPES["gpu"]
    data = cdata.synthetic_cifar(n_train=1024, n_test=1)
    loader = cdata.BatchLoader(
        data.train_images,
        data.train_labels,
        recipe.batch_size,
        shuffle=True,
        augment=True,
        policy=recipe.policy,
        drop_last=True,
        device=device,
        channels_last=True,
    )
    model = (
        build_model(recipe).to(device).to(memory_format=torch.channels_last)
    )
    trainer = Trainer(
        model,
        make_optimizer(recipe, model),
        lr_factor=lr_factor("cosine", 100, 10),
        grad_clip=recipe.grad_clip,
        amp_dtype=torch.bfloat16 if device.type == "cuda" else None,
    )
    mix = mixer(recipe, 10, torch.Generator().manual_seed(1))
    # the epoch's order moves to the device once, here
    batches = iter(loader)
    x, y = next(batches)
    for step in range(3):
        with check(step):
            x, target = mix(x, y)
            # autocast has no meta device: there the forward pass runs in float32
            with (
                trainer.autocast()
                if device.type == "cuda"
                else contextlib.nullcontext()
            ):
                logits = trainer.net(x)
            trainer.update(soft_cross_entropy(logits.float(), target))
            x, y = next(batches)


def test_pipeline_never_waits_for_the_device_on_a_stand_in():
    """The GPU test's three steps on ``meta``, watched: no blocking copy, no number written into a device
    tensor, nothing read back (which would raise on ``meta``); the watcher itself catches each kind."""
    watch = _WaitWatch()

    def check(step):
        return watch if step else contextlib.nullcontext()

    try:
        _gpu_recipe_step(torch.device("meta"), check)
    except (
        RuntimeError,
        NotImplementedError,
    ) as error:  # meta has no values to read back
        pytest.fail(
            f"the training step reads a value back from the device (or uses an operation that has no "
            f"meta kernel): {error}"
        )
    assert not watch.waits, (
        "the training step would make the host wait for the GPU: "
        + "; ".join(watch.waits)
    )
    # the watcher sees each way of waiting it looks for
    with _WaitWatch() as seen:
        kernel = torch.ones(3, 3, device="meta")
        kernel[1, 1] = 5.0
        torch.arange(3).to("meta")
        torch.zeros(3, device="meta").copy_(torch.arange(3))
        torch.arange(3).to("meta", non_blocking=True)  # queued: not a wait
    assert len(seen.waits) == 3, seen.waits
    # reading back needs values that meta does not have
    with pytest.raises(RuntimeError):
        torch.ones(3, device="meta").sum().item()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_pipeline_never_waits_for_the_device():
    """The same three steps on CUDA with CUDA's own sync check set to error for the second and third."""

    @contextlib.contextmanager
    def check(step):
        torch.cuda.synchronize()
        if step:
            torch.cuda.set_sync_debug_mode("error")
        try:
            yield
        finally:
            torch.cuda.set_sync_debug_mode("default")

    _gpu_recipe_step(torch.device("cuda"), check)
