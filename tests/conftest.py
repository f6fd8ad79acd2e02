import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # so tests can `import helpers`

# Under pytest-xdist every worker runs notebooks whose kernels train with torch. Each torch
# process would start one thread per core, and two workers' threads then fight over the
# same cores (a CI-mode notebook took 8x longer than alone). One thread per process instead;
# the kernels inherit the setting.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")


@pytest.fixture(scope="module")
def learner():
    """A user without root, on a system Python, with a clone of the course (``helpers.Learner``);
    skips the test where it cannot be made."""
    from helpers import learner_without_root  # lazy: helpers imports the grader (nbgrader)

    with learner_without_root() as who:
        yield who
