"""Grade a whole class: nbgrader's autograde, in parallel, resumable, with limits.

``grade(course_dir, assignment_id, jobs=2, force=True)`` (the command: ``course_utils.cli.autograde``,
``make autograde ID=<id> JOBS=N FORCE=1``) grades ``submitted/<student>/<ID>/`` and returns the
assignment's status (``status.py``: ``status/<ID>.json``, which ``make grades`` and the feedback read).

- JOBS worker processes (``worker.py``; default: one per core) each grade many students, one
  after another, each in a fresh kernel with a memory limit (``kernel.py``, ``watchdog.py``)
  and a time limit for the whole notebook (the per-cell limit, ``COURSE_CELL_TIMEOUT``, applies too);
- only new or changed submissions are graded (by the sha256 of the submitted notebooks) unless
  ``force``; a failed submission is not retried until it changes, or with ``force``;
- a submission past its limits, or whose kernel dies, is recorded as failed with the reason and
  its autograded scores set to 0, and everyone else is still graded;
- a worker that gives no answer for a student within ``answer_within`` (stuck outside any kernel)
  is stopped and the student graded again by a fresh worker, then failed if that one is stuck too;
- each graded submission gets the flags of the static scans (``flags.py``).

Kernels under grading get ``MPLBACKEND=Agg`` (figures are not rendered) and one OpenMP/torch
thread, so parallel kernels do not fight over the cores.  The gradebook is SQLite (which waits
for its lock, see ``autograde/nbgrader_config.py``) or the server in ``COURSE_DB_URL``.
"""

from __future__ import annotations

import json
import os
import queue
import select
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .config import course_root
from .flags import published_answers, submission_flags
from .gradebook import assignment_gradebook, zero_scores
from .limits import (
    ANSWER_MARGIN,
    DEFAULT_MEM_LIMIT,
    DEFAULT_TIME_LIMIT,
    gib,
    parse_size,
)
from .status import (
    FAILED,
    entry,
    is_current,
    log_name,
    logs_folder,
    read_status,
    submission_sha256,
    write_status,
)
from .worker import command as worker_command

# Kernels under grading: no figure rendering, one thread each (JOBS kernels share the cores).
KERNEL_ENV = {
    "MPLBACKEND": "Agg",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "PYDEVD_DISABLE_FILE_VALIDATION": "1",  # silences debugpy's start-up warning
}


def grade(
    course_dir: str | os.PathLike,
    assignment_id: str,
    jobs: int | None = None,
    force: bool = False,
    students: list[str] | None = None,
    mem_limit: str | int | None = DEFAULT_MEM_LIMIT,
    time_limit: float = DEFAULT_TIME_LIMIT,
    env_extra: dict | None = None,
    progress=print,
    fork_server: bool = True,
    answer_within: float | None = None,
    sandbox: bool = True,
) -> dict:
    """Grade the submissions of ``assignment_id`` and return the assignment's status
    (``{student: {"sha256", "state", "reasons", "flags", "seconds", "graded_at"}}``, every
    student, graded now or before).  ``course_dir`` is the repository (or a copy of the course)
    or its ``autograde/`` folder; ``env_extra`` goes into the graders' environment (e.g.
    ``COURSE_CELL_TIMEOUT``, ``COURSE_DB_URL``); ``progress`` gets one line per submission;
    ``fork_server=False`` starts every kernel as a fresh Python (see ``forkserver.py``);
    ``answer_within`` (seconds; default two attempts at ``time_limit`` plus ``ANSWER_MARGIN``)
    bounds the wait for one student: a worker that gives no answer is stopped and the student
    graded once more by a fresh worker, then failed, so a stuck worker never stops the class.
    ``sandbox`` (the default) runs every kernel in bubblewrap (``sandbox.py``) and refuses to
    grade where it cannot start; ``sandbox=False`` grades with the grader's own rights and flags
    every row ``graded without sandbox``."""
    root = course_root(course_dir)
    if sandbox:
        refuse_without_sandbox(fork_server)
    mem_bytes = parse_size(mem_limit)
    jobs = max(1, jobs or len(os.sched_getaffinity(0)))
    present = submitted_students(root, assignment_id, students)
    status = read_status(root, assignment_id)
    shas = {
        s: submission_sha256(root / "submitted" / s / assignment_id)
        for s in present
    }
    todo = [
        s
        for s in present
        if force
        or not is_current(
            status.get(s), shas[s], root / "autograded" / s / assignment_id
        )
    ]
    progress(
        f"{assignment_id}: {len(present)} submissions, {len(todo)} to grade"
        + (
            ""
            if force
            else f" ({len(present) - len(todo)} unchanged since last graded; --force regrades them)"
        )
        + f", {min(jobs, len(todo))} worker(s), limits {gib(mem_bytes) if mem_bytes else 'no'} memory, "
        f"{time_limit:g} s per notebook, "
        + ("in a sandbox" if sandbox else "WITHOUT a sandbox (--no-sandbox)")
    )
    if not todo:
        return status
    with tempfile.TemporaryDirectory(prefix="course-grading-") as kernels:
        run = ClassRun(
            root,
            assignment_id,
            todo,
            shas,
            status,
            progress,
            sandbox,
            time_limit,
            answer_within or 2 * time_limit + ANSWER_MARGIN,
            worker_command(
                assignment_id,
                root,
                mem_bytes,
                time_limit,
                fork_server,
                sandbox,
            ),
            worker_environment(kernels, mem_bytes, env_extra),
        )
        run.grade_all(min(jobs, len(todo)))
    total = time.perf_counter() - run.started
    failed = [s for s in todo if status[s]["state"] == FAILED]
    progress(
        f"{assignment_id}: graded {len(todo) - len(failed)}, failed {len(failed)} in {total:.1f} s "
        f"({len(todo) / total * 60:.1f} submissions/min)"
        + (f"; failed: {', '.join(failed)}" if failed else "")
    )
    return status


