"""Schematic figures of the book, drawn from code so that their shapes stay correct.

Each function returns a ``matplotlib.figure.Figure`` built without pyplot (nothing is left in
pyplot's list of open figures), with a white background and dark text so that it reads the same
on a light or a dark page, in the Okabe-Ito colour-blind-safe palette.  Keyword arguments set
the sizes that the labels print.  ``ALT`` holds the alt text of each figure, for screen readers.

Which chapter uses which:

- 01 (queries, keys, values): ``qkv_lookup``, attention as a soft memory lookup;
- 02 (self-attention): ``self_attention_flow``, X -> Q, K, V -> scores -> weights -> out, and
  ``c2_calculation``, the lab report's derivation of one output token by token;
- 04 (multi-head attention): ``multihead_flow``, split into heads, attend, merge, project;
- 06 (masking, the Transformer): ``encoder_decoder``, the three kinds of attention and their masks;
- 07 (ViT on CIFAR-10): ``vit_pipeline``, image -> patches -> tokens -> encoder -> class logits.

In a notebook, a figure is the cell's last expression (the inline backend shows it) or goes
through ``fig.savefig``.  Drawing units are inches: every axes spans its whole figure with limits
equal to the figure's size, so positions below read as inches from the bottom-left corner.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import (
    Circle,
    FancyArrowPatch,
    FancyBboxPatch,
    Rectangle,
)
from matplotlib.path import Path

__all__ = [
    "ALT",
    "qkv_lookup",
    "self_attention_flow",
    "c2_calculation",
    "multihead_flow",
    "encoder_decoder",
    "vit_pipeline",
]

# Okabe-Ito: distinguishable with every common colour-vision deficiency.  One role, one colour,
# in every figure: queries blue, keys orange, values green, scores/weights purple, outputs vermillion.
BLUE, ORANGE, GREEN, PURPLE = "#0072B2", "#E69F00", "#009E73", "#CC79A7"
VERMILLION, SKY = "#D55E00", "#56B4E9"
INK = "#1A1A1A"  # all text: dark on the explicit white background, whatever the page theme
LINE = "#333333"  # arrows
# operations are grey; tensors are coloured
OP_EDGE, OP_FILL = (
    "#555555",
    "#EFEFEF",
)
MONO = "DejaVu Sans Mono"  # shapes are monospaced, so (n, d) reads like code

FS = 10.0  # body font size (points)
FS_SHAPE = 9.5
FS_SMALL = 9.0
FS_TITLE = 12.0
LINE_H = 1.32 / 72  # inches per point of font size between baselines


# --------------------------------------------------------------------------- drawing helpers
def _tint(color: str, amount: float = 0.28) -> tuple[float, float, float]:
    """``color`` mixed into white: a fill light enough for dark text on it."""
    return tuple(1.0 - amount * (1.0 - c) for c in to_rgb(color))


def _canvas(
    width: float, height: float, title: str | None = None
) -> tuple[Figure, Axes]:
    """A white figure whose one axes maps data units to inches (see the module docstring)."""
    fig = Figure(figsize=(width, height), facecolor="white")
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    # no tick labels: the figure's text is only what the diagram says
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_axis_off()
    ax.set_facecolor("white")
    if title:
        ax.text(
            width / 2,
            height - 0.28,
            title,
            ha="center",
            va="center",
            fontsize=FS_TITLE,
            weight="bold",
            color=INK,
        )
    return fig, ax


@dataclass(frozen=True)
class _Box:
    """Centre and size of a drawn box, to aim arrows at its edges."""

    x: float
    y: float
    w: float
    h: float

    @property
    def left(self) -> tuple[float, float]:
        return (self.x - self.w / 2, self.y)

    @property
    def right(self) -> tuple[float, float]:
        return (self.x + self.w / 2, self.y)

    @property
    def top(self) -> tuple[float, float]:
        return (self.x, self.y + self.h / 2)

    @property
    def bottom(self) -> tuple[float, float]:
        return (self.x, self.y - self.h / 2)

    def rim(self, toward: tuple[float, float]) -> tuple[float, float]:
        """Where a line from the centre to ``toward`` leaves a circle of diameter ``w``."""
        dx, dy = toward[0] - self.x, toward[1] - self.y
        d = math.hypot(dx, dy) or 1.0
        return (self.x + self.w / 2 * dx / d, self.y + self.w / 2 * dy / d)

    def at(self, side: str, offset: float) -> tuple[float, float]:
        """A point on one side, ``offset`` inches from that side's middle (up or right)."""
        x, y = getattr(self, side)
        return (
            (x, y + offset) if side in ("left", "right") else (x + offset, y)
        )


# One line of text in a box: (text, style); styles set font, size and weight.
_STYLES = {
    "title": dict(fontsize=FS, weight="bold"),
    "op": dict(fontsize=FS),
    "math": dict(fontsize=FS),
    "shape": dict(fontsize=FS_SHAPE, family=MONO),
    "note": dict(fontsize=FS_SMALL, style="italic"),
}


def _lines(
    ax: Axes, x: float, y: float, lines: Sequence[tuple[str, str]]
) -> None:
    """Stack ``lines`` vertically, centred on ``y``."""
    # Mathtext (roots, superscripts) stands taller than plain text: give its line more room.
    sizes = [
        _STYLES[style]["fontsize"] * (1.45 if style == "math" else 1.0)
        for _, style in lines
    ]
    total = sum(sizes) * LINE_H
    top = y + total / 2
    for (text, style), size in zip(lines, sizes):
        top -= size * LINE_H / 2
        ax.text(
            x,
            top,
            text,
            ha="center",
            va="center_baseline" if style == "math" else "center",
            color=INK,
            **_STYLES[style],
        )
        top -= size * LINE_H / 2


def _box(
    ax: Axes,
    x: float,
    y: float,
    w: float,
    h: float,
    title: str,
    *more: str | tuple[str, str],
    color: str | None = None,
    op: bool = False,
    linestyle: str = "-",
    text_x: float | None = None,
    lw: float = 1.4,
) -> _Box:
    """A rounded box centred on (x, y): coloured for a tensor, grey for an operation (``op``).

    ``more`` lines are shapes (monospaced) unless given as ``(text, style)``.
    """
    edge, fill = (
        (OP_EDGE, OP_FILL)
        if op
        else (color or LINE, _tint(color or "#999999"))
    )
    ax.add_patch(
        FancyBboxPatch(
            (x - w / 2, y - h / 2),
            w,
            h,
            boxstyle="round,pad=0,rounding_size=0.07",
            facecolor=fill,
            edgecolor=edge,
            linewidth=lw,
            linestyle=linestyle,
            zorder=2,
        )
    )
    lines = [(title, "op" if op else "title")]
    lines += [m if isinstance(m, tuple) else (m, "shape") for m in more]
    _lines(ax, x if text_x is None else text_x, y, lines)
    return _Box(x, y, w, h)


