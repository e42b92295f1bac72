"""TrivialAugment on a whole batch at once, each image with its own operation and strength.

TrivialAugment (Müller & Hutter, 2021; torchvision's ``TrivialAugmentWide``) gives every image one
operation drawn uniformly from fourteen, at a strength drawn uniformly from 31 levels (and a random
sign where the operation has one).  torchvision's transform draws one operation per call, for
everything it is given: applied to a batch, every image would get the same one.  ``trivial_augment``
draws per image, sorts the batch by operation and runs each operation once on its own images with
their own strengths (the five geometric ones as one resampling): about a dozen calls whatever the
batch size, none of which makes the host wait for a GPU (nothing is read back, no boolean-mask
indexing, every copy to the device queued).  Each operation gives what torchvision's functional one
gives (``tests/training/test_augment.py`` checks every operation at every level against
``torchvision.transforms.v2.functional``).
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "OPERATIONS",
    "LEVELS",
    "trivial_augment",
    "draw",
    "apply",
    "levels",
    "rotate_and_jitter",
]

OPERATIONS = (
    "Identity",
    "ShearX",
    "ShearY",
    "TranslateX",
    "TranslateY",
    "Rotate",
    "Brightness",
    "Color",
    "Contrast",
    "Sharpness",
    "Posterize",
    "Solarize",
    "AutoContrast",
    "Equalize",
)
LEVELS = 31  # torchvision's num_magnitude_bins
SIGNED = {
    "ShearX",
    "ShearY",
    "TranslateX",
    "TranslateY",
    "Rotate",
    "Brightness",
    "Color",
    "Contrast",
    "Sharpness",
}
GEOMETRIC = ("ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate")
_GEOMETRIC_IDS = [OPERATIONS.index(name) for name in GEOMETRIC]
# adjacent in OPERATIONS: after sorting by operation, the geometric images are one slice
assert _GEOMETRIC_IDS == list(
    range(_GEOMETRIC_IDS[0], _GEOMETRIC_IDS[-1] + 1)
)


def _level_tables() -> dict[str, Tensor]:
    """torchvision's ``TrivialAugmentWide`` table of strengths per operation (float64, ``(LEVELS,)``)."""
    table = {
        "ShearX": torch.linspace(0.0, 0.99, LEVELS),
        "ShearY": torch.linspace(0.0, 0.99, LEVELS),
        "TranslateX": torch.linspace(0.0, 32.0, LEVELS),
        "TranslateY": torch.linspace(0.0, 32.0, LEVELS),
        "Rotate": torch.linspace(0.0, 135.0, LEVELS),
        "Brightness": torch.linspace(0.0, 0.99, LEVELS),
        "Color": torch.linspace(0.0, 0.99, LEVELS),
        "Contrast": torch.linspace(0.0, 0.99, LEVELS),
        "Sharpness": torch.linspace(0.0, 0.99, LEVELS),
        "Posterize": (8 - (torch.arange(LEVELS) / ((LEVELS - 1) / 6)))
        .round()
        .int(),
        "Solarize": torch.linspace(1.0, 0.0, LEVELS),
    }
    # torchvision builds the tables in float32 and reads one entry as a Python float
    return {name: values.double() for name, values in table.items()}


_TABLES = _level_tables()
# draw()'s lookup, built once (the tables are constants; building them per batch cost the host
# about a millisecond): row k holds operation k's strengths (zeros where it has none), and
# _HAS_SIGN[k] says whether operation k takes a random sign
_STRENGTH = torch.stack(
    [
        _TABLES.get(name, torch.zeros(LEVELS, dtype=torch.float64))
        for name in OPERATIONS
    ]
)
_HAS_SIGN = torch.tensor([name in SIGNED for name in OPERATIONS])


def levels(op: str) -> Tensor | None:
    """The strengths of ``op`` at each of the ``LEVELS`` levels (torchvision's ``TrivialAugmentWide``
    table, float64, a fresh copy); None for the operations without a strength."""
    return _TABLES[op].clone() if op in _TABLES else None


