"""Grading kernels forked from a warm process, instead of a fresh Python per notebook.

Every notebook's first cell imports torch, matplotlib and ``course_utils``; in a fresh kernel
that (with ipykernel itself) is a large share of grading one notebook (results/bench_grading.json).
A grading worker (``course_utils.grading.worker``) therefore starts one *zygote*: a process
that imports all of that once, runs no learner code, starts no thread, and then only forks.

How a kernel starts, seen from nbgrader's kernel manager nothing changes:

1. the manager runs the kernel spec's launcher, ``kernel.py -f <connection file>``; the worker
   has put the zygote's socket in ``COURSE_FORKSERVER`` (see ``kernel.py``);
2. the launcher (``run_forked_kernel``, standard library only) connects to the zygote and
   sends its connection file, environment, working directory and standard streams;
3. the zygote forks; the child takes those over, applies the memory limit and drops the
   grader's secrets (as ``kernel.py`` does), then becomes the IPython kernel;
4. the launcher stays as the kernel's stand-in: it forwards SIGINT/SIGTERM/SIGHUP (the per-cell
   timeout interrupts with SIGINT) over the connection, where the child raises them in itself
   (a process id means nothing across the sandbox's PID namespace), and exits with the child's
   status, which the zygote sends when it reaps the child.  If the launcher is killed (the manager's SIGKILL, the watchdog),
   the child sees its end of the connection close and kills its own process group: the child
   is the zygote's child, not the launcher's, so ``PR_SET_PDEATHSIG`` cannot do it.

Each submission gets a fresh fork of a zygote that never ran learner code, so nothing one
notebook sets or patches reaches the next.  What a fork shares with its siblings, unlike a
fresh Python: the hash seed of ``str`` (``PYTHONHASHSEED``) and the modules' import-time state
(numpy's global generator is reseeded in each child; torch's default seed is fixed anyway).

When the zygote is missing, dies, or refuses (it checks it has a single thread before it
serves), the launcher falls back to the plain kernel; ``--no-fork-server`` turns it off.  A
sandboxed zygote (``sandbox.py``: started inside bubblewrap with ``--workdir``) never has a
fallback outside the sandbox: the launcher then fails instead (``SANDBOX_ENV``).  Sandboxed, the
zygote takes its listening socket from the worker (``--listen-fd``: the socket's file is
outside the sandbox, where no kernel can replace it), runs every kernel in ``work/`` with the
sandbox's own environment plus the few variables in ``sandbox.PASSED_ENV``, and makes itself
undumpable, so that a kernel, which runs as the same user, cannot attach to it and change the
kernels it forks for the students after.

Run by path (``python forkserver.py SOCKET``) it is the zygote; the launcher imports it by
path too, so nothing heavy is imported at the top of this file.
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import socket
import struct
import sys
import time

SOCKET_ENV = "COURSE_FORKSERVER"  # the zygote's socket, in the worker's (and launcher's) environment
SANDBOX_ENV = "COURSE_SANDBOXED"  # set by the worker: the zygote is sandboxed, never fall back outside
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# What a notebook's first cell imports (see the chapters): imported once, in the zygote.
# Besides these, the zygote imports what the assignment's notebooks import (``warm_up``'s
# ``extra``: torchvision only for the chapters that use it).
WARM_MODULES = (
    "torch",
    "torch.nn",
    "torch.nn.functional",
    "numpy",
    "matplotlib",
    "matplotlib.pyplot",
    "nbformat",
    "IPython",
    "ipykernel.kernelapp",
    "ipykernel.ipkernel",
    "einops",
    "course_utils",
    "course_utils.plots",
    "course_utils.runtime",
    "course_utils.results",
    "course_utils.analysis",
    *(
        f"course_utils.references.{m}"
        for m in (
            "attention",
            "masking",
            "multihead",
            "positional",
            "decoding",
            "vit",
            "schedules",
            "regularization",
            "diagnosis",
        )
    ),
    "course_utils.models.transformer",
    "course_utils.models.torch_interop",
    *(
        f"course_utils.training.{m}"
        for m in ("data", "recipes", "trainer", "seq2seq_task", "toy_task")
    ),
    # integrity first: its snapshot of torch's and Python's functions, before anything else runs
    *(
        f"course_utils.grading.{m}"
        for m in (
            "integrity",
            "checks",
            "pristine",
            "doubles",
            "isolation",
            "test_room",
            "cell_hooks",
        )
    ),
    # PyTorch's meta-device machinery, which the hidden tests' device checks load on
    # first use (seconds per kernel otherwise: meta kernels import torch._dynamo);
    # importing it starts no thread.
    "torch._meta_registrations",
    "torch._refs",
    "torch._decomp",
    "torch._dynamo",
)


def skip_slow_optional_imports() -> None:
    """Leave out an optional dependency that costs seconds at every start and serves grading
    nothing: ``rfc3987_syntax``, which jsonschema (under nbformat and nbgrader) imports when it
    is installed, only to check the "iri" string format, and which builds a parser on import
    (about 2 s of CPU in each worker and fork server).  jsonschema does without it."""
    if "rfc3987_syntax" not in sys.modules:
        # `import rfc3987_syntax` now raises ImportError
        sys.modules["rfc3987_syntax"] = None


# ------------------------------------------------------------------ wire format
def _send(
    sock: socket.socket, message: dict, fds: list[int] | None = None
) -> None:
    """One message: 4-byte length, then JSON; ``fds`` travel with the length."""
    data = json.dumps(message).encode()
    header = struct.pack("!I", len(data))
    if fds:
        socket.send_fds(sock, [header], fds)
        sock.sendall(data)
    else:
        sock.sendall(header + data)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    chunks = b""
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            raise EOFError("the other end closed the connection")
        chunks += chunk
    return chunks


def _recv(sock: socket.socket, maxfds: int = 0) -> tuple[dict, list[int]]:
    fds: list[int] = []
    if maxfds:
        header, fds, _, _ = socket.recv_fds(sock, 4, maxfds)
        if not header:
            raise EOFError("the other end closed the connection")
        header += _recv_exactly(sock, 4 - len(header))
    else:
        header = _recv_exactly(sock, 4)
    (length,) = struct.unpack("!I", header)
    return json.loads(_recv_exactly(sock, length)), fds


# ------------------------------------------------------------------ the launcher's side
def run_forked_kernel(
    argv: list[str], wait_for_zygote: float = 300
) -> int | None:
    """Have the zygote fork a kernel for ``argv`` (``-f <connection file>``), stand in for it
    until it exits, and return its exit status (negative: killed by that signal).  ``None``
    when no kernel was forked (no zygote, or it refused): start a plain kernel instead."""
    path = os.environ.pop(SOCKET_ENV, "")
    sandboxed = bool(os.environ.pop(SANDBOX_ENV, ""))
    if not path:
        if sandboxed:
            print(
                "course grading: no fork server was named; the grading sandbox has no kernel to give, "
                "and no learner code runs outside it",
                file=sys.stderr,
            )
            return 1
        return None
    pending: list[int] = []
    child = {"pid": 0}

    def forward(signum, _frame):
        if child["pid"]:
            try:  # the child raises it in itself (_watch_launcher)
                _send(sock, {"signal": int(signum)})
            except OSError:
                pass
        else:
            # arrived before the fork: delivered once the child exists
            pending.append(signum)

    def no_kernel(why: str) -> int | None:
        if sandboxed:  # learner code never runs outside the sandbox
            print(
                f"course grading: {why}; the grading sandbox has no kernel to give, and no learner code "
                "runs outside it",
                file=sys.stderr,
            )
            return 1
        print(
            f"course grading: {why}; starting a plain kernel",
            file=sys.stderr,
        )
        return None

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError as exc:
        return no_kernel(f"no fork server at {path} ({exc})")
    old = {s: signal.signal(s, forward) for s in _FORWARDED}
    try:
        # The zygote may still be importing (it accepts first): wait, but not forever.
        sock.settimeout(wait_for_zygote)
        _send(
            sock,
            {
                "argv": argv,
                "env": dict(os.environ),
                "cwd": os.getcwd(),
                "launcher": os.getpid(),
            },
            fds=[0, 1, 2],
        )
        reply, _ = _recv(sock)
        if "pid" not in reply:
            raise RuntimeError(reply.get("error", reply))
    except (OSError, EOFError, RuntimeError, ValueError) as exc:
        for s, handler in old.items():
            signal.signal(s, handler)
        sock.close()
        if any(signum != signal.SIGINT for signum in pending):
            # the manager stopped this kernel while it was being made
            return -pending[-1]
        return no_kernel(f"the fork server did not start a kernel ({exc})")
    child["pid"] = reply["pid"]
    for signum in pending:
        forward(signum, None)
    sock.settimeout(None)
    try:
        # {"exit": status}, sent when the zygote reaps the child
        status, _ = _recv(sock)
        return int(status["exit"])
    except EOFError:
        # The zygote died; the child is gone too once every copy of its end is closed.
        return 1


def exit_like(code: int) -> None:
    """Exit as the kernel did: with its code, or killed by the same signal."""
    if code < 0:
        if -code in _FORWARDED:  # our handler would forward it to nobody
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        # a signal that does not end the process falls through to exit(1)
        time.sleep(1)
        code = 1
    sys.exit(code)


# ------------------------------------------------------------------ the zygote
class _Zygote:
    def __init__(
        self,
        path: str | None,
        listen_fd: int | None = None,
        workdir: str | None = None,
    ):
        self.path, self.workdir = path, workdir
        self.listener = (
            socket.socket(fileno=listen_fd)
            if listen_fd is not None
            else socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        )
        self.children: dict[
            int, socket.socket
        ] = {}  # kernel pid -> its launcher's connection
        self.wake_r, self.wake_w = os.pipe()

    def listen(self) -> None:
        """Listen before warming up: a launcher that comes early waits instead of failing."""
        # the worker bound and listens on it already (sandboxed)
        if self.path is None:
            return
        if os.path.exists(self.path):
            os.unlink(self.path)
        self.listener.bind(self.path)
        self.listener.listen(64)

    @staticmethod
    def warm_up(extra: tuple[str, ...] = ()) -> None:
        """Import ``WARM_MODULES`` and ``extra`` (the assignment's imports; a name that is no
        module is skipped quietly): other libraries before the course's own modules, the
        course's after them."""
        skip_slow_optional_imports()
        first = WARM_MODULES.index("course_utils")
        extra = [m for m in extra if m not in WARM_MODULES]
        ours = [m for m in extra if m.split(".")[0] == "course_utils"]
        names = [
            *WARM_MODULES[:first],
            *(m for m in extra if m not in ours),
            *WARM_MODULES[first:],
            *ours,
        ]
        for name in names:
            try:
                __import__(name)
            except ImportError as exc:  # a module a later chapter adds: the kernel imports it itself
                if name in WARM_MODULES:
                    print(
                        f"course grading: fork server could not import {name}: {exc}",
                        file=sys.stderr,
                    )
        # What exists now is never freed: the collector leaves it alone in every child, which
        # saves the children the time and the copied pages of scanning it.
        gc.collect()
        gc.freeze()
        # Forking a process with threads can leave a lock held in the child forever.
        tasks = (
            os.listdir("/proc/self/task")
            if os.path.isdir("/proc/self/task")
            else ["main"]
        )
        if len(tasks) != 1:
            names = []
            for task in tasks:
                try:
                    with open(f"/proc/self/task/{task}/comm") as f:
                        names.append(f.read().strip())
                except OSError:
                    names.append(task)
            raise RuntimeError(
                f"the fork server has {len(tasks)} threads after its imports "
                f"({', '.join(names)}); forking it is not safe"
            )

    def serve(self) -> None:
        for fd in (self.wake_r, self.wake_w):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(self.wake_w)
        # wakes select() through the pipe
        signal.signal(signal.SIGCHLD, lambda *_: None)
        # Ctrl-C stops the driver, which ends us
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        while True:
            ready, _, _ = select.select(
                [self.listener, self.wake_r, sys.stdin], [], []
            )
            if self.wake_r in ready:
                try:
                    os.read(self.wake_r, 4096)
                except BlockingIOError:
                    pass
            self._reap()
            if sys.stdin in ready and not os.read(sys.stdin.fileno(), 4096):
                return  # the worker closed our stdin or died: stop, with whatever kernels remain
            if self.listener in ready:
                self._accept()

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is not None:
                # negative: killed by that signal
                code = os.waitstatus_to_exitcode(status)
                try:
                    _send(conn, {"exit": code})
                except OSError:
                    pass  # the launcher is gone already
                conn.close()

    def _accept(self) -> None:
        conn, _ = self.listener.accept()
        fds: list[int] = []
        try:
            conn.settimeout(30)
            request, fds = _recv(conn, maxfds=3)
            if len(fds) != 3:
                raise ValueError(
                    f"expected the launcher's 3 standard streams, got {len(fds)}"
                )
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
        except (OSError, EOFError, ValueError) as exc:
            try:
                _send(conn, {"error": f"{type(exc).__name__}: {exc}"})
            except OSError:
                pass
            conn.close()
            for fd in fds:
                os.close(fd)
            return
        if pid == 0:
            self._become_kernel(conn, request, fds)  # never returns
        for fd in fds:
            os.close(fd)
        conn.settimeout(None)
        self.children[pid] = conn
        try:
            _send(conn, {"pid": pid})
        except OSError:
            pass  # the launcher died meanwhile; the child notices the closed connection

    def _become_kernel(
        self, conn: socket.socket, request: dict, fds: list[int]
    ) -> None:
        code = 1
        try:
            code = self._kernel(conn, request, fds)
        except SystemExit as exc:
            code = (
                exc.code
                if isinstance(exc.code, int)
                else (0 if exc.code is None else 1)
            )
        except BaseException:
            import traceback

            traceback.print_exc()
        try:
            import atexit

            atexit._run_exitfuncs()  # IPython's history and the like, as at a normal exit
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)

    def _kernel(
        self, conn: socket.socket, request: dict, fds: list[int]
    ) -> int:
        """In the forked child: become the kernel the launcher asked for."""
        os.setsid()  # its own process group: killed as one, and not by the driver's Ctrl-C
        signal.set_wakeup_fd(-1)
        for s in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        self.listener.close()
        os.close(self.wake_r)
        os.close(self.wake_w)
        for other in self.children.values():
            other.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)

        # sandboxed: the sandbox's folder and environment, not the grader's
        if self.workdir is not None:
            from course_utils.grading.sandbox import PASSED_ENV

            os.chdir(self.workdir)
            os.environ.update(
                {k: v for k, v in request["env"].items() if k in PASSED_ENV}
            )
        else:
            os.chdir(request["cwd"])
            os.environ.clear()
            os.environ.update(request["env"])
        # ipykernel exits when its parent changes; the parent is this zygote, not the manager.
        # (Its default comes from JPY_PARENT_PID, read when the zygote imported it: set it here.)
        os.environ["JPY_PARENT_PID"] = str(os.getppid())
        sys.argv = [
            "ipykernel_launcher",
            *request["argv"],
            f"--IPKernelApp.parent_handle={os.getppid()}",
        ]

        from course_utils.grading import kernel

        sys.argv.append(kernel.RELEASE_FRAMES)
        kernel.contain()  # memory limit and secrets, exactly as a plain kernel does
        # blocking, like the zygote's copy (the flag is shared)
        conn.settimeout(None)
        # every child would otherwise draw the same numbers
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        self._watch_launcher(conn, request["launcher"])

        from ipykernel import kernelapp

        kernelapp.launch_new_instance()
        return 0

    @staticmethod
    def _watch_launcher(conn: socket.socket, launcher: int) -> None:
        """Raise in this process the signals the launcher forwards; die with the launcher: its
        end of the connection closes when it exits or is killed."""
        import threading

        def watch():
            try:
                while True:
                    message, _ = _recv(conn)
                    signum = int(message.get("signal", 0))
                    # interrupts the running cell; the kernel lives on
                    if signum == signal.SIGINT:
                        os.kill(os.getpid(), signum)
                    elif signum in _FORWARDED:
                        os.killpg(0, signum)
            except (OSError, EOFError, ValueError):
                pass
            # the kernel and whatever it started
            os.killpg(0, signal.SIGKILL)

        threading.Thread(
            target=watch, name="launcher-watch", daemon=True
        ).start()