def refuse_without_sandbox(fork_server: bool) -> None:
    """Stop (SystemExit, with the fix) where sandboxed grading cannot run."""
    from .sandbox import unavailable

    why = unavailable()
    if why:
        raise SystemExit(f"cannot grade: {why}")
    if not fork_server:
        raise SystemExit(
            "the grading sandbox starts its kernels through the fork server: "
            "--no-fork-server needs --no-sandbox as well"
        )


def submitted_students(
    root: Path, assignment_id: str, students: list[str] | None = None
) -> list[str]:
    """The students with a submission of the assignment, sorted (only ``students``, when given)."""
    submitted = root / "submitted"
    present = sorted(
        p.parent.name
        for p in submitted.glob(f"*/{assignment_id}")
        if p.is_dir()
    )
    if students:
        unknown = sorted(set(students) - set(present))
        if unknown:
            raise SystemExit(
                f"no submission of {assignment_id} for {', '.join(unknown)} in {submitted}"
            )
        present = [s for s in present if s in set(students)]
    return present


def worker_environment(
    kernels: str, mem_bytes: int | None, env_extra: dict | None
) -> dict:
    """The workers' environment: the grading kernel spec (written into ``kernels``) first on
    ``JUPYTER_PATH``, ``KERNEL_ENV``, then ``env_extra``."""
    from .kernel import write_kernelspec

    write_kernelspec(kernels, mem_bytes)
    env = dict(os.environ, **KERNEL_ENV)
    env.pop("CI", None)  # grading behaves as on an instructor's machine
    env.update(env_extra or {})
    env["JUPYTER_PATH"] = os.pathsep.join(
        [kernels] + [p for p in [env.get("JUPYTER_PATH")] if p]
    )
    env["PATH"] = (
        str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    )
    return env


def _eta(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class WorkerProcess:
    """One worker process (``worker.py``), seen from the driver."""

    def __init__(self, command: list[str], log: Path, cwd: Path, env: dict):
        with open(log, "a") as stderr:  # the child keeps its own copy
            self.proc = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                cwd=cwd,
                env=env,
                text=True,
            )

    def running(self) -> bool:
        return self.proc.poll() is None

    def ask(self, student: str, within: float) -> str | None:
        """The worker's answer for ``student``: its JSON line, "" when it ended without one, or
        None when it gave none within ``within`` seconds."""
        self.proc.stdin.write(student + "\n")
        self.proc.stdin.flush()
        # One request, one line: nothing waits in the text buffer that select cannot see.
        ready, _, _ = select.select([self.proc.stdout], [], [], within)
        return self.proc.stdout.readline() if ready else None

    def exit_code(self) -> int:
        return self.proc.wait()

    def kill(self) -> None:
        """Stop the worker with everything it started (fork server, kernels), then reap it."""
        import psutil

        try:
            family = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.Error:
            family = []
        for p in family:
            try:
                p.kill()
            except psutil.Error:
                pass
        self.proc.kill()
        self.proc.wait()

    def close(self) -> None:
        """Let a running worker end (no more students on its stdin), or stop it after a minute."""
        if self.running():
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill()


