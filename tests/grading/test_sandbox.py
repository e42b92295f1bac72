"""Hostile submissions, graded the way `make autograde` grades (course_utils.grading.autograde.grade,
JOBS=1 so that one worker grades them one after the other): from inside its kernel, a submission
cannot read the solutions or the gradebook, change the source notebook, read another student's
files or the grader's secrets, connect anywhere, or leave a process behind; one that kills the
fork server costs nothing to the students graded after it.

The same submission graded with ``sandbox=False`` shows that each probe does find what it looks
for when nothing stops it (a probe that could never see a leak would prove nothing).
"""

from __future__ import annotations

import hashlib
import socket
import threading
import time
import uuid
from pathlib import Path

import nbformat
import psutil
import pytest

from course_utils.grading.autograde import grade
from course_utils.grading.sandbox import FLAG_UNSANDBOXED, unavailable
from tests.helpers import missing_piece
from tests.grading.test_autograde_driver import (
    CID,
    _insert_after_first_function,
    _reset,
    max_points,
    scores,
    small_course,  # noqa: F401
)
from tests.e2e.test_grading_e2e import _submission, _write

# the grader's database password, for this test
SECRET = "pw-" + uuid.uuid4().hex
# in the command line of the process the submission leaves
MARKER = "left-behind-" + uuid.uuid4().hex

# Each probe prints "PROBE <name> held" or "PROBE <name> LEAKED: <what>".  {root} is the course,
# {port} a listener of the test's on 127.0.0.1.
PROBES = r"""
import glob, os, socket, sqlite3, subprocess, sys
def _probe(name, attempt):
    try:
        found = attempt()
    except Exception as exc:
        found = None
    print("PROBE", name, "LEAKED: " + str(found)[:80] if found else "held")
root = {root!r}
source = os.path.join(root, "solutions", {cid!r}, {cid!r} + ".ipynb")
_probe("read-solutions", lambda: open(source).read(200))
def _write_source():
    with open(source, "a") as f:
        f.write(" ")
    return "appended to the source notebook"
_probe("write-source", _write_source)
def _gradebook():
    db = sqlite3.connect(os.path.join(root, "autograde", "gradebook.db"))
    db.execute("update grade set auto_score = 0")
    db.commit()
    return "rewrote every score"
_probe("write-gradebook", _gradebook)
_probe("read-other-student", lambda: open(glob.glob(os.path.join(root, "autograde", "submitted", "reference", "*", "*.ipynb"))[0]).read(100))
def _secret():
    for path in glob.glob("/proc/*/environ"):
        try:
            if {secret!r} in open(path, errors="replace").read():
                return path
        except OSError:
            pass
    return {secret!r} in str(os.environ) and "os.environ"
_probe("grader-secret", _secret)
def _connect():
    with socket.create_connection(("127.0.0.1", {port}), timeout=3) as s:
        s.sendall(b"LEAK")
    return "connected to 127.0.0.1:{port}"
_probe("network", _connect)
def _leave_behind():
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", {marker!r}],
                     start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return None
_probe("detached-process", _leave_behind)
"""
PROBE_NAMES = (
    "read-solutions",
    "write-source",
    "write-gradebook",
    "read-other-student",
    "grader-secret",
    "network",
    "detached-process",
)
KILL_ZYGOTE = "import os, signal\ntry:\n    os.kill(os.getppid(), signal.SIGKILL)\nexcept OSError:\n    pass\n"


