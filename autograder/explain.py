"""Naming a mistake nobody listed: the mutant of the reference that the learner's outputs equal.

Trusted side only (the judge, in the grader and in the check cell). ``explain`` runs the
mutants of ``autograder.mutation`` on the cases a learner's function was graded on and keeps
those whose outputs equal the learner's on every case, failing and passing alike. If the
survivors all say the same thing, that change is told in plain words; if changes that say
different things fit (even at one place: "axis 0" or "every entry"?), nothing specific is
said (a wrong diagnosis is worse than none).

A mutant may loop or allocate without end (a loop bound changed): the search runs in a forked
child with a memory limit, a deadline per call and one for the whole search, after which no
claim is made. Where there is no ``fork`` (Windows) it runs in-process with the deadlines only.
"""
from __future__ import annotations

import copy
import json
import os
import select
import signal
import sys
import time

import numpy as np

from autograder.diagnose import close_per_output
from autograder.exercise import Exercise
from autograder.mutation import mutants
from autograder.transport import as_outputs

# CPU seconds, so that a busy grading machine gives the same diagnosis as an idle one
CALL_SECONDS = 0.5     # one mutant on one case (the reference takes milliseconds)
BUDGET_SECONDS = 10.0  # the whole search for one exercise
WALL_FACTOR = 4        # the parent gives up on the child after this many times the budget
MEMORY_BYTES = 2 << 30  # what the search may allocate beyond the process's size


class _Overtime(BaseException):  # not an Exception: a mutant's `except Exception` cannot hold it
    """A mutant ran past its deadline."""


def _alarm(signum, frame):
    raise _Overtime()


def _outputs(fn, case, timed: bool) -> tuple | None:
    try:
        if timed:
            signal.setitimer(signal.ITIMER_PROF, CALL_SECONDS)
        try:
            with np.errstate(all="ignore"):
                return as_outputs(fn(**case))
        finally:
            if timed:
                signal.setitimer(signal.ITIMER_PROF, 0)
    except (Exception, _Overtime):  # the deadline, MemoryError, any error of the mutant
        return None


def _equal(ex: Exercise, got: tuple | None, other: tuple | None) -> bool:
    """Equal within the exercise's tolerance; ``got`` None (the learner's code raised) is
    equalled by a mutant that raises too."""
    if got is None or other is None:
        return got is None and other is None
    return len(other) == len(got) and all(close_per_output(ex, got, other, equal_nan=True))


def _search(ex: Exercise, pairs: list, deadline: float) -> list[int]:
    every = mutants(ex)
    alive = list(range(len(every)))
    try:  # a deadline per call where signals can be had (the main thread)
        old = signal.signal(signal.SIGPROF, _alarm)
    except (AttributeError, ValueError):
        old = None
    try:
        for case, got in pairs:
            if time.process_time() > deadline:
                raise _Overtime()
            # each mutant gets its own copy: one that writes into its inputs must not change the next's
            alive = [i for i in alive if _equal(ex, got, _outputs(every[i].fn, copy.deepcopy(case), old is not None))]
            if not alive:
                break
    finally:
        if old is not None:
            signal.signal(signal.SIGPROF, old)
    return alive


def _vm_size() -> int:
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    except (OSError, StopIteration):
        return 0


def _in_child(ex: Exercise, pairs: list, budget: float) -> list[int] | None:
    """``_search`` in a forked child: a mutant's loop or allocation cannot hurt the grader."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: search, write the survivors' indexes, leave without clean-up
        status = 1
        try:
            os.close(read)
            import resource
            size = _vm_size()
            if size:
                resource.setrlimit(resource.RLIMIT_AS, (size + MEMORY_BYTES, size + MEMORY_BYTES))
            found = _search(ex, pairs, time.process_time() + budget)
            os.write(write, json.dumps(found).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write)
    chunks, end = [], time.monotonic() + WALL_FACTOR * budget + 1.0
    try:
        while True:
            left = end - time.monotonic()
            if left <= 0 or not select.select([read], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                return None
            chunk = os.read(read, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    try:
        return json.loads(b"".join(chunks))
    except ValueError:  # the child failed
        return None


def matching(ex: Exercise, pairs: list, budget: float = BUDGET_SECONDS) -> list | None:
    """The mutants of ``ex`` whose outputs equal ``got`` on every (case, got) pair; None when
    the search ran out of time or memory. Put the failing pairs first: they rule out the most."""
    every = mutants(ex)  # made here, so that a forked child inherits them
    if hasattr(os, "fork") and sys.platform.startswith("linux"):
        found = _in_child(ex, pairs, budget)
    else:
        try:
            found = _search(ex, pairs, time.process_time() + budget)
        except _Overtime:
            found = None
    return None if found is None else [every[i] for i in found]


def explain(ex: Exercise, failing: list, passing: list, raised: list = ()) -> str | None:
    """One sentence naming the change that turns the reference into the learner's code, or None.

    ``failing``: (case, got, want) triples; ``passing``: (case, got) pairs; ``raised``: the
    cases on which the learner's code raised (a mutant must raise there too).
    """
    if not failing or sum(int(np.size(w)) for _, _, want in failing for w in want) < 3:
        return None  # one or two numbers fit too many changes by chance
    found = matching(ex, [(c, g) for c, g, _ in failing] + [(c, None) for c in raised] + list(passing))
    if not found:
        return None
    if len({m.words for m in found}) != 1:  # two fits that say different things: no claim,
        return None                          # even at one place ("axis 0" or "every entry"?)
    return (f"Your code behaves like the right one with a single change: {found[0].words}. "
            "Look for that spot in your code.")
