"""How well the feedback names mistakes, over the project's banks of learner code; anyone can rerun it.

Grades every entry of the four banks in ``tests/`` (``learner_bugs``: one edit of a solution
cell, a bug nobody listed; ``mutant_bank``: a learner's function alone; ``two_mistake_bank``:
cells with one or two mistakes, and right ones; ``alternative_solutions``: right cells written
another way) through the grader's judge path (graded cases, re-runs alone, the repair search),
and runs the check cell (``autograder.check``) on the same code. Prints, per notebook and per
kind:

- a wrong answer: **named** (every mistake named: the message holds the words the bank gives
  for each, or for one mistake an edit of the learner's line that makes every case match, on
  a line the bank's edit wrote), **one of two** (a two-mistake answer with one of them named), **named otherwise**
  (a specific or listed message with none of those words: read it, it may be a wrong claim),
  **named wrongly** (an edit of a line the bank's edit did not write),
  **pinpointed** (which output, which cases), **generic** (a count and the first difference),
  **not caught** (full marks);
- a right answer: full marks with nothing more said, or not;
- the check cell: the wrong answers it passes while the grader takes points, and its time;
- per listed mistake of the exercises, how often its name was said and how often rightly
  (the entry's own words were in the message too): precision over the banks;
- messages over 400 characters that quote no line of the learner's.

    python benchmarks/diagnosis.py [--bank two_mistake_bank ...] [--notebook 05 ...]
                                   [--markdown docs/diagnosis.md] [--json out.json]

About 10 minutes for all ~410 entries on a 2-core machine (each is graded once and checked once).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import platform
import statistics
import sys
import time
import warnings
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
from tqdm import tqdm

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "autograder" / "exercises")]

from autograder.check_cell import check  # noqa: E402
from autograder.exercises import get  # noqa: E402
from learner_code import LearnerCode, notebooks  # noqa: E402
from solution_cells import _run_cell, edited, namespace_with, verdict_in  # noqa: E402

BANKS = ("learner_bugs", "mutant_bank", "two_mistake_bank", "alternative_solutions")
WRONG = ("named", "one of two", "named otherwise", "named wrongly", "pinpointed", "generic", "not caught")
LONG = 400           # characters: a message longer than this should be split or cut
QUOTES = "line of yours"  # a message that quotes the learner's own line may be longer


def entries(banks=BANKS) -> list[tuple[str, LearnerCode]]:
    """(bank, entry) for every entry of ``banks``."""
    import importlib

    out = []
    for bank in banks:
        module = importlib.import_module(bank)
        found = {"learner_bugs": ["BUGS"], "mutant_bank": ["MUTANTS"], "alternative_solutions": ["ALTERNATIVES"],
                 "two_mistake_bank": ["ANSWERS", "CORRECT"]}[bank]
        out += [(bank, entry) for name in found for entry in getattr(module, name)]
    return out


def edited_lines(entry: LearnerCode) -> set[str]:
    """The lines of an edit entry's cell that its edit wrote (stripped); empty for a whole source."""
    if not entry.edit:
        return set()
    from test_learner_bugs import edited_lines as lines_of
    return lines_of(entry)


def reviewed() -> dict[str, str]:
    """Sentences reviewed by hand as right names of a bank's bug (an equivalent change said
    another way), by the bug's words: they count as naming it."""
    from mutant_bank import ENGINE_WORDS
    from test_learner_bugs import REVIEWED
    return {**ENGINE_WORDS, **REVIEWED}


def scope_of(bank: str, entry: LearnerCode) -> dict:
    """The namespace the entry's code runs in, as in its bank's tests."""
    if bank == "mutant_bank":  # a function alone, numpy as np
        scope = {"__name__": "__main__", "np": np}
        _run_cell(entry.source, scope)
        return scope
    source = edited(entry.exercise, *entry.edit) if entry.edit else entry.source
    return namespace_with(entry.exercise, source)


def told(entry: LearnerCode, text: str, extra: dict) -> list[bool]:
    """Per mistake of the entry, whether ``text`` names it."""
    low = text.lower()
    says = bool(entry.says) and all(s in text for s in entry.says)
    out = []
    for i, what in enumerate(entry.what):
        words = entry.names[i] if entry.names else ()
        out.append(says or any(w.lower() in low for w in words) or (what in extra and extra[what] in text))
    return out


