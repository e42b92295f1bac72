"""Writing files so that a killed process never leaves half a file: the one home for it.

Checkpoints, run histories, result files, the dataset cache and the grading status all go
through ``atomic_path``: the content is written to a temporary file beside the target, which
then replaces the target in one step (``os.replace``), so a reader sees the old file or the
new one, never a mixture.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

__all__ = ["atomic_path", "write_text", "write_json", "torch_save"]


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; when the block ends without an error, it becomes ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"
    )
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        # mkstemp makes private files; these are for everyone
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: str | Path, text: str) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def write_json(path: str | Path, obj: Any, *, indent: int = 1) -> Path:
    """``obj`` as JSON (floats for anything JSON cannot hold, e.g. numpy scalars), newline-terminated."""
    return write_text(
        path, json.dumps(obj, indent=indent, default=float) + "\n"
    )


def torch_save(obj: Any, path: str | Path) -> Path:
    import torch

    with atomic_path(path) as tmp:
        torch.save(obj, tmp)
    return Path(path)