def _node(
    ax: Axes, x: float, y: float, symbol: str, r: float = 0.16
) -> _Box:
    """A small circle holding one operator symbol (sum, residual add)."""
    ax.add_patch(
        Circle(
            (x, y),
            r,
            facecolor="white",
            edgecolor=OP_EDGE,
            linewidth=1.4,
            zorder=2,
        )
    )
    ax.text(
        x,
        y,
        symbol,
        ha="center",
        va="center",
        fontsize=FS + 2,
        color=INK,
        zorder=3,
    )
    return _Box(x, y, 2 * r, 2 * r)


def _label(
    ax: Axes,
    x: float,
    y: float,
    text: str,
    *,
    mono: bool = False,
    size: float = FS_SMALL,
    ha: str = "center",
) -> None:
    """Text on a white patch, so it stays readable where it crosses a line."""
    ax.text(
        x,
        y,
        text,
        ha=ha,
        va="center",
        fontsize=size,
        color=INK,
        family=MONO if mono else None,
        zorder=4,
        bbox=dict(
            boxstyle="round,pad=0.12", facecolor="white", edgecolor="none"
        ),
    )


def _arrow(
    ax: Axes,
    start: tuple[float, float],
    end: tuple[float, float],
    label: str | None = None,
    *,
    mono: bool = True,
    color: str = LINE,
    lw: float = 1.3,
) -> None:
    """A straight arrow from ``start`` exactly to ``end``; ``label`` (a shape, monospaced by
    default) sits just above its middle."""
    ax.add_patch(
        FancyArrowPatch(
            start,
            end,
            arrowstyle="-|>",
            mutation_scale=13,
            color=color,
            linewidth=lw,
            shrinkA=0,
            shrinkB=0,
            zorder=1,
        )
    )
    if label:
        _label(
            ax,
            (start[0] + end[0]) / 2,
            (start[1] + end[1]) / 2 + 0.16,
            label,
            mono=mono,
        )


def _path_arrow(
    ax: Axes,
    points: Sequence[tuple[float, float]],
    *,
    color: str = LINE,
    lw: float = 1.3,
) -> None:
    """An arrow along a polyline (elbows around boxes: residual paths, line wraps)."""
    ax.add_patch(
        FancyArrowPatch(
            path=Path(points),
            arrowstyle="-|>",
            mutation_scale=13,
            color=color,
            linewidth=lw,
            joinstyle="miter",
            zorder=1,
        )
    )


def _mask_glyph(
    ax: Axes,
    x: float,
    y: float,
    rows: int,
    cols: int,
    blocked: Callable[[int, int], bool],
    color: str,
    cell: float = 0.085,
) -> None:
    """A tiny attention mask centred on (x, y): rows are queries, columns keys, dark = blocked."""
    x0, y0 = x - cols * cell / 2, y + rows * cell / 2
    for i in range(rows):
        for j in range(cols):
            ax.add_patch(
                Rectangle(
                    (x0 + j * cell, y0 - (i + 1) * cell),
                    cell,
                    cell,
                    linewidth=0.6,
                    edgecolor="white",
                    facecolor="#4D4D4D" if blocked(i, j) else color,
                    zorder=3,
                )
            )


def _check_sizes(**sizes: int) -> None:
    """Sizes are printed in labels and set the layout: only positive integers make sense."""
    for name, value in sizes.items():
        if (
            not isinstance(value, int)
            or isinstance(value, bool)
            or value < 1
        ):
            raise ValueError(
                f"diagrams: {name} must be a positive integer, got {value!r}"
            )


def _count(k: int, noun: str) -> str:
    return f"{k} {noun}" + ("" if k == 1 else "s")


def _shape(*dims: object) -> str:
    """``(5, 4)``; a one-element shape keeps Python's trailing comma, ``(4,)``."""
    return (
        f"({dims[0]},)"
        if len(dims) == 1
        else "(" + ", ".join(str(d) for d in dims) + ")"
    )


