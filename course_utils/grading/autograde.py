"""Grade a whole class: nbgrader's autograde, in parallel, resumable, with limits.

    python -m course_utils.cli.autograde ID [--jobs N] [--force] [--student S ...]
                                                [--mem-limit 3G] [--time-limit 900]
                                                [--no-fork-server]

run from the repository root (``make autograde ID=<id> JOBS=N FORCE=1`` does).  It grades
``autograde/submitted/<student>/<ID>/`` with nbgrader's own ``Autograde`` converter (so the
scores are exactly those of ``nbgrader autograde``) and

- runs JOBS worker processes (default: one per core); each worker imports nbgrader once and
  grades many students, one after another, in a fresh kernel each; the kernels are forked from
  a warm process that has imported torch and the course once (``forkserver.py``), so no kernel
  imports them again, or started as plain Pythons with ``--no-fork-server``;
- regrades only new or changed submissions (by the sha256 of the submitted notebooks) unless
  ``--force`` (a failed submission is not retried until it changes, or with ``--force``);
- limits each submission's kernel: memory (``RLIMIT_DATA`` in the kernel, see
  ``course_utils.grading.kernel``, plus a watchdog on the kernel's resident memory) and
  wall-clock time for the whole notebook (the per-cell limit, ``COURSE_CELL_TIMEOUT``, still
  applies); a submission past them, or one whose kernel dies, is recorded as failed with the
  reason, its autograded test scores are set to 0, and everyone else is still graded;
- stops a worker that gives no answer for a student within two attempts at the time limit plus
  ``ANSWER_MARGIN`` (stuck outside any kernel), and grades that student again with a fresh
  worker, then records it as failed if that one is stuck too;
- writes ``autograde/status/<ID>.json``: ``{student: {"sha256", "state": "graded"|"failed",
  "reasons": [...], "flags": [...], "seconds", "graded_at"}}`` (``make grades`` reads
  ``reasons`` and ``flags``), and each submission's nbgrader log to
  ``autograde/status/<ID>.logs/<student>.log``.

Kernels under grading get ``MPLBACKEND=Agg`` (figures are not rendered) and one OpenMP/torch
thread, so parallel kernels do not fight over the cores.  The gradebook is SQLite (which waits
for its lock, see ``autograde/nbgrader_config.py``) or the server in ``COURSE_DB_URL``.

From Python: ``grade(course_dir, assignment_id, jobs=2, force=True)`` returns the status.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import queue
import re
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from ..files import write_text

DEFAULT_MEM_LIMIT = "3G"
DEFAULT_TIME_LIMIT = 15 * 60  # seconds for a whole notebook: far above any chapter (results/bench_grading.json)
# A worker answers for a student within two attempts at the notebook's time limit plus this
# (importing nbgrader, starting the fork server, writing the gradebook).  One that does not is
# stuck outside any kernel the watchdog can stop: the driver stops it and grades the others.
ANSWER_MARGIN = 5 * 60
# Kernels under grading: no figure rendering, one thread each (JOBS kernels share the cores).
KERNEL_ENV = {
    "MPLBACKEND": "Agg",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "PYDEVD_DISABLE_FILE_VALIDATION": "1",  # silences debugpy's start-up warning
}
_MEMORY_ERROR = re.compile(r"MemoryError|OutOfMemoryError|not enough memory|can't allocate memory|"
                           r"Cannot allocate memory|std::bad_alloc", re.I)


# ------------------------------------------------------------------ small helpers
def parse_size(text: str | int | None) -> int | None:
    """'3G', '512M', '3GiB', '1.5g' or a number of bytes -> bytes; '0'/'none' -> no limit."""
    if text is None or isinstance(text, int):
        return text or None
    m = re.fullmatch(r"\s*([\d.]+)\s*([kmgt]?)(i?b)?\s*", str(text), re.I)
    if not m:
        if str(text).strip().lower() in {"none", "off"}:
            return None
        raise ValueError(f"memory limit {text!r}: write it as 3G, 512M or a number of bytes")
    factor = 1024 ** " kmgt".index(m.group(2).lower() or " ")
    return int(float(m.group(1)) * factor) or None


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


def course_root(course_dir: str | os.PathLike) -> Path:
    """nbgrader's course directory (the folder with nbgrader_config.py): ``course_dir`` itself
    or its ``autograde/`` folder."""
    course_dir = Path(course_dir).resolve()
    for candidate in (course_dir, course_dir / "autograde"):
        if (candidate / "nbgrader_config.py").is_file():
            return candidate
    raise SystemExit(f"no nbgrader_config.py in {course_dir} or {course_dir / 'autograde'}: "
                     "run this from the repository root, or pass the course directory")


def submission_sha256(folder: Path) -> str:
    """sha256 over the submitted notebooks (names and bytes), the test of 'changed'."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        digest.update(str(path.relative_to(folder)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def _notebooks(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.ipynb"))


