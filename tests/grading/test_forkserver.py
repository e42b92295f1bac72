"""Grading kernels forked from a warm process (course_utils.grading.forkserver) on chapter 01:

- the scores are those of plain kernels;
- the per-cell timeout still interrupts an infinite loop, and the rest of the notebook runs;
- the memory and time limits, and a kernel that kills itself: tests/grading/test_autograde_driver.py
  (the driver grades with the fork server by default);
- nothing one submission sets or patches is visible to the next one graded by the same worker;
- killing the launcher kills the kernel; without a fork server the launcher starts a plain kernel.
"""

from __future__ import annotations

import os
import signal
import time

import nbformat
import psutil
import pytest

from course_utils.grading.autograde import grade
from tests.mutations import MUTATIONS
from tests.grading.test_autograde_driver import (
    CID,
    SANDBOX,
    _insert_after_first_function,
    _reset,
    max_points,
    scores,
    small_course,  # noqa: F401  (small_course is a fixture)
)
from tests.e2e.test_grading_e2e import _mutate, _submission, _write

# A cell that says which process started its kernel, and whether another notebook's state is here.
PROBE = """\
import builtins, os, psutil, torch
_parent = " ".join(psutil.Process(os.getpid()).parent().cmdline())
print("PROBE", "forked" if "forkserver" in _parent else "plain",
      "LEAKED" if ("LEAK" in globals() or hasattr(builtins, "leak") or hasattr(torch, "leak")
                   or getattr(torch.isclose, "leak", False)) else "clean")
"""
LEAKER = """\
import builtins, torch
LEAK = 1
builtins.leak = 1
torch.leak = 1
def _always_close(*args, **kwargs):
    return torch.tensor(True)
_always_close.leak = True
torch.isclose = _always_close
"""


def _with_cells(*codes: str):
    def edit(nb):
        for code in codes:
            _insert_after_first_function(code)(nb)

    return edit


def _probe(course, student: str) -> list[str]:
    """The PROBE lines printed in ``student``'s autograded notebook.

    A cell's printed text is read whole: a kernel under load may flush one ``print`` as several
    stream outputs (``"PROBE"``, then ``" forked clean"``), which a notebook shows as one line."""
    nb = nbformat.read(
        course / "autograde" / "autograded" / student / CID / f"{CID}.ipynb",
        as_version=4,
    )
    return [
        line
        for c in nb.cells
        if c.cell_type == "code"
        for line in "".join(
            o.get("text", "")
            for o in c.get("outputs", [])
            if o.get("output_type") == "stream" and o.get("name") == "stdout"
        ).splitlines()
        if line.startswith("PROBE")
    ]


@pytest.mark.slow
def test_same_scores_with_and_without_fork_server(small_course):
    course = small_course
    _reset(course)
    _write(
        course,
        CID,
        "reference",
        _submission(course, CID, _with_cells(PROBE)),
    )
    _write(
        course,
        CID,
        "untouched",
        nbformat.read(
            course / "notebooks" / CID / f"{CID}.ipynb", as_version=4
        ),
    )
    for m in MUTATIONS[CID][:2]:
        _write(course, CID, m.name, _submission(course, CID, _mutate(m)))

    plain = grade(
        course, CID, jobs=2, force=True, fork_server=False, sandbox=False
    )
    plain_scores = scores(course)
    assert _probe(course, "reference") == ["PROBE plain clean"]
    forked = grade(course, CID, jobs=2, force=True, sandbox=False)
    assert _probe(course, "reference") == ["PROBE forked clean"]
    assert scores(course) == plain_scores
    assert {s: (v["state"], v["reasons"]) for s, v in forked.items()} == {
        s: (v["state"], v["reasons"]) for s, v in plain.items()
    }
    assert sum(plain_scores["reference"].values()) > 0 and not any(
        plain_scores["untouched"].values()
    )


@pytest.mark.slow
def test_cell_timeout_interrupts_a_forked_kernel(small_course):
    course = small_course
    _reset(course)
    _write(
        course,
        CID,
        "loops",
        _submission(
            course, CID, _with_cells("while True:\n    pass", PROBE)
        ),
    )
    status = grade(
        course,
        CID,
        jobs=1,
        force=True,
        env_extra={"COURSE_CELL_TIMEOUT": "10"},
        sandbox=SANDBOX,
    )
    s = status["loops"]
    assert s["state"] == "graded" and any(
        "per-cell limit of 10 s" in r for r in s["reasons"]
    ), s
    # The cells after the loop ran in the same (forked) kernel, and every test still passed.
    assert _probe(course, "loops") == ["PROBE forked clean"]
    assert scores(course)["loops"] == max_points(course)


