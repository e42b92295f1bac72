"""A grading worker: a process that grades the students the driver (``autograde.py``) names on its
stdin, one after another, and answers one JSON line per student on its stdout.

    python -m course_utils.grading.worker ID --course DIR --mem-limit BYTES --time-limit S
                                          [--no-fork-server] [--no-sandbox]

It imports nbgrader once and grades each submission with nbgrader's own ``Autograde`` (so the
scores are exactly those of ``nbgrader autograde``) in a fresh kernel, forked from its fork
server (``forkserver.py``), inside bubblewrap unless ``--no-sandbox`` (``sandbox.py``), under the
watchdog (``watchdog.py``).  A submission that fails is answered with the reason and its scores
are set to 0.  ``command()`` is the command line the driver starts it with.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from .config import load_config, source_folder
from .execute import (
    course_imports,
    forget_running_cell,
    guarded_execute,
    running_cell,
)
from .forkserver import skip_slow_optional_imports
from .gradebook import score_text, zero_scores
from .limits import parse_size
from .reasons import failure_reason, graded_reasons, kernel_never_started
from .status import FAILED, GRADED, log_name, logs_folder
from .watchdog import Watchdog

# run with -m: relative imports need the package
PROGRAM = f"{__package__}.worker"


def command(
    assignment_id: str,
    root: Path,
    mem_limit: int | None,
    time_limit: float,
    fork_server: bool = True,
    sandboxed: bool = True,
) -> list[str]:
    """The command line that starts a worker (run it in the course directory ``root``)."""
    return (
        [
            sys.executable,
            "-m",
            PROGRAM,
            assignment_id,
            "--course",
            str(root),
            "--mem-limit",
            str(mem_limit or 0),
            "--time-limit",
            str(time_limit),
        ]
        + ([] if fork_server else ["--no-fork-server"])
        + ([] if sandboxed else ["--no-sandbox"])
    )


def assignment_modules(folder: Path) -> tuple[str, ...]:
    """Every module the source notebooks in ``folder`` import, in any cell (the fork server
    imports them once, for all its kernels).  The instructor's notebooks, never a submission's."""
    import nbformat

    from .markers import imported_modules

    found: list[str] = []
    for path in sorted(folder.glob("*.ipynb")):
        for c in nbformat.read(path, as_version=4).cells:
            if c.cell_type == "code":
                found += [
                    m for m in imported_modules(c.source) if m not in found
                ]
    return tuple(found)


def serve(
    assignment_id: str,
    root: Path,
    mem_limit: int | None,
    time_limit: float,
    fork_server: bool = True,
    sandboxed: bool = True,
) -> None:
    """Start the sandbox and the fork server, answer for every student named on stdin, then
    stop them."""
    from .forkserver import SANDBOX_ENV, SOCKET_ENV, ForkServer

    box = None
    if sandboxed:  # sandbox.py: the kernels are forked inside it, and talk over its folder
        from .sandbox import Sandbox

        box = Sandbox()
        # no launcher falls back to a kernel outside the sandbox
        os.environ[SANDBOX_ENV] = "1"
    zygote = None
    if fork_server or sandboxed:
        # short: a socket path has ~100 bytes
        folder = tempfile.mkdtemp(prefix="course-zygote-")
        zygote = ForkServer(
            folder,
            sandbox=box,
            warm=assignment_modules(source_folder(root, assignment_id)),
        )
        # sandboxed, a failed start is retried per student
        if zygote.start(dict(os.environ)) or sandboxed:
            # the kernels' launcher finds it there
            os.environ[SOCKET_ENV] = zygote.path
        else:
            zygote = None
    try:
        answer(assignment_id, root, mem_limit, time_limit, zygote, box)
    finally:
        if zygote is not None:
            zygote.stop()
            shutil.rmtree(os.path.dirname(zygote.path), ignore_errors=True)
        if box is not None:
            box.remove()


def answer(
    assignment_id: str,
    root: Path,
    mem_limit: int | None,
    time_limit: float,
    zygote=None,
    box=None,
) -> None:
    """Read student ids from stdin, grade each, answer one JSON line per student."""
    # The protocol gets its own copy of stdout; fd 1 becomes stderr, so whatever a kernel or
    # a library writes to stdout lands in the worker's log, not in the protocol.
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    grader = Grader(assignment_id, root, mem_limit, time_limit, zygote, box)
    for line in sys.stdin:
        if student := line.strip():
            proto.write(json.dumps(grader.grade(student)) + "\n")


def autograde_config(root: Path, assignment_id: str, box=None):
    """The course's configuration with nbgrader's Execute replaced by ``execute.py``'s and, in
    the sandbox ``box``, the kernels' sockets in its folder."""
    from nbgrader.converters import Autograde
    from nbgrader.preprocessors import Execute

    config = load_config(root)
    guarded = guarded_execute(
        course_imports(source_folder(root, assignment_id))
    )
    config.Autograde.autograde_preprocessors = [
        guarded if pp is Execute else pp
        for pp in Autograde.class_traits()[
            "autograde_preprocessors"
        ].default()
    ]
    # the kernel's sockets: files in the sandbox's folder (it has no network)
    if box is not None:
        config.KernelManager.transport = "ipc"
        config.KernelManager.ip = str(box.run_dir / "kernel")
        # One kernel at a time per worker: one name, in the folder the sandbox sees (the default
        # is a temporary file in the grader's /tmp, which the sandbox does not share).
        config.KernelManager.connection_file = str(
            box.run_dir / "kernel.json"
        )
    return config


