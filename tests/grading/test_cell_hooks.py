"""A grading kernel lets go of what a failed cell's frames held (course_utils.grading.cell_hooks), so a
loop that filled memory until its cell was interrupted does not hold that memory through the cells
after it; the notebook's own namespace stays as it was."""

from __future__ import annotations

import gc


FILL = """
import weakref
class Big(list): pass
kept = Big([1])
def fill():
    out = Big(range(10))        # what a runaway loop would have grown
    global ref
    ref = weakref.ref(out)
    try:
        raise ValueError
    except ValueError:
        raise KeyboardInterrupt  # as the per-cell timeout interrupts it
fill()
"""


def test_a_failed_cells_frames_are_released_and_the_namespace_kept():
    from IPython.core.interactiveshell import InteractiveShell

    from course_utils.grading import cell_hooks

    shell = InteractiveShell.instance()
    try:
        shell.run_cell(FILL)
        gc.collect()
        assert shell.user_ns["ref"]() is not None, (
            "without the hook IPython keeps the frame (the test's premise)"
        )
        cell_hooks.install(shell)
        cell_hooks.install(shell)  # once only
        assert (
            shell.events.callbacks["post_run_cell"].count(
                cell_hooks.release_failed_cell
            )
            == 1
        )
        shell.run_cell(FILL)
        gc.collect()
        assert shell.user_ns["ref"]() is None, (
            "the failed cell's local variables are still held"
        )
        # the namespace is untouched
        assert shell.user_ns["kept"] == [1] and "Big" in shell.user_ns
        after = shell.run_cell("kept + [2]")
        assert after.success and after.result == [1, 2]
    finally:
        shell.events.unregister(
            "post_run_cell", cell_hooks.release_failed_cell
        ) if cell_hooks.release_failed_cell in shell.events.callbacks[
            "post_run_cell"
        ] else None
        InteractiveShell.clear_instance()


def test_the_grading_kernel_installs_the_hook(tmp_path, monkeypatch):
    from jupyter_client.manager import start_new_kernel

    from course_utils.grading.kernel import write_kernelspec

    write_kernelspec(tmp_path, 2 * 2**30)
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    km, kc = start_new_kernel(kernel_name="python3")
    try:
        out: list[str] = []

        def run(code):
            out.clear()
            kc.execute_interactive(
                code,
                timeout=120,
                output_hook=lambda m: out.append(
                    str(
                        m["content"].get("text")
                        or m["content"].get("ename")
                        or ""
                    )
                ),
            )
            return "".join(out)

        assert "KeyboardInterrupt" in run(FILL)
        assert (
            run(
                "import gc; gc.collect(); print(ref() is None, kept)"
            ).strip()
            == "True [1]"
        )
        names = run(
            "print(sorted(k for k in dir() if not k.startswith('_') and k not in "
            "('In', 'Out', 'exit', 'quit', 'get_ipython', 'open')))"
        ).strip()
        assert names == "['Big', 'fill', 'gc', 'kept', 'ref', 'weakref']", (
            f"the start-up line left a name: {names}"
        )
    finally:
        km.shutdown_kernel(now=True)