def _inverse_affine(
    angle: Tensor,
    tx: Tensor,
    ty: Tensor,
    shear_x: Tensor,
    shear_y: Tensor,
    cx: Tensor,
    cy: Tensor,
) -> Tensor:
    """torchvision's ``_get_inverse_affine_matrix`` (scale 1) for a batch: every argument ``(B,)``
    float64 (angles in degrees, the centre relative to the image's centre) -> ``(B, 2, 3)``."""
    rot, sx, sy = (
        torch.deg2rad(angle),
        torch.deg2rad(shear_x),
        torch.deg2rad(shear_y),
    )
    a = torch.cos(rot - sy) / torch.cos(sy)
    b = -(a * torch.tan(sx) + torch.sin(rot))
    c = torch.sin(rot - sy) / torch.cos(sy)
    d = torch.cos(rot) - c * torch.tan(sx)
    # the inverse of the rotation-shear (its determinant is 1), then the inverse translation about the centre
    m0, m1, m3, m4 = d, -b, -c, a
    m2 = cx - m0 * (cx + tx) - m1 * (cy + ty)
    m5 = cy - m3 * (cx + tx) - m4 * (cy + ty)
    return torch.stack([m0, m1, m2, m3, m4, m5], -1).view(-1, 2, 3)


def _geometric(images: Tensor, op: Tensor, magnitude: Tensor) -> Tensor:
    """Every image moved by its own affine map (identity unless its ``op`` is geometric), nearest
    neighbour, black outside, as torchvision's ``affine``/``rotate`` on uint8 images.  ``op`` and
    ``magnitude`` ``(B,)`` are on the CPU: the maps are worked out there in float64, as torchvision does."""
    b, _, h, w = images.shape
    zero = torch.zeros_like(magnitude)
    is_op = {name: op == OPERATIONS.index(name) for name in GEOMETRIC}
    # ShearX/ShearY shear about the top-left corner (torchvision's centre=[0, 0]: -W/2, -H/2 from the
    # centre); the shear angle is atan(magnitude); translations are whole pixels (int() truncates)
    shear = torch.rad2deg(torch.atan(magnitude))
    corner = is_op["ShearX"] | is_op["ShearY"]
    # rotate() turns the other way from affine()
    theta = (
        _inverse_affine(
            angle=torch.where(is_op["Rotate"], -magnitude, zero),
            tx=torch.where(is_op["TranslateX"], magnitude.trunc(), zero),
            ty=torch.where(is_op["TranslateY"], magnitude.trunc(), zero),
            shear_x=torch.where(is_op["ShearX"], shear, zero),
            shear_y=torch.where(is_op["ShearY"], shear, zero),
            cx=torch.where(corner, zero - w / 2, zero),
            cy=torch.where(corner, zero - h / 2, zero),
        )
        .float()
        .to(images.device, non_blocking=True)
    )
    # torchvision's _affine_grid: pixel centres relative to the image centre, mapped, then scaled to [-1, 1]
    xs = torch.linspace(
        (1.0 - w) * 0.5, (w - 1.0) * 0.5, w, device=images.device
    )
    ys = torch.linspace(
        (1.0 - h) * 0.5, (h - 1.0) * 0.5, h, device=images.device
    )
    base = torch.stack(
        [
            xs.expand(h, w),
            ys[:, None].expand(h, w),
            torch.ones(h, w, device=images.device),
        ],
        -1,
    )
    theta = theta.transpose(1, 2).contiguous()  # (B, 3, 2)
    theta[..., 0] /= 0.5 * w
    theta[..., 1] /= 0.5 * h
    grid = (
        base.view(1, h * w, 3).expand(b, -1, -1).bmm(theta).view(b, h, w, 2)
    )
    moved = F.grid_sample(
        images.float(),
        grid,
        mode="nearest",
        padding_mode="zeros",
        align_corners=False,
    )
    return moved.round_().to(torch.uint8)


def _blend(
    image: Tensor, other: Tensor, ratio: Tensor, rest: Tensor
) -> Tensor:
    """``image * ratio + other * rest`` clamped to uint8 (``rest`` = 1 - ``ratio``; both ``(B, 1, 1, 1)``)."""
    return (
        torch.addcmul(image.mul(ratio), other, rest)
        .clamp_(0, 255)
        .to(torch.uint8)
    )


def _grey(images: Tensor) -> Tensor:
    """Luma ``(B, 1, H, W)`` float, floored (torchvision's grey image for uint8 blends)."""
    r, g, b = images.unbind(-3)
    return (
        r.mul(0.2989)
        .add_(g, alpha=0.587)
        .add_(b, alpha=0.114)
        .floor_()
        .unsqueeze(-3)
    )


