"""The book's schematic figures (course_utils.diagrams): each renders to a real picture, prints the
shapes that its arguments give, keeps its text inside the figure and off other text, has alt text,
and leaves nothing in pyplot's list of open figures."""

from __future__ import annotations

import inspect
import io
import itertools
import re

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.image import imread
from matplotlib.text import Text

from course_utils import diagrams

PUBLIC = sorted(
    name
    for name, fn in inspect.getmembers(diagrams, inspect.isfunction)
    if fn.__module__ == diagrams.__name__ and not name.startswith("_")
)

# (function, non-default arguments, text the figure must show for them, default sizes it must not show)
SHAPES = [
    (
        "qkv_lookup",
        dict(n=6),
        [
            "(6, d_k)",
            "(6, d_v)",
            "(6,)",
            "(d_k,)",
            "(d_v,)",
            "6 keys",
            "$k_{6}$",
            "$v_{6}$",
        ],
        ["(4, d_k)", "(4,)"],
    ),
    (
        "qkv_lookup",
        dict(n=1),
        ["(1, d_k)", "(1,)", "1 key ", "1.00"],
        ["$k_{2}$"],
    ),
    (
        "self_attention_flow",
        dict(n=7, d_model=12, d_k=3, d_v=5),
        [
            "(7, 12)",
            "(12, 3)",
            "(12, 5)",
            "(7, 3)",
            "(7, 5)",
            "(7, 7)",
            "n = 7 tokens",
        ],
        ["(5, 8)", "(8, 4)", "(5, 5)"],
    ),
    (
        "self_attention_flow",
        dict(scaled=False),
        ["$QK^{\\top}$", "chapter 3 divides"],
        ["sqrt{d_k}"],
    ),
    (
        "c2_calculation",
        dict(n=6),
        [
            "6 inputs",
            "$k_{6}$",
            "$v_{6}$",
            "\\alpha_{2,6}",
            "$q_2 = e_2W^Q$",
            "(d_v,)",
            "unscaled",
        ],
        ["$k_{7}$"],
    ),
    (
        "c2_calculation",
        dict(n=2),
        ["2 inputs", "$e_{2}$", "\\hat\\alpha_{2,2}"],
        ["$e_{3}$"],
    ),
    (
        "multihead_flow",
        dict(n=6, d_model=12, heads=3),
        [
            "(B, 6, 12)",
            "(12, 12)",
            "(B, 3, 6, 4)",
            "(B, 6, 4)",
            "D = 12 / 3 = 4",
            "head 3",
            "3 heads",
            r"\sqrt{4}",
        ],
        ["(B, 5, 8)", "(B, 2, 5, 4)"],
    ),
    (
        "multihead_flow",
        dict(n=10, d_model=64, heads=8),
        ["(B, 8, 10, 8)", "head 1", "head 8", "…"],
        ["head 5"],
    ),
    (
        "encoder_decoder",
        dict(),
        [
            "self-attention",
            "padding mask",
            "masked self-attention",
            "causal + padding mask",
            "cross-attention",
            "source padding mask",
            "memory (B, n, d_model)",
            "keys, values",
            "queries",
            "N ×",
            "× N",
            "target tokens, shifted right",
            "positional\nencoding",
            "Add & LayerNorm",
            "feed-forward",
        ],
        ["final LayerNorm"],
    ),
    (
        "encoder_decoder",
        dict(norm_first=True),
        ["final LayerNorm", "pre-norm", "causal + padding mask"],
        ["Add & LayerNorm"],
    ),
    (
        "vit_pipeline",
        dict(img_size=32, patch_size=8, dim=32),
        [
            "16 patches",
            "192 numbers",
            "4 × 4",
            "8·8·3",
            "(3, 32, 32)",
            "Conv2d(3, 32,",
            "kernel = stride = 8)",
            "(16, 32)",
            "16 tokens",
            "(17, 32)",
            "(32,)",
            "32 → 10",
            "[CLS]",
            "L × encoder block",
        ],
        ["64 patches", "48 numbers", "(65, 64)"],
    ),
    (
        "vit_pipeline",
        dict(img_size=48, patch_size=16, dim=20, channels=1, num_classes=7),
        [
            "9 patches",
            "256 numbers",
            "(1, 48, 48)",
            "Conv2d(1, 20,",
            "(10, 20)",
            "20 → 7",
            "(7,)",
        ],
        ["(10,)"],
    ),
]