# --------------------------------------------------------------------------- 01: soft lookup
def qkv_lookup(n: int = 4) -> Figure:
    """Attention as a soft memory lookup: one query against ``n`` keys, softmax, weighted values."""
    _check_sizes(n=n)
    # Made-up scores with one clear winner, so the bars show a *soft* choice: mostly one value,
    # a little of the others.
    scores = [round(1.6 * math.sin(2.4 * i + 0.7), 1) for i in range(n)]
    exps = [math.exp(s - max(scores)) for s in scores]
    weights = [e / sum(exps) for e in exps]

    row = 0.58
    height = 2.4 + row * (n - 1)
    title = f"Attention as a soft lookup: one query, {_count(n, 'key')} and {_count(n, 'value')}"
    fig, ax = _canvas(10.0, height, title)
    y_head = height - 0.8  # column headers
    ys = [height - 1.42 - i * row for i in range(n)]
    mid = sum(ys) / n

    query = _box(
        ax, 0.7, mid, 0.95, 0.72, "query q", _shape("d_k"), color=BLUE
    )
    col = dict(
        keys=2.3,
        scores=3.5,
        softmax=4.6,
        bars=5.25,
        times=6.95,
        values=7.45,
        sum=8.45,
        out=9.4,
    )
    header = [
        ("keys", "keys K", _shape(n, "d_k")),
        ("scores", r"scores $q\cdot k_i$", _shape(n)),
        ("values", "values V", _shape(n, "d_v")),
    ]
    for key, name, shape in header:
        _lines(ax, col[key], y_head, [(name, "title"), (shape, "shape")])
    _lines(
        ax,
        col["bars"] + 0.55,
        y_head,
        [("weights w", "title"), (_shape(n), "shape")],
    )

    soft = _box(
        ax,
        col["softmax"],
        mid,
        0.82,
        (n - 1) * row + 0.44,
        "softmax",
        op=True,
    )
    total = _node(ax, col["sum"], mid, "Σ", r=0.2)
    for i, y in enumerate(ys):
        key = _box(
            ax, col["keys"], y, 0.62, 0.42, f"$k_{{{i + 1}}}$", color=ORANGE
        )
        score = _box(
            ax,
            col["scores"],
            y,
            0.62,
            0.42,
            f"{scores[i]:+.1f}",
            color=PURPLE,
        )
        _arrow(ax, query.right, key.left)
        _arrow(ax, key.right, score.left)
        _arrow(ax, score.right, (soft.left[0], y))
        # The bar's length is the weight: the lookup is soft, every value gets some share.
        ax.add_patch(
            Rectangle(
                (col["bars"], y - 0.15),
                1.1 * weights[i],
                0.3,
                facecolor=PURPLE,
                edgecolor=INK,
                linewidth=0.8,
                zorder=2,
            )
        )
        ax.text(
            col["bars"] + 1.1 * weights[i] + 0.06,
            y,
            f"{weights[i]:.2f}",
            ha="left",
            va="center",
            fontsize=FS_SMALL,
            color=INK,
        )
        _arrow(ax, (soft.right[0], y), (col["bars"] - 0.02, y))
        ax.text(
            col["times"],
            y,
            "×",
            ha="center",
            va="center",
            fontsize=FS + 1,
            color=INK,
        )
        value = _box(
            ax, col["values"], y, 0.62, 0.42, f"$v_{{{i + 1}}}$", color=GREEN
        )
        _arrow(ax, value.right, total.rim(value.right))
    out = _box(
        ax,
        col["out"],
        mid,
        0.95,
        0.72,
        "output",
        _shape("d_v"),
        color=VERMILLION,
    )
    _arrow(ax, total.right, out.left)
    ax.text(
        5.0,
        0.3,
        r"output $= \Sigma_i\, w_i v_i$: a blend of the values, weighted by how well each key "
        "matches the query (the weights are the softmax of the scores: they sum to 1)",
        ha="center",
        va="center",
        fontsize=FS_SMALL,
        color=INK,
    )
    return fig


# --------------------------------------------------------------------------- 02: self-attention
def self_attention_flow(
    n: int = 5,
    d_model: int = 8,
    d_k: int = 4,
    d_v: int = 4,
    scaled: bool = True,
) -> Figure:
    """Self-attention on one sequence: X -> Q, K, V -> scores -> row softmax -> weights @ V.

    ``scaled=False`` draws chapter 2's head, whose scores are the plain ``Q K^T`` (chapter 3 adds
    the division by sqrt(d_k)).
    """
    _check_sizes(n=n, d_model=d_model, d_k=d_k, d_v=d_v)
    fig, ax = _canvas(
        9.9,
        5.1,
        "Self-attention: every token queries every token of the same sequence",
    )
    # one horizontal lane per projection
    lanes = {
        "q": 3.95,
        "k": 2.75,
        "v": 1.55,
    }
    # X is one tall box: the same tokens feed all three maps.
    x = _box(
        ax, 0.65, lanes["k"], 0.95, 3.1, "X", _shape(n, d_model), color=SKY
    )
    roles = [
        ("q", "Q", d_k, BLUE),
        ("k", "K", d_k, ORANGE),
        ("v", "V", d_v, GREEN),
    ]
    made = {}
    for lane, name, width, color in roles:
        y = lanes[lane]
        # The matrix as the text writes it, rows are tokens: Q = X W_Q with W_Q of shape
        # (d_model, d_k).  nn.Linear stores its transpose (out, in); the notes below say so.
        w = _box(
            ax,
            2.0,
            y,
            0.95,
            0.62,
            f"$W_{name}$",
            _shape(d_model, width),
            op=True,
        )
        made[lane] = _box(
            ax, 3.3, y, 0.95, 0.62, name, _shape(n, width), color=color
        )
        _arrow(ax, (x.right[0], y), w.left)
        _arrow(ax, w.right, made[lane].left)

    mid = (lanes["q"] + lanes["k"]) / 2
    formula = r"$QK^{\top}/\sqrt{d_k}$" if scaled else r"$QK^{\top}$"
    scores = _box(
        ax,
        4.95,
        mid,
        1.5,
        1.05,
        "scores",
        (formula, "math"),
        _shape(n, n),
        color=PURPLE,
    )
    _arrow(ax, made["q"].right, scores.at("left", 0.3))
    _arrow(ax, made["k"].right, scores.at("left", -0.3))
    soft = _box(
        ax, 6.45, mid, 0.95, 0.72, "softmax", ("by rows", "note"), op=True
    )
    weights = _box(
        ax,
        7.8,
        mid,
        0.95,
        0.72,
        "weights",
        _shape(n, n),
        color=PURPLE,
        lw=2.0,
    )
    _arrow(ax, scores.right, soft.left)
    _arrow(ax, soft.right, weights.left)

    # V waits on its lane until the weights are ready: out = weights @ V.
    matmul = _box(ax, 7.8, lanes["v"], 1.1, 0.62, "weights @ V", op=True)
    out = _box(
        ax,
        9.25,
        lanes["v"],
        0.9,
        0.62,
        "out",
        _shape(n, d_v),
        color=VERMILLION,
    )
    _arrow(ax, weights.bottom, matmul.top)
    _arrow(ax, made["v"].right, matmul.left)
    _arrow(ax, matmul.right, out.left)

    notes = (
        f"n = {n} tokens, d_model = {d_model}, d_k = {d_k}, d_v = {d_v}.  Coloured: tensors.  "
        "Grey: operations, their matrices as in the text: Q = X W_Q.",
        f"In code, W_q = nn.Linear({d_model}, {d_k}) stores the transpose, (out, in): "
        f"W_q.weight = W_Qᵀ has shape {_shape(d_k, d_model)}, and W_v.weight {_shape(d_v, d_model)}.",
        f"Row i of the weights sums to 1: how much token i takes from each of the {n} value rows."
        + (
            ""
            if scaled
            else "  (Unscaled scores: chapter 3 divides them by √d_k.)"
        ),
    )
    for k, note in enumerate(notes):
        ax.text(
            0.2,
            0.74 - 0.24 * k,
            note,
            ha="left",
            va="center",
            fontsize=FS_SMALL,
            color=INK,
        )
    return fig