def _sharpness(images: Tensor, rest: Tensor) -> Tensor:
    """Blend with a 3x3 smoothed copy (border pixels kept), as torchvision's ``adjust_sharpness``."""
    c = images.shape[1]
    # made on the CPU and copied without waiting: writing a Python number into a GPU tensor
    # (kernel[1, 1] = 5.0 there) is a blocking copy
    kernel = torch.tensor(
        [[1.0, 1.0, 1.0], [1.0, 5.0, 1.0], [1.0, 1.0, 1.0]]
    ).div_(13.0)
    kernel = kernel.to(images.device, non_blocking=True)
    out = images.float()
    smooth = F.conv2d(out, kernel.expand(c, 1, 3, 3), groups=c).round_()
    inner = out[..., 1:-1, 1:-1]
    torch.addcmul(inner, smooth - inner, rest, out=inner)
    return out.clamp_(0, 255).to(torch.uint8)


def _autocontrast(images: Tensor) -> Tensor:
    """Stretch each channel of each image to 0..255 (a flat channel stays as it is)."""
    x = images.float()
    low, high = (
        x.amin(dim=(-2, -1), keepdim=True),
        x.amax(dim=(-2, -1), keepdim=True),
    )
    flat = high == low
    inv_scale = torch.where(
        flat, torch.ones_like(high), (high - low).mul_(1.0 / 255)
    )
    low = torch.where(flat, torch.zeros_like(low), low)
    return (x - low).div_(inv_scale).clamp_(0, 255).to(torch.uint8)


def draw(
    batch: int, generator: torch.Generator | None = None
) -> tuple[Tensor, Tensor]:
    """TrivialAugment's draws for ``batch`` images, on the CPU: each image's operation (an index into
    ``OPERATIONS``, uniform) and its signed strength (a uniform level of ``levels(op)``, negated with
    probability 1/2 where the operation has a sign; 0 where it has no strength), ``(B,)`` each."""
    op = torch.randint(len(OPERATIONS), (batch,), generator=generator)
    level = torch.randint(LEVELS, (batch,), generator=generator)
    negative = torch.rand(batch, generator=generator) <= 0.5
    magnitude = _STRENGTH[op, level]
    return op, torch.where(negative & _HAS_SIGN[op], -magnitude, magnitude)


def _per_image(values: Tensor, device: torch.device) -> Tensor:
    """``(n,)`` values made on the CPU -> ``(n, 1, 1, 1)`` on ``device``, copied without waiting (a
    blocking copy makes the host wait for the device's queue)."""
    return values.view(-1, 1, 1, 1).to(device, non_blocking=True)


@functools.cache  # built once, not per batch
def _colour_ops() -> dict:
    """The non-geometric operations: ``f(images uint8 (n, 3, H, W), magnitude float64 (n,) on the CPU) -> uint8``."""
    from torchvision.transforms.v2.functional import equalize

    def factors(m: Tensor, device: torch.device) -> tuple[Tensor, Tensor]:
        # the factor 1 + m and its complement -m, each rounded to float32 from float64 as
        # torchvision's Python floats are
        return _per_image((1.0 + m).float(), device), _per_image(
            (1.0 - (1.0 + m)).float(), device
        )

    def brightness(x, m):
        return (
            x.float()
            .mul_(factors(m, x.device)[0])
            .clamp_(0, 255)
            .to(torch.uint8)
        )

    def colour(x, m):
        return _blend(x.float(), _grey(x), *factors(m, x.device))

    def contrast(x, m):
        return _blend(
            x.float(),
            _grey(x).mean(dim=(-3, -2, -1), keepdim=True),
            *factors(m, x.device),
        )

    def posterize(x, m):  # m is the number of bits kept
        bits = m.to(torch.int64)
        return x & _per_image(
            ((0xFF << (8 - bits)) & 0xFF).to(torch.uint8), x.device
        )

    def solarize(x, m):  # pixels at or above 255 m are inverted
        return torch.where(
            x >= _per_image((255.0 * m).float(), x.device), 255 - x, x
        )

    return {
        "Identity": lambda x, m: x,
        "Brightness": brightness,
        "Color": colour,
        "Contrast": contrast,
        "Sharpness": lambda x, m: _sharpness(x, factors(m, x.device)[1]),
        "Posterize": posterize,
        "Solarize": solarize,
        "AutoContrast": lambda x, m: _autocontrast(x),
        "Equalize": lambda x, m: equalize(x),
    }