def _undumpable() -> None:
    """No process of the same user may attach to this one (ptrace, /proc/<pid>/mem)."""
    import ctypes

    PR_SET_DUMPABLE = 4
    if (
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        != 0
    ):
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def serve(
    path: str | None,
    listen_fd: int | None = None,
    workdir: str | None = None,
    warm: tuple[str, ...] = (),
) -> None:
    """The zygote's main: listen on ``path`` (or the listening socket ``listen_fd``), warm up
    (``warm``: modules to import besides ``WARM_MODULES``), fork kernels until stdin closes;
    ``workdir``: sandboxed, every kernel runs there."""
    # Run by path, sys.path[0] is this folder, which a plain kernel does not have (kernel.py).
    if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(
        os.path.abspath(__file__)
    ):
        del sys.path[0]
    if workdir is not None:
        _undumpable()
    zygote = _Zygote(path, listen_fd, workdir)
    zygote.listen()
    print("listening", flush=True)
    # nobody reads our stdout after that line: what we print goes to the log
    os.dup2(2, 1)
    code = 0
    try:
        zygote.warm_up(warm)
        zygote.serve()
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        for pid in list(zygote.children):
            try:
                # each kernel leads its own process group
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        zygote.listener.close()
        # Nothing is left to write or free: a normal interpreter exit would spend a second or
        # more tearing down torch and the rest, while the worker waits for it.
        if path is not None and os.path.exists(path):
            os.unlink(path)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


