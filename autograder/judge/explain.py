"""Naming an unlisted mistake: the mutant of the reference that fits. [trusted; also the check cell]

Trusted side only (the judge, in the grader and in the check cell). ``explain`` runs the
mutants of ``autograder.judge.mutation`` on the cases a learner's function was graded on and keeps
those whose outputs equal the learner's on every case, failing and passing alike. If the
survivors all say the same thing, that change is told in plain words; if changes that say
different things fit, nothing specific is said (a wrong diagnosis is worse than none), except
for two changes of the same spot ("over axes (-2, -1)" or "over every entry" of a 2-D array),
which are both told. A name swapped for another that the words cannot show (the reference's
own names) is never told: "one variable for another" gives the learner no spot to look at.

A mutant may loop or allocate without end (a loop bound changed): the search runs in a forked
child with a memory limit, a deadline per call and one for the whole search
(``autograder.kernel.contained``), after which no claim is made.
"""
from __future__ import annotations

import copy
import time

import numpy as np

from autograder.kernel.contained import Overtime, call_within, in_child
from autograder.kernel.operators import ANONYMOUS_SWAP
from autograder.judge.diagnose import close_per_output
from autograder.judge.exercise import Exercise
from autograder.judge.mutation import mutants, mutants_by
from autograder.kernel.transport import as_outputs

BUDGET_SECONDS = 10.0  # CPU seconds for the whole search of one exercise (a busy grading
                       # machine gives the same diagnosis as an idle one)


def _outputs(fn, case) -> tuple | None:
    try:
        with np.errstate(all="ignore"):
            return call_within(lambda: as_outputs(fn(**case)))
    except (Exception, Overtime):  # the deadline, MemoryError, any error of the mutant
        return None


def output_kind(a: np.ndarray) -> str:
    """What an output is, as far as an exercise can promise it: "scalar" (a 0-d array, any
    number), "bool" (a boolean array), "int" (an integer array) or "other" (float, complex).
    Here a mutant's outputs must be of the learner's kinds; the verdict holds each output to the
    reference's (``verdict._kind_promised``)."""
    return "scalar" if a.ndim == 0 else "bool" if a.dtype == bool else "int" if a.dtype.kind in "iu" else "other"


def _equal(ex: Exercise, got: tuple | None, other: tuple | None) -> bool:
    """Equal within the exercise's tolerance and of the same kind (a float mask is not the
    boolean one: the judge takes points for it); ``got`` None (the learner's code raised) is
    equalled by a mutant that raises too."""
    if got is None or other is None:
        return got is None and other is None
    return len(other) == len(got) and all(close_per_output(ex, got, other, equal_nan=True)) and \
        all(output_kind(g) == output_kind(o) for g, o in zip(got, other))


def _search(ex: Exercise, pairs: list, deadline: float) -> list[int]:
    every = mutants(ex)
    alive = list(range(len(every)))
    for case, got in pairs:
        if time.process_time() > deadline:
            raise Overtime()
        # each mutant gets its own copy: one that writes into its inputs must not change the next's
        alive = [i for i in alive if _equal(ex, got, _outputs(every[i].fn, copy.deepcopy(case)))]
        if not alive:
            break
    return alive


def matching(ex: Exercise, pairs: list, budget: float = BUDGET_SECONDS, wall: float | None = None) -> list | None:
    """The mutants of ``ex`` whose outputs equal ``got`` on every (case, got) pair; None when
    the search ran out of time (``budget`` CPU seconds, ``wall`` on the clock) or memory. Put
    the failing pairs first: they rule out the most."""
    # made here, so that a forked child inherits them; with a bound on the clock (the check
    # cell), only if they are made within it (the next call goes on from there)
    end = None if wall is None else time.monotonic() + wall
    every = mutants(ex) if end is None else mutants_by(ex, end)
    if every is None or end is not None and end - time.monotonic() < 0.05:
        return None
    if end is not None:
        budget = wall = min(budget, end - time.monotonic())
    found = in_child(lambda deadline: _search(ex, pairs, deadline), budget, wall)
    return None if found is None else [every[i] for i in found]


def explain(ex: Exercise, failing: list, passing: list, raised: list = (),
            budget: float = BUDGET_SECONDS, wall: float | None = None) -> str | None:
    """One sentence naming the change that turns the reference into the learner's code, or None.

    ``failing``: (case, got, want) triples; ``passing``: (case, got) pairs; ``raised``: the
    cases on which the learner's code raised (a mutant must raise there too).
    """
    if not failing or sum(int(np.size(w)) for _, _, want in failing for w in want) < 3:
        return None  # one or two numbers fit too many changes by chance
    found = matching(ex, [(c, g) for c, g, _ in failing] + [(c, None) for c in raised] + list(passing), budget, wall)
    if not found:
        return None
    words = list(dict.fromkeys(m.words for m in found))
    if any(w.startswith(ANONYMOUS_SWAP) for w in words):
        return None  # "one variable for another", neither named: no spot to look at (and on few cases, chance)
    if len(words) == 1:
        return (f"Your code behaves like the right one with a single change: {words[0]}. "
                "Look for that spot in your code.")
    # two fits that say different things: no claim, unless both change the same spot (the
    # cases cannot tell "over axes (-2, -1)" from "over every entry" of a 2-D array): then both
    if len(words) == 2 and len({(m.host, m.site) for m in found}) == 1:
        return (f"Your code behaves like the right one with one change at one spot, which these "
                f"cases cannot pin down: {words[0]}, or {words[1]}. Look for that spot in your code.")
    return None
