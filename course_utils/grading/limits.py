"""The limits a submission is graded under: their defaults, and memory sizes as people write them."""

from __future__ import annotations

import re

DEFAULT_MEM_LIMIT = "3G"
# seconds for a whole notebook: far above any chapter (results/bench_grading.json)
DEFAULT_TIME_LIMIT = 15 * 60
# A worker answers for a student within two attempts at the notebook's time limit plus this
# (importing nbgrader, starting the fork server, writing the gradebook).  One that does not is
# stuck outside any kernel the watchdog can stop: the driver stops it and grades the others.
ANSWER_MARGIN = 5 * 60


def parse_size(text: str | int | None) -> int | None:
    """'3G', '512M', '3GiB', '1.5g' or a number of bytes -> bytes; '0'/'none' -> no limit."""
    if text is None or isinstance(text, int):
        return text or None
    m = re.fullmatch(r"\s*([\d.]+)\s*([kmgt]?)(i?b)?\s*", str(text), re.I)
    if not m:
        if str(text).strip().lower() in {"none", "off"}:
            return None
        raise ValueError(
            f"memory limit {text!r}: write it as 3G, 512M or a number of bytes"
        )
    factor = 1024 ** " kmgt".index(m.group(2).lower() or " ")
    return int(float(m.group(1)) * factor) or None


def gib(n: int) -> str:
    """A number of bytes as the reasons and the progress line write it."""
    return f"{n / 2**30:.1f} GiB"
