"""The grading kernel's hooks: graded test cells in a namespace of their own (``test_room.py``),
and, after a cell fails, letting go of what its frames held.

IPython keeps a failed cell's exception (``sys.last_value``, its ``last_execution_result``) until the
next error, and through the exception's traceback every frame of the call that failed, with its
local variables.  A loop that filled memory until the per-cell timeout interrupted it would hold
that memory through the cells that follow, and a few such cells would exhaust the kernel's memory
limit and cost the whole notebook instead of one exercise.  ``install`` registers a
``post_run_cell`` hook that clears those frames' variables once the cell's error has been shown.
The grading kernel (``kernel.py``) installs both at start-up (its ``RELEASE_FRAMES``).
"""

from __future__ import annotations

import gc


def release_failed_cell(result) -> None:
    """``post_run_cell`` hook: clear the local variables of every frame of a failed cell's traceback."""
    error = getattr(result, "error_in_exec", None)
    # an error raised while handling another keeps that one's frames too
    while error is not None:
        tb = error.__traceback__
        while tb is not None:
            frame = tb.tb_frame
            try:
                frame.clear()
            except RuntimeError:  # a frame still running (none should be, after the cell): leave it
                pass
            else:
                # Before Python 3.13 a frame caches a dict of its locals, which traceback formatters
                # fill and keep; reading f_locals again syncs that dict with the cleared frame.  A
                # module-level frame's "locals" are the notebook's namespace, which clear() leaves.
                _ = frame.f_locals
            tb = tb.tb_next
        error = error.__context__
    gc.collect()


def install(shell) -> None:
    """Register the hooks of a grading kernel on an IPython shell (once): this one, and the
    graded test cells' own namespace (``test_room.py``)."""
    from . import test_room

    if release_failed_cell not in shell.events.callbacks["post_run_cell"]:
        shell.events.register("post_run_cell", release_failed_cell)
    test_room.install(shell)