def grade(bank: str, entry: LearnerCode, extra: dict) -> dict:
    """One entry graded and checked: its class, the check cell's word, times, messages."""
    start = time.perf_counter()
    verdict = verdict_in(entry.exercise, scope_of(bank, entry))
    graded = time.perf_counter() - start
    out = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out):
        check(entry.exercise, scope_of(bank, entry))
    checked = time.perf_counter() - start
    text = " ".join(verdict.messages)
    check_text = out.getvalue()
    row = dict(bank=bank, exercise=entry.exercise, notebook=entry.notebook, kind=entry.kind,
               what=list(entry.what) or [entry.how], messages=verdict.messages, points=verdict.points,
               max_points=verdict.max_points, grade_s=graded, check_s=checked,
               check_passes="\u2714" in check_text and "\u2718" not in check_text, check=check_text[:600])
    if entry.kind == "correct":
        row["class"] = "full, silent" if verdict.full_marks and len(verdict.messages) == 1 else \
            "full, told more" if verdict.full_marks else "points lost"
        return row
    named = told(entry, text, extra)
    # a line of the learner's with an edit that makes every case match: for an edit of the
    # solution, right if it is a line the edit wrote; for a whole cell of one mistake, right
    # (confirmed on every case)
    wrote = edited_lines(entry)
    if verdict.lines and entry.kind == "single" and not all(named):
        named = [not wrote or bool(set(verdict.lines) & wrote)]
        if not named[0]:
            row["class"] = "named wrongly"
    row["named"] = named
    row["class"] = row.get("class") or ("not caught" if verdict.full_marks else
                    "named" if all(named) else
                    "one of two" if any(named) else
                    "named otherwise" if verdict.kind in ("listed", "specific") else
                    "pinpointed" if verdict.kind == "pinpoint" else "generic")
    row["listed"] = [m.name for m in get(entry.exercise).mistakes if m.name in text]
    return row


def tables(rows: list[dict]) -> str:
    """The report, as markdown tables."""
    lines = []
    wrong = [r for r in rows if r["kind"] != "correct"]
    for kind in ("single", "two"):
        these = [r for r in wrong if r["kind"] == kind]
        if not these:
            continue
        lines += [f"\n### {kind} mistake{'s' if kind == 'two' else ''} ({len(these)} answers)\n",
                  "| notebook | " + " | ".join(WRONG) + " | all |", "|---" * (len(WRONG) + 2) + "|"]
        for nb in notebooks() + ["all"]:
            part = [r for r in these if nb in ("all", r["notebook"])]
            if part:
                count = Counter(r["class"] for r in part)
                lines.append(f"| {nb} | " + " | ".join(str(count[c]) for c in WRONG) + f" | {len(part)} |")
    right = [r for r in rows if r["kind"] == "correct"]
    if right:
        count = Counter(r["class"] for r in right)
        lines += [f"\n### right answers ({len(right)})\n",
                  "| full marks, nothing more said | full marks, told more | points lost |", "|---|---|---|",
                  f"| {count['full, silent']} | {count['full, told more']} | {count['points lost']} |"]
    if wrong:
        said = sum(r["class"] in ("named", "one of two") for r in wrong)
        two = [r for r in wrong if r["kind"] == "two"]
        lose = sum(r["class"] != "not caught" for r in wrong)
        lines += ["\n### shares\n", f"- lose points: {lose}/{len(wrong)} = {lose / len(wrong):.0%}",
                  f"- named (one of two counts): {said}/{len(wrong)} = {said / len(wrong):.0%}"]
        if two:
            both = sum(r["class"] in ("named", "one of two") for r in two)
            lines.append(f"- two-mistake answers named: {both}/{len(two)} = {both / len(two):.0%}")
        passes = [r for r in wrong if r["check_passes"] and r["class"] != "not caught"]
        lines.append(f"- check cell passes, grader takes points: {len(passes)}"
                     + "".join(f"\n  - {r['exercise']}: {'; '.join(r['what'])}" for r in passes))
    fired = defaultdict(lambda: [0, 0])
    for r in wrong:
        for name in r.get("listed", []):
            fired[(r["exercise"], name)][0] += 1
            fired[(r["exercise"], name)][1] += any(r["named"])
    if fired:
        lines += ["\n### listed mistakes said (precision over the banks)\n",
                  "| exercise | mistake | said | with the entry's own words |", "|---|---|---|---|"]
        lines += [f"| {ex} | {name} | {n} | {ok} |" for (ex, name), (n, ok) in sorted(fired.items())]
    long = [m for r in rows for m in r["messages"] if len(m) > LONG and QUOTES not in m]
    grade_s, check_s = [r["grade_s"] for r in rows], [r["check_s"] for r in rows]
    lines += ["\n### time and length\n",
              f"- grading one answer: median {statistics.median(grade_s):.2f} s, worst {max(grade_s):.2f} s",
              f"- check cell: median {statistics.median(check_s):.2f} s, worst {max(check_s):.2f} s",
              f"- messages over {LONG} characters quoting no line of the learner's: {len(long)}"]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bank", nargs="+", choices=BANKS, default=list(BANKS))
    parser.add_argument("--notebook", nargs="+", help="only these notebooks (00 .. 07)")
    parser.add_argument("--markdown", type=Path, help="also write the report here")
    parser.add_argument("--json", type=Path, help="write every row here")
    args = parser.parse_args(argv)
    todo = [(b, e) for b, e in entries(args.bank) if not args.notebook or e.notebook in args.notebook]
    extra = reviewed()
    warnings.simplefilter("ignore")
    rows = []
    with np.errstate(all="ignore"):
        for bank, entry in tqdm(todo, desc="grading the banks", unit="answer"):
            rows.append(grade(bank, entry, extra))
    report = tables(rows)
    print(report)
    if args.markdown:
        head = (f"# How well the feedback names mistakes\n\nMade by `python benchmarks/diagnosis.py "
                f"--markdown {args.markdown}` on {time.strftime('%Y-%m-%d')}, {platform.machine()}, "
                f"{len(rows)} answers of the banks {', '.join(args.bank)}.\n")
        args.markdown.write_text(head + report + "\n")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=str))


if __name__ == "__main__":
    main()
