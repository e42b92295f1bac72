"""The grading kernels' sandbox: learner code runs in a bubblewrap container that sees nothing of
the course but the Python environment, and nothing of the machine but a scratch folder.

bubblewrap (``bwrap``, Debian's package ``bubblewrap``; the sandbox Flatpak uses) starts a
process in new Linux namespaces.  Each grading worker starts its fork server (the warm process
that kernels are forked from, ``forkserver.py``) in one such sandbox, so every kernel it forks
runs there too:

* a user namespace: the code runs as an unprivileged user (uid 1000), with no capabilities;
* a PID namespace: ``/proc`` shows only the sandbox's own processes (never the grader's, whose
  environment holds the gradebook's address), and every process in it dies with the worker
  (``--die-with-parent``); between two students the worker kills whatever the previous one left;
* a network namespace with nothing in it: no connection leaves the sandbox.  The kernels talk to
  the grader over Unix sockets (ZeroMQ's ``ipc`` transport) in a folder bound into the sandbox;
* a file system of read-only binds: the operating system (``/usr``, the parts of ``/etc`` a
  Python process reads), the Python
  environment, ``course_utils`` and the stored results, and nothing else of the repository
  (no ``solutions/``, no gradebook, no ``autograde/``, no other student's files); ``/tmp`` and
  the home folder are private and small; the one writable folder the grader shares is
  ``work/``, which holds a copy of the student's own submission and is emptied between students;
* an empty environment, but for what a kernel needs (no ``COURSE_DB_URL`` or password).

Where bubblewrap cannot start (not installed, user namespaces switched off, not Linux), grading
stops and says so (``unavailable``), unless the instructor passes ``--no-sandbox``; every status
row and grade export then says ``graded without sandbox``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FLAG_UNSANDBOXED = "graded without sandbox"
UID = 1000  # the user learner code runs as, inside the sandbox
# the private /tmp lives in memory no process's RSS shows: keep it small
TMP_BYTES = 256 * 2**20
# The environment of the sandbox: nothing from the grader's, only what a kernel needs.
BASE_ENV = {
    "HOME": "/tmp/home",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONNOUSERSITE": "1",
    "MPLCONFIGDIR": "/tmp/home/.matplotlib",
}
# What a kernel's launcher may pass on into the sandbox (everything else is the sandbox's own).
PASSED_ENV = (
    "NBGRADER_EXECUTION",
    "COURSE_KERNEL_MEM_LIMIT",
    "COURSE_FAST",
    "MPLBACKEND",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "PYDEVD_DISABLE_FILE_VALIDATION",
    "JPY_SESSION_NAME",
)
FIX = (
    "install bubblewrap ('sudo apt-get install -y bubblewrap' on Debian and Ubuntu), on Linux with user "
    "namespaces enabled; or grade with --no-sandbox (make autograde ... NO_SANDBOX=1), which runs learner "
    "code with the grader's rights and marks every row 'graded without sandbox'"
)


def _bwrap() -> str | None:
    return shutil.which("bwrap")


# What of /etc a Python process reads (the loader's cache, users, time zone, fonts, certificates):
# not all of it.  Seen from inside, the files of the grader's user are the sandbox user's, so a
# file only the grader may read (/etc/shadow, a host key) must not be there at all.
ETC = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "passwd",
    "group",
    "nsswitch.conf",
    "localtime",
    "timezone",
    "alternatives",
    "fonts",
    "ssl/certs",
    "ca-certificates",
    "mime.types",
    "matplotlibrc",
)


def _system_binds() -> list[str]:
    """The operating system, read-only: /usr, what /etc holds for a Python process (``ETC``),
    and /bin, /lib... as links or binds."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ETC:
        path = Path("/etc") / name
        if path.exists():
            args += ["--ro-bind", str(path), str(path)]
    for name in ("bin", "sbin", "lib", "lib32", "lib64"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    return args


def _python_binds() -> list[str]:
    """The Python environment, course_utils and the stored results, read-only, at their own paths."""
    import course_utils
    from course_utils.results import checkout_root, find_results_dir

    paths = {
        Path(sys.prefix),
        Path(sys.base_prefix),
        Path(course_utils.__file__).resolve().parent,
    }
    results = find_results_dir()
    if results.is_dir():
        paths.add(results.resolve())
    root = checkout_root()
    # how course_utils.results recognises a checkout: keep that true inside
    if root is not None:
        paths.add(root / "pyproject.toml")
    args = []
    # parents first, so a child bind wins
    for path in sorted(paths, key=lambda p: len(p.parts)):
        if path.exists():
            args += ["--ro-bind", str(path), str(path)]
    return args


class Sandbox:
    """One grading worker's sandbox: the folders it shares with the grader and the ``bwrap``
    command that starts a process in it.

    ``folder/run`` holds the kernels' connection files and sockets, ``folder/work`` the current
    student's copy of their submission (the kernels' working directory); both are bound into
    the sandbox at the same paths, so the grader and the kernel name them alike."""

    def __init__(self, folder: str | os.PathLike | None = None):
        # short: socket paths have ~100 bytes
        self.folder = Path(folder or tempfile.mkdtemp(prefix="course-sbx-"))
        self.run_dir, self.work = self.folder / "run", self.folder / "work"
        for d in (self.run_dir, self.work):
            d.mkdir(parents=True, exist_ok=True)

    def command(
        self, argv: list[str], extra_env: dict | None = None
    ) -> list[str]:
        """``argv`` run inside the sandbox, in ``work/``."""
        bwrap = _bwrap()
        if bwrap is None:
            raise RuntimeError(f"no bwrap on PATH: {FIX}")
        env = dict(
            BASE_ENV,
            PATH=os.pathsep.join(
                [str(Path(sys.executable).parent), "/usr/bin", "/bin"]
            ),
            **(extra_env or {}),
        )
        # The private /tmp first: binds that follow it may lie under /tmp (a checkout or a
        # virtual environment there) and are mounted on top of it, not hidden by it.
        args = [
            bwrap,
            "--unshare-all",
            "--unshare-user",
            "--uid",
            str(UID),
            "--gid",
            str(UID),
            "--die-with-parent",
            "--new-session",
            "--hostname",
            "grading",
            "--size",
            str(TMP_BYTES),
            "--tmpfs",
            "/tmp",
            "--dir",
            "/tmp/home",
            *_system_binds(),
            *_python_binds(),
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--bind",
            str(self.folder),
            str(self.folder),
            "--chdir",
            str(self.work),
            "--clearenv",
        ]
        for key, value in env.items():
            args += ["--setenv", key, value]
        return [*args, "--", *argv]

    def reset(self, submission: Path | None = None) -> None:
        """Empty ``run/`` and ``work/``; then copy ``submission`` (a student's submitted folder) into ``work/``."""
        # emptied, not replaced: the zygote's working directory stays
        for d in (
            self.run_dir,
            self.work,
        ):
            for entry in d.iterdir():
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)
        # The sandbox's user is the grader's user seen from inside (user namespace), so it may
        # write here and nowhere else the grader can.
        if submission is not None and submission.is_dir():
            shutil.copytree(
                submission,
                self.work,
                dirs_exist_ok=True,
                ignore=shutil.ignore_patterns(
                    ".ipynb_checkpoints", "__pycache__"
                ),
            )

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def unavailable() -> str | None:
    """Why a sandbox cannot be started here (None: it can), with the fix."""
    if not sys.platform.startswith("linux"):
        return f"the grading sandbox needs Linux (this is {sys.platform}): {FIX}"
    if _bwrap() is None:
        return f"bubblewrap (bwrap) is not installed: {FIX}"
    box = Sandbox()
    try:
        proc = subprocess.run(
            box.command([sys.executable, "-c", "print('ok')"]),
            capture_output=True,
            text=True,
            timeout=60,
            env={"PATH": "/usr/bin:/bin"},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap did not start: {exc}; {FIX}"
    finally:
        box.remove()
    if proc.returncode != 0 or proc.stdout.strip() != "ok":
        return f"bubblewrap could not start a sandbox: {proc.stderr.strip()[:300]}; {FIX}"
    return None