def apply(images: Tensor, op: Tensor, magnitude: Tensor) -> Tensor:
    """Each image's operation ``op (B,)`` at its strength ``magnitude (B,)`` (``draw``'s outputs, on
    the CPU): uint8 ``images (B, 3, H, W)`` on any device -> the same shape.

    The images are sorted by operation (the order is worked out on the CPU, where the draws are), so
    each operation runs once on its own images and the geometric ones share one resampling; the
    device receives small copies the host does not wait for, and nothing is read back.
    """
    if op.device.type != "cpu" or magnitude.device.type != "cpu":
        raise ValueError(
            "augment.apply: op and magnitude must be on the CPU (as draw() makes them)"
        )
    if len(images) == 0:
        return images.clone()
    device = images.device
    order = torch.argsort(op, stable=True)
    counts = torch.bincount(op, minlength=len(OPERATIONS)).tolist()
    # non_blocking: the host queues the copy and goes on (a blocking copy waits for the device's queue)
    to_device = order.to(device, non_blocking=True)
    x, m, o = images[to_device], magnitude[order], op[order]
    ops, pieces, start = _colour_ops(), [], 0
    for k, name in enumerate(OPERATIONS):
        if name in GEOMETRIC:
            if k == _GEOMETRIC_IDS[0]:  # every geometric image at once
                end = start + sum(counts[j] for j in _GEOMETRIC_IDS)
                if end > start:
                    pieces.append(
                        _geometric(x[start:end], o[start:end], m[start:end])
                    )
                start = end
            continue
        end = start + counts[k]
        if end > start:
            pieces.append(ops[name](x[start:end], m[start:end]))
        start = end
    out = torch.empty_like(images)
    out[to_device] = torch.cat(pieces)
    return out


def trivial_augment(
    images: Tensor, generator: torch.Generator | None = None
) -> Tensor:
    """TrivialAugment (wide) per image: uint8 ``images (B, 3, H, W)`` on any device -> the same shape.

    The draws come from ``generator`` on the CPU (``draw``), so a seeded generator gives the same
    augmentation on every device.
    """
    if (
        images.dtype != torch.uint8
        or images.dim() != 4
        or images.shape[1] != 3
    ):
        raise ValueError(
            f"trivial_augment: expected uint8 images (B, 3, H, W), got {images.dtype} "
            f"{tuple(images.shape)}"
        )
    return apply(images, *draw(len(images), generator))


# ColorJitter's three operations, as the ids of the TrivialAugment operations that do the same
# (torchvision's adjust_brightness, adjust_contrast and adjust_saturation, by factor 1 + strength)
_JITTER_IDS = torch.tensor(
    [OPERATIONS.index(name) for name in ("Brightness", "Contrast", "Color")]
)


def rotate_and_jitter(
    images: Tensor,
    generator: torch.Generator | None = None,
    *,
    degrees: float = 15.0,
    jitter: float = 0.2,
) -> Tensor:
    """The lab report's extra augmentation, per image: torchvision's ``RandomRotation(degrees)`` (nearest,
    black corners) then ``ColorJitter(brightness=jitter, contrast=jitter, saturation=jitter)`` (three
    factors uniform in [1 - jitter, 1 + jitter], applied in a random order of their own):
    uint8 ``images (B, 3, H, W)`` on any device -> the same shape.

    Drawn on the CPU from ``generator`` and applied with ``apply``'s batched operations (the same
    arithmetic as torchvision's functional ones), so a batch costs a few calls, not one per image.
    """
    if (
        images.dtype != torch.uint8
        or images.dim() != 4
        or images.shape[1] != 3
    ):
        raise ValueError(
            f"rotate_and_jitter: expected uint8 images (B, 3, H, W), got {images.dtype} "
            f"{tuple(images.shape)}"
        )
    b = len(images)
    angle = (
        torch.rand(b, generator=generator, dtype=torch.float64) * 2 - 1
    ) * degrees
    factor = (
        1
        + (
            torch.rand(b, 3, generator=generator, dtype=torch.float64) * 2
            - 1
        )
        * jitter
    )
    # each image's own order of the three
    order = torch.rand(b, 3, generator=generator).argsort(dim=1)
    out = apply(images, torch.full((b,), OPERATIONS.index("Rotate")), angle)
    for step in range(3):
        which = order[:, step]
        out = apply(
            out,
            _JITTER_IDS[which],
            factor.gather(1, which[:, None]).squeeze(1) - 1,
        )
    return out