class _Listener:
    """A TCP server on 127.0.0.1 that records whatever connects to it."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.got: list[bytes] = []
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    self.got.append(conn.recv(100))
                except OSError:
                    self.got.append(b"(connected)")

    def close(self):
        self.stop = True
        self.thread.join()
        self.sock.close()


def _probes(course: Path, student: str) -> dict[str, str]:
    nb = nbformat.read(
        course / "autograde" / "autograded" / student / CID / f"{CID}.ipynb",
        as_version=4,
    )
    lines = [
        line
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        for line in o.get("text", "").splitlines()
        if line.startswith("PROBE ")
    ]
    return {line.split()[1]: line.split(" ", 2)[2] for line in lines}


def _left_behind() -> list[int]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        if MARKER in " ".join(p.info["cmdline"] or []):
            found.append(p.pid)
    return found


def _grade_hostile(
    course: Path, sandbox: bool
) -> tuple[dict, dict, list, str]:
    _reset(course)
    listener = _Listener()
    try:
        code = PROBES.format(
            root=str(course),
            cid=CID,
            secret=SECRET,
            port=listener.port,
            marker=MARKER,
        )
        _write(
            course,
            CID,
            "hostile",
            _submission(course, CID, _insert_after_first_function(code)),
        )
        _write(
            course,
            CID,
            "hostile-kills-fork-server",
            _submission(
                course, CID, _insert_after_first_function(KILL_ZYGOTE)
            ),
        )
        _write(course, CID, "reference", _submission(course, CID))
        source = course / "solutions" / CID / f"{CID}.ipynb"
        before = hashlib.sha256(source.read_bytes()).hexdigest()
        status = grade(
            course,
            CID,
            jobs=1,
            force=True,
            progress=lambda line: None,
            sandbox=sandbox,
            env_extra={"PGPASSWORD": SECRET, "COURSE_CELL_TIMEOUT": "60"},
        )
        time.sleep(1)
        after = hashlib.sha256(source.read_bytes()).hexdigest()
        return (
            status,
            _probes(course, "hostile"),
            listener.got,
            "unchanged" if before == after else "changed",
        )
    finally:
        listener.close()
        for pid in _left_behind():
            psutil.Process(pid).kill()


@pytest.mark.slow
def test_hostile_submissions_are_held_by_the_sandbox(small_course):
    why = unavailable()
    if why:
        missing_piece(
            "bubblewrap (the grading sandbox)",
            "run 'sudo apt-get install -y bubblewrap' on Linux",
        )
    status, probes, received, source = _grade_hostile(
        small_course, sandbox=True
    )
    assert set(probes) == set(PROBE_NAMES), (
        f"the probes did not all run: {probes}"
    )
    leaked = {name: what for name, what in probes.items() if what != "held"}
    assert not leaked, f"the sandbox let these through: {leaked}"
    assert received == [], (
        f"a submission reached a listener on 127.0.0.1: {received}"
    )
    assert source == "unchanged"
    assert _left_behind() == [], (
        "a process the submission started outlived its grading"
    )
    full = max_points(small_course)
    got = scores(small_course)
    assert got["reference"] == full, (
        f"graded after two hostile submissions, the reference lost points: {got['reference']}"
    )
    # its answers are right; the probes change nothing of its grade
    assert got["hostile"] == full
    # The one that killed its fork server may fail (its kernel died with it); the others are graded.
    assert (
        status["hostile"]["state"]
        == status["reference"]["state"]
        == "graded"
    ), status
    assert not any(FLAG_UNSANDBOXED in st["flags"] for st in status.values())


@pytest.mark.slow
def test_without_the_sandbox_the_same_probes_see_the_leaks(small_course):
    """The control: every row is flagged, and the probes that need no network setup find what they look for."""
    status, probes, received, source = _grade_hostile(
        small_course, sandbox=False
    )
    assert all(FLAG_UNSANDBOXED in st["flags"] for st in status.values()), (
        status
    )
    for name in (
        "read-solutions",
        "write-source",
        "read-other-student",
        "network",
    ):
        assert probes.get(name, "").startswith("LEAKED"), (
            f"probe {name} saw nothing without the sandbox: {probes}"
        )
    assert source == "changed" and received, (source, received)


def test_a_sandboxed_launcher_never_starts_a_kernel_outside_the_sandbox(
    monkeypatch, tmp_path
):
    from course_utils.grading import forkserver

    missing = str(tmp_path / "no-such.sock")
    monkeypatch.setenv(forkserver.SANDBOX_ENV, "1")
    monkeypatch.delenv(forkserver.SOCKET_ENV, raising=False)
    # no fork server named: no kernel
    assert forkserver.run_forked_kernel(["-f", "kernel.json"]) == 1
    monkeypatch.setenv(forkserver.SANDBOX_ENV, "1")
    monkeypatch.setenv(forkserver.SOCKET_ENV, missing)
    # fork server gone: no kernel
    assert forkserver.run_forked_kernel(["-f", "kernel.json"]) == 1
    # the launcher pops both variables
    monkeypatch.delenv(forkserver.SANDBOX_ENV, raising=False)
    monkeypatch.setenv(forkserver.SOCKET_ENV, missing)
    # unsandboxed: a plain kernel
    assert forkserver.run_forked_kernel(["-f", "kernel.json"]) is None
