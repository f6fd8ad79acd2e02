"""Shared check for an exercise module: each registered mistake loses points and is named."""
from __future__ import annotations

from autograder.diagnose import safe_outputs
from autograder.judge import judge

TEST_KEY = b"a key for the tests, not a secret"  # graded cases are drawn from a key


def mistake_verdicts(exercises):
    """(exercise id, mistake name, verdict when a submission behaves exactly like the mistake)."""
    for ex in exercises:
        cases = ex.graded_cases(TEST_KEY)
        for m in ex.mistakes:
            results = [safe_outputs(m.wrong, c) or "raised" for c in cases]
            yield ex.id, m.name, judge(ex, cases, results)