def load_status(root: Path, assignment_id: str) -> dict:
    path = root / "status" / f"{assignment_id}.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def _save_status(root: Path, assignment_id: str, status: dict) -> None:
    # atomic: readers (a progress display, the next run) never see half a file
    write_text(root / "status" / f"{assignment_id}.json", json.dumps(dict(sorted(status.items())), indent=1))


def tamper_flags(folder: Path) -> list[str]:
    """Flags of the static tamper scan over the submitted notebooks ([] without the scanner)."""
    try:
        from course_utils.grading.tamper import scan_notebook
    except ImportError:
        return []
    flags: list[str] = []
    for nb in _notebooks(folder):
        try:
            found = scan_notebook(nb)
        except Exception:  # noqa: BLE001  (an unreadable notebook fails grading with its reason)
            continue
        flags += [f for f in found if f not in flags]
    return flags


def copy_flags(folder: Path, answers: dict, exercises: dict) -> list[str]:
    """Flags for graded functions of the submitted notebooks that are the course's published
    answers up to names and formatting (``copies.py``; ``answers``: ``copies.course_answers``)."""
    import nbformat

    from course_utils.grading.copies import copied_answers

    flags: list[str] = []
    for path in _notebooks(folder):
        try:
            nb = nbformat.read(path, as_version=4)
        except Exception:  # noqa: BLE001  (an unreadable notebook fails grading with its reason)
            continue
        flags += [f for f in copied_answers(nb, answers, exercises) if f not in flags]
    return flags


