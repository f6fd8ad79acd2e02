"""What runs in the learner's kernel: the check cell and the graded cell.

``check(id, globals())`` runs the public cases and prints advice right away (the verdict
here is only advice: nothing in the kernel decides a grade). ``record(id, globals())``
runs public and hidden cases and prints the outputs as plain data for the judge; it never
raises, so one broken exercise costs that exercise only.
"""
from __future__ import annotations

import copy
import warnings

from autograder.exercise import Exercise, as_outputs
from autograder.exercises import by_function, get
from autograder.judge import NOT_IMPLEMENTED, helper_note, judge
from autograder.transport import MIME, encode_results


def _run(ex: Exercise, namespace: dict, cases: list) -> list:
    """Per case: the learner's outputs as a tuple of arrays, or the error as text."""
    if ex.call is None and ex.function not in namespace:
        missing = f"`{ex.function}` is not defined: run the cell that defines it first"
        return [missing] * len(cases)
    results = []
    for case in cases:
        try:
            results.append(as_outputs(ex.run_learner(namespace, copy.deepcopy(case))))
        except NotImplementedError:
            results.append(NOT_IMPLEMENTED)
        except Exception as err:  # any learner error is a result, not a crash
            results.append(f"{type(err).__name__}: {err}")
    return results


def check(exercise_id: str, namespace: dict) -> bool:
    """Run the public cases of an exercise and print a success line or a diagnosis."""
    ex = get(exercise_id)
    results = _run(ex, namespace, ex.all_cases(hidden=False))
    verdict = judge(ex, results, hidden=False)
    if verdict.passed == verdict.total:
        print(f"\u2714 {ex.function}: all {verdict.total} public cases match. "
              "Hidden cases are checked when you submit.")
        return True
    failing = {h for h in ex.helpers if not _passes_public_cases(h, exercise_id, namespace)}
    note = helper_note(ex, failing)
    print(f"\u2718 {ex.function}: " + "\n  ".join(verdict.messages + ([note] if note else [])))
    return False


def _passes_public_cases(function: str, exercise_id: str, namespace: dict) -> bool:
    """Whether the exercise of ``function`` (same topic as ``exercise_id``) passes its public cases."""
    ex = by_function(exercise_id, function)
    if ex is None:
        return True
    verdict = judge(ex, _run(ex, namespace, ex.all_cases(hidden=False)), hidden=False)
    return verdict.passed == verdict.total


def record(exercise_id: str, namespace: dict) -> None:
    """Run every case and display the outputs for the grader (no verdict here)."""
    from IPython.display import display

    try:
        ex = get(exercise_id)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results = _run(ex, namespace, ex.all_cases(hidden=True))
        payload = encode_results(exercise_id, results)
        summary = (f"Recorded {len(results)} cases of {exercise_id} for the grader; "
                   "the score is computed when you submit.")
    except Exception as err:  # the grader's own failure must still not stop the notebook
        payload = {"exercise": exercise_id, "cases": [], "failure": repr(err)}
        summary = f"Could not record {exercise_id}: {err!r}"
    display({MIME: payload, "text/plain": summary}, raw=True)
