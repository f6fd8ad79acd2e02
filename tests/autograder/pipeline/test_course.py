"""pipeline/course.py: one scratch course grades submission after submission, each on its own."""
import nbformat

import autograder.pipeline.plan as plan
from autograder.pipeline.course import ScratchCourse
from autograder.pipeline.judge_outputs import recorded_verdict

from helpers import NOTEBOOKS, SOLUTIONS

ASSIGNMENT, NAME = "00_start_here", "start_here.ipynb"


def test_a_course_grades_one_submission_after_another_drawing_the_cases_once_each(tmp_path, monkeypatch):
    drawn = []
    draw = plan.graded_cases
    monkeypatch.setattr(plan, "graded_cases", lambda nb: drawn.append(1) or draw(nb))
    course = ScratchCourse(ASSIGNMENT, tmp_path / "course")
    full = course.grade(nbformat.read(SOLUTIONS / ASSIGNMENT / NAME, as_version=4), "ada", NAME)
    assert len(drawn) == 1  # execution draws them; the judge is handed the same cases
    blank = course.grade(nbformat.read(NOTEBOOKS / ASSIGNMENT / NAME, as_version=4), "ada", NAME,
                         feedback=False)
    assert len(drawn) == 2
    max_points = {c.metadata.nbgrader.grade_id: c.metadata.nbgrader.points
                  for c in nbformat.read(SOLUTIONS / ASSIGNMENT / NAME, as_version=4).cells
                  if plan.recorded_exercise(c)}
    assert max_points and full.scores.keys() >= max_points.keys()
    assert all(full.scores[g] == p for g, p in max_points.items())
    assert all(blank.scores[g] == 0 for g in max_points)  # nothing left over from the first
    assert "<html" in full.feedback and blank.feedback is None
    verdicts = {c.metadata.nbgrader.grade_id: recorded_verdict(c)
                for c in nbformat.reads(full.autograded, as_version=4).cells if plan.recorded_exercise(c)}
    assert {g: v["points"] for g, v in verdicts.items()} == {g: full.scores[g] for g in max_points}


def test_ctrl_c_inside_an_nbgrader_step_is_ctrl_c_again():
    """nbgrader's API (``capture_log``) catches whatever stops a step, Ctrl-C included, and
    answers a failure with its traceback: the command must stop as interrupted (exit 130,
    "what was done is saved"), not as a failed step; other failures stay failures."""
    import logging

    import pytest
    from nbgrader.utils import capture_log

    from autograder.grading import GradingError
    from autograder.pipeline.course import require_success

    class Step:
        log = logging.getLogger("a step")

        def __init__(self, stop):
            self.stop = stop

        def start(self):
            raise self.stop

    with pytest.raises(KeyboardInterrupt):
        require_success(capture_log(Step(KeyboardInterrupt())), "generate_feedback")
    with pytest.raises(GradingError, match="ValueError: KeyboardInterrupt"):
        require_success(capture_log(Step(ValueError("KeyboardInterrupt"))), "generate_feedback")
