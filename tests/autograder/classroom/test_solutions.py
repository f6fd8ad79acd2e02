"""classroom/solutions.py: the model solutions reach a course's learners once the work is due.

A course with a local exchange and a due date in nbgrader's gradebook: releasing is refused
while anyone may still hand the assignment in (the due date, then one learner's extension);
once it is over, ``autograder release-solutions`` releases it and a learner fetches it with
nbgrader, as from their Assignment List, and gets the solution code to read and run.
"""
from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from autograder.classroom.solutions import release_solutions
from autograder.pipeline.course import GradingError, new_course

ASSIGNMENT = "00_start_here"
BIN = Path(sys.executable).parent
ANSWER = "e = np.exp(z - np.max(z, axis=axis, keepdims=True))"


def set_due(course: Path, due: datetime, extension: timedelta | None = None) -> None:
    """What ``nbgrader db assignment add --duedate`` and the formgrader's extension field keep."""
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "transformers") as gb:
        gb.update_or_create_assignment(ASSIGNMENT, duedate=due)
        if extension is not None:
            gb.update_or_create_student("ada")
            gb.add_submission(ASSIGNMENT, "ada").extension = extension
            gb.db.commit()


@pytest.fixture
def course(tmp_path):
    root = tmp_path / "course"
    root.mkdir()
    new_course(root)
    with open(root / "nbgrader_config.py", "a") as f:
        f.write(f"get_config().Exchange.root = {str(root / 'exchange')!r}\n")
    return root


def outbound(course: Path) -> Path:
    return course / "exchange" / "transformers" / "outbound" / f"{ASSIGNMENT}_solutions"


def test_refused_while_the_work_may_still_be_handed_in(course):
    set_due(course, datetime.utcnow() + timedelta(days=1))
    with pytest.raises(GradingError, match="may still be handed in until"):
        release_solutions(ASSIGNMENT, course)
    set_due(course, datetime.utcnow() - timedelta(days=1), extension=timedelta(days=2))
    with pytest.raises(GradingError, match="its due date or an extension"):
        release_solutions(ASSIGNMENT, course)
    assert not outbound(course).exists()


def test_released_after_the_due_date_and_fetched_by_a_learner(course, tmp_path):
    set_due(course, datetime.utcnow() - timedelta(hours=1))
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    said = subprocess.run([str(BIN / "autograder"), "release-solutions", ASSIGNMENT, "--course", str(course)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert said.returncode == 0, said.stderr
    assert f"released {ASSIGNMENT}_solutions" in said.stdout

    home = tmp_path / "home"
    home.mkdir()
    fetch = subprocess.run([str(BIN / "nbgrader"), "fetch_assignment", f"{ASSIGNMENT}_solutions",
                            "--course=transformers", f"--Exchange.root={course / 'exchange'}"],
                           cwd=home, env={**env, "HOME": str(home)}, capture_output=True, text=True, timeout=300)
    assert fetch.returncode == 0, fetch.stderr
    nb = nbformat.read(home / f"{ASSIGNMENT}_solutions" / "start_here.ipynb", as_version=4)
    code = "\n".join(c.source for c in nb.cells)
    assert ANSWER in code and "BEGIN SOLUTION" not in code and "NotImplementedError" not in code
    assert nb.cells[0].source.startswith(f"**Model solution of {ASSIGNMENT}**")
    assert not any("nbgrader" in c.metadata for c in nb.cells)
