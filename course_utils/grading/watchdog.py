"""The worker's watchdog: a thread that kills the kernels of the submission being graded when they
hold too much memory or run past the notebook's time limit, and says why."""

from __future__ import annotations

import threading
import time

from .limits import gib


class Watchdog(threading.Thread):
    """``arm(time_limit)`` before a submission, ``disarm()`` after; ``reason`` says why it killed
    the kernels (None when it did not).  ``spare``: processes under the worker that are not
    kernels (the fork server and, sandboxed, bubblewrap's): never counted, never killed."""

    def __init__(self, mem_limit: int | None, poll: float = 0.2):
        super().__init__(daemon=True)
        import psutil

        self.psutil, self.me = psutil, psutil.Process()
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
                total += (
                    p.memory_info().rss
                    if kind == "rss"
                    else p.memory_full_info().pss
                )
            except (self.psutil.Error, AttributeError):
                pass
        return total

    def run(self) -> None:
        while True:
            time.sleep(self.poll)
            with self.lock:
                if self.deadline is None:
                    continue
                kernels = [
                    p
                    for p in self.me.children(recursive=True)
                    if p.pid not in self.spare
                ]
                rss = self._memory(kernels, "rss")
                if (
                    len(kernels) > 1
                    and self.mem_limit
                    and rss > self.mem_limit
                ):
                    # Processes a kernel forks (DataLoader workers), and a forked kernel and its
                    # fork server, share pages: count each page once (PSS).  PSS is costly to
                    # read and never more than RSS, so only when RSS says over the limit.
                    rss = self._memory(kernels, "pss")
                if self.mem_limit and rss > self.mem_limit:
                    self._kill(
                        kernels,
                        f"memory limit: the kernel used {gib(rss)}, more than the "
                        f"{gib(self.mem_limit)} limit, and was stopped",
                    )
                elif time.monotonic() > self.deadline:
                    self._kill(
                        kernels,
                        f"time limit: the notebook was still running after "
                        f"{self.time_limit:g} s and was stopped",
                    )
