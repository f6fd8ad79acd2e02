# nbgrader configuration of this course directory; the settings live in autograder/config.py.
from pathlib import Path

from autograder.config import configure
from autograder.validate import use_for_nbgrader_validate

# the course is the folder this file is in, so a copy of it grades into its own gradebook
configure(get_config(), Path(__file__).resolve().parent)  # noqa: F821 (get_config is provided by nbgrader)
# `nbgrader validate` answers with the course's grader: nbgrader's own Validator would pass
# every graded cell, since they only record outputs (see autograder/validate.py).
use_for_nbgrader_validate()