def c2_calculation(n: int = 4) -> Figure:
    """The lab report's derivation of one output, c_2, token by token: q_2 against every k_i,
    softmax, and the weighted sum of the v_i (its per-token steps, with unscaled scores)."""
    _check_sizes(n=n)
    if n < 2:
        raise ValueError(
            f"c2_calculation: the figure follows token 2, so n must be at least 2, got {n}"
        )
    row = 0.625  # exact in binary, so the height in pixels is a whole number at any n
    height = 3.0 + row * (n - 1)
    fig, ax = _canvas(
        10.4,
        height,
        f"The lab report's c₂, one token at a time ({_count(n, 'input')})",
    )
    col = dict(
        e=0.55,
        k=1.75,
        dot=2.95,
        a=3.85,
        soft=4.95,
        ahat=6.05,
        times=6.72,
        v=7.3,
        sum=8.45,
        out=9.6,
    )
    y_head = height - 0.8
    ys = [height - 1.95 - i * row for i in range(n)]
    mid = sum(ys) / n
    headers = [
        ("e", "inputs", "$e_i$"),
        ("k", "keys", "$k_i = e_iW^K$"),
        ("a", "scores", r"$\alpha_{2,i}$"),
        ("ahat", "weights", r"$\hat\alpha_{2,i}$"),
        ("v", "values", "$v_i = e_iW^V$"),
    ]
    for key, name, formula in headers:
        _lines(ax, col[key], y_head, [(name, "title"), (formula, "math")])

    # q_2 comes from e_2 alone and is compared with every key: one query on a vertical bus.
    top = ys[0] + 0.62
    query = _box(
        ax, col["dot"], top + 0.12, 1.05, 0.42, "$q_2 = e_2W^Q$", color=BLUE
    )
    ax.plot(
        [col["dot"], col["dot"]],
        [query.bottom[1], ys[-1]],
        color=BLUE,
        linewidth=1.6,
        zorder=1,
    )
    soft = _box(
        ax,
        col["soft"],
        mid,
        0.8,
        (n - 1) * row + 0.44,
        "softmax",
        ("over i", "note"),
        op=True,
    )
    total = _node(ax, col["sum"], mid, "Σ", r=0.2)
    for i, y in enumerate(ys):
        tag = str(i + 1)
        e = _box(
            ax,
            col["e"],
            y,
            0.62,
            0.42,
            f"$e_{{{tag}}}$",
            color=BLUE if i == 1 else SKY,
            lw=2.2 if i == 1 else 1.4,
        )
        k = _box(ax, col["k"], y, 0.62, 0.42, f"$k_{{{tag}}}$", color=ORANGE)
        dot = _node(ax, col["dot"], y, "·", r=0.13)
        a = _box(
            ax,
            col["a"],
            y,
            0.72,
            0.42,
            rf"$\alpha_{{2,{tag}}}$",
            color=PURPLE,
        )
        ahat = _box(
            ax,
            col["ahat"],
            y,
            0.72,
            0.42,
            rf"$\hat\alpha_{{2,{tag}}}$",
            color=PURPLE,
        )
        v = _box(ax, col["v"], y, 0.62, 0.42, f"$v_{{{tag}}}$", color=GREEN)
        _arrow(ax, e.right, k.left)
        _arrow(ax, k.right, dot.left)
        _arrow(ax, dot.right, a.left)
        _arrow(ax, a.right, (soft.left[0], y))
        _arrow(ax, (soft.right[0], y), ahat.left)
        ax.text(
            col["times"],
            y,
            "×",
            ha="center",
            va="center",
            fontsize=FS + 1,
            color=INK,
        )
        _arrow(ax, v.right, total.rim(v.right))
    out = _box(
        ax,
        col["out"],
        mid,
        0.95,
        0.62,
        "$c_2$",
        _shape("d_v"),
        color=VERMILLION,
    )
    _arrow(ax, total.right, out.left)
    notes = (
        r"$\alpha_{2,i} = q_2\cdot k_i$,   $\hat\alpha_{2,i} = e^{\alpha_{2,i}} / \Sigma_j\, e^{\alpha_{2,j}}$,"
        r"   $c_2 = \Sigma_i\, \hat\alpha_{2,i}\, v_i$:  row 2 of softmax$(QK^{\top})V$.",
        r"The report's steps leave the scores unscaled; its matrix formula divides them by $\sqrt{d_k}$"
        " (chapter 3): followed literally, the two give different weights.",
    )
    for j, note in enumerate(notes):
        ax.text(
            0.2,
            0.62 - 0.3 * j,
            note,
            ha="left",
            va="center",
            fontsize=FS_SMALL,
            color=INK,
        )
    return fig


