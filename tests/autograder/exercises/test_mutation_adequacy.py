"""Case adequacy: every mutant of every exercise's reference loses points
(``autograder.exercises.adequacy``).

The graded cases of each exercise, drawn from several keys, must tell every mutant that
reaches the outputs from the reference, unless it is listed in ``Exercise.equivalent`` with a
reason; a listed mutant that the cases do kill is stale and must go from the list.
"""
import pytest

from autograder.exercises.adequacy import KEYS, check
from autograder.exercises import all_exercises

EXERCISES = all_exercises()


@pytest.mark.parametrize("ex", EXERCISES, ids=[ex.id for ex in EXERCISES])
def test_graded_cases_kill_every_mutant(ex):
    report = check(ex, KEYS[:3])
    print(f"{ex.id}: {report.live} mutants reach the outputs, {report.listed} listed as equivalent, "
          f"score {report.score:.1%}")
    assert report.total > 0, f"{ex.id}: no mutant made from its reference"
    unexplained = [f"{m.id!r}: {m.words}" for m in report.unexplained]
    assert not unexplained, f"{ex.id}: mutants keep full marks:\n  " + "\n  ".join(unexplained)
    stale = [k for k in ex.equivalent if k not in report.survivors]
    assert not stale, f"{ex.id}: listed as equivalent but killed (or no longer made): {stale}"
