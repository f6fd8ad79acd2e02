# nbgrader's configuration of this course directory: the course's grading pipeline
# (autograder/pipeline/config.py), then this course's own settings.
from pathlib import Path

from autograder.pipeline.config import configure

c = get_config()  # noqa: F821 (nbgrader provides it)
configure(c, Path(__file__).resolve().parent)
# `nbgrader validate` answers with the course's grader: nbgrader's own Validator would pass
# every graded cell, since they only record outputs (see autograder/validate.py).
from autograder.validate import use_for_nbgrader_validate  # noqa: E402

use_for_nbgrader_validate()
