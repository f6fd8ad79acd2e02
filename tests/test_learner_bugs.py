"""How today's grader names the learner bugs of ``learner_bugs.py`` (one edit of a solution cell).

The first test keeps the bank honest: every edit applies, the notebook still runs and no
registered mistake recognises the bug. ``test_report`` sorts the verdicts into "not caught",
"named", "named wrongly", "pinpointed" and "generic" and prints a table per notebook; run it
with ``-s`` to see it. Thresholds on the shares come once the new diagnosis engine exists.
"""
from collections import Counter, defaultdict

import pytest

from learner_bugs import BUGS, NOTEBOOKS, notebook_of
from solution_cells import edited, verdict_with

CLASSES = ("not caught", "named", "named wrongly", "pinpointed", "generic")


def verdict_or_error(bug):
    """The judge's verdict on the bug's edited notebook (graded cases, TEST_KEY), or why there
    is none (the edit does not apply, or the notebook's cells do not run)."""
    try:
        return verdict_with(bug.exercise, edited(bug.exercise, bug.old, bug.new))
    except Exception as e:
        return f"{type(e).__name__}: {e}"


@pytest.fixture(scope="module")
def verdicts():
    return {bug: verdict_or_error(bug) for bug in BUGS}


def classify(bug, verdict) -> str:
    if verdict.full_marks:
        return "not caught"
    if verdict.kind in ("specific", "listed"):
        text = " ".join(verdict.messages).lower()
        return "named" if any(word.lower() in text for word in bug.expect) else "named wrongly"
    return "pinpointed" if verdict.kind == "pinpoint" else "generic"


def test_every_bug_applies_and_is_not_a_listed_mistake(verdicts):
    assert len(set(BUGS)) == len(BUGS), "a bug is in the bank twice"
    broken = [f"{b.exercise}: {b.bug}: {v}" for b, v in verdicts.items() if isinstance(v, str)]
    assert not broken, "edits that do not apply or run:\n  " + "\n  ".join(broken)
    listed = [f"{b.exercise}: {b.bug}" for b, v in verdicts.items() if v.kind == "listed"]
    assert not listed, "registered mistakes, not bugs for the bank:\n  " + "\n  ".join(listed)


def test_report(verdicts):
    assert not any(isinstance(v, str) for v in verdicts.values()), "see the test above"
    table = defaultdict(Counter)
    members = defaultdict(list)
    for bug, verdict in verdicts.items():
        cls = classify(bug, verdict)
        table[notebook_of(bug.exercise)][cls] += 1
        members[cls].append(f"[{notebook_of(bug.exercise)}] {bug.exercise}: {bug.bug}\n"
                            f"      {' | '.join(verdict.messages)[:200]}")
    total = sum(table.values(), Counter())
    print("\nnotebook " + "".join(f"{c:>15}" for c in CLASSES) + f"{'bugs':>8}")
    for notebook in sorted(table) + ["all"]:
        row = total if notebook == "all" else table[notebook]
        print(f"{notebook:8} " + "".join(f"{row[c]:>15}" for c in CLASSES) + f"{sum(row.values()):>8}")
    for cls in CLASSES:
        print(f"\n{cls} ({len(members[cls])}):", *members[cls], sep="\n  ")

    for notebook in NOTEBOOKS:
        assert sum(table[notebook].values()) >= 11, f"notebook {notebook} has fewer than 11 bugs"
    assert len(BUGS) >= 88
