import os
import sys
import warnings
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # so tests can `import helpers`, `ctrl_c`, ...

from ctrl_c import put_back, sigint_now  # noqa: E402 (after the path it is found on)

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


@pytest.fixture(autouse=True)
def ctrl_c_kept(request):
    """A test that leaves this process ignoring or blocking Ctrl-C is named (a warning in the
    summary) and the state restored: every process a later test starts would inherit it, and
    the tests that press Ctrl-C in a command (classroom/test_regrade.py, test_classroom.py)
    would test nothing. Where the course's own code did it, an instructor's Python would lose
    Ctrl-C too."""
    before = sigint_now()
    yield
    after = sigint_now()
    if after != before:
        kept = put_back(before)
        warnings.warn(f"{request.node.nodeid} left Ctrl-C (SIGINT) as (handler, state) = {after}, "
                      f"found as {before}: restored" + (f", but {kept}" if kept else ""))


@pytest.fixture(autouse=True)
def check_cell_patient(monkeypatch):
    """The check cell's "Looking for the mistake…" line waits for a slow search; on a busy
    test machine it would come at random, so the tests that read a check cell's first line
    do not see it (``test_judge`` tests the line itself)."""
    monkeypatch.setattr("autograder.check_cell.PATIENCE", 1e9)
