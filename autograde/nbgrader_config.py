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
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(here, "gradebook.db")

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

# Keep the hidden tests in the gradebook; autograde puts them back into every submission.
c.ClearHiddenTests.enabled = True
