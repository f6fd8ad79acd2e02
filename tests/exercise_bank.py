"""Shared check for an exercise module: each registered mistake loses points and is named."""
from __future__ import annotations

from autograder.judge import _safe_outputs, judge


def mistake_verdicts(exercises):
    """(exercise id, mistake name, verdict when a submission behaves exactly like the mistake)."""
    for ex in exercises:
        cases = ex.all_cases(hidden=True)
        for m in ex.mistakes:
            results = [_safe_outputs(m.wrong, c) or "raised" for c in cases]
            yield ex.id, m.name, judge(ex, results)