def _published_answers(root: Path, assignment_id: str) -> tuple[dict, dict]:
    """(fingerprints of the course's answers, {graded name: exercise}) of the assignment."""
    import nbformat

    from course_utils.grading.copies import course_answers, graded_names

    answers, exercises = {}, {}
    for path in sorted(_source_folder(root, assignment_id).glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        answers.update(course_answers(nb))
        exercises.update(graded_names(nb))
    return answers, exercises


@contextmanager
def _environ(extra: dict | None):
    saved = dict(os.environ)
    os.environ.update(extra or {})
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def load_config(root: Path):
    """The course's nbgrader configuration (reads COURSE_DB_URL, COURSE_CELL_TIMEOUT)."""
    from traitlets.config.loader import PyFileConfigLoader

    return PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()


# ------------------------------------------------------------------ the worker process
class _Watchdog(threading.Thread):
    """Kills the worker's kernels when they use too much memory or time (runs in the worker)."""

    def __init__(self, mem_limit: int | None, poll: float = 0.2):
        super().__init__(daemon=True)
        import psutil

        self.psutil, self.me = psutil, psutil.Process()
        # The fork server (and, sandboxed, bwrap's processes): the kernels are its children
        # (counted, killed); it is not a kernel.
        self.spare: set[int] = set()
        self.mem_limit, self.poll = mem_limit, poll
        self.deadline: float | None = None
        self.time_limit = 0.0
        self.reason: str | None = None
        self.lock = threading.Lock()

    def arm(self, time_limit: float) -> None:
        with self.lock:
            self.reason, self.time_limit = None, time_limit
            self.deadline = time.monotonic() + time_limit

    def disarm(self) -> None:
        with self.lock:
            self.deadline = None

    def _kill(self, kernels, reason: str) -> None:
        self.reason, self.deadline = reason, None
        for p in kernels:
            try:
                p.kill()
            except self.psutil.Error:
                pass

    def _memory(self, processes, kind: str) -> int:
        total = 0
        for p in processes:
            try:
                total += p.memory_info().rss if kind == "rss" else p.memory_full_info().pss
            except (self.psutil.Error, AttributeError):
                pass
        return total

    def run(self) -> None:
        while True:
            time.sleep(self.poll)
            with self.lock:
                if self.deadline is None:
                    continue
                kernels = [p for p in self.me.children(recursive=True) if p.pid not in self.spare]
                rss = self._memory(kernels, "rss")
                if len(kernels) > 1 and self.mem_limit and rss > self.mem_limit:
                    # Processes a kernel forks (DataLoader workers), and a forked kernel and its
                    # fork server, share pages: count each page once (PSS).  PSS is costly to
                    # read and never more than RSS, so only when RSS says over the limit.
                    rss = self._memory(kernels, "pss")
                if self.mem_limit and rss > self.mem_limit:
                    self._kill(kernels, f"memory limit: the kernel used {_gib(rss)}, more than the "
                                        f"{_gib(self.mem_limit)} limit, and was stopped")
                elif time.monotonic() > self.deadline:
                    self._kill(kernels, f"time limit: the notebook was still running after "
                                        f"{self.time_limit:g} s and was stopped")


_CURRENT: dict = {}  # the cell being executed, for the reason when a kernel dies


def _cell_name(cell, index: int) -> str:
    gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
    return f"cell {index + 1}" + (f" ({gid})" if gid else "")  # counted from 1, as the tamper scan does


_SKIPPED_NOTE = "(not run while grading: this cell shows the course's results and grades nothing)\n"


def _guarded_execute(preamble: str):
    import nbformat
    from nbgrader.preprocessors import Execute

    from course_utils.grading import test_room
    from course_utils.grading.markers import skipped_while_grading

    class GuardedExecute(Execute):
        """nbgrader's Execute, remembering which cell runs (to say where a kernel died), sending
        each graded test cell to run in the grader's own namespace (``test_room.py``), and
        leaving out the cells tagged ``skip-while-grading`` (``markers.py``)."""

        def preprocess_cell(self, cell, resources, index):
            _CURRENT["cell"] = _cell_name(cell, index)
            if skipped_while_grading(cell):  # the course's results, nothing graded (markers.py)
                cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=_SKIPPED_NOTE)]
                cell.execution_count = None
                return cell, resources
            if cell.cell_type != "code" or not _is_test(cell):
                return super().preprocess_cell(cell, resources, index)
            source = cell.source
            cell.source = test_room.wrap(source, preamble)
            try:
                return super().preprocess_cell(cell, resources, index)
            finally:
                cell.source = source  # the graded notebook and its feedback show the test itself

    return GuardedExecute


def _is_test(cell) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return bool(meta.get("grade")) and not meta.get("solution")


def _course_imports(source_folder: Path) -> str:
    """The top-level imports of the course's own code cells (neither answers nor tests) in the
    source notebooks: what the test cells' module names mean, whatever a submission did to them."""
    import nbformat

    from course_utils.grading import test_room
    from course_utils.grading.markers import defined_names

    sources, answers = [], set()
    for path in sorted(source_folder.glob("*.ipynb")):
        for c in nbformat.read(path, as_version=4).cells:
            if c.cell_type != "code" or _is_test(c):
                continue
            if c.get("metadata", {}).get("nbgrader", {}).get("solution"):
                answers |= set(defined_names(c.source))
            else:
                sources.append(c.source)
    return test_room.preamble_of(sources, answers)


