"""classroom/worker.py, in this process: a worker grades the prepared notebook a task carries.

The worker as a separate process (time limits, kills, its parent's death) is exercised by
test_classroom.py and test_distributed.py.
"""
import nbformat
from nbformat.v4 import new_markdown_cell

from autograder.classroom import grade, worker
from autograder.classroom.jobs import Outcome, Task
from autograder.pipeline import plan

from helpers import NOTEBOOKS, SOLUTIONS

ASSIGNMENT, NAME = "00_start_here", "start_here.ipynb"


def test_the_worker_grades_what_it_is_sent_not_a_file(tmp_path, monkeypatch):
    monkeypatch.setenv(plan.SECRET_ENV, str(tmp_path / "secret"))
    folder = tmp_path / "submitted" / "ada" / ASSIGNMENT
    folder.mkdir(parents=True)
    (folder / NAME).write_bytes((NOTEBOOKS / ASSIGNMENT / NAME).read_bytes())  # the blank file
    blank = grade.make_task(folder, "ada", ASSIGNMENT, NAME)
    assert isinstance(blank, Task) and blank.notes == []
    monkeypatch.setenv(plan.SECRET_ENV, str(tmp_path / "no secret in a worker"))
    solution = nbformat.read(SOLUTIONS / ASSIGNMENT / NAME, as_version=4)
    solution.cells.insert(0, new_markdown_cell("**Notes from the grader**"))
    sent = Task("ada", ASSIGNMENT, NAME, nbformat.writes(solution), ["a note"], blank.digest, None,
                b"k" * 32)
    outcome = worker.grade_task(sent)
    assert outcome.ok, outcome.reason
    assert outcome.notes == ["a note"] and outcome.digest == blank.digest
    assert outcome.scores and all(s > 0 for s in outcome.scores.values())  # the solution it was sent
    assert "Notes from the grader" in outcome.feedback
    assert not (tmp_path / "no secret in a worker").exists()  # the cases came from the task's key


def test_a_submission_that_cannot_be_prepared_fails_alone_and_says_why(tmp_path, monkeypatch):
    folder = tmp_path / "submitted" / "bo" / ASSIGNMENT
    folder.mkdir(parents=True)
    (folder / NAME).write_bytes(b"{}")

    def broken(*args):
        raise ValueError("a bug of the grader's")

    monkeypatch.setattr("autograder.pipeline.submission.prepare", broken)
    failed = grade.make_task(folder, "bo", ASSIGNMENT, NAME)
    assert isinstance(failed, Outcome) and not failed.ok
    assert "could not prepare" in failed.reason and "a bug of the grader's" in failed.reason
