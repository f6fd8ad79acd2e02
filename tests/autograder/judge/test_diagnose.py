"""Generic diagnoses name bugs no mistake list foresaw: measured on the mutant bank."""
from collections import defaultdict

import numpy as np
import pytest

from autograder.exercises import get
from autograder.judge.verdict import judge
from autograder.kernel import run_cases
from exercise_bank import TEST_KEY
from mutant_bank import ENGINE_WORDS, MUTANTS

SHARE = 0.70  # the bar: at least this share of mutants gets a specific, correct message


def verdict_of(mutant):
    ex = get(mutant.exercise)
    namespace = {"np": np, "__name__": "__main__"}
    exec(mutant.source, namespace)
    cases = ex.graded_cases(TEST_KEY)
    return ex, judge(ex, cases, run_cases(namespace, ex.function, ex.call, cases))


@pytest.fixture(scope="module")
def verdicts():
    return [(m, *verdict_of(m)) for m in MUTANTS]


def test_every_mutant_loses_points_and_none_is_a_listed_mistake(verdicts):
    for m, ex, v in verdicts:
        assert v.points < v.max_points, f"{m.exercise}: {m.what[0]} scores full marks"
        text = " ".join(v.messages)
        assert not any(k.message() in text for k in ex.mistakes), \
            f"{m.exercise}: {m.what[0]} is a listed mistake; the bank is for the generic diagnoses"


def test_generic_diagnoses_name_most_mutants(verdicts):
    per_notebook = defaultdict(lambda: [0, 0])
    missed = []
    for m, _, v in verdicts:
        text = " ".join(v.messages)
        bug = m.what[0]
        named = all(words in text for words in m.says) or (bug in ENGINE_WORDS and ENGINE_WORDS[bug] in text)
        per_notebook[m.notebook][0] += named
        per_notebook[m.notebook][1] += 1
        if not named:
            missed.append(f"{m.exercise} ({m.what[0]}): {' '.join(v.messages)[:160]}")
    for notebook, (named, total) in sorted(per_notebook.items()):
        assert total >= 10, f"notebook {notebook} has only {total} mutants"
        print(f"notebook {notebook}: {named}/{total} named")
    named = sum(n for n, _ in per_notebook.values())
    print(f"all: {named}/{len(verdicts)} = {named / len(verdicts):.0%}; not named:", *missed, sep="\n  ")
    assert named / len(verdicts) >= SHARE


def test_hidden_case_feedback_names_features_not_numbers(verdicts):
    for m, ex, v in verdicts:
        first = next((line for line in v.messages if line.startswith("First difference")), "")
        if first:
            assert "hidden case" in first and "index" not in first and "got" not in first


def test_every_modelled_mistake_of_the_registry_loses_points_and_is_named():
    from autograder.exercises import all_exercises
    from exercise_bank import mistake_verdicts

    modelled = {(ex.id, m.name) for ex in all_exercises() for m in ex.mistakes if m.wrong}
    seen = 0
    for exercise_id, name, verdict in mistake_verdicts(all_exercises()):
        if (exercise_id, name) in modelled:
            seen += 1
            assert verdict.points < verdict.max_points and name in " ".join(verdict.messages), \
                (exercise_id, name, verdict.messages)
    assert seen == len(modelled) > 100


def test_no_boundary_is_claimed_on_the_batch_axis():
    """Errors only in the last sequence of the batch (the one with padding, say) are not told
    "wrong only at the last index of axis -4": the batch has no boundary to handle. The same
    errors at the last query position of every sequence are."""
    from autograder.judge.diagnose import where_wrong
    ex = get("encdec.masks")
    case = ex.public_cases()[0]
    want = ex.reference(**case)
    assert want[2].shape[0] >= 2 and want[2].shape[2] >= 4
    bad_batch = want[2].copy()
    bad_batch[-1, 0, 1:3, 0:2] = ~bad_batch[-1, 0, 1:3, 0:2]  # inside the last sequence's mask
    assert where_wrong(ex, [(case, (want[0], want[1], bad_batch), want)], 2) is None
    bad_query = want[2].copy()
    bad_query[:, :, -1, 0:2] = ~bad_query[:, :, -1, 0:2]
    said = where_wrong(ex, [(case, (want[0], want[1], bad_query), want)], 2)
    assert said is not None and "last index of axis -2" in said