@dataclass
class ClassRun:
    """One grading of a class: the students left to grade, shared by threads that each drive a
    worker process, and the status they record into (``status`` is updated and written)."""

    root: Path
    assignment_id: str
    todo: list[str]
    shas: dict[str, str]
    status: dict
    progress: Callable[[str], object]
    sandbox: bool
    time_limit: float
    answer_within: float
    command: list[str]  # starts a worker
    env: dict  # the workers'
    # students
    waiting: queue.Queue = field(default_factory=queue.Queue, init=False)
    lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    done: int = field(default=0, init=False)

    def __post_init__(self):
        self.db_url, self.course_id = assignment_gradebook(
            self.root, self.assignment_id, self.env
        )
        # what a submission may not paste in
        self.published = published_answers(self.root, self.assignment_id)
        for s in self.todo:
            self.waiting.put(s)
        self.logs = logs_folder(self.root, self.assignment_id)
        self.logs.mkdir(parents=True, exist_ok=True)
        self.started = time.perf_counter()

    def grade_all(self, workers: int) -> None:
        threads = [
            threading.Thread(target=self.drive, args=(n,), daemon=True)
            for n in range(workers)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def drive(self, n: int) -> None:
        """One thread: grade students from the queue with worker ``n`` (a fresh one whenever the
        last one ended or was stopped) until none is left."""
        worker = None
        try:
            while True:
                try:
                    student = self.waiting.get_nowait()
                except queue.Empty:
                    return
                result, worker = self.grade_one(student, n, worker)
                self.record(result)
        finally:
            if worker is not None:
                worker.close()

    def grade_one(
        self, student: str, n: int, worker: WorkerProcess | None
    ) -> tuple[dict, WorkerProcess | None]:
        """``student``'s result, from ``worker`` or a fresh one, and the worker to go on with."""
        worker_log = log_name(self.assignment_id, f"worker-{n}")
        for attempt in (1, 2):
            if worker is None or not worker.running():
                worker = WorkerProcess(
                    self.command,
                    self.logs / f"worker-{n}.log",
                    self.root,
                    self.env,
                )
            t0 = time.perf_counter()
            line = worker.ask(student, self.answer_within)
            if line:
                return json.loads(line), worker
            if line == "":
                return self._failed(
                    student,
                    t0,
                    [
                        f"the grading process stopped (exit code {worker.exit_code()}); "
                        f"see {worker_log}"
                    ],
                ), worker
            worker.kill()  # stuck: the worker, not the submission (its kernel has limits)
            worker = None
            if attempt == 1:
                self.progress(
                    f"{student}: the grading process gave no answer in {self.answer_within:g} s; "
                    "stopped it, grading the student again with a fresh one"
                )
        reasons = [
            f"the grading process gave no answer in {self.answer_within:g} s, twice, and was stopped with "
            f"its kernels each time (the notebook's limit is {self.time_limit:g} s); see {worker_log}"
        ]
        reasons += zero_scores(
            self.db_url, self.course_id, self.assignment_id, student
        )
        return self._failed(student, t0, reasons), None

    @staticmethod
    def _failed(student: str, t0: float, reasons: list[str]) -> dict:
        return {
            "student": student,
            "state": FAILED,
            "seconds": round(time.perf_counter() - t0, 2),
            "reasons": reasons,
        }

    def record(self, result: dict) -> None:
        """Put one student's result, with its flags, into the status file and the progress."""
        s = result.get("student")
        try:
            flags = submission_flags(
                self.root / "submitted" / s / self.assignment_id,
                self.published,
                self.sandbox,
            )
            with self.lock:
                self.status[s] = entry(
                    self.shas[s],
                    result["state"],
                    result["reasons"],
                    flags,
                    result["seconds"],
                )
                write_status(self.root, self.assignment_id, self.status)
                self.done += 1
                self.progress(self._progress_line(result, flags))
        except Exception as exc:  # keep grading the others
            self.progress(
                f"could not record the result of {s}: {type(exc).__name__}: {exc}"
            )

    def _progress_line(self, result: dict, flags: list[str]) -> str:
        elapsed = time.perf_counter() - self.started
        rate = self.done / elapsed * 60
        eta = (len(self.todo) - self.done) * elapsed / self.done
        what = result["state"] + (
            f" {result['score']}" if result.get("score") else ""
        )
        notes = "; ".join(result["reasons"] + [f"flag: {f}" for f in flags])
        return (
            f"[{self.done}/{len(self.todo)}] {result['student']}: {what} in {result['seconds']:.1f} s"
            f" | {rate:.1f}/min, ETA {_eta(eta)}"
            + (f" | {notes}" if notes else "")
        )
