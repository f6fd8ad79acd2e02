"""pipeline/course.py: one scratch course grades submission after submission, each on its own;
a failed nbgrader step is told from Ctrl-C and from the sandbox's failure by the grader's records."""
import logging
import signal

import nbformat
import pytest
from nbgrader.utils import capture_log

import autograder.pipeline.plan as plan
from autograder.pipeline.course import GradingError, SandboxError, ScratchCourse, run_step
from autograder.pipeline.judge_outputs import recorded_verdict

from ctrl_c import pythons_ctrl_c
from helpers import NOTEBOOKS, SOLUTIONS

ASSIGNMENT, NAME = "00_start_here", "start_here.ipynb"


def test_a_course_grades_one_submission_after_another_drawing_the_cases_once_each(tmp_path, monkeypatch):
    drawn = []
    draw = plan.graded_cases
    monkeypatch.setattr(plan, "graded_cases", lambda nb, key: drawn.append(key) or draw(nb, key))
    course = ScratchCourse(ASSIGNMENT, tmp_path / "course")
    full = course.grade(nbformat.read(SOLUTIONS / ASSIGNMENT / NAME, as_version=4), "ada", NAME, b"k" * 32)
    assert drawn == [b"k" * 32]  # execution draws them from the key given; the judge is handed the same
    blank = course.grade(nbformat.read(NOTEBOOKS / ASSIGNMENT / NAME, as_version=4), "ada", NAME, b"j" * 32,
                         feedback=False)
    assert drawn == [b"k" * 32, b"j" * 32]
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


class _Step:
    """An nbgrader app as its API runs it (``capture_log(app)``): ``start`` does ``stop()``."""
    log = logging.getLogger("a step")

    def __init__(self, stop):
        self.stop = stop

    def start(self):
        self.stop()


def _raise(err):
    def stop():
        raise err
    return stop


def test_ctrl_c_inside_an_nbgrader_step_is_ctrl_c_again():
    """nbgrader's API (``capture_log``) catches whatever stops a step, Ctrl-C included, and
    answers a failure with its traceback: the command must stop as interrupted (exit 130,
    "what was done is saved"), not as a failed step; other failures stay failures."""
    with pythons_ctrl_c():
        with pytest.raises(KeyboardInterrupt):
            run_step(lambda: capture_log(_Step(lambda: signal.raise_signal(signal.SIGINT))), "generate_feedback")
        with pytest.raises(GradingError, match="ValueError: KeyboardInterrupt"):
            run_step(lambda: capture_log(_Step(_raise(ValueError("KeyboardInterrupt")))), "generate_feedback")


def test_a_failed_step_that_only_says_keyboardinterrupt_is_a_failure():
    """Its text ends in the line a Ctrl-C's traceback ends in, but no Ctrl-C was pressed:
    "interrupted" would be the wrong diagnosis."""
    step = _Step(_raise(ValueError("the step failed\nKeyboardInterrupt")))
    assert capture_log(step)["error"].rstrip().endswith("\nKeyboardInterrupt")
    with pythons_ctrl_c(), pytest.raises(GradingError) as failed:
        run_step(lambda: capture_log(step), "autograde")
    assert "the step failed" in str(failed.value)


def test_a_failed_step_whose_log_names_the_sandbox_is_no_sandbox_error():
    """The learner's kernel can put any text in nbgrader's log (``test_adversarial.py`` does):
    only the grader's own record says the sandbox could not run (``execute.watch_sandbox``)."""
    def say_and_fail():
        _Step.log.error("SandboxUnavailable: bubblewrap is not installed")
        raise ValueError("the notebook broke the step")
    with pytest.raises(GradingError) as failed:
        run_step(lambda: capture_log(_Step(say_and_fail)), "autograde")
    assert not isinstance(failed.value, SandboxError) and "broke the step" in str(failed.value)