@pytest.mark.slow
def test_no_state_leaks_between_students(small_course):
    course = small_course
    _reset(course)
    # One worker grades both, in this order (students are graded in sorted order).
    _write(
        course, CID, "a_leaks", _submission(course, CID, _with_cells(LEAKER))
    )
    _write(
        course, CID, "b_probes", _submission(course, CID, _with_cells(PROBE))
    )
    status = grade(course, CID, jobs=1, force=True, sandbox=SANDBOX)
    assert all(s["state"] == "graded" for s in status.values()), status
    got = scores(course)
    assert _probe(course, "b_probes") == ["PROBE forked clean"]
    # The patched torch.isclose did not reach b's tests either: all of them pass.
    assert got["b_probes"] == max_points(course)


# ------------------------------------------------------------------ the launcher, without nbgrader
@pytest.fixture
def kernel_env(tmp_path, monkeypatch):
    """A kernel spec and a running fork server, with the worker's environment."""
    from course_utils.grading.forkserver import SOCKET_ENV, ForkServer
    from course_utils.grading.kernel import write_kernelspec

    write_kernelspec(tmp_path, 2 * 2**30)
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    from course_utils.grading.autograde import KERNEL_ENV

    # one thread: an OpenMP pool would make forking unsafe
    for (
        name,
        value,
    ) in KERNEL_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("COURSE_DB_URL", "sqlite:///secret.db")
    # the assignment's own imports, as the worker passes them (a name that is no module is skipped)
    server = ForkServer(
        str(tmp_path), warm=("torchvision", "torchvision.models.resnet34")
    )
    assert server.start(dict(os.environ))
    monkeypatch.setenv(SOCKET_ENV, server.path)
    yield server
    server.stop()


def _run(kc, code: str) -> list[str]:
    out: list[str] = []

    def hook(msg):
        if msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            out.append(msg["content"]["ename"])

    kc.execute_interactive(code, output_hook=hook, timeout=120)
    return out


def _gone(pid: int, within: float = 15) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.slow
def test_killing_the_launcher_kills_the_forked_kernel(kernel_env):
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3")
    try:
        text = "".join(
            _run(
                kc,
                "import os, psutil, resource\n"
                "print(os.getpid(), psutil.Process().ppid(), os.environ.get('COURSE_DB_URL'),\n"
                "      resource.getrlimit(resource.RLIMIT_DATA)[0])",
            )
        )
        pid, ppid, secret, limit = text.split()
        assert (
            int(ppid) == kernel_env.pid
            and secret == "None"
            and int(limit) == 2 * 2**30
        ), text
        launcher = km.provisioner.process.pid
        assert int(pid) != launcher
        # SIGINT through the launcher interrupts the running cell; the kernel lives on.
        assert "KeyboardInterrupt" in _run(
            kc,
            "import signal, time\nos.kill(%d, signal.SIGINT)\ntime.sleep(30)"
            % launcher,
        )
        assert _run(kc, "print('alive')") == ["alive\n"]
        os.kill(launcher, signal.SIGKILL)
        assert _gone(int(pid)), "the forked kernel outlived its launcher"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@pytest.mark.slow
def test_without_fork_server_the_launcher_starts_a_plain_kernel(
    kernel_env, monkeypatch
):
    from jupyter_client.manager import start_new_kernel

    from course_utils.grading.forkserver import SOCKET_ENV

    monkeypatch.setenv(SOCKET_ENV, kernel_env.path + ".missing")
    km, kc = start_new_kernel(kernel_name="python3")
    try:
        text = "".join(
            _run(
                kc,
                "import os, psutil\nprint(psutil.Process().ppid(), os.environ.get('COURSE_DB_URL'))",
            )
        )
        ppid, secret = text.split()
        assert int(ppid) == os.getpid() and secret == "None", text
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@pytest.mark.slow
def test_a_forked_kernel_has_the_assignments_modules_imported(kernel_env):
    """What the zygote imported (WARM_MODULES, then the assignment's imports) is there in every
    kernel without importing it again: torchvision (asked for) and torch._dynamo (which the
    hidden tests' meta-device checks load)."""
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3")
    try:
        text = "".join(
            _run(
                kc,
                "import sys\nprint(sorted(m for m in ('torchvision', 'torch._dynamo', "
                "'torchvision.models.resnet34') if m in sys.modules))",
            )
        )
        assert text.strip() == "['torch._dynamo', 'torchvision']", text
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
