"""nbgrader configuration of the course (the one config file; run nbgrader from this folder).

The course directory is this folder.  The source notebooks live in ../solutions and the
student release in ../notebooks, so nbgrader's usual "source"/"release" steps map onto the
repository's top-level folders; submissions, autograded copies, feedback and the gradebook
stay here and are never committed (see ../.gitignore).  All paths are relative to this file.
"""
import os

c = get_config()  # noqa: F821  (nbgrader provides get_config)

here = os.path.dirname(os.path.abspath(__file__))

c.CourseDirectory.root = here
c.CourseDirectory.course_id = "attention-course"
c.CourseDirectory.source_directory = os.path.join("..", "solutions")
c.CourseDirectory.release_directory = os.path.join("..", "notebooks")
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"
# The gradebook: SQLite next to this file, or the server that COURSE_DB_URL names (for a large
# class graded in parallel, e.g. postgresql://grader@/course?host=/var/run/postgresql).  SQLite
# waits up to 60 s for a lock instead of failing with "database is locked", so parallel
# graders (course_utils.grading.autograde --jobs N) can share it.
c.CourseDirectory.db_url = os.environ.get("COURSE_DB_URL") or (
    "sqlite:///" + os.path.join(here, "gradebook.db") + "?timeout=60")

# Only the notebooks are part of an assignment; data and caches never are.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "*.pt", "*.ckpt", "data"]

# The release never carries outputs of the stored run: learners produce their own.
c.ClearOutput.enabled = True
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Execution under autograde/validate.  A cell that runs longer than the timeout is
# interrupted and recorded as an error, so an infinite loop costs only the tests that hit
# it.  Expensive cells switch to fast mode (course_utils.runtime.fast_mode) because
# nbgrader sets NBGRADER_EXECUTION in the kernel's environment.
c.Execute.timeout = int(os.environ.get("COURSE_CELL_TIMEOUT", "60"))
c.Execute.interrupt_on_timeout = True
c.Execute.kernel_name = "python3"
# A kernel's start-up (no learner code runs in it) may take long on a machine busy with other
# graders: wait up to 120 s (nbclient's default is 60) before the grader retries the start once.
c.Execute.startup_timeout = int(os.environ.get("COURSE_KERNEL_STARTUP_TIMEOUT", "120"))

# What an answer prints to stderr (warnings, logging, progress bars) never costs points:
# nbgrader scores a test cell with any stderr output as 0, so autograde drops every stderr
# stream after execution.  Errors are "error" outputs, not streams: they still cost points.
c.IgnorePattern.enabled = True
c.IgnorePattern.pattern = r"(?s).*"

# Keep the hidden tests in the gradebook; autograde puts them back into every submission.
c.ClearHiddenTests.enabled = True

# `make collect`: Canvas and Moodle submission zips (course_utils/grading/collect.py says
# which file names they write).  Learners map to student ids through roster.csv when present.
c.ZipCollectApp.extractor_plugin = "course_utils.grading.collect.CourseExtractor"
c.ZipCollectApp.collector_plugin = "course_utils.grading.collect.CourseCollector"
c.CourseCollector.roster = "roster.csv"
c.CourseCollector.zip_timezone = "UTC"  # zip entries carry no zone; Canvas and Moodle servers usually write UTC

# `nbgrader generate_feedback` as private as `make feedback`: the autograded notebook has the
# hidden tests back in place and tracebacks that quote them; HideTests removes both before
# nbgrader renders the page (course_utils/grading/private_feedback.py).
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "course_utils.grading.private_feedback.HideTests",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]