def _texts(fig: Figure) -> list[str]:
    return [t.get_text() for t in fig.findobj(Text)]


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80)
    return buf.getvalue()


def test_every_public_function_is_listed_and_has_alt_text():
    assert PUBLIC == sorted(
        [
            "qkv_lookup",
            "self_attention_flow",
            "c2_calculation",
            "multihead_flow",
            "encoder_decoder",
            "vit_pipeline",
        ]
    )
    assert sorted(set(diagrams.__all__) - {"ALT"}) == PUBLIC
    assert sorted(diagrams.ALT) == PUBLIC
    for name, alt in diagrams.ALT.items():
        sentences = re.findall(r"[.!?](?:\s|$)", alt.strip())
        assert 1 <= len(sentences) <= 2 and alt.strip().endswith("."), (
            f"{name}: alt text is not one or two sentences"
        )
        assert 40 < len(alt) < 800, name


@pytest.mark.parametrize("name", PUBLIC)
def test_renders_a_nontrivial_white_png_without_pyplot_state(name):
    before = plt.get_fignums()
    fig = getattr(diagrams, name)()
    data = _png(fig)
    assert plt.get_fignums() == before, f"{name} left a pyplot figure open"
    assert isinstance(fig, Figure)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    img = imread(io.BytesIO(data))[..., :3]
    width, height = fig.get_size_inches()
    assert img.shape[:2] == (round(height * 80), round(width * 80))
    assert np.allclose(img[0, 0], 1.0) and np.allclose(img[-1, -1], 1.0), (
        "the background must be white"
    )
    ink = (img < 0.9).any(axis=-1).mean()
    assert 0.03 < ink < 0.6, f"{name}: {ink:.1%} of the pixels are drawn"
    colours = np.unique((img * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    assert len(colours) > 30, f"{name}: only {len(colours)} colours"
    assert any(t.strip() for t in _texts(fig))


@pytest.mark.parametrize(
    "name, kwargs, wanted, absent",
    SHAPES,
    ids=[f"{s[0]}-{i}" for i, s in enumerate(SHAPES)],
)
def test_labels_print_the_shapes_of_the_arguments(
    name, kwargs, wanted, absent
):
    before = plt.get_fignums()
    fig = getattr(diagrams, name)(**kwargs)
    assert plt.get_fignums() == before
    text = "\n".join(_texts(fig)) + "\n"
    missing = [w for w in wanted if w not in text]
    assert not missing, f"{name}({kwargs}) does not show {missing}"
    stale = [w for w in absent if w in text]
    assert not stale, f"{name}({kwargs}) still shows {stale}"


@pytest.mark.parametrize(
    "name, kwargs",
    [(name, {}) for name in PUBLIC] + [s[:2] for s in SHAPES],
    ids=PUBLIC + [f"{s[0]}-{i}" for i, s in enumerate(SHAPES)],
)
def test_text_stays_inside_the_figure_and_off_other_text(name, kwargs):
    fig = getattr(diagrams, name)(**kwargs)
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    boxes = [
        (t.get_text(), t.get_window_extent(renderer))
        for t in fig.findobj(Text)
        if t.get_visible() and t.get_text().strip()
    ]
    outside = [
        s
        for s, b in boxes
        if b.x0 < 0
        or b.y0 < 0
        or b.x1 > fig.bbox.width
        or b.y1 > fig.bbox.height
    ]
    assert not outside, f"{name}({kwargs}): clipped text {outside}"
    overlaps = [
        (a, b)
        for (a, ba), (b, bb) in itertools.combinations(boxes, 2)
        if ba.overlaps(bb)
    ]
    assert not overlaps, f"{name}({kwargs}): overlapping text {overlaps}"


@pytest.mark.parametrize(
    "call",
    [
        lambda: diagrams.qkv_lookup(n=0),
        lambda: diagrams.self_attention_flow(d_k=-1),
        lambda: diagrams.c2_calculation(n=1),
        lambda: diagrams.multihead_flow(d_model=10, heads=3),
        lambda: diagrams.vit_pipeline(img_size=30, patch_size=4),
        lambda: diagrams.vit_pipeline(dim=2.5),
    ],
)
def test_bad_sizes_are_refused_without_pyplot_state(call):
    before = plt.get_fignums()
    with pytest.raises(ValueError):
        call()
    assert plt.get_fignums() == before