def _source_folder(root: Path, assignment_id: str) -> Path:
    """The assignment's folder of source notebooks (nbgrader's ``source_directory``), found
    without importing nbgrader (``format_path`` with the course's default layout)."""
    config = load_config(root)
    source = config.CourseDirectory.get("source_directory", "source")
    return (Path(config.CourseDirectory.get("root", str(root))) / source / assignment_id).resolve()


def _assignment_modules(source_folder: Path) -> tuple[str, ...]:
    """Every module the source notebooks of an assignment import, in any cell (the fork server
    imports them once, for all its kernels).  The instructor's notebooks, never a submission's."""
    import nbformat

    from course_utils.grading.markers import imported_modules

    found: list[str] = []
    for path in sorted(source_folder.glob("*.ipynb")):
        for c in nbformat.read(path, as_version=4).cells:
            if c.cell_type == "code":
                found += [m for m in imported_modules(c.source) if m not in found]
    return tuple(found)


def _zero_scores(db_url: str, course_id: str, assignment_id: str, student: str) -> None:
    """A failed submission keeps no stale or partial automatic scores: its tests score 0."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(db_url, course_id) as gb:
        try:
            submission = gb.find_submission(assignment_id, student)
        except MissingEntry:
            return
        for nb in submission.notebooks:
            for g in nb.grades:
                g.auto_score = 0
                g.needs_manual_grade = False
        gb.db.commit()


def _graded_reasons(autograded: Path, cell_timeout, mem_limit: int | None) -> list[str]:
    """What an instructor should know about a graded submission: cells that ran out of
    memory or past the per-cell limit (their tests lost the points)."""
    import nbformat

    reasons = []
    for path in _notebooks(autograded):
        nb = nbformat.read(path, as_version=4)
        for i, cell in enumerate(nb.cells):
            for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
                if out.get("output_type") != "error":
                    continue
                text = ": ".join(x for x in (out.get("ename"), out.get("evalue")) if x)
                if _MEMORY_ERROR.search(text):
                    limit = f" (the limit is {_gib(mem_limit)})" if mem_limit else ""
                    reasons.append(f"out of memory in {_cell_name(cell, i)}{limit}: "
                                   f"{text.splitlines()[0][:200]}")
                elif out.get("ename") == "CellTimeoutError":
                    reasons.append(f"{_cell_name(cell, i)} ran past the per-cell limit of "
                                   f"{cell_timeout} s and was interrupted")
    return reasons


def _worker(assignment_id: str, root: Path, mem_limit: int | None, time_limit: float,
            fork_server: bool = True, sandboxed: bool = True) -> None:
    """Read student ids from stdin, grade each, answer one JSON line per student."""
    from course_utils.grading.forkserver import SANDBOX_ENV, SOCKET_ENV, ForkServer

    box = None
    if sandboxed:  # sandbox.py: the kernels are forked inside it, and talk over its folder
        from course_utils.grading.sandbox import Sandbox

        box = Sandbox()
        os.environ[SANDBOX_ENV] = "1"  # no launcher falls back to a kernel outside the sandbox
    zygote = None
    if fork_server or sandboxed:
        folder = tempfile.mkdtemp(prefix="course-zygote-")  # short: a socket path has ~100 bytes
        zygote = ForkServer(folder, sandbox=box, warm=_assignment_modules(_source_folder(root, assignment_id)))
        if zygote.start(dict(os.environ)) or sandboxed:  # sandboxed, a failed start is retried per student
            os.environ[SOCKET_ENV] = zygote.path  # the kernels' launcher finds it there
        else:
            zygote = None
    try:
        _grade_students(assignment_id, root, mem_limit, time_limit, zygote, box)
    finally:
        if zygote is not None:
            zygote.stop()
            shutil.rmtree(os.path.dirname(zygote.path), ignore_errors=True)
        if box is not None:
            box.remove()


def _kernel_died(log_text: str) -> bool:
    """Whether the student's nbgrader log (``log_text``) says that its kernel died."""
    return "DeadKernelError" in log_text or "Kernel died" in log_text