# --------------------------------------------------------------------------- 04: multi-head
def multihead_flow(n: int = 5, d_model: int = 8, heads: int = 2) -> Figure:
    """Multi-head attention: project, split into ``heads`` heads of d_model/heads, attend, merge, W_O."""
    _check_sizes(n=n, d_model=d_model, heads=heads)
    if d_model % heads:
        raise ValueError(
            f"multihead_flow: d_model={d_model} is not divisible by heads={heads}"
        )
    d = d_model // heads
    width, height = 8.6, 6.5
    cx = width / 2
    fig, ax = _canvas(
        width,
        height,
        f"Multi-head attention: {_count(heads, 'head')} of D = {d} features each",
    )
    # Head cards in one row; too many to draw: the first two, a gap, the last one.
    shown = list(range(heads)) if heads <= 4 else [0, 1, None, heads - 1]
    card_w, gap, dots_w = 1.85, 0.2, 0.5
    widths = [dots_w if h is None else card_w for h in shown]
    left = cx - (sum(widths) + gap * (len(shown) - 1)) / 2
    # split and merge span every head card
    bar_w = max(6.4, 2 * (cx - left) + 0.3)

    x = _box(ax, cx, 5.6, 1.7, 0.62, "X", _shape("B", n, d_model), color=SKY)
    split = _box(
        ax,
        cx,
        3.6,
        bar_w,
        0.78,
        f"split into H = {heads} heads: view the last axis as (H, D), move H forward",
        f"{_shape('B', n, d_model)} → {_shape('B', heads, n, d)},  D = {d_model} / {heads} = {d}",
        op=True,
    )
    for k, (name, color) in enumerate(
        [("q", BLUE), ("k", ORANGE), ("v", GREEN)]
    ):
        px = cx + (k - 1) * 2.2
        w = _box(
            ax,
            px,
            4.65,
            1.2,
            0.62,
            f"$W_{name}$",
            _shape(d_model, d_model),
            op=True,
        )
        fork = (
            x.bottom[1] + w.top[1]
        ) / 2  # one trunk out of X, branching to the three maps
        _path_arrow(ax, [x.bottom, (cx, fork), (px, fork), w.top])
        _arrow(ax, w.bottom, (px, split.top[1]), color=color, lw=2.0)
        _label(
            ax,
            px + 0.08,
            (w.bottom[1] + split.top[1]) / 2,
            f"{name.upper()} {_shape('B', n, d_model)}",
            mono=True,
            ha="left",
        )

    merge = _box(
        ax,
        cx,
        1.5,
        bar_w,
        0.78,
        "merge: concatenate the heads' outputs feature-wise",
        f"{_shape('B', heads, n, d)} → {_shape('B', n, d_model)}",
        op=True,
    )
    for k, h in enumerate(shown):
        hx = left + sum(widths[:k]) + gap * k + widths[k] / 2
        if h is None:
            ax.text(
                hx,
                2.55,
                "…",
                ha="center",
                va="center",
                fontsize=FS_TITLE + 4,
                color=INK,
            )
            continue
        card = _box(
            ax,
            hx,
            2.55,
            card_w,
            0.86,
            f"head {h + 1}",
            (
                rf"softmax$(Q_{{{h + 1}}}K_{{{h + 1}}}^{{\top}}/\sqrt{{{d}}})\,V_{{{h + 1}}}$",
                "math",
            ),
            _shape("B", n, d),
            color=PURPLE,
        )
        _arrow(ax, (hx, split.bottom[1]), card.top)
        _arrow(ax, card.bottom, (hx, merge.top[1]))
    wo = _box(
        ax,
        cx - 1.3,
        0.5,
        1.2,
        0.62,
        "$W_O$",
        _shape(d_model, d_model),
        op=True,
    )
    out = _box(
        ax,
        cx + 1.3,
        0.5,
        1.7,
        0.62,
        "out",
        _shape("B", n, d_model),
        color=VERMILLION,
    )
    _arrow(ax, (wo.x, merge.bottom[1]), wo.top)
    _arrow(ax, wo.right, out.left)
    ax.text(
        0.2,
        0.5,
        f"B = batch size\nn = {n} tokens\nd_model = {d_model}",
        ha="left",
        va="center",
        fontsize=FS_SMALL,
        color=INK,
        linespacing=1.4,
    )
    return fig


# --------------------------------------------------------------------------- 06: the Transformer
@dataclass(frozen=True)
class _Sublayer:
    """One residual sublayer of a stack: an attention (with its mask pictogram) or the feed-forward."""

    name: str
    title: str
    note: str | None = None
    color: str | None = None
    linestyle: str = "-"
    # rows, cols, blocked(i, j)
    mask: tuple[int, int, Callable[[int, int], bool]] | None = None


def _sublayer_box(
    ax: Axes, x: float, y: float, w: float, h: float, unit: _Sublayer
) -> _Box:
    """An attention box (coloured, its own edge style, mask pictogram) or a grey feed-forward box."""
    if unit.mask is None:
        return _box(ax, x, y, w, h, unit.title, op=True)
    # The mask pictogram sits at the right end, the words to its left.
    box = _box(
        ax,
        x,
        y,
        w,
        h,
        unit.title,
        (unit.note, "note"),
        color=unit.color,
        linestyle=unit.linestyle,
        lw=2.0,
        text_x=x - 0.28,
    )
    rows, cols, blocked = unit.mask
    _mask_glyph(ax, x + w / 2 - 0.36, y, rows, cols, blocked, unit.color)
    return box


def _stack(
    ax: Axes,
    x: float,
    y: float,
    units: Sequence[_Sublayer],
    *,
    norm_first: bool,
    side: int,
    repeat: str,
) -> tuple[dict[str, _Box], tuple[float, float]]:
    """Residual sublayers bottom-up from the stream at (x, y), in a frame marked ``repeat``.

    Post-norm (the paper): sublayer, then "Add & LayerNorm" of its input and output.  Pre-norm:
    LayerNorm, sublayer, then the residual add; the stack ends with one more LayerNorm.  The
    residual path runs on ``side`` (-1 left, +1 right).  Returns the boxes by unit name and the
    point where the stream leaves the stack.
    """
    w, h_sub, h_norm = 2.7, 0.62, 0.36
    rail = x + side * (w / 2 + 0.2)
    bottom = y + 0.06
    boxes: dict[str, _Box] = {}
    stream = (x, y)
    for unit in units:
        # where the residual copy of the stream leaves
        branch = (
            x,
            stream[1] + 0.16,
        )
        if norm_first:
            norm = _box(
                ax,
                x,
                stream[1] + 0.34 + h_norm / 2,
                1.8,
                h_norm,
                "LayerNorm",
                op=True,
            )
            _arrow(ax, stream, norm.bottom)
            sub = _sublayer_box(
                ax, x, norm.top[1] + 0.24 + h_sub / 2, w, h_sub, unit
            )
            _arrow(ax, norm.top, sub.bottom)
            add = _node(ax, x, sub.top[1] + 0.24 + 0.14, "+", r=0.14)
            _arrow(ax, sub.top, add.bottom)
        else:
            sub = _sublayer_box(
                ax, x, stream[1] + 0.34 + h_sub / 2, w, h_sub, unit
            )
            _arrow(ax, stream, sub.bottom)
            add = _box(
                ax,
                x,
                sub.top[1] + 0.24 + h_norm / 2,
                1.8,
                h_norm,
                "Add & LayerNorm",
                op=True,
            )
            _arrow(ax, sub.top, add.bottom)
        target = add.left if side < 0 else add.right
        _path_arrow(
            ax, [branch, (rail, branch[1]), (rail, target[1]), target]
        )
        ax.add_patch(Circle(branch, 0.04, color=LINE, zorder=3))
        boxes[unit.name] = sub
        stream = add.top
    top = stream[1] + 0.12
    left = min(x - w / 2, rail) - 0.18
    right = max(x + w / 2, rail) + 0.18
    ax.add_patch(
        FancyBboxPatch(
            (left, bottom),
            right - left,
            top - bottom,
            boxstyle="round,pad=0,rounding_size=0.12",
            facecolor="#FAFAFA",
            edgecolor="#8C8C8C",
            linewidth=1.2,
            zorder=0,
        )
    )
    ax.text(
        left - 0.12 if side < 0 else right + 0.12,
        (bottom + top) / 2,
        repeat,
        ha="right" if side < 0 else "left",
        va="center",
        fontsize=FS_TITLE,
        weight="bold",
        color=INK,
    )
    if norm_first:  # pre-norm never normalises the residual stream itself: one LayerNorm per stack, at the end
        final = _box(
            ax,
            x,
            stream[1] + 0.36 + h_norm / 2,
            1.8,
            h_norm,
            "final LayerNorm",
            op=True,
        )
        _arrow(ax, stream, final.bottom)
        stream = final.top
    return boxes, stream


