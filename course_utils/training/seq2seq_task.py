"""A synthetic sequence-to-sequence task for chapter 06's small Transformer: reverse a digit string.

The task, the model and its training (the mechanism); chapter 06's full run, which writes
``results/ch06_seq2seq.json`` and the trained weights, is ``course_utils.experiments.seq2seq``.
``load_trained_model`` loads those weights: the graded tests decode with them.

Tokens: ``PAD = 0``, ``BOS = 1`` (begin of sequence), ``EOS = 2`` (end of sequence) and the
digits 0-9 as ``3 .. 12``.  A source is 3 to 12 random digits, right-padded; its target is
``BOS``, the same digits reversed (or sorted, with ``--task sort``), ``EOS``, then padding.
Reversal needs every output position to find one source position (the last first), so the
cross-attention of a trained model draws an anti-diagonal.

Held-out data: a validation set (watched during training, never used to pick a checkpoint: the
run has a fixed step budget) and a test set (evaluated once, at the end, with greedy decoding,
beam search and temperature sampling).  Training batches are drawn fresh at every step and any
sequence that also occurs in the validation or test set is redrawn, so the held-out accuracy
measures sequences the model has never seen.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from ..models.transformer import Seq2SeqTransformer
from ..references.decoding import beam_search, greedy_decode, sample_decode
from .optim import lr_factor
from .trainer import Trainer

PAD, BOS, EOS = 0, 1, 2
FIRST_DIGIT = 3
VOCAB_SIZE = FIRST_DIGIT + 10
MODEL_FILE = "ch06_seq2seq_model.pth"  # in results/: the full run's weights (experiments.seq2seq)

__all__ = [
    "PAD",
    "BOS",
    "EOS",
    "VOCAB_SIZE",
    "TaskConfig",
    "TrainConfig",
    "to_tokens",
    "to_text",
    "make_examples",
    "make_batch",
    "HeldOut",
    "make_heldout",
    "build_seq2seq",
    "exact_match",
    "greedy_exact_match",
    "Evaluation",
    "decode",
    "evaluate_decoding",
    "train_seq2seq",
    "load_trained_model",
    "MODEL_FILE",
]


# --------------------------------------------------------------------------- data
@dataclasses.dataclass(frozen=True)
class TaskConfig:
    task: str = "reverse"  # "reverse" or "sort"
    min_len: int = 3
    max_len: int = 12

    def __post_init__(self):
        if self.task not in ("reverse", "sort"):
            raise ValueError(
                f"TaskConfig: task must be 'reverse' or 'sort', got {self.task!r}"
            )
        if not 1 <= self.min_len <= self.max_len:
            raise ValueError(
                f"TaskConfig: need 1 <= min_len <= max_len, got {self.min_len}, {self.max_len}"
            )


def to_tokens(digits: str) -> list[int]:
    """``"305"`` -> ``[6, 3, 8]`` (source tokens, no BOS/EOS)."""
    if not digits.isdigit():
        raise ValueError(
            f"to_tokens: expected a string of digits, got {digits!r}"
        )
    return [FIRST_DIGIT + int(c) for c in digits]


def to_text(tokens) -> str:
    """Token ids -> readable text: digits as digits, ``<bos>``/``<eos>`` spelled out, padding dropped."""
    names = {BOS: "<bos>", EOS: "<eos>"}
    out = []
    for tok in (int(t) for t in tokens):
        if tok == PAD:
            continue
        out.append(
            names.get(
                tok,
                str(tok - FIRST_DIGIT)
                if FIRST_DIGIT <= tok < VOCAB_SIZE
                else f"<{tok}>",
            )
        )
    return "".join(out)


def make_examples(
    digits: Tensor, lengths: Tensor, task: str = "reverse"
) -> tuple[Tensor, Tensor]:
    """Source and target tokens for digit strings.

    ``digits (B, L)`` with values 0-9 (entries at positions ``>= lengths[b]`` are ignored),
    ``lengths (B,)`` -> ``src (B, Lb)`` and ``tgt (B, Lb + 2)``, where ``Lb`` is the longest
    length in the batch: ``src`` is the digits then ``PAD``; ``tgt`` is ``BOS``, the answer,
    ``EOS``, then ``PAD``.
    """
    batch, width = digits.shape
    longest = int(lengths.max()) if batch else 0
    pos = torch.arange(width, device=digits.device).expand(batch, width)
    keep = pos < lengths[:, None]
    # output position p holds input position length - 1 - p
    if task == "reverse":
        index = (lengths[:, None] - 1 - pos).clamp(min=0)
        answer = digits.gather(1, index)
    # padding sorts last when it is pushed above every digit
    elif task == "sort":
        answer = torch.where(keep, digits, 10).sort(dim=1).values
    else:
        raise ValueError(f"make_examples: unknown task {task!r}")
    src = torch.where(keep, digits + FIRST_DIGIT, PAD)[:, :longest]
    tgt = torch.full(
        (batch, longest + 2), PAD, dtype=torch.long, device=digits.device
    )
    tgt[:, 0] = BOS
    tgt[:, 1 : longest + 1] = torch.where(keep, answer + FIRST_DIGIT, PAD)[
        :, :longest
    ]
    tgt.scatter_(1, lengths[:, None] + 1, EOS)
    return src, tgt


def _draw(
    batch_size: int, config: TaskConfig, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    lengths = torch.randint(
        config.min_len,
        config.max_len + 1,
        (batch_size,),
        generator=generator,
    )
    digits = torch.randint(
        0, 10, (batch_size, config.max_len), generator=generator
    )
    # canonical padding
    digits = torch.where(
        torch.arange(config.max_len) < lengths[:, None], digits, 0
    )
    return digits, lengths


def _keys(digits: Tensor, lengths: Tensor) -> Tensor:
    """One int64 per sequence, equal iff the digit strings are equal (base-11 code, digit + 1)."""
    pos = torch.arange(digits.shape[1])
    code = torch.where(pos < lengths[:, None], digits + 1, 0)
    return (code * (11**pos)).sum(dim=1)


def make_batch(
    batch_size: int,
    config: TaskConfig,
    generator: torch.Generator,
    exclude: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """A fresh random batch ``(src, tgt)``; sequences whose key is in ``exclude`` are redrawn."""
    digits, lengths = _draw(batch_size, config, generator)
    if exclude is not None and exclude.numel():
        for _ in range(100):
            clash = torch.isin(_keys(digits, lengths), exclude)
            if not clash.any():
                break
            d2, l2 = _draw(int(clash.sum()), config, generator)
            digits[clash], lengths[clash] = d2, l2
        else:  # pragma: no cover - only if the held-out sets cover almost all strings
            raise RuntimeError(
                "make_batch: could not avoid the held-out sequences; lower min_len or the set sizes"
            )
    return make_examples(digits, lengths, config.task)


@dataclasses.dataclass
class HeldOut:
    src: Tensor
    tgt: Tensor
    keys: Tensor

    def __len__(self) -> int:
        return self.src.shape[0]


def make_heldout(
    size: int, config: TaskConfig, seed: int, exclude: Tensor | None = None
) -> HeldOut:
    """``size`` distinct sequences, none of whose keys is in ``exclude``."""
    generator = torch.Generator().manual_seed(seed)
    digits, lengths, seen = (
        [],
        [],
        set() if exclude is None else set(exclude.tolist()),
    )
    while len(digits) < size:
        d, n = _draw(size, config, generator)
        for di, ni, key in zip(d, n, _keys(d, n).tolist()):
            if key not in seen and len(digits) < size:
                seen.add(key)
                digits.append(di)
                lengths.append(ni)
    d, n = torch.stack(digits), torch.stack(lengths)
    src, tgt = make_examples(d, n, config.task)
    return HeldOut(src, tgt, _keys(d, n))


# --------------------------------------------------------------------------- model and training
@dataclasses.dataclass
class TrainConfig:
    task: str = "reverse"
    min_len: int = 3
    max_len: int = 12
    d_model: int = 64
    num_heads: int = 4
    num_encoder_layers: int = 2
    num_decoder_layers: int = 2
    d_ff: int = 128
    dropout: float = 0.0
    norm_first: bool = True
    steps: int = 700
    batch_size: int = 128
    lr: float = 2e-3
    warmup_steps: int = 100
    grad_clip: float = 1.0
    seed: int = 0
    eval_every: int = 100
    val_size: int = 500
    test_size: int = 2000
    beam_size: int = 4
    temperatures: tuple = (0.5, 1.0, 2.0)

    @property
    def task_config(self) -> TaskConfig:
        return TaskConfig(self.task, self.min_len, self.max_len)


def build_seq2seq(cfg: TrainConfig) -> Seq2SeqTransformer:
    return Seq2SeqTransformer(
        VOCAB_SIZE,
        VOCAB_SIZE,
        d_model=cfg.d_model,
        num_heads=cfg.num_heads,
        num_encoder_layers=cfg.num_encoder_layers,
        num_decoder_layers=cfg.num_decoder_layers,
        d_ff=cfg.d_ff,
        dropout=cfg.dropout,
        max_len=cfg.max_len + 2,
        pad_id=PAD,
        norm_first=cfg.norm_first,
    )


def exact_match(pred: Tensor, tgt: Tensor) -> Tensor:
    """bool ``(B,)``: the whole output, ``BOS`` to ``EOS``, equals the target (padding ignored)."""
    width = max(pred.shape[1], tgt.shape[1])
    pred = F.pad(pred, (0, width - pred.shape[1]), value=PAD)
    tgt = F.pad(tgt, (0, width - tgt.shape[1]), value=PAD)
    return (pred == tgt).all(dim=1)


def decode(
    model,
    src: Tensor,
    method: str,
    max_new_tokens: int,
    *,
    beam_size: int = 4,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
) -> Tensor:
    """``src (B, S)`` decoded by ``method``: ``"greedy"``, ``"beam"`` or ``"sample"`` -> ``(B, <= 1 + max_new_tokens)``."""
    if method == "greedy":
        return greedy_decode(model, src, max_new_tokens, BOS, EOS, PAD)
    if method == "beam":
        return beam_search(
            model, src, max_new_tokens, BOS, EOS, PAD, beam_size=beam_size
        )
    if method == "sample":
        return sample_decode(
            model,
            src,
            max_new_tokens,
            BOS,
            EOS,
            PAD,
            temperature=temperature,
            generator=generator,
        )
    raise ValueError(f"unknown decoding method {method!r}")


class Evaluation(NamedTuple):
    """What ``evaluate_decoding`` measures: the exact-match ``accuracy``, the outcome per sequence
    ``hits (N,)`` (bool) and the decoded sequences ``outputs (N, W)``, padded with ``PAD``."""

    accuracy: float
    hits: Tensor
    outputs: Tensor


@torch.no_grad()
def evaluate_decoding(
    model,
    data: HeldOut,
    method: str = "greedy",
    *,
    batch_size: int = 500,
    **kw,
) -> Evaluation:
    """Decode every source of ``data`` and compare with its target (see ``Evaluation``).

    ``method`` is ``"greedy"``, ``"beam"`` (keyword ``beam_size``) or ``"sample"`` (keywords
    ``temperature``, ``generator``).
    """
    was_training = model.training
    model.eval()
    hits, outputs = [], []
    for start in range(0, len(data), batch_size):
        src = data.src[start : start + batch_size]
        tgt = data.tgt[start : start + batch_size]
        # room for every digit and EOS
        pred = decode(model, src, method, tgt.shape[1] - 1, **kw)
        hits.append(exact_match(pred, tgt))
        outputs.append(pred)
    model.train(was_training)
    hit = torch.cat(hits)
    width = max(o.shape[1] for o in outputs)
    padded = torch.cat(
        [F.pad(o, (0, width - o.shape[1]), value=PAD) for o in outputs]
    )
    return Evaluation(float(hit.double().mean()), hit, padded)


@torch.no_grad()
def greedy_exact_match(
    model, data: HeldOut, *, batch_size: int = 500
) -> Tensor:
    """bool ``(N,)``: whether greedy decoding reproduces each target, read off one teacher-forced pass.

    Greedy decoding outputs a target exactly if and only if, fed the target's own prefix, the model
    ranks the target's next token first at every position up to ``EOS``: while that holds, each
    step's prefix is the target's; where it first fails, the greedy output leaves the target.  So
    one forward pass over the targets gives the hits that ``evaluate_decoding(model, data, "greedy")``
    decodes step by step (up to rounding in a near tie between two tokens).
    """
    was_training = model.training
    model.eval()
    hits = []
    for start in range(0, len(data), batch_size):
        src, tgt = (
            data.src[start : start + batch_size],
            data.tgt[start : start + batch_size],
        )
        # (B, T): the most probable token after each prefix
        predicted = model(src, tgt[:, :-1]).argmax(dim=-1)
        hits.append(
            ((predicted == tgt[:, 1:]) | (tgt[:, 1:] == PAD)).all(dim=1)
        )
    model.train(was_training)
    return torch.cat(hits)


def train_seq2seq(
    cfg: TrainConfig,
    *,
    log: Callable[[str], None] | None = print,
    val: HeldOut | None = None,
    exclude: Tensor | None = None,
) -> tuple[Seq2SeqTransformer, dict[str, Any]]:
    """Teacher-forced training with Adam for ``cfg.steps`` steps on fresh batches.

    The decoder reads ``tgt[:, :-1]`` (``BOS`` and the answer) and is trained to predict
    ``tgt[:, 1:]`` (the answer and ``EOS``) at every position at once; padding positions do not
    count in the loss.  Returns the model (in eval mode) and the history: the mean training loss
    of every ``eval_every`` steps and, if ``val`` is given, the greedy exact-match accuracy on it.
    """
    torch.manual_seed(cfg.seed)
    generator = torch.Generator().manual_seed(cfg.seed + 1)
    model = build_seq2seq(cfg)
    optimizer = torch.optim.Adam(
        model.parameters(), lr=cfg.lr, betas=(0.9, 0.98), eps=1e-9
    )
    # Linear warm-up from 0 at step 0, then cosine decay: chapter 08's warmup_cosine_lr.
    # a short trial run still decays
    warmup = min(cfg.warmup_steps, cfg.steps - 1)
    trainer = Trainer(
        model,
        optimizer,
        lr_factor=lr_factor("cosine", cfg.steps, warmup),
        grad_clip=cfg.grad_clip,
    )
    history: dict[str, list] = {
        "step": [],
        "train_loss": [],
        "val_exact_match": [],
        "elapsed_s": [],
    }
    eval_time = 0.0
    window: list[float] = []
    start = time.perf_counter()
    model.train()
    for step in range(cfg.steps):
        src, tgt = make_batch(
            cfg.batch_size, cfg.task_config, generator, exclude
        )
        # teacher forcing: the true prefix, not the model's own guesses
        logits = model(src, tgt[:, :-1])
        loss = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]),
            tgt[:, 1:].reshape(-1),
            ignore_index=PAD,
        )
        window.append(trainer.step(loss))
        if (step + 1) % cfg.eval_every == 0 or step + 1 == cfg.steps:
            tick = time.perf_counter()
            # greedy decoding's accuracy, from one teacher-forced pass (see greedy_exact_match)
            acc = (
                float(greedy_exact_match(model, val).double().mean())
                if val is not None
                else None
            )
            eval_time += time.perf_counter() - tick
            history["step"].append(step + 1)
            history["train_loss"].append(sum(window) / len(window))
            history["val_exact_match"].append(acc)
            history["elapsed_s"].append(
                round(time.perf_counter() - start, 2)
            )
            window = []
            if log:
                shown = "" if acc is None else f"  val exact match {acc:.3f}"
                log(
                    f"step {step + 1:5d}  loss {history['train_loss'][-1]:.4f}{shown}"
                )
    model.eval()
    history["train_time_s"] = round(time.perf_counter() - start, 2)
    history["eval_time_s"] = round(eval_time, 2)
    return model, history


def load_trained_model(path: Path | str | None = None) -> Seq2SeqTransformer:
    """The model saved by the full run (``results/ch06_seq2seq_model.pth``), in eval mode."""
    from .. import results

    path = Path(path or Path(results.RESULTS_DIR) / MODEL_FILE)
    if not path.exists():
        raise FileNotFoundError(
            f"{path} is missing: run `python -m course_utils.experiments.seq2seq` to train and save it"
        )
    saved = torch.load(path, map_location="cpu", weights_only=True)
    model = Seq2SeqTransformer(**saved["config"])
    model.load_state_dict(saved["state_dict"])
    return model.eval()
