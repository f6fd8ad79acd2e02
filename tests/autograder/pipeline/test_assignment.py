"""pipeline/assignment.py: the assignment's source, read once per version, handed out as copies."""
import shutil

import pytest

from autograder.pipeline import assignment
from autograder.pipeline.assignment import NoSuchAssignment, assignments, notebooks, source
from autograder.pipeline.plan import recorded_exercise
from helpers import SOLUTIONS

ASSIGNMENT, NAME = "00_start_here", "start_here.ipynb"


def test_one_source_per_version_with_what_grading_needs():
    src = source(ASSIGNMENT, NAME)
    assert source(ASSIGNMENT) is src and source(ASSIGNMENT, "start_here") is src  # read once
    nb = src.read()
    graded = [c for c in nb.cells if recorded_exercise(c)]
    assert src.exercises == [recorded_exercise(c) for c in graded]
    assert list(src.graded) == [c.metadata.nbgrader.grade_id for c in graded]
    assert all(pts == float(c.metadata.nbgrader.points) for (_, pts), c in zip(src.graded.values(), graded))
    assert set(src.graded) <= src.owned
    assert src.teaching and all(not s.startswith(" ") for s in src.teaching)
    nb.cells.clear()  # a caller's copy: the next one is whole
    assert src.read().cells
    assert ASSIGNMENT in assignments() and notebooks(ASSIGNMENT) == [NAME]


def test_a_changed_source_is_read_again(tmp_path, monkeypatch):
    shutil.copytree(SOLUTIONS / ASSIGNMENT, tmp_path / ASSIGNMENT)
    monkeypatch.setattr(assignment, "SOLUTIONS", tmp_path)
    first = source(ASSIGNMENT)
    path = tmp_path / ASSIGNMENT / NAME
    path.write_text(path.read_text().replace('"points": 2', '"points": 3', 1))
    again = source(ASSIGNMENT)
    assert again is not first and again.digest != first.digest
    assert sorted(again.graded.values()) != sorted(first.graded.values())


@pytest.mark.parametrize("where", [("no_such_assignment", None), (ASSIGNMENT, "other.ipynb"),
                                   ("..", "start_here.ipynb"), (ASSIGNMENT, "../01_language_models/x.ipynb")])
def test_no_such_assignment_says_so(where):
    with pytest.raises(NoSuchAssignment):
        source(*where)
