"""Correct solutions written differently from the instructor's get full marks and no diagnosis.

Each alternative of ``alternative_solutions.ALTERNATIVES`` is graded once (a module-scoped
fixture), through the real path of a graded cell (``solution_cells.verdict_with``), on the
graded cases drawn from three keys and on the check cell's public cases. Every verdict must
give every point with the single line "All N cases match the reference.": a right answer
reached another way must never be told it looks like a mistake.
"""
from __future__ import annotations

from collections import Counter

import pytest

from alternative_solutions import ALTERNATIVES
from exercise_bank import TEST_KEY
from learner_code import notebooks
from solution_cells import solution_source, verdict_with

KEYS = (TEST_KEY, b"second key for the alternatives", b"third key for the alternatives")
RUNS = {**{f"graded, key {n}": dict(key=key) for n, key in enumerate(KEYS, 1)},
        "public": dict(public=True)}


def _ids():
    seen = Counter()
    for alt in ALTERNATIVES:
        seen[alt.exercise] += 1
        yield f"{alt.exercise}-{seen[alt.exercise]}"


IDS = list(_ids())


@pytest.fixture(scope="module")
def verdicts():
    """id -> {run: Verdict}: every alternative graded once per run."""
    return {name: {run: verdict_with(alt.exercise, alt.source, **kwargs)
                   for run, kwargs in RUNS.items()}
            for name, alt in zip(IDS, ALTERNATIVES)}


@pytest.mark.parametrize("name", IDS)
def test_full_marks_and_no_diagnosis(verdicts, name):
    alt = ALTERNATIVES[IDS.index(name)]
    problems = []
    for run, v in verdicts[name].items():
        if not v.full_marks or v.messages != [f"All {v.total} cases match the reference."]:
            problems.append(f"{run}: {v.points} of {v.max_points} points; {v.messages}")
    assert not problems, f"{alt.exercise} ({alt.how}):\n" + "\n".join(problems)


@pytest.mark.parametrize("name", IDS)
def test_written_differently_in_plain_numpy(name):
    alt = ALTERNATIVES[IDS.index(name)]
    assert alt.source.strip() != solution_source(alt.exercise).strip()
    for module in ("torch", "scipy", "course_lib"):
        assert module not in alt.source, f"{name} uses {module}, absent while graded"


def test_the_bank_covers_the_course():
    assert len(ALTERNATIVES) >= 24
    per_notebook = Counter(alt.notebook for alt in ALTERNATIVES)
    assert all(per_notebook[nb] >= 2 for nb in notebooks()), per_notebook
    assert len({alt.exercise for alt in ALTERNATIVES}) >= 16
    assert len({(alt.exercise, alt.source) for alt in ALTERNATIVES}) == len(ALTERNATIVES)