def _tokens_in(
    ax: Axes,
    x: float,
    y: float,
    title: str,
    shape: str,
    embedded: str,
    side: int,
) -> tuple[float, float]:
    """Tokens -> embedding -> + positional encoding; returns the point where the stream goes on."""
    tokens = _box(ax, x, y, 2.2, 0.56, title, shape, color=SKY)
    emb = _box(ax, x, y + 0.8, 1.8, 0.38, "embedding", op=True)
    _arrow(ax, tokens.top, emb.bottom)
    add = _node(ax, x, emb.top[1] + 0.38, "+", r=0.14)
    _arrow(ax, emb.top, add.bottom)
    # Positional encoding comes in from the outer side, as in the paper's figure.
    pe_x = x + side * 1.05
    ax.text(
        pe_x + side * 0.05,
        add.y,
        "positional\nencoding",
        ha="left" if side > 0 else "right",
        va="center",
        fontsize=FS_SMALL,
        color=INK,
        linespacing=1.15,
    )
    _arrow(ax, (pe_x, add.y), add.left if side < 0 else add.right)
    _label(ax, x + 0.12, add.top[1] + 0.17, embedded, mono=True, ha="left")
    return add.top


def encoder_decoder(norm_first: bool = False) -> Figure:
    """The encoder-decoder Transformer and its three attentions, each with its mask.

    ``norm_first=False`` draws the paper's post-norm layers; ``True`` the pre-norm ones that
    chapter 06's model uses by default (LayerNorm before each sublayer, one more per stack).
    """
    enc_x, dec_x, width = 2.55, 7.15, 9.7
    # Pictograms of 4 queries: the last key (column) is padding; causal also blocks the future.
    enc_units = [
        _Sublayer(
            "self",
            "self-attention",
            "padding mask",
            BLUE,
            "-",
            (4, 4, lambda i, j: j >= 3),
        ),
        _Sublayer("ff", "feed-forward"),
    ]
    dec_units = [
        _Sublayer(
            "self",
            "masked self-attention",
            "causal + padding mask",
            VERMILLION,
            "--",
            (4, 4, lambda i, j: j > i or j >= 3),
        ),
        _Sublayer(
            "cross",
            "cross-attention",
            "source padding mask",
            PURPLE,
            "-.",
            (4, 5, lambda i, j: j >= 4),
        ),
        _Sublayer("ff", "feed-forward"),
    ]
    unit_h = 2.02 if norm_first else 1.58
    height = (
        3.3 + unit_h * len(dec_units) + (0.72 if norm_first else 0) + 2.0
    )
    layers = (
        "pre-norm layers"
        if norm_first
        else "post-norm layers, as in the paper"
    )
    fig, ax = _canvas(
        width,
        height,
        f"The Transformer: encoder (left) and decoder (right), {layers}",
    )

    enc_in = _tokens_in(
        ax,
        enc_x,
        0.45,
        "source tokens",
        _shape("B", "n"),
        _shape("B", "n", "d_model"),
        -1,
    )
    dec_in = _tokens_in(
        ax,
        dec_x,
        0.45,
        "target tokens, shifted right",
        _shape("B", "m"),
        _shape("B", "m", "d_model"),
        +1,
    )
    start = enc_in[1] + 0.45
    _arrow(ax, enc_in, (enc_x, start))
    _arrow(ax, dec_in, (dec_x, start))
    _, memory = _stack(
        ax,
        enc_x,
        start,
        enc_units,
        norm_first=norm_first,
        side=-1,
        repeat="N ×",
    )
    dec, dec_out = _stack(
        ax,
        dec_x,
        start,
        dec_units,
        norm_first=norm_first,
        side=+1,
        repeat="× N",
    )

    # The encoder's output, "memory", gives the keys and values of every cross-attention;
    # the queries come from the decoder's own stream below it.
    cross = dec["cross"]
    route_y = memory[1] + 0.35
    route_x = enc_x + 1.85  # just outside the encoder's frame
    _path_arrow(
        ax,
        [
            memory,
            (enc_x, route_y),
            (route_x, route_y),
            (route_x, cross.y),
            cross.left,
        ],
        color=PURPLE,
        lw=1.8,
    )
    _label(
        ax,
        enc_x,
        route_y + 0.2,
        "memory " + _shape("B", "n", "d_model"),
        mono=True,
    )
    _label(ax, route_x + 0.12, cross.y + 0.17, "keys, values", ha="left")
    _label(ax, dec_x - 0.08, cross.bottom[1] - 0.14, "queries", ha="right")

    head = _box(
        ax,
        dec_x,
        dec_out[1] + 0.75,
        2.4,
        0.5,
        "linear, then softmax",
        ("d_model → vocab", "shape"),
        op=True,
    )
    _arrow(ax, dec_out, head.bottom)
    probs = _box(
        ax,
        dec_x,
        head.top[1] + 0.6,
        2.6,
        0.56,
        "next-token probabilities",
        _shape("B", "m", "vocab"),
        color=VERMILLION,
    )
    _arrow(ax, head.top, probs.bottom)

    legend = [
        "Mask pictograms: rows are queries, columns are keys;",
        "a dark cell is a pair that may not attend.",
        "Here the last key is padding; causal also blocks future keys.",
        "Box edges: solid = encoder self-attention,",
        "dashed = masked self-attention, dash-dot = cross-attention.",
        "B = batch, n = source length, m = target length.",
    ]
    for k, line in enumerate(legend):
        ax.text(
            0.3,
            height - 0.85 - 0.24 * k,
            line,
            ha="left",
            va="center",
            fontsize=FS_SMALL,
            color=INK,
        )
    return fig