def _kernel_never_started(error: str | None, log_text: str, cell_reached: bool, watchdog_reason: str | None) -> bool:
    """Whether a failed grading failed before any of the submission's cells ran: its kernel died
    while starting or gave no answer within nbclient's start-up limit (``log_text``: the
    student's nbgrader log).  Such a failure is the machine's, never the learner's."""
    if not error or cell_reached or watchdog_reason:
        return False
    return _kernel_died(log_text) or "Kernel didn't respond" in log_text


def _grade_students(assignment_id: str, root: Path, mem_limit: int | None, time_limit: float,
                    zygote=None, box=None) -> None:
    import logging

    # The protocol gets its own copy of stdout; fd 1 becomes stderr, so whatever a kernel or
    # a library writes to stdout lands in the worker's log, not in the protocol.
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    from nbgrader.converters import Autograde
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.preprocessors import Execute

    from course_utils.grading.collect import unreadable_reason

    config = load_config(root)
    guarded = _guarded_execute(_course_imports(_source_folder(root, assignment_id)))
    config.Autograde.autograde_preprocessors = [
        guarded if pp is Execute else pp for pp in Autograde.class_traits()["autograde_preprocessors"].default()]
    if box is not None:  # the kernel's sockets: files in the sandbox's folder (it has no network)
        config.KernelManager.transport = "ipc"
        config.KernelManager.ip = str(box.run_dir / "kernel")
        # One kernel at a time per worker: one name, in the folder the sandbox sees (the default
        # is a temporary file in the grader's /tmp, which the sandbox does not share).
        config.KernelManager.connection_file = str(box.run_dir / "kernel.json")
    log = logging.getLogger(f"course_grading.{os.getpid()}")
    log.setLevel(logging.INFO)
    log.propagate = False
    watchdog = _Watchdog(mem_limit)
    watchdog.spare = set(zygote.family) if zygote is not None else set()
    watchdog.start()
    logs = root / "status" / f"{assignment_id}.logs"
    logs.mkdir(parents=True, exist_ok=True)

    for line in sys.stdin:
        student = line.strip()
        if not student:
            continue
        start = time.perf_counter()
        for attempt in (1, 2):
            _CURRENT.clear()
            if box is not None:
                if zygote is not None and not zygote.alive():  # a submission killed it: a fresh one
                    zygote.start(dict(os.environ))
                    watchdog.spare = set(zygote.family)
                box.reset(root / "submitted" / student / assignment_id)
            buffer = logs / f"{student}.log"
            handler = logging.FileHandler(buffer, mode="w")
            handler.setFormatter(logging.Formatter("%(asctime)s [%(levelname)s] %(message)s"))
            log.addHandler(handler)
            coursedir = CourseDirectory(config=config)
            coursedir.assignment_id, coursedir.student_id = assignment_id, student
            app = Autograde(coursedir=coursedir, config=config, log=log)
            app.force, app.create_student = True, True
            watchdog.arm(time_limit)
            error = None
            try:
                app.start()
            except Exception as exc:  # noqa: BLE001  (a failure is a result, not a crash; Ctrl-C stops)
                error = f"{type(exc).__name__}: {exc}"
            finally:
                watchdog.disarm()
                log.removeHandler(handler)
                handler.close()
                if zygote is not None:
                    zygote.sweep()  # nothing a submission started outlives its grading
            text = buffer.read_text(errors="replace")
            died = bool(error) and _kernel_died(text)
            no_start = _kernel_never_started(error, text, "cell" in _CURRENT, watchdog.reason)
            # SQLite gave up waiting for its lock (very busy disk): grade the student again.
            if error and "database is locked" in text and attempt == 1:
                continue
            # No learner code had run: the machine failed (a start under heavy load), not the
            # submission.  Start the kernel once more.
            if no_start and attempt == 1:
                continue
            break

        result = {"student": student, "state": "graded", "reasons": [], "score": None}
        if error is None:
            result["reasons"] = _graded_reasons(root / "autograded" / student / assignment_id,
                                                config.Execute.timeout, mem_limit)
            result["score"] = _score(coursedir, assignment_id, student)
        else:
            result["state"] = "failed"
            where = _CURRENT.get("cell", "its first cell")
            if watchdog.reason:
                reason = f"{watchdog.reason} (in {where})"
            elif no_start:
                reason = ("the kernel failed to start twice (it died or gave no answer within the start-up "
                          "limit, Execute.startup_timeout), before any cell ran: the machine, not the "
                          "submission; check its memory and load, then grade this student again")
            elif died:
                reason = (f"the kernel died while running {where} (the code exits Python, kills "
                          f"its own process, or crashed it); nothing after that cell ran")
            elif unreadable := unreadable_reason(coursedir.format_path(coursedir.submitted_directory, student,
                                                                       assignment_id)):
                reason = f"grading failed: {unreadable}"  # the cause and the fix, not nbformat's error
            else:
                # nbgrader logs the traceback, then "There was an error processing assignment
                # '<id>' for student ...": the line before that is the exception itself.
                lines = text.splitlines()
                end = next((i for i, ln in enumerate(lines) if "There was an error processing assignment '" in ln),
                           len(lines))
                last = [ln.strip() for ln in lines[:end] if ln.strip()]
                reason = f"grading failed: {(last[-1] if last and end < len(lines) else error)[:300]}"
            result["reasons"] = [reason + f"; details in status/{assignment_id}.logs/{student}.log"]
            try:
                _zero_scores(coursedir.db_url, coursedir.course_id, assignment_id, student)
            except Exception as exc:  # noqa: BLE001
                result["reasons"].append(f"could not set its scores to 0: {exc}")
        result["seconds"] = round(time.perf_counter() - start, 2)
        proto.write(json.dumps(result) + "\n")


