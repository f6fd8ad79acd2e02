"""What the search for a fix of a learner's code costs per exercise, to set ``search_sites``.

The repair search (``autograder.kernel.repair``) is budgeted by a count of edits tried, the
exercise's ``search_sites``, so that a learner is told the same on a busy machine as on an idle
one; its CPU deadline (``SEARCH_SECONDS``) is only a backstop. This script runs the graded
cell's search on every wrong answer of the project's banks (as ``benchmarks/diagnosis.py``
gathers them), in this process and with the backstop far away, and prints per exercise: the
searches, how many ended at the count, their CPU time (median, worst), the CPU time of one edit
tried, the ``search_sites`` set and the count that about ``TARGET`` CPU seconds would buy. Set
an exercise's ``search_sites`` near that count (it need not be exact: the count, not the
seconds, decides what is said), and keep the worst time under half the backstop, so that a
machine twice as slow still ends every search at the count.

    python benchmarks/repair_search.py [--notebook 07 ...]

About 10 minutes for all the banks on a 2-core machine.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np
from tqdm import tqdm

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "benchmarks"), str(REPO / "tests"), str(REPO / "tests" / "autograder" / "exercises")]

from diagnosis import entries, scope_of  # noqa: E402
from exercise_bank import TEST_KEY  # noqa: E402

from autograder.exercises import get  # noqa: E402
from autograder.kernel import repair  # noqa: E402
from autograder.kernel.contained import _armed  # noqa: E402
from autograder.kernel.repair import SEARCH_SECONDS, SEARCH_SITES  # noqa: E402

TARGET = 3.0  # CPU seconds a search may take on this machine


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebook", nargs="+", help="only these notebooks (00 .. 07)")
    args = parser.parse_args(argv)
    todo = [(b, e) for b, e in entries() if e.kind != "correct" and (not args.notebook or e.notebook in args.notebook)]
    warnings.simplefilter("ignore")
    runs = defaultdict(list)  # exercise -> (CPU seconds, edits tried, how it stopped)
    for bank, entry in tqdm(todo, desc="searching", unit="answer"):
        ex = get(entry.exercise)
        scope = scope_of(bank, entry)
        probes, wants = ex.probes()
        cases = ex.graded_cases(TEST_KEY)
        start = time.process_time()
        with np.errstate(all="ignore"):
            _armed(lambda deadline: repair._search(scope, ex.function, ex.call, probes, wants, cases, ex.rtol,
                                                   ex.atol, deadline, ex.search_sites), 20 * SEARCH_SECONDS)
        if repair.last_search.get("sites"):  # a search ran (the probes failed)
            runs[ex.id].append((time.process_time() - start, repair.last_search["sites"], repair.last_search["stop"]))
    print(f"\nsearch_sites default {SEARCH_SITES}, backstop {SEARCH_SECONDS} CPU s, target {TARGET} s\n")
    print("| exercise | searches | at the count | CPU s median | CPU s worst | ms per edit | search_sites | "
          f"sites in {TARGET:g} s |")
    print("|---|---|---|---|---|---|---|---|")
    worst = 0.0
    for exercise, these in sorted(runs.items()):
        seconds = [s for s, _, _ in these]
        per_site = statistics.median(s / n for s, n, _ in these)
        counted = sum(stop == "count" for _, _, stop in these)
        worst = max(worst, max(seconds))
        print(f"| {exercise} | {len(these)} | {counted} | {statistics.median(seconds):.2f} | {max(seconds):.2f} | "
              f"{1e3 * per_site:.2f} | {get(exercise).search_sites} | {round(TARGET / per_site, -2):.0f} |")
    print(f"\nworst search {worst:.2f} CPU s: {worst / SEARCH_SECONDS:.0%} of the backstop")


if __name__ == "__main__":
    main()