# --------------------------------------------------------------------------- 07: ViT
def _picture(pixels: int) -> np.ndarray:
    """A small made-up RGB picture (sky, sun, hill) in the palette, ``(pixels, pixels, 3)`` in [0, 1]."""
    # v: 0 at the top row
    v, u = np.mgrid[0 : 1 : pixels * 1j, 0 : 1 : pixels * 1j]
    img = np.empty((pixels, pixels, 3))
    img[:] = np.array(_tint(SKY, 0.45))
    img[(u - 0.7) ** 2 + (v - 0.28) ** 2 < 0.028] = to_rgb(ORANGE)
    img[v > 0.62 + 0.12 * np.sin(5.0 * u)] = to_rgb(GREEN)
    return img


def vit_pipeline(
    img_size: int = 32,
    patch_size: int = 4,
    dim: int = 64,
    channels: int = 3,
    num_classes: int = 10,
) -> Figure:
    """The Vision Transformer: patches, patch embedding, [CLS] and positions, L pre-norm blocks, head."""
    _check_sizes(
        img_size=img_size,
        patch_size=patch_size,
        dim=dim,
        channels=channels,
        num_classes=num_classes,
    )
    if img_size % patch_size:
        raise ValueError(
            f"vit_pipeline: img_size={img_size} is not divisible by patch_size={patch_size}"
        )
    grid = img_size // patch_size
    patches, numbers, tokens = (
        grid * grid,
        patch_size * patch_size * channels,
        grid * grid + 1,
    )
    fig, ax = _canvas(
        9.7,
        6.7,
        "The Vision Transformer (ViT): an image read as a sequence of patches",
    )

    # Row 1: image -> patches -> linear projection -> [CLS] and positions.
    y1, side = 5.3, 1.3
    # a multiple of the grid, so patches are whole pixels
    pixels = grid * max(1, math.ceil(64 / grid))
    img = _picture(pixels)
    ax.imshow(
        img,
        extent=(0.3, 0.3 + side, y1 - side / 2, y1 + side / 2),
        interpolation="nearest",
        zorder=2,
    )
    for k in range(grid + 1):  # the cut lines between patches
        t = k * side / grid
        ax.plot(
            [0.3 + t, 0.3 + t],
            [y1 - side / 2, y1 + side / 2],
            color="white",
            linewidth=0.8,
            zorder=3,
        )
        ax.plot(
            [0.3, 0.3 + side],
            [y1 - side / 2 + t, y1 - side / 2 + t],
            color="white",
            linewidth=0.8,
            zorder=3,
        )
    ax.add_patch(
        Rectangle(
            (0.3, y1 - side / 2),
            side,
            side,
            fill=False,
            edgecolor=INK,
            linewidth=1.0,
            zorder=4,
        )
    )
    _lines(
        ax,
        0.3 + side / 2,
        y1 - side / 2 - 0.3,
        [
            ("image", "title"),
            (_shape(channels, img_size, img_size), "shape"),
        ],
    )

    # A few patches in reading order (row by row), as the flattened sequence starts.
    step, thumb = pixels // grid, 0.38
    shown = (
        [0, 1, 2, None, patches - 1] if patches > 4 else list(range(patches))
    )
    x = 2.45
    for k in shown:
        if k is None:
            ax.text(
                x + 0.12,
                y1,
                "…",
                ha="center",
                va="center",
                fontsize=FS_TITLE,
                color=INK,
            )
            x += 0.3
            continue
        r, c = divmod(k, grid)
        ax.imshow(
            img[r * step : (r + 1) * step, c * step : (c + 1) * step],
            extent=(x, x + thumb, y1 - thumb / 2, y1 + thumb / 2),
            interpolation="nearest",
            zorder=2,
        )
        ax.add_patch(
            Rectangle(
                (x, y1 - thumb / 2),
                thumb,
                thumb,
                fill=False,
                edgecolor=INK,
                linewidth=0.8,
                zorder=3,
            )
        )
        ax.text(
            x + thumb / 2,
            y1 + thumb / 2 + 0.13,
            str(k + 1),
            ha="center",
            va="center",
            fontsize=FS_SMALL,
            color=INK,
        )
        x += thumb + 0.08
    patches_right = x - 0.08
    _arrow(ax, (0.3 + side + 0.08, y1), (2.37, y1), "cut", mono=False)
    _lines(
        ax,
        (2.45 + patches_right) / 2,
        y1 - 0.62,
        [
            (f"{grid} × {grid} = {patches} patches", "op"),
            (
                f"of {patch_size}·{patch_size}·{channels} = {numbers} numbers",
                "op",
            ),
        ],
    )

    proj = _box(
        ax,
        5.75,
        y1,
        1.95,
        0.95,
        "linear projection",
        f"Conv2d({channels}, {dim},",
        f"kernel = stride = {patch_size})",
        op=True,
    )
    _arrow(ax, (patches_right + 0.1, y1), proj.left)
    cls = _box(
        ax,
        8.5,
        y1,
        1.9,
        0.95,
        "prepend [CLS] token",
        ("+ position embeddings", "op"),
        _shape(tokens, dim),
        op=True,
    )
    _arrow(ax, proj.right, cls.left, _shape(patches, dim))
    _label(
        ax,
        (proj.right[0] + cls.left[0]) / 2,
        y1 - 0.17,
        _count(patches, "token"),
    )

    # Row 2: L pre-norm encoder blocks; the stream wraps round from the end of row 1.
    y2 = 2.75
    frame_left, frame_right = 0.55, 7.05
    ax.add_patch(
        FancyBboxPatch(
            (frame_left, y2 - 0.62),
            frame_right - frame_left,
            1.55,
            boxstyle="round,pad=0,rounding_size=0.12",
            facecolor="#FAFAFA",
            edgecolor="#8C8C8C",
            linewidth=1.2,
            zorder=0,
        )
    )
    ax.text(
        frame_left + 0.15,
        y2 + 0.76,
        "L × encoder block (pre-norm)",
        ha="left",
        va="center",
        fontsize=FS,
        weight="bold",
        color=INK,
    )
    ln1 = _box(ax, 1.35, y2, 0.62, 0.5, "LN", op=True)
    msa = _box(
        ax,
        2.75,
        y2,
        1.55,
        0.62,
        "multi-head",
        ("self-attention", "op"),
        color=PURPLE,
    )
    add1 = _node(ax, 3.9, y2, "+", r=0.14)
    ln2 = _box(ax, 4.75, y2, 0.62, 0.5, "LN", op=True)
    mlp = _box(ax, 5.75, y2, 0.8, 0.5, "MLP", op=True)
    add2 = _node(ax, 6.6, y2, "+", r=0.14)
    wrap1 = 3.98
    _path_arrow(
        ax, [cls.bottom, (cls.x, wrap1), (0.25, wrap1), (0.25, y2), ln1.left]
    )
    _label(
        ax, 4.0, wrap1, f"{tokens} tokens {_shape(tokens, dim)}", mono=False
    )
    for a, b in [(ln1, msa), (msa, add1), (ln2, mlp), (mlp, add2)]:
        _arrow(ax, a.right, b.left)
    _arrow(ax, add1.right, ln2.left)
    rail = y2 + 0.52
    # residual: the stream skips around each sublayer
    for start, add in [
        (0.8, add1),
        (4.28, add2),
    ]:
        ax.add_patch(Circle((start, y2), 0.04, color=LINE, zorder=3))
        _path_arrow(ax, [(start, y2), (start, rail), (add.x, rail), add.top])
    _label(
        ax,
        3.8,
        y2 - 0.47,
        f"every block maps {_shape(tokens, dim)} to {_shape(tokens, dim)}",
        size=FS_SMALL,
    )
    final = _box(ax, 8.15, y2, 1.2, 0.5, "final LN", op=True)
    _arrow(ax, add2.right, final.left)

    # Row 3: only the [CLS] token's vector reaches the classifier.
    y3, wrap2 = 0.75, 1.65
    token = _box(
        ax, 1.3, y3, 1.4, 0.62, "[CLS] token", _shape(dim), color=VERMILLION
    )
    _path_arrow(
        ax, [final.bottom, (final.x, wrap2), (token.x, wrap2), token.top]
    )
    _label(ax, 4.7, wrap2, f"keep position 0 of {_shape(tokens, dim)}")
    head = _box(
        ax,
        3.45,
        y3,
        1.5,
        0.62,
        "linear head",
        f"{dim} → {num_classes}",
        op=True,
    )
    logits = _box(
        ax,
        5.6,
        y3,
        1.6,
        0.62,
        "class logits",
        _shape(num_classes),
        color=VERMILLION,
    )
    _arrow(ax, token.right, head.left)
    _arrow(ax, head.right, logits.left)
    # A little bar chart of made-up logits: the largest one is the prediction.
    values = [
        0.35 + 0.3 * math.sin(1.9 * k + 1.0) ** 2 for k in range(num_classes)
    ]
    best = max(range(num_classes), key=values.__getitem__)
    bar_w = min(0.12, 1.5 / num_classes)
    for k, v in enumerate(values):
        ax.add_patch(
            Rectangle(
                (6.65 + k * bar_w, y3 - 0.3),
                bar_w * 0.8,
                0.6 * v,
                facecolor=VERMILLION if k == best else "#B3B3B3",
                edgecolor="none",
                zorder=2,
            )
        )
    ax.text(
        6.65 + num_classes * bar_w + 0.1,
        y3,
        "largest logit:\npredicted class",
        ha="left",
        va="center",
        fontsize=FS_SMALL,
        color=INK,
    )
    _arrow(ax, logits.right, (6.6, y3))
    return fig


