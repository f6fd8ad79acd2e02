"""The race's points in the course's nbgrader gradebook (``leaderboard --points N --gradebook``):
extra credit on the graded cell above the race, which the formgrader and ``nbgrader export``
count.

A course grades notebook 06 for two learners with ``autograder grade``: ada hands in the
solution (18 of 18), bo the blank notebook (0). cy has a submission of 06 in the gradebook that
was never autograded (nbgrader's ``add_submission``), gus is a student without one, dee and eve
are not students. The board is made here, not raced (what the race ranks is ``test_race.py``'s):
ada 1st, cy 2nd, gus 3rd, dee 4th, bo 5th of the learners, eve ranked nowhere, fay's sandbox did
not start, and the 5-gram's line at 2.5 bits per character.
"""
from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder import cli
from autograder.classroom.grade import grade_submissions
from autograder.classroom.journal import course_config
from autograder.pipeline.course import new_course
from autograder.race import board, leaderboard
from autograder.race.gradebook import GradebookError, carrier, race_points, write_points
from autograder.race.verify import Run
from helpers import NOTEBOOKS, SOLUTIONS

ASSIGNMENT = "06_gpt"
ROW = "grade_scaling_train_time"
LINE = 2.5


def _board() -> list[board.Standing]:
    runs = lambda *xs: [Run(i, bpc=x) for i, x in enumerate(xs)]  # noqa: E731
    return board.rank([board.Standing("ada", runs(1.0, 1.01, 0.99)), board.Standing("cy", runs(1.5, 1.51, 1.49)),
                       board.Standing("gus", runs(1.8, 1.81, 1.79)), board.Standing("dee", runs(2.0, 2.01, 1.99)),
                       board.Standing("bo", runs(2.9, 2.91, 2.89)),
                       board.Standing(board.BASELINE, runs(2.2, 2.21, 2.19)),
                       board.Standing("eve", [Run(0, reason="not causal")]),
                       board.Standing("fay", [Run(0, reason="did not start", grader_fault=True)])])


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """A course directory with 06 graded for ada and bo, cy's not graded, and gus a student without one."""
    from nbgrader.api import Gradebook

    tmp = tmp_path_factory.mktemp("race_gradebook")
    folder = tmp / "class"
    folder.mkdir()
    shutil.copyfile(SOLUTIONS / ASSIGNMENT / "gpt.ipynb", folder / "ada.ipynb")
    shutil.copyfile(NOTEBOOKS / ASSIGNMENT / "gpt.ipynb", folder / "bo.ipynb")
    root = tmp / "course"
    root.mkdir()
    new_course(root)
    summary = grade_submissions(folder, ASSIGNMENT, root, jobs=2, progress=False)
    assert len(summary.graded) == 2, summary.report()
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        gb.add_student("cy")
        gb.add_submission(ASSIGNMENT, "cy")
        gb.add_student("gus")
    return root


@pytest.fixture
def course(graded, tmp_path):
    """A copy of ``graded`` for one test to write into."""
    return Path(shutil.copytree(graded, tmp_path / "course", symlinks=True))


def _grade(course: Path, student: str, row: str = ROW):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return gb.find_grade(row, "gpt", ASSIGNMENT, student).to_dict()  # what the formgrader's API sends


def test_points_by_the_line_are_extra_credit_that_the_formgrader_and_nbgrader_export_count(course):
    from nbgrader.apps import NbGraderAPI

    assert carrier(ASSIGNMENT) == ("gpt.ipynb", ROW)  # the graded cell just above the race's
    done = write_points(course, ASSIGNMENT, race_points(_board(), LINE, most=2, award="line"))
    assert done.row == ROW and done.points == {"ada": 2.0, "bo": 0.0}  # bo is above the line
    said = dict(line.split(": ", 1) for line in done.not_written)
    assert set(said) == {"cy", "gus", "dee", "eve", "fay"}
    assert "06_gpt is not autograded yet" in said["cy"] and "no submission of 06_gpt" in said["gus"]
    assert said["dee"] == said["eve"] == "not a student of the gradebook"
    assert "could not run the entry to the end" in said["fay"]
    ada = _grade(course, "ada")
    assert ada["extra_credit"] == 2.0 and ada["auto_score"] == 1.0  # the cell's own score as it was
    assert _grade(course, "ada", "grade_gpt_block")["extra_credit"] is None  # one row carries them
    api = NbGraderAPI(config=course_config(course))  # the formgrader's own listing
    listed = api.get_submission(ASSIGNMENT, "ada")
    assert (listed["score"], listed["max_score"]) == (20.0, 18.0)
    assert api.get_submission(ASSIGNMENT, "bo")["score"] == 0.0
    exported = course / "exported.csv"
    subprocess.run([str(Path(sys.executable).parent / "nbgrader"), "export", "--to", str(exported)], cwd=course,
                   check=True, capture_output=True)
    scores = {r["student_id"]: float(r["score"]) for r in csv.DictReader(open(exported))
              if r["assignment"] == ASSIGNMENT}
    assert scores == {"ada": 20.0, "bo": 0.0, "cy": 0.0, "gus": 0.0}  # nbgrader lists every student


def test_the_race_replaces_its_own_points_but_never_extra_credit_given_by_hand(course):
    from nbgrader.api import Gradebook

    write_points(course, ASSIGNMENT, race_points(_board(), LINE, most=2, award="line"))
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:  # as the formgrader saves a hand's
        gb.find_grade(ROW, "gpt", ASSIGNMENT, "bo").extra_credit = 0.5
        gb.db.commit()
    done = write_points(course, ASSIGNMENT, race_points(_board(), LINE, most=10, award="rank"))
    assert done.points == {"ada": 10.0} and _grade(course, "ada")["extra_credit"] == 10.0  # not 12
    assert _grade(course, "bo")["extra_credit"] == 0.5
    assert any(line.startswith("bo: ") and "did not write" in line for line in done.not_written)


def test_a_gradebook_without_the_assignment_is_refused_before_anything_is_written(tmp_path):
    from nbgrader.api import Gradebook

    empty = tmp_path / "course"
    empty.mkdir()
    new_course(empty)
    with pytest.raises(GradebookError, match="no gradebook at"):
        write_points(empty, ASSIGNMENT, {"ada": 2.0})
    with Gradebook(f"sqlite:///{empty / 'gradebook.db'}") as gb:
        gb.add_student("ada")
    with pytest.raises(GradebookError, match="06_gpt is not in the gradebook"):
        write_points(empty, ASSIGNMENT, {"ada": 2.0})


def test_the_command_writes_the_boards_points_and_says_whose_it_could_not(course, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(leaderboard, "race", lambda *args, **kwargs: (_board(), LINE))  # raced elsewhere
    monkeypatch.setenv("AUTOGRADER_ISOLATION", "auto")  # the command sets it where unset: kept to this test
    command = ["leaderboard", ASSIGNMENT, str(tmp_path), "--out", str(tmp_path / "race"), "--allow-unisolated",
               "--course", str(course), "--gradebook"]
    assert cli.main(command) == 2 and "--points N" in capsys.readouterr().err
    assert cli.main(command + ["--points", "3"]) == 1  # some learners' points could not be written
    said = capsys.readouterr().out
    assert f"race points written to the gradebook for 2 learner(s), as extra credit on {ROW}" in said
    assert "not written: dee: not a student of the gradebook" in said
    assert _grade(course, "ada")["extra_credit"] == 3.0
    assert cli.main(command[:-3] + ["--course", str(tmp_path), "--points", "3", "--gradebook"]) == 2
    assert "no gradebook at" in capsys.readouterr().err