def _kill_tree(proc: subprocess.Popen) -> None:
    """Stop a worker with everything it started (fork server, kernels), then reap it."""
    import psutil

    try:
        family = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        family = []
    for p in family:
        try:
            p.kill()
        except psutil.Error:
            pass
    proc.kill()
    proc.wait()


def _score(coursedir, assignment_id: str, student: str) -> str | None:
    from nbgrader.api import Gradebook

    try:
        with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
            s = gb.find_submission(assignment_id, student)
            return f"{s.score:g}/{s.max_score:g}"
    except Exception:  # noqa: BLE001  (only for the progress line)
        return None


# ------------------------------------------------------------------ the driver
def _check_gradebook(root: Path, assignment_id: str, env: dict) -> tuple[str, str]:
    """The gradebook's (url, course id), once the assignment is known to be in it.

    One query through SQLAlchemy rather than nbgrader's ``Gradebook``: importing nbgrader takes
    the driver seconds before any worker starts.  An assignment in the gradebook means its
    tables exist (``nbgrader generate_assignment`` made them), so the workers never race to
    create them."""
    import sqlalchemy

    with _environ(env):
        config = load_config(root)
    db_url = config.CourseDirectory.db_url
    course_id = config.CourseDirectory.course_id
    engine = sqlalchemy.create_engine(db_url)
    try:
        with engine.connect() as db:
            found = db.execute(sqlalchemy.text("SELECT 1 FROM assignment WHERE name = :name"),
                               {"name": assignment_id}).first()
    except sqlalchemy.exc.OperationalError as exc:
        if "no such table" not in str(exc):
            raise SystemExit(f"cannot open the gradebook ({db_url.split('?')[0]}): {exc.orig}") from None
        found = None  # a new, empty gradebook
    except sqlalchemy.exc.ProgrammingError:  # PostgreSQL: relation "assignment" does not exist
        found = None
    finally:
        engine.dispose()
    if found is None:
        raise SystemExit(f"assignment {assignment_id!r} is not in the gradebook ({db_url.split('?')[0]}): "
                         f"run 'make release' (nbgrader generate_assignment {assignment_id}) first") from None
    return db_url, course_id