class ForkServer:
    """The zygote of one grading worker: ``start()`` it, put ``path`` into the environment the
    kernels inherit (``SOCKET_ENV``), ``stop()`` it when the worker ends (it also stops when the
    worker dies).  With a ``sandbox`` (``sandbox.Sandbox``) it runs inside it."""

    def __init__(
        self, folder: str, sandbox=None, warm: tuple[str, ...] = ()
    ):
        self.path = os.path.join(folder, "zygote.sock")
        self.sandbox = sandbox
        # modules the assignment imports, warmed besides WARM_MODULES
        self.warm = tuple(warm)
        self.proc = None
        # its processes (bwrap's too): not kernels
        self.family: set[int] = set()

    def start(self, env: dict, timeout: float = 60) -> bool:
        """Start the zygote; False (with the reason on stderr) when it does not come up."""
        import subprocess

        from course_utils.grading.kernel import PRIVATE_ENV

        # The zygote never sees the grader's secrets: a forked kernel could read them back
        # from /proc/self/environ, which is the environment its process was started with.
        env = {
            k: v
            for k, v in env.items()
            if k not in PRIVATE_ENV and k != SOCKET_ENV
        }
        here = os.path.abspath(__file__)
        warm = ["--warm", ",".join(self.warm)] if self.warm else []
        if self.sandbox is None:
            self.proc = subprocess.Popen(
                [sys.executable, here, self.path, *warm],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
            )
        else:
            # The worker binds the socket, outside the sandbox, and hands the zygote the listening end.
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            if os.path.exists(self.path):
                os.unlink(self.path)
            listener.bind(self.path)
            listener.listen(64)
            fd = listener.fileno()
            os.set_inheritable(fd, True)
            from course_utils.grading.sandbox import PASSED_ENV

            # threads, plotting backend
            passed = {k: v for k, v in env.items() if k in PASSED_ENV}
            command = self.sandbox.command(
                [
                    sys.executable,
                    here,
                    "--listen-fd",
                    str(fd),
                    "--workdir",
                    str(self.sandbox.work),
                    *warm,
                ],
                extra_env=passed,
            )
            try:
                # bwrap's own process stays in the sandbox as its init, and its environment can be read
                # there (/proc/1/environ): it starts with none of the grader's.
                self.proc = subprocess.Popen(
                    command,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    pass_fds=[fd],
                    env={"PATH": "/usr/bin:/bin"},
                )
            finally:
                listener.close()  # the zygote has its own copy
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else b""
        if line.strip() != b"listening":
            print(
                f"course grading: the fork server did not start ({line!r})"
                + ("" if self.sandbox else "; plain kernels instead"),
                file=sys.stderr,
            )
            self.stop()
            return False
        import psutil

        try:  # nothing but the zygote (and bwrap's processes) exists in the sandbox yet
            self.family = {self.proc.pid} | {
                p.pid
                for p in psutil.Process(self.proc.pid).children(
                    recursive=True
                )
            }
        except psutil.Error:
            self.family = {self.proc.pid}
        return True

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.alive() else None

    def leftovers(self) -> list:
        """The processes in the zygote's tree that are not the zygote's own: kernels, and what
        they started (in the sandbox, orphans belong to the sandbox's init, still in the tree)."""
        import psutil

        if not self.alive():
            return []
        try:
            tree = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.Error:
            return []
        return [p for p in tree if p.pid not in self.family]

    def sweep(self) -> int:
        """Kill every process a graded submission left in the zygote's tree; how many there were."""
        import psutil

        left = self.leftovers()
        for p in left:
            try:
                p.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(left, timeout=5)
        return len(left)

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            self.proc.stdin.close()  # the zygote's signal to stop
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()
            self.proc.wait()
        self.proc = None
        if self.sandbox is not None and os.path.exists(self.path):
            os.unlink(self.path)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(
        description="the grading fork server (the grading worker starts it)"
    )
    parser.add_argument("socket", nargs="?", help="the socket to listen on")
    parser.add_argument(
        "--listen-fd",
        type=int,
        help="a listening socket to take over (sandboxed)",
    )
    parser.add_argument(
        "--workdir", help="sandboxed: every kernel runs in this folder"
    )
    parser.add_argument(
        "--warm",
        default="",
        help="comma-separated modules to import besides WARM_MODULES",
    )
    args = parser.parse_args()
    if (args.socket is None) == (args.listen_fd is None):
        parser.error("give a SOCKET or --listen-fd")
    serve(
        args.socket,
        args.listen_fd,
        args.workdir,
        tuple(m for m in args.warm.split(",") if m),
    )
