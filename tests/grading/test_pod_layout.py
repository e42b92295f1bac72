"""The Kubernetes grading pod, graded for real on this machine: every chapter's reference
solution gets full marks in the grading image's file layout, with the pod's own command.

- The image's files are assembled from the Containerfile's own COPY lines (WORKDIR /course),
  with its ignore file's patterns applied as Docker applies them; a COPY source that the
  repository lacks, or that the ignore file drops, fails the test.
- The image installs the course in editable mode (``pip install -e``), so course_utils and
  the stored results are found beside the copy in /course, never in the repository: here a
  Python environment made of this one's packages (hard links, no copies) with course_utils
  mapped to the assembled copy plays that part, for the grader, its workers and the kernels.
- The Job's mounts (submitted/ read-only, autograded/, status/) become folders of the layout;
  the gradebook is SQLite (the pods use PostgreSQL; tests/grading/test_postgres_grading.py grades into
  one), released with ``nbgrader generate_assignment`` like ``make release``.
- Each chapter is graded by the shell script of the Job that ``render_job.py`` renders for it,
  run by /bin/sh in the layout with the Job's environment: the sandbox's settings and command
  where bubblewrap can start (always under CI), else the rendering for clusters without it
  (``--no-sandbox``, rows flagged).
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from tests.conftest import release
from tests.helpers import ROOT, chapter_ids, grading_sandbox
from tests.e2e.test_grading_e2e import (
    _max_points,
    _scores,
    _submission,
    _write,
)

K8S = ROOT / "autograde" / "k8s"
STUDENT = "reference"
SANDBOX = grading_sandbox()

sys.path.insert(0, str(K8S))
import render_job  # noqa: E402


# ------------------------------------------------------------------ the ignore file, as Docker reads it
def _regex(pattern: str) -> re.Pattern:
    """Docker's pattern syntax (moby/patternmatcher): ``*`` and ``?`` stop at ``/``, ``**``
    spans folders, anything else is literal."""
    out, i = "", 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out, i = out + "(.*/)?", i + 3
            continue
        if pattern.startswith("**", i):
            out, i = out + ".*", i + 2
            continue
        if c == "*":
            out += "[^/]*"
        elif c == "?":
            out += "[^/]"
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            out += re.escape(pattern[i])
        else:
            out += re.escape(c)
        i += 1
    return re.compile(out)


def ignore_rules(text: str) -> list[tuple[bool, re.Pattern]]:
    """(takes back, pattern) per line of a .dockerignore file."""
    rules = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        back = line.startswith("!")
        pattern = os.path.normpath(
            line[1:].strip() if back else line
        ).lstrip("/")
        rules.append((back, _regex(pattern)))
    return rules


def ignored(rel: str, rules) -> bool:
    """Whether the build context leaves out ``rel`` (a path from the context's root): the last
    rule that matches it, or one of its folders, decides."""
    parts = rel.split("/")
    candidates = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    out = False
    for back, regex in rules:
        if any(regex.fullmatch(c) for c in candidates):
            out = not back
    return out


def test_ignore_rules_read_as_docker_reads_them():
    rules = ignore_rules(
        "# a comment\n.git\n*.tmp\n**/*.pt\nautograde/*\n!autograde/keep.py\n**/__pycache__\n"
    )
    assert ignored(".git/config", rules) and ignored("a.tmp", rules)
    assert not ignored("results/a.tmp", rules), (
        "a pattern without **/ matches at the top level only"
    )
    assert ignored("results/run/model.pt", rules) and ignored(
        "model.pt", rules
    )
    assert not ignored("results/model.pth", rules)
    assert ignored("autograde/gradebook.db", rules) and ignored(
        "autograde/k8s/Containerfile", rules
    )
    assert not ignored("autograde/keep.py", rules)
    assert ignored("course_utils/__pycache__/x.pyc", rules) and not ignored(
        "course_utils/x.py", rules
    )


# ------------------------------------------------------------------ the image's file layout
def containerfile() -> tuple[str, list[tuple[list[str], str]]]:
    """(WORKDIR, [(sources, destination)] of the COPY lines) of the Containerfile."""
    text = re.sub(r"\\\n", " ", (K8S / "Containerfile").read_text())
    workdir, copies = "/", []
    for line in text.splitlines():
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if words[0] == "ADD":
            raise AssertionError(
                "the Containerfile ADDs files: this test assembles COPY lines only"
            )
        if words[0] == "WORKDIR":
            workdir = words[1]
        elif words[0] == "COPY":
            args = [w for w in words[1:] if not w.startswith("--")]
            assert not any(w.startswith("--from") for w in words), (
                "COPY --from is not from the repository"
            )
            copies.append((args[:-1], args[-1]))
    return workdir, copies


def assemble(layout: Path) -> list[Path]:
    """The image's files below WORKDIR, copied from the repository into ``layout``; returns the
    files copied.  Fails on a COPY source that is missing or left out by the ignore file."""
    workdir, copies = containerfile()
    assert workdir == "/course", workdir
    rules = ignore_rules((K8S / "Containerfile.dockerignore").read_text())
    copied: list[Path] = []

    def put(src: Path, dst: Path) -> None:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
        copied.append(dst)

    for sources, dest in copies:
        into_folder = dest.endswith("/") or len(sources) > 1
        target = layout / os.path.normpath(dest)
        for source in sources:
            src = ROOT / source
            rel = os.path.normpath(source)
            assert src.exists(), (
                f"the Containerfile copies {source}, which the repository lacks"
            )
            assert not ignored(rel, rules), (
                f"the Containerfile copies {source}, which its ignore file leaves out"
            )
            if src.is_file():
                put(src, target / src.name if into_folder else target)
                continue
            for folder, dirs, files in os.walk(src):
                here = Path(folder)
                dirs[:] = [
                    d
                    for d in dirs
                    if not ignored(
                        (here / d).relative_to(ROOT).as_posix(), rules
                    )
                ]
                for name in files:
                    rel_file = (here / name).relative_to(ROOT).as_posix()
                    if not ignored(rel_file, rules):
                        put(
                            here / name,
                            target / (here / name).relative_to(src),
                        )
    return copied


def test_layout_holds_what_grading_reads(tmp_path):
    files = {p.relative_to(tmp_path).as_posix() for p in assemble(tmp_path)}
    wanted = {
        "pyproject.toml",
        "autograde/nbgrader_config.py",
        "course_utils/grading/sandbox.py",
    }
    wanted |= {f"solutions/{c}/{c}.ipynb" for c in chapter_ids()} | {
        f"notebooks/{c}/{c}.ipynb" for c in chapter_ids()
    }
    # every stored result and trained model the chapters read (results/*.pth among them)
    wanted |= {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "results").iterdir()
        if p.is_file() and p.suffix in (".json", ".pth")
    }
    assert any(w.endswith(".pth") for w in wanted)
    assert not wanted - files, (
        f"missing from the image: {sorted(wanted - files)}"
    )
    assert not any(
        f.startswith("autograde/") and f != "autograde/nbgrader_config.py"
        for f in files
    )


# ------------------------------------------------------------------ a Python environment like the image's
def _image_python(where: Path, course: Path) -> Path:
    """A virtual environment with this one's packages (hard links) in which course_utils is
    the editable install of ``course`` (as ``pip install -e .`` in the image makes it)."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(where)],
        check=True,
        timeout=120,
    )
    site = Path(sysconfig.get_path("purelib"))
    target = where / site.relative_to(sys.prefix)
    subprocess.run(
        ["cp", "-al", f"{site}/.", str(target)], check=True, timeout=300
    )
    editable = [
        p
        for p in site.iterdir()
        if p.name.startswith("__editable__")
        and p.is_file()
        and str(ROOT) in p.read_text()
    ]
    assert editable, (
        "this environment lacks the editable install of course_utils (make venv: pip install -e)"
    )
    for path in editable:
        mine = target / path.name
        mine.unlink()  # a hard link: writing through it would change this environment's own file
        mine.write_text(path.read_text().replace(str(ROOT), str(course)))
    for cached in (target / "__pycache__").glob("__editable__*"):
        cached.unlink()
    python = where / "bin" / "python"
    found = subprocess.run(
        [
            str(python),
            "-c",
            "import course_utils; print(course_utils.__file__)",
        ],
        cwd="/",
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.strip()
    assert Path(found).is_relative_to(course), (
        f"course_utils of the image's Python comes from {found}"
    )
    return python


def _tree_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        digest.update(path.relative_to(folder).as_posix().encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def pod(tmp_path_factory):
    """(image Python, course folder, {chapter: Job documents}): the layout, released, with the
    reference solution of every chapter submitted by the student ``reference``."""
    base = tmp_path_factory.mktemp("pod")
    # hard links need one file system
    if os.stat(base).st_dev != os.stat(sys.prefix).st_dev:
        base = Path(tempfile.mkdtemp(prefix="pod-layout-", dir=sys.prefix))
    course = base / "course"
    start = time.perf_counter()
    assemble(course)
    python = _image_python(base / "python", course)
    ids = chapter_ids()
    jobs = {
        cid: render_job.render(
            cid, [STUDENT], image="grader", sandbox=SANDBOX
        )
        for cid in ids
    }
    for _, job in jobs.values():
        assert (
            job["spec"]["template"]["spec"]["containers"][0]["workingDir"]
            == "/course"
        )
        for mount in job["spec"]["template"]["spec"]["containers"][0][
            "volumeMounts"
        ]:
            if mount["mountPath"].startswith("/course/"):
                (
                    course / Path(mount["mountPath"]).relative_to("/course")
                ).mkdir(parents=True, exist_ok=True)
    release(course, ids)
    for cid in ids:
        _write(course, cid, STUDENT, _submission(course, cid))
    print(f"pod layout ready in {time.perf_counter() - start:.1f} s")
    yield python, course, jobs
    # only links, but tens of thousands
    shutil.rmtree(base / "python", ignore_errors=True)
    if base.is_relative_to(sys.prefix):
        shutil.rmtree(base, ignore_errors=True)


def run_pod(
    python: Path, course: Path, docs: list[dict], home: Path
) -> subprocess.CompletedProcess:
    """The Job's container for completion index 0: its script, by /bin/sh, in the layout, with
    the Job's environment (ConfigMap values, plain values; no Secret: the gradebook is SQLite)."""
    cm, job = docs
    pod = job["spec"]["template"]["spec"]
    (box,) = pod["containers"]
    assert box["command"] == ["/bin/sh", "-c"]
    students = home / "students.txt"
    students.write_text(cm["data"]["students.txt"])
    (mount,) = [
        m
        for m in box["volumeMounts"]
        if any(
            v["name"] == m["name"] and "configMap" in v
            for v in pod["volumes"]
        )
    ]
    script = box["args"][0].replace(
        f"{mount['mountPath']}/students.txt", str(students)
    )
    env = {
        "PATH": f"{python.parent}:/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "JOB_COMPLETION_INDEX": "0",
    }
    for var in box["env"]:
        if "value" in var:
            env[var["name"]] = var["value"]
        elif "configMapKeyRef" in var.get("valueFrom", {}):
            ref = var["valueFrom"]["configMapKeyRef"]
            assert ref["name"] == cm["metadata"]["name"]
            env[var["name"]] = cm["data"][ref["key"]]
    env["HOME"] = str(home)  # the pod's HOME is its own empty /tmp
    return subprocess.run(
        ["/bin/sh", "-c", script],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.mark.slow
# one worker builds the layout once and grades every chapter in it
@pytest.mark.xdist_group("pod-layout")
@pytest.mark.parametrize("cid", chapter_ids())
def test_pod_grades_the_reference_with_full_marks(cid, pod, tmp_path):
    python, course, jobs = pod
    submitted = course / "autograde" / "submitted"
    before = _tree_digest(submitted)
    start = time.perf_counter()
    proc = run_pod(python, course, jobs[cid], tmp_path)
    wall = time.perf_counter() - start
    log = f"{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    assert proc.returncode == 0, (
        f"the pod's command failed (exit {proc.returncode}):\n{log}"
    )
    assert f"grading {cid} for {STUDENT} (index 0)" in proc.stdout
    status = json.loads(
        (course / "autograde" / "status" / f"{cid}.json").read_text()
    )[STUDENT]
    assert status["state"] == "graded", (status, log)
    # The reference is the reader's edition pasted in: flagged as such (copies.py), and nothing else.
    others = [f for f in status["flags"] if "published answer" not in f]
    assert others == ([] if SANDBOX else ["graded without sandbox"]), status
    assert _tree_digest(submitted) == before, (
        "the grader wrote into submitted/, which the pod mounts read-only"
    )

    full = _max_points(cid)
    got = _scores(course, cid)[STUDENT]
    autograded = nbformat.read(
        course / "autograde" / "autograded" / STUDENT / cid / f"{cid}.ipynb",
        as_version=4,
    )
    errors = [
        f"{o.get('ename')}: {o.get('evalue')}"
        for c in autograded.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert got == full, (
        f"{cid}: the reference solution scored {got} of {full} in the pod; errors: {errors}"
    )

    from course_utils.grading.feedback import generate as generate_feedback

    (page,) = generate_feedback(course, cid, students=[STUDENT])
    feedback = html.unescape(page.read_text(encoding="utf-8"))
    notebook_text = json.dumps(autograded)
    assert (
        "FileNotFoundError" not in feedback
        and "FileNotFoundError" not in notebook_text
    ), (
        f"{cid}: a file the chapter reads is not in the image: {[e for e in errors if 'FileNotFound' in e]}"
    )
    print(
        f"{cid}: graded in the pod layout in {wall:.1f} s ({status['seconds']} s grading)"
        + ("" if SANDBOX else ", without the sandbox")
    )
