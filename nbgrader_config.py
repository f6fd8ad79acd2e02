# nbgrader configuration of this course directory; the settings live in autograder/config.py.
from autograder.config import configure

configure(get_config())  # noqa: F821 (get_config is provided by nbgrader)
