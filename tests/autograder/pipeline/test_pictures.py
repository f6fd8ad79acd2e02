"""pipeline/pictures.py: what a report draws, from what the graded cell recorded, and what not.

The pictures are advice: a payload that does not hold the outcomes of the cases sent draws
nothing and raises nothing; a picture's time and number are bounded; a course figure is a
function of ``course_lib`` only. The whole path (graded cell, sandbox, report in a browser) is
in test_feedback.py.
"""
import logging

import numpy as np
import pytest

from autograder.exercises import get
from autograder.kernel.cases import SHOWN, _shown
from autograder.kernel.transport import as_outputs
from autograder.pipeline.pictures import (PER_EXERCISE, Budget, course_outputs, course_picture,
                                          difference_outputs, shown_cases)

SOFTMAX = get("warmup.softmax")


def _softmax(z, axis=-1):
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _recorded(function, ex=SOFTMAX) -> dict:
    """The payload's ``SHOWN`` entry as the graded cell makes it, ``function`` its learner's code."""
    spec = {"exercise": ex.id, "function": ex.function, "call": ex.call, "signature": ex.signature,
            **shown_cases(ex)}
    return {SHOWN: _shown({ex.function: function}, spec)}


def _images(outputs) -> list:
    return [o for o in outputs if "image/png" in o.get("data", {})]


def test_only_exercises_with_a_matrix_output_send_public_cases_to_draw():
    assert SHOWN in shown_cases(SOFTMAX)
    assert shown_cases(get("scaling.param_count")) == {}  # numbers only: nothing to draw


def test_a_right_answer_draws_nothing_and_a_wrong_one_its_failing_cases():
    assert difference_outputs(SOFTMAX, _recorded(_softmax), Budget()) == []
    wrong = difference_outputs(SOFTMAX, _recorded(lambda z, axis=-1: _softmax(z, 0)), Budget())
    images = _images(wrong)
    assert 1 <= len(images) <= PER_EXERCISE
    assert all(o["data"]["text/plain"].startswith("softmax, public case ") for o in images)


def test_more_failing_cases_than_drawn_are_named():
    outputs = difference_outputs(SOFTMAX, _recorded(lambda z, axis=-1: 2 * _softmax(z, axis)), Budget())
    failing = [i for i, c in enumerate(SOFTMAX.public_cases(), 1)
               if any(np.ndim(a) >= 2 for a in as_outputs(SOFTMAX.reference(**c)))]
    assert len(failing) > PER_EXERCISE and len(_images(outputs)) == PER_EXERCISE
    rest = ", ".join(map(str, failing[PER_EXERCISE:]))
    assert outputs[-1]["text"].startswith(f"Not drawn here: public case{'s' * (len(failing) > PER_EXERCISE + 1)} {rest};")


def test_no_time_left_draws_nothing_and_says_so():
    outputs = difference_outputs(SOFTMAX, _recorded(lambda z, axis=-1: 2 * _softmax(z, axis)), Budget(0))
    assert not _images(outputs) and "the report's time for pictures ran out" in outputs[0]["text"]


@pytest.mark.parametrize("shown", [None, "cases", {"a": 1}, [], [{"outputs": 3}] * 2, [7] * 40])
def test_outcomes_that_are_not_those_of_the_cases_sent_draw_nothing(shown):
    assert difference_outputs(SOFTMAX, {SHOWN: shown}, Budget()) == []


def test_an_unreadable_case_among_the_outcomes_costs_its_picture_only():
    recorded = _recorded(lambda z, axis=-1: _softmax(z, 0))
    wrong = len(_images(difference_outputs(SOFTMAX, recorded, Budget())))
    recorded[SHOWN][0] = {"outputs": "not arrays"}
    assert len(_images(difference_outputs(SOFTMAX, recorded, Budget()))) >= wrong - 1


def test_running_the_public_cases_in_the_kernel_never_raises():
    spec = {"exercise": SOFTMAX.id, "function": "softmax", "call": None, SHOWN: "not a list of cases"}
    assert _shown({"softmax": _softmax}, spec) == []
    spec = {**spec, **shown_cases(SOFTMAX)}
    outcomes = _shown({}, spec)  # no function of that name: each case raised, none lost
    assert len(outcomes) == len(SOFTMAX.public_cases()) and all("raised" in o for o in outcomes)


@pytest.mark.parametrize("name", ["os:system", "course_lib.viz:_HALF", "course_lib.viz:toy_explorer()",
                                  "builtins:print", "course_lib:"])
def test_a_course_figure_is_a_public_function_of_course_lib(name, caplog):
    with pytest.raises(ValueError):
        course_picture(name)
    with caplog.at_level(logging.WARNING):
        assert course_outputs(name, logging.getLogger("test")) == []
    assert "could not be drawn" in caplog.text


def test_the_explorer_of_notebook_02_is_drawn_once_per_process():
    first = course_picture("course_lib.viz:toy_explorer")
    assert first["data"]["image/png"] and course_picture("course_lib.viz:toy_explorer") is first
