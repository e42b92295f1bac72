"""Numbers from ``results/`` for the book's Markdown pages, as MyST substitutions.

A page writes ``{{ install_gpu_only_gb }}`` and the build puts in the value computed here from
the result file, so prose pages follow the course's rule that every number comes from
``results/`` (chapter pages render theirs in code cells).  A missing result file is a build
error that names the command that makes it.
"""

from __future__ import annotations

import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[2] / "results"


def _read(name: str, command: str) -> dict:
    path = RESULTS / f"{name}.json"
    if not path.exists():
        raise RuntimeError(
            f"{path} is missing: run `{command}` (the book quotes it)"
        )
    return json.loads(path.read_text())


def substitutions() -> dict[str, str]:
    out: dict[str, str] = {}
    size = _read("install_size", "python -m benchmarks.install_size")
    d, prov = size["data"], size["provenance"]
    out["install_env_gb"] = f"{d['environment_bytes'] / 1e9:.1f}"
    out["install_gpu_only_gb"] = f"{d['gpu_only_bytes'] / 1e9:.1f}"
    out["install_torch_gb"] = f"{d['torch_bytes'] / 1e9:.1f}"
    out["install_torch_version"] = d["torch_version"]
    out["install_measured_on"] = prov["date"][:10]
    out.update(_notebook_times())
    return out


def _notebook_times() -> dict[str, str]:
    """``notebook_times_table``: a Markdown table of each chapter's full-mode time and slowest cell."""
    times = _read("notebook_times", "python -m benchmarks.notebook_times")
    d, prov = times["data"], times["provenance"]
    rows = [
        "| chapter | whole notebook | its slowest cell |",
        "|---|---|---|",
    ]

    def duration(seconds: float) -> str:
        return (
            f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"
        )

    for cid, t in d["chapters"].items():
        slow = max(t["slow_cells"], key=lambda c: c["seconds"], default=None)
        slowest = (
            f"{duration(slow['seconds'])}, in {slow['section'].replace('|', '/')}"
            if slow
            else f"none takes {d['slow_cell_s']:.0f} s"
        )
        rows.append(f"| {cid} | {duration(t['total_s'])} | {slowest} |")
    hw = prov["hardware"]
    return {
        "notebook_times_table": "\n".join(rows),
        "notebook_times_machine": f"{hw['cpu']}, {hw['cpu_cores']} cores, no GPU"
        if not hw.get("gpu")
        else f"{hw['cpu']} with {hw['gpu']}",
        "notebook_times_load": f"{d['load_average_1min']['start']} -> {d['load_average_1min']['end']}",
        "notebook_times_date": prov["date"][:10],
    }


def _add(app, config) -> None:
    config.myst_substitutions = {
        **substitutions(),
        **(config.myst_substitutions or {}),
    }


def setup(app):
    app.connect("config-inited", _add)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