def _eta(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def grade(course_dir: str | os.PathLike, assignment_id: str, jobs: int | None = None, force: bool = False,
          students: list[str] | None = None, mem_limit: str | int | None = DEFAULT_MEM_LIMIT,
          time_limit: float = DEFAULT_TIME_LIMIT, env_extra: dict | None = None,
          progress=print, fork_server: bool = True, answer_within: float | None = None,
          sandbox: bool = True) -> dict:
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
    answer_within = answer_within or 2 * time_limit + ANSWER_MARGIN
    root = course_root(course_dir)
    if sandbox:
        from course_utils.grading.sandbox import unavailable

        why = unavailable()
        if why:
            raise SystemExit(f"cannot grade: {why}")
        if not fork_server:
            raise SystemExit("the grading sandbox starts its kernels through the fork server: "
                             "--no-fork-server needs --no-sandbox as well")
    mem_bytes = parse_size(mem_limit)
    jobs = max(1, jobs or len(os.sched_getaffinity(0)))
    submitted = root / "submitted"
    present = sorted(p.parent.name for p in submitted.glob(f"*/{assignment_id}") if p.is_dir())
    if students:
        unknown = sorted(set(students) - set(present))
        if unknown:
            raise SystemExit(f"no submission of {assignment_id} for {', '.join(unknown)} in {submitted}")
        present = [s for s in present if s in set(students)]
    status = load_status(root, assignment_id)
    todo, shas = [], {}
    for s in present:
        shas[s] = submission_sha256(submitted / s / assignment_id)
        old = status.get(s)
        done = (old and old.get("sha256") == shas[s]
                and (old.get("state") == "failed" or (root / "autograded" / s / assignment_id).is_dir()))
        if force or not done:
            todo.append(s)
    progress(f"{assignment_id}: {len(present)} submissions, {len(todo)} to grade"
             + ("" if force else f" ({len(present) - len(todo)} unchanged since last graded; --force regrades them)")
             + f", {min(jobs, len(todo))} worker(s), limits {_gib(mem_bytes) if mem_bytes else 'no'} memory, "
               f"{time_limit:g} s per notebook, " + ("in a sandbox" if sandbox else "WITHOUT a sandbox (--no-sandbox)"))
    if not todo:
        return status

    with tempfile.TemporaryDirectory(prefix="course-grading-") as kernels:
        from course_utils.grading.kernel import write_kernelspec

        write_kernelspec(kernels, mem_bytes)
        env = dict(os.environ, **KERNEL_ENV)
        env.pop("CI", None)  # grading behaves as on an instructor's machine
        env.update(env_extra or {})
        env["JUPYTER_PATH"] = os.pathsep.join([kernels] + [p for p in [env.get("JUPYTER_PATH")] if p])
        bindir = str(Path(sys.executable).parent)
        env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
        db_url, course_id = _check_gradebook(root, assignment_id, env)
        published = _published_answers(root, assignment_id)  # what a submission may not paste in

        work: queue.Queue[str] = queue.Queue()
        for s in todo:
            work.put(s)
        lock = threading.Lock()
        started = time.perf_counter()
        counter = {"done": 0}
        stuck: set[str] = set()  # students whose first worker gave no answer
        logs = root / "status" / f"{assignment_id}.logs"
        logs.mkdir(parents=True, exist_ok=True)

        def record(result: dict) -> None:
            s = result["student"]
            flags = tamper_flags(submitted / s / assignment_id) + copy_flags(submitted / s / assignment_id,
                                                                              *published)
            if not sandbox:
                from course_utils.grading.sandbox import FLAG_UNSANDBOXED

                flags.append(FLAG_UNSANDBOXED)
            with lock:
                status[s] = {"sha256": shas[s], "state": result["state"], "reasons": result["reasons"],
                             "flags": flags, "seconds": result["seconds"],
                             "graded_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
                _save_status(root, assignment_id, status)
                counter["done"] += 1
                done = counter["done"]
                elapsed = time.perf_counter() - started
                rate = done / elapsed * 60
                eta = (len(todo) - done) * elapsed / done
                what = result["state"] + (f" {result['score']}" if result.get("score") else "")
                notes = "; ".join(result["reasons"] + [f"flag: {f}" for f in flags])
                progress(f"[{done}/{len(todo)}] {s}: {what} in {result['seconds']:.1f} s"
                         f" | {rate:.1f}/min, ETA {_eta(eta)}" + (f" | {notes}" if notes else ""))

        def safe_record(result: dict) -> None:
            try:
                record(result)
            except Exception as exc:  # noqa: BLE001  (keep grading the others)
                progress(f"could not record the result of {result.get('student')}: {type(exc).__name__}: {exc}")

        def run_worker(n: int) -> None:
            proc, retry = None, None
            try:
                while True:
                    if retry is not None:
                        student, retry = retry, None
                    else:
                        try:
                            student = work.get_nowait()
                        except queue.Empty:
                            return
                    if proc is None or proc.poll() is not None:
                        proc = subprocess.Popen(
                            [sys.executable, "-m", "course_utils.cli.autograde", assignment_id,
                             "--worker", "--course", str(root), "--mem-limit", str(mem_bytes or 0),
                             "--time-limit", str(time_limit)] + ([] if fork_server else ["--no-fork-server"])
                            + ([] if sandbox else ["--no-sandbox"]),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=open(logs / f"worker-{n}.log", "a"), cwd=root, env=env, text=True)
                    t0 = time.perf_counter()
                    proc.stdin.write(student + "\n")
                    proc.stdin.flush()
                    # One request, one line: nothing waits in the text buffer that select cannot see.
                    ready, _, _ = select.select([proc.stdout], [], [], answer_within)
                    line = proc.stdout.readline() if ready else None
                    if line:
                        safe_record(json.loads(line))
                        continue
                    if line is None:
                        _kill_tree(proc)
                        proc = None
                        if student not in stuck:  # the worker, not the submission (its kernel has limits)
                            stuck.add(student)
                            progress(f"{student}: the grading process gave no answer in {answer_within:g} s; "
                                     "stopped it, grading the student again with a fresh one")
                            retry = student
                            continue
                        reasons = [f"the grading process gave no answer in {answer_within:g} s, twice, and was "
                                   f"stopped with its kernels each time (the notebook's limit is {time_limit:g} s); "
                                   f"see status/{assignment_id}.logs/worker-{n}.log"]
                        try:
                            _zero_scores(db_url, course_id, assignment_id, student)
                        except Exception as exc:  # noqa: BLE001
                            reasons.append(f"could not set its scores to 0: {exc}")
                        safe_record({"student": student, "state": "failed",
                                     "seconds": round(time.perf_counter() - t0, 2), "reasons": reasons})
                        continue
                    code = proc.wait()
                    safe_record({"student": student, "state": "failed", "seconds": round(time.perf_counter() - t0, 2),
                            "reasons": [f"the grading process stopped (exit code {code}); see "
                                        f"status/{assignment_id}.logs/worker-{n}.log"]})
            finally:
                if proc is not None and proc.poll() is None:
                    proc.stdin.close()
                    try:
                        proc.wait(timeout=60)
                    except subprocess.TimeoutExpired:
                        _kill_tree(proc)

        threads = [threading.Thread(target=run_worker, args=(n,), daemon=True) for n in range(min(jobs, len(todo)))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    total = time.perf_counter() - started
    failed = [s for s in todo if status[s]["state"] == "failed"]
    progress(f"{assignment_id}: graded {len(todo) - len(failed)}, failed {len(failed)} in {total:.1f} s "
             f"({len(todo) / total * 60:.1f} submissions/min)" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return status
