"""The graded cell, run where the learner's code runs: in the grading sandbox. [sandbox]

``record(id, globals())`` is the graded cell: while a notebook is
graded, the grader has written the exercise's cases (public and hidden, drawn from a secret
seed) to a read-only folder named by ``$AUTOGRADER_CASES``; ``record`` runs the learner's
function on them and displays the outputs as plain data, which the grader, outside the
sandbox, compares with the reference. ``record`` never raises, and a case that runs too long
is stopped, so one broken exercise costs that exercise only.

Nothing here decides a grade: the exercise registry, the judge and the references are absent
from the sandbox. The check cell (``autograder.check_cell``) runs ``run_cases`` in the
learner's own kernel.
"""
from __future__ import annotations

import base64
import copy
import os
import signal
import time
import tracemalloc
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from autograder.kernel import wire
from autograder.kernel.calls import run
from autograder.kernel.hints import describe_error
from autograder.kernel.transport import (COUNTED, MIME, NOT_IMPLEMENTED, STOPPED, OverMemory, Raised, as_outputs,
                                        decode_cases, decode_probes, encode_results)

CASES_ENV = "AUTOGRADER_CASES"
PICKLE = "pickle"        # the cases file: the grader runs cases again alone, so the payload holds
CODE = "code"            # the learner's function, pickled (``pickled``)
SHOWN = "shown"          # the cases file: public cases whose outputs the report draws, and the
                         # payload: their outcomes (advice only: the graded cases are the score)
SHOWN_SECONDS = 1.0      # CPU seconds for them, taken from the search for a fix
CASE_SECONDS = 5.0       # CPU seconds; one case of an honest exercise takes milliseconds
EXERCISE_SECONDS = 12.0  # CPU seconds for all cases of one exercise
WALL_FACTOR = 4          # a case that waits is stopped after this many times CASE_SECONDS on the
                         # clock, and all cases together after EXERCISE_SECONDS on the clock
DIAGNOSIS_SECONDS = 1.4  # the check cell's search for a name of the mistake (it answers within 2 s)
CELL_SECONDS = 13.5      # the graded cell ends within this many seconds on the clock (the grader
                         # stops a cell after 15): the search for a fix gets what the cases left


class CaseTimeout(Exception):
    """A case ran past its time limit (raised by the alarm in ``_time_limit``)."""


def grading_folder() -> Path | None:
    """The folder of cases files while the grader runs this kernel, else None."""
    folder = os.environ.get(CASES_ENV)
    return Path(folder) if folder else None


@contextmanager
def _time_limit(seconds: float, wall_seconds: float):
    """Raise CaseTimeout in the code below after ``seconds`` of CPU time, or ``wall_seconds``
    on the clock (code that sleeps), whichever comes first (main thread only).

    CPU time, not the clock, so that the same code gets the same result on a busy grading
    machine (a class graded in parallel) as on an idle one.
    """
    def alarm(signum, frame):
        raise CaseTimeout(signum)
    try:
        old = signal.signal(signal.SIGPROF, alarm), signal.signal(signal.SIGALRM, alarm)
    except ValueError:  # not the main thread: no alarm, the grader's cell timeout still holds
        yield
        return
    signal.setitimer(signal.ITIMER_PROF, seconds)
    signal.setitimer(signal.ITIMER_REAL, wall_seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGPROF, old[0])
        signal.signal(signal.SIGALRM, old[1])


@contextmanager
def _allocations():
    """Count what the code below allocates (numpy's arrays and Python's objects, as Python's
    ``tracemalloc`` sees them): ``count["peak"]`` is the most it held at once beyond what
    existed before, in bytes; -1 when the code stopped the count (``tracemalloc.stop()``).

    A count, not a clock: the same code gets the same number on a busy machine."""
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    count = {"peak": -1}
    try:
        yield count
    finally:
        if tracemalloc.is_tracing():
            count["peak"] = max(0, tracemalloc.get_traced_memory()[1] - base)
            if started:
                tracemalloc.stop()


def _bounded(namespace: dict, function: str, call: str | None, case: dict, limit: int | None):
    """The learner's outputs on ``case``; with a ``limit`` in bytes, an ``OverMemory`` instead
    when the call held more than that at once (an exercise whose text promises tiles, never
    the whole matrix)."""
    if limit is None:
        return as_outputs(run(namespace, function, call, case))
    with _allocations() as count:
        result = run(namespace, function, call, case)
    if count["peak"] < 0:
        return OverMemory(STOPPED)
    if count["peak"] > limit:
        return OverMemory(COUNTED, count["peak"])
    return as_outputs(result)


