"""One submission, two ways of grading it: ``autograder submit`` (``grading.grade_notebook``)
and ``autograder grade`` over a class meet the same cases, so give the same scores and the
same messages, word for word.

The messages of a wrong answer name the largest error of its first failing hidden case, a
number that depends on the case's values: other cases would give other words. The key of the
cases is the prepared submission's (``plan.submission_key``), computed once; before it was,
the class path hashed the notebook before nbgrader restored its locked cells and the
one-notebook path after, so an edited locked cell met other cases in each.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.grading import grade_notebook
from autograder.pipeline.course import new_course
from autograder.pipeline.judge_outputs import recorded_verdict
from autograder.pipeline.plan import recorded_exercise
from helpers import SOLUTIONS

ASSIGNMENT, NAME = "00_start_here", "start_here.ipynb"
SOLUTION = SOLUTIONS / ASSIGNMENT / NAME
CLI = str(Path(sys.executable).with_name("autograder"))
# a jvp that is right only where the incoming gradient sums to zero, wrong by an amount that
# depends on each case's values
JVP = "return s * (g - np.sum(g * s, axis=axis, keepdims=True))"
JVP_OFF = "return s * (g - np.sum(g * s, axis=axis, keepdims=True)) + 0.01 * np.mean(g)"


def _with(nb, grade_id: str, old: str, new: str) -> None:
    (cell,) = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id]
    assert old in cell.source
    cell.source = cell.source.replace(old, new)


def make_class(folder: Path) -> dict[str, Path]:
    """Three learners: honest, one who edited a locked graded cell, one whose graded cell
    is there twice; the last two with a wrong jvp."""
    folder.mkdir()
    honest = nbformat.read(SOLUTION, as_version=4)
    edited = nbformat.read(SOLUTION, as_version=4)
    _with(edited, "warmup_softmax_jvp", JVP, JVP_OFF)
    graded = [c for c in edited.cells if recorded_exercise(c)]
    graded[0].source += "\n# my note in the locked cell"
    doubled = nbformat.read(SOLUTION, as_version=4)
    _with(doubled, "warmup_softmax_jvp", JVP, JVP_OFF)
    at = next(i for i, c in enumerate(doubled.cells) if recorded_exercise(c))
    doubled.cells.insert(at + 1, nbformat.from_dict(doubled.cells[at]))
    paths = {}
    for student, nb in (("ada", honest), ("bo", edited), ("cy", doubled)):
        paths[student] = folder / f"{student}.ipynb"
        nbformat.write(nb, paths[student])
    return paths


def verdicts_in(autograded: str) -> dict[str, dict]:
    """exercise id -> the verdict its (first) graded cell carries."""
    out = {}
    for cell in nbformat.reads(autograded, as_version=4).cells:
        ex_id = recorded_exercise(cell)
        if ex_id and ex_id not in out:
            out[ex_id] = recorded_verdict(cell)
    return out


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("two_paths")
    paths = make_class(tmp / "class")
    course = tmp / "course"
    course.mkdir()
    new_course(course)
    run = subprocess.run([CLI, "grade", str(tmp / "class"), "-a", ASSIGNMENT, "--course", str(course),
                          "--jobs", "2"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    alone = {student: grade_notebook(path, ASSIGNMENT) for student, path in paths.items()}
    in_class = {student: (course / "autograded" / student / ASSIGNMENT / NAME).read_text()
                for student in paths}
    return alone, in_class


def test_the_same_submission_gets_the_same_cases_scores_and_messages_both_ways(both):
    alone, in_class = both
    for student, result in alone.items():
        class_verdicts = verdicts_in(in_class[student])
        submit_verdicts = verdicts_in(result.autograded)
        assert class_verdicts == submit_verdicts, student
        for e in result.exercises:
            assert class_verdicts[e.id]["points"] == e.points and class_verdicts[e.id]["messages"] == e.messages
    assert alone["ada"].total == alone["ada"].max_total
    for student in ("bo", "cy"):  # the wrong jvp fails on values its cases draw
        jvp = alone[student].by_id("warmup.softmax_jvp")
        assert jvp.points < jvp.max_points
        assert any("largest error" in m for m in jvp.messages), jvp.messages
