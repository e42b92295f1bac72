"""The grading tier: the checks the tests use, and what instructors use to grade a class.

- ``checks``     helpers for visible tests (learners import them) and hidden tests (through
                 ``pristine``): comparisons with derived tolerances, messages with hints
- ``isolation``  one mistake costs one exercise (e.g. ``reference_heads``)
- ``doubles``    test doubles with known answers (``CopyModel``; ``ScriptedModel`` for beam search)
- ``integrity``  a snapshot of torch/builtins functions that hidden tests check (tampering)
- ``pristine``   private copies of ``course_utils`` for hidden tests (``from course_utils.grading
                 import pristine``: the name every hidden test uses)
- ``tamper``     a static scan of a submission for code that rebinds the grader's functions
- ``collect``    LMS submission zips (Canvas, Moodle) -> nbgrader's ``submitted/`` folder
- ``autograde``  the driver: ``grade()`` a class in parallel, resumable, with memory and time limits
- ``worker``     a grading process (``python -m course_utils.grading.worker``): one student at a time
- ``execute``    nbgrader's Execute as a worker runs it (tests in ``test_room``, skipped cells)
- ``watchdog``   stops a kernel past its memory or time limit; ``limits``: the limits' defaults
- ``reasons``    why a submission failed or lost points, in words; ``flags``: what the scans found
- ``status``     the grading status (``status/<id>.json``, merged across pods): one reader and writer
- ``config``     the course's nbgrader configuration, loaded in one place
- ``gradebook``  the driver's and workers' own gradebook queries; zero scores of a failed submission
- ``kernel``     the grading kernel: a memory limit, and no grader secrets in its environment
- ``forkserver`` kernels forked from a warm process that has imported torch and the course once
- ``sandbox``    the bubblewrap sandbox learner code runs in
- ``feedback``   private feedback: each test's points and message, never hidden-test code
- ``export``     grades per assignment as CSV, and as a Canvas gradebook import

May import: the standard library, torch, nbgrader/nbformat (instructor-side modules only), the
top level and ``references``; ``references``, ``models`` and ``training`` never import it.
"""

from .pristine import Pristine, pristine

__all__ = ["Pristine", "pristine"]