def _same(a, b) -> bool:
    """Whether an input is as it was: arrays equal (floats up to rounding, NaN to NaN), dicts,
    lists and tuples item by item, anything else by ``==``."""
    if isinstance(a, np.ndarray):
        if not isinstance(b, np.ndarray) or a.shape != b.shape:
            return False
        if a.dtype.kind in "fc" and b.dtype.kind in "fc":
            return bool(np.allclose(a, b, rtol=1e-9, atol=1e-12, equal_nan=True))
        return bool(np.array_equal(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    try:
        return bool(a == b)
    except Exception:  # an object whose == fails says nothing
        return True


def changed_in_place(case: dict, given: dict) -> list[str]:
    """The arguments whose values a call changed: ``given`` is the copy of ``case`` it was given."""
    return [name for name in case if not _same(case[name], given.get(name))]


def run_cases(namespace: dict, function: str, call: str | None, cases: list,
              budget: float | None = None, signature: str | None = None,
              memory: list | None = None, changed: list | None = None) -> list:
    """Per case, its outcome: the learner's outputs as a tuple of arrays, or a ``Raised``
    (``transport.NOT_IMPLEMENTED`` for the release's stub) or an ``OverMemory``.

    ``budget``: seconds of CPU time for all the cases together; they also get as many seconds
    on the clock, so that a graded cell ends before the grader's cell timeout. ``memory``:
    per case, the bytes the call may hold at once (None: no limit); a case past it gives an
    ``OverMemory``. ``changed``: a list to which, per case, the names of the
    inputs the call changed in place are appended."""
    results, left, wall_left = [], budget, budget
    limits = list(memory or ()) + [None] * (len(cases) - len(memory or ()))
    for case, allowed in zip(cases, limits):
        if left is not None and (left <= 0 or wall_left <= 0):
            results.append(Raised(f"not run: the earlier cases used up the {budget:g} s for this exercise"))
            continue
        limit = CASE_SECONDS if left is None else min(CASE_SECONDS, left)
        wall = WALL_FACTOR * CASE_SECONDS if wall_left is None else min(WALL_FACTOR * CASE_SECONDS, wall_left)
        start, wall_start = time.process_time(), time.monotonic()
        given = copy.deepcopy(case)
        try:
            with _time_limit(limit, wall):
                results.append(_bounded(namespace, function, call, given, allowed))
        except CaseTimeout as stop:
            waited = "" if stop.args and stop.args[0] == signal.SIGPROF else " (it was waiting: input, sleep, a lock?)"
            results.append(Raised(f"did not finish within {limit:.0f} s (an endless loop?)" if not waited
                                  else f"did not finish within {wall:.0f} s{waited}"))
        except BaseException as err:  # any learner error (sys.exit() too) is a result, not a crash
            stub = type(err) is NotImplementedError  # the release's `raise NotImplementedError()`
            results.append(NOT_IMPLEMENTED if stub else Raised(describe_error(err, function, signature)))
        if changed is not None:
            changed.append(changed_in_place(case, given))
        if left is not None:
            left -= time.process_time() - start
            wall_left -= time.monotonic() - wall_start
    return results


def pickled(namespace: dict, function: str) -> str | None:
    """The learner's ``function`` with what it reads from the notebook, pickled by value
    (``cloudpickle``) as base64 text, for the grader to run alone (``fresh``); None when it
    cannot be (those cases then fail, saying so)."""
    # lazy: cloudpickle (40 ms) only in graded cells whose cases the grader runs again alone
    import cloudpickle

    try:
        return base64.b64encode(cloudpickle.dumps(namespace[function])).decode()
    except Exception:  # not defined, or something it holds does not pickle
        return None


def record(exercise_id: str, namespace: dict) -> None:
    """The graded cell: run the cases the grader wrote and display the outputs as data."""
    # lazy: IPython (0.1 s) for the graded cell alone: every trusted process that imports
    # autograder (the command, the workers) runs this module too
    from IPython.display import display

    folder = grading_folder()
    if folder is None:
        print(f"This cell hands your code for {exercise_id} to the grader when you submit; "
              "the check cell above tests it now.")
        return
    start = time.monotonic()
    try:
        # the grader's file, read-only in the sandbox; but $AUTOGRADER_CASES is the kernel's own to
        # change, and without isolation the folder is the learner's: read as any message is
        spec = wire.loads((folder / f"{exercise_id}.json").read_bytes())
        cases = decode_cases(spec)
        changed = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results = run_cases(namespace, spec["function"], spec["call"], cases,
                                budget=EXERCISE_SECONDS, signature=spec.get("signature"),
                                memory=spec.get("memory"), changed=changed)
        payload = encode_results(exercise_id, results)
        payload["changed"] = changed
        if spec.get(PICKLE):  # the grader runs some of these cases again alone (``fresh``)
            payload[CODE] = pickled(namespace, spec["function"])
        summary = f"Recorded {len(results)} cases of {exercise_id} for the grader."
        if spec.get(SHOWN):
            payload[SHOWN] = _shown(namespace, spec)
        payload["fixes"] = _fixes(namespace, spec, cases, CELL_SECONDS - (time.monotonic() - start))
    except Exception as err:  # the kernel side's own failure must still not stop the notebook
        payload = {"exercise": exercise_id, "cases": [], "failure": repr(err)}
        summary = f"Could not record {exercise_id}: {err!r}"
    display({MIME: payload, "text/plain": summary}, raw=True)


def _shown(namespace: dict, spec: dict) -> list:
    """The outcomes of the public cases the report draws (their encoded form; [] should
    running them fail here): advice only, so they never cost the graded outputs."""
    try:
        shown = decode_cases({"cases": spec[SHOWN]})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results = run_cases(namespace, spec["function"], spec["call"], shown, budget=SHOWN_SECONDS,
                                signature=spec.get("signature"), memory=spec.get("shown_memory"))
        return encode_results(spec["exercise"], results)["cases"]
    except Exception:
        return []


def _fixes(namespace: dict, spec: dict, cases: list, seconds: float) -> list:
    """The graded cell's search for one edit that fixes the learner's code (``repair``), in
    what is left of ``seconds`` on the clock; advice only, so it never costs the outputs."""
    if seconds <= 1.0:
        return []
    try:
        # lazy: repair and its operators (30 ms) only when a graded cell searches for a fix, so
        # every notebook's `from autograder import ...` stays light
        from autograder.kernel.repair import SEARCH_SECONDS, fixes
        probes, wants, rtol, atol, sites = decode_probes(spec.get("probes"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fixes(namespace, spec["function"], spec["call"], probes, wants, cases, rtol, atol,
                         budget=min(SEARCH_SECONDS, seconds - 0.5), wall=seconds - 0.5, sites=sites)
    except Exception:
        return []