class Grader:
    """Grades one student at a time: nbgrader's Autograde under the watchdog, its log in
    ``status/<id>.logs/<student>.log``."""

    def __init__(
        self,
        assignment_id: str,
        root: Path,
        mem_limit: int | None,
        time_limit: float,
        zygote=None,
        box=None,
    ):
        self.assignment_id, self.root, self.mem_limit, self.time_limit = (
            assignment_id,
            root,
            mem_limit,
            time_limit,
        )
        self.zygote, self.box = zygote, box
        self.config = autograde_config(root, assignment_id, box)
        self.log = logging.getLogger(f"course_grading.{os.getpid()}")
        self.log.setLevel(logging.INFO)
        self.log.propagate = False
        self.watchdog = Watchdog(mem_limit)
        self.watchdog.spare = (
            set(zygote.family) if zygote is not None else set()
        )
        self.watchdog.start()
        self.logs = logs_folder(root, assignment_id)
        self.logs.mkdir(parents=True, exist_ok=True)

    def grade(self, student: str) -> dict:
        """{"student", "state", "reasons", "score", "seconds"}: the answer for one student."""
        start = time.perf_counter()
        for attempt in (1, 2):
            coursedir, error, log_text = self._autograde(student)
            no_start = kernel_never_started(
                error,
                log_text,
                running_cell() is not None,
                self.watchdog.reason,
            )
            # SQLite gave up waiting for its lock (very busy disk): grade the student again.
            if error and "database is locked" in log_text and attempt == 1:
                continue
            # No learner code had run: the machine failed (a start under heavy load), not the
            # submission.  Start the kernel once more.
            if no_start and attempt == 1:
                continue
            break
        if error is None:
            result = {
                "student": student,
                "state": GRADED,
                "score": score_text(
                    coursedir.db_url,
                    coursedir.course_id,
                    self.assignment_id,
                    student,
                ),
                "reasons": graded_reasons(
                    self.root / "autograded" / student / self.assignment_id,
                    self.config.Execute.timeout,
                    self.mem_limit,
                ),
            }
        else:
            submitted = coursedir.format_path(
                coursedir.submitted_directory, student, self.assignment_id
            )
            reason = failure_reason(
                error,
                log_text,
                running_cell(),
                self.watchdog.reason,
                no_start,
                submitted,
            )
            reasons = [
                f"{reason}; details in {log_name(self.assignment_id, student)}"
            ]
            reasons += zero_scores(
                coursedir.db_url,
                coursedir.course_id,
                self.assignment_id,
                student,
            )
            result = {
                "student": student,
                "state": FAILED,
                "score": None,
                "reasons": reasons,
            }
        result["seconds"] = round(time.perf_counter() - start, 2)
        return result

    def _autograde(self, student: str):
        """One run of nbgrader's Autograde: (its CourseDirectory, the error or None, the log)."""
        from nbgrader.converters import Autograde
        from nbgrader.coursedir import CourseDirectory

        forget_running_cell()
        if self.box is not None:
            # a submission killed it: a fresh one
            if self.zygote is not None and not self.zygote.alive():
                self.zygote.start(dict(os.environ))
                self.watchdog.spare = set(self.zygote.family)
            self.box.reset(
                self.root / "submitted" / student / self.assignment_id
            )
        path = self.logs / f"{student}.log"
        handler = logging.FileHandler(path, mode="w")
        handler.setFormatter(
            logging.Formatter("%(asctime)s [%(levelname)s] %(message)s")
        )
        self.log.addHandler(handler)
        coursedir = CourseDirectory(config=self.config)
        coursedir.assignment_id, coursedir.student_id = (
            self.assignment_id,
            student,
        )
        app = Autograde(
            coursedir=coursedir, config=self.config, log=self.log
        )
        app.force, app.create_student = True, True
        self.watchdog.arm(self.time_limit)
        error = None
        try:
            app.start()
        except (
            Exception
        ) as exc:  # a failure is a result, not a crash; Ctrl-C stops
            error = f"{type(exc).__name__}: {exc}"
        finally:
            self.watchdog.disarm()
            self.log.removeHandler(handler)
            handler.close()
            if self.zygote is not None:
                self.zygote.sweep()  # nothing a submission started outlives its grading
        return coursedir, error, path.read_text(errors="replace")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog=f"python -m {PROGRAM}", description=__doc__.split("\n")[0]
    )
    parser.add_argument("assignment_id")
    parser.add_argument(
        "--course", type=Path, required=True, help="the course directory"
    )
    parser.add_argument(
        "--mem-limit", default="0", help="per kernel, in bytes (0: none)"
    )
    parser.add_argument(
        "--time-limit",
        type=float,
        required=True,
        help="seconds per notebook",
    )
    parser.add_argument(
        "--no-fork-server", dest="fork_server", action="store_false"
    )
    parser.add_argument("--no-sandbox", dest="sandbox", action="store_false")
    args = parser.parse_args(argv)
    serve(
        args.assignment_id,
        args.course,
        parse_size(args.mem_limit),
        args.time_limit,
        args.fork_server,
        args.sandbox,
    )


if __name__ == "__main__":
    skip_slow_optional_imports()  # before nbgrader: each worker starts seconds sooner
    main()
    # Its answers are written and its zygote and sandbox are gone: tearing down nbgrader's
    # modules would only keep the driver waiting for this process to end.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