# --------------------------------------------------------------------------- alt text
ALT: dict[str, str] = {
    "qkv_lookup": (
        "A query vector q of shape (d_k,) is compared by dot products with 4 keys k_1 to k_4, giving one "
        "score each; a softmax turns the scores into 4 weights, drawn as bars that sum to 1, and the output "
        "of shape (d_v,) is the sum of the 4 values v_1 to v_4, each multiplied by its weight."
    ),
    "self_attention_flow": (
        "The input X of shape (n, d_model) is multiplied by three matrices, W_Q and W_K of shape (d_model, d_k) "
        "and W_V of shape (d_model, d_v) (nn.Linear stores each transposed, as (out, in)), to give Q and K of "
        "shape (n, d_k) and V of shape (n, d_v); the scores Q K-transpose, divided by the square root of d_k "
        "unless drawn unscaled, form an (n, n) matrix whose rows a softmax turns into weights, and weights "
        "times V gives the output of shape (n, d_v)."
    ),
    "c2_calculation": (
        "The lab report's computation of one output, c_2: each input e_i gives a key k_i and a value v_i, the "
        "query q_2 from e_2 alone is dotted with every key to give scores alpha_2,i, a softmax over i turns "
        "them into weights, and c_2 is the sum of the values, each multiplied by its weight."
    ),
    "multihead_flow": (
        "X of shape (B, n, d_model) goes through W_q, W_k and W_v, and each result is split into H heads of "
        "shape (B, H, n, D) with D = d_model / H. The H heads attend in parallel, their outputs are "
        "concatenated back to (B, n, d_model), and the output projection W_O gives the result."
    ),
    "encoder_decoder": (
        "The encoder-decoder Transformer: source tokens plus positional encoding enter an encoder stack of N "
        "layers (self-attention with a padding mask, then feed-forward, each with a residual connection and "
        "LayerNorm), and target tokens shifted right enter a decoder stack of N layers (masked self-attention "
        "with a causal and padding mask, cross-attention, feed-forward). The encoder's output, the memory, "
        "gives the keys and values of every cross-attention (with the source padding mask), its queries come "
        "from the decoder, and a linear layer and softmax on top give next-token probabilities."
    ),
    "vit_pipeline": (
        "A 3 by 32 by 32 image is cut into 8 by 8 = 64 patches of 4 by 4 by 3 = 48 numbers, which a linear "
        "projection (a Conv2d with kernel and stride 4) turns into 64 tokens; a [CLS] token is prepended and "
        "position embeddings added, giving 65 tokens. L pre-norm encoder blocks (LayerNorm, multi-head "
        "attention, residual add, LayerNorm, MLP, residual add) and a final LayerNorm follow, and a linear "
        "head reads the [CLS] token to give 10 class logits."
    ),
}
