"""What runs in the learner's kernel: the check cell and the graded cell.

``check(id, globals())`` runs the public cases and prints advice right away; nothing in the
kernel decides a grade. ``record(id, globals())`` is the graded cell: while a notebook is
graded, the grader has written the exercise's cases (public and hidden, drawn from a secret
seed) to a read-only folder named by ``$AUTOGRADER_CASES``; ``record`` runs the learner's
function on them and displays the outputs as plain data, which the grader, outside the
sandbox, compares with the reference. ``record`` never raises, and a case that runs too long
is stopped, so one broken exercise costs that exercise only.

This module runs in the grading sandbox, where the exercise registry, the judge and the
references are absent: it imports them only inside ``check``, which does nothing there.
"""
from __future__ import annotations

import copy
import json
import os
import signal
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

from autograder.calls import run
from autograder.hints import describe_error
from autograder.transport import MIME, NOT_IMPLEMENTED, as_outputs, decode_cases, decode_probes, encode_results

CASES_ENV = "AUTOGRADER_CASES"
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


def run_cases(namespace: dict, function: str, call: str | None, cases: list,
              budget: float | None = None, signature: str | None = None) -> list:
    """Per case: the learner's outputs as a tuple of arrays, or the error as text.

    ``budget``: seconds of CPU time for all the cases together; they also get as many seconds
    on the clock, so that a graded cell ends before the grader's cell timeout."""
    results, left, wall_left = [], budget, budget
    for case in cases:
        if left is not None and (left <= 0 or wall_left <= 0):
            results.append(f"not run: the earlier cases used up the {budget:g} s for this exercise")
            continue
        limit = CASE_SECONDS if left is None else min(CASE_SECONDS, left)
        wall = WALL_FACTOR * CASE_SECONDS if wall_left is None else min(WALL_FACTOR * CASE_SECONDS, wall_left)
        start, wall_start = time.process_time(), time.monotonic()
        try:
            with _time_limit(limit, wall):
                results.append(as_outputs(run(namespace, function, call, copy.deepcopy(case))))
        except CaseTimeout as stop:
            waited = "" if stop.args and stop.args[0] == signal.SIGPROF else " (it was waiting: input, sleep, a lock?)"
            results.append(f"did not finish within {limit:.0f} s (an endless loop?)" if not waited
                           else f"did not finish within {wall:.0f} s{waited}")
        except BaseException as err:  # any learner error (sys.exit() too) is a result, not a crash
            stub = type(err) is NotImplementedError  # the release's `raise NotImplementedError()`
            results.append(NOT_IMPLEMENTED if stub else describe_error(err, function, signature))
        if left is not None:
            left -= time.process_time() - start
            wall_left -= time.monotonic() - wall_start
    return results


def record(exercise_id: str, namespace: dict) -> None:
    """The graded cell: run the cases the grader wrote and display the outputs as data."""
    from IPython.display import display

    folder = grading_folder()
    if folder is None:
        print(f"This cell hands your code for {exercise_id} to the grader when you submit; "
              "the check cell above tests it now.")
        return
    start = time.monotonic()
    try:
        spec = json.loads((folder / f"{exercise_id}.json").read_text())
        cases = decode_cases(spec)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results = run_cases(namespace, spec["function"], spec["call"], cases,
                                budget=EXERCISE_SECONDS, signature=spec.get("signature"))
        payload = encode_results(exercise_id, results)
        summary = f"Recorded {len(results)} cases of {exercise_id} for the grader."
        payload["fixes"] = _fixes(namespace, spec, cases, CELL_SECONDS - (time.monotonic() - start))
    except Exception as err:  # the kernel side's own failure must still not stop the notebook
        payload = {"exercise": exercise_id, "cases": [], "failure": repr(err)}
        summary = f"Could not record {exercise_id}: {err!r}"
    display({MIME: payload, "text/plain": summary}, raw=True)


def _fixes(namespace: dict, spec: dict, cases: list, seconds: float) -> list:
    """The graded cell's search for one edit that fixes the learner's code (``repair``), in
    what is left of ``seconds`` on the clock; advice only, so it never costs the outputs."""
    if seconds <= 1.0:
        return []
    try:
        from autograder.repair import SEARCH_SECONDS, fixes
        probes, wants, rtol, atol = decode_probes(spec.get("probes"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fixes(namespace, spec["function"], spec["call"], probes, wants, cases, rtol, atol,
                         budget=min(SEARCH_SECONDS, seconds - 0.5), wall=seconds - 0.5)
    except Exception:
        return []


def check(exercise_id: str, namespace: dict) -> None:
    """Run the public cases of an exercise and print a success line or a diagnosis.

    Returns nothing, so that the cell shows the message alone.
    """
    if grading_folder() is not None:
        print("Check cells do nothing while the notebook is graded.")
        return
    from autograder.exercises import get
    from autograder.judge import judge

    ex = get(exercise_id)
    cases = ex.public_cases()
    results = run_cases(namespace, ex.function, ex.call, cases, signature=ex.signature)
    verdict = judge(ex, cases, results, public=True, fixes=lambda: _public_fixes(ex, namespace, cases),
                    seconds=DIAGNOSIS_SECONDS)
    advice = _unavailable_while_graded(ex, namespace)
    if verdict.passed == verdict.total and not advice:
        print(f"\u2714 {ex.function}: all {verdict.total} public cases match. "
              "Hidden cases are checked when you submit.")
        return
    lines = list(verdict.messages) if verdict.passed < verdict.total else []
    failing = {h for h in ex.helpers if not _passes_public_cases(h, exercise_id, namespace)}
    if failing:
        from autograder.judge import helper_note
        lines.append(helper_note(ex, failing))
    lines += advice
    mark = "\u2718" if verdict.passed < verdict.total or advice else "\u2714"
    print(f"{mark} {ex.function}: " + "\n  ".join(line for line in lines if line)
          + f"\n  To look at a failing case: show_case({exercise_id!r}, <case number>).")
    if verdict.passed < verdict.total:
        from autograder.picture import show_first_failure  # the learner's kernel only, never staged
        show_first_failure(ex, cases, results)


def _public_fixes(ex, namespace: dict, cases: list) -> list:
    """The check cell's search for one edit that fixes the learner's code on the public cases."""
    from autograder.repair import CHECK_SECONDS, decode_fixes, fixes
    probes, wants = ex.probes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = fixes(namespace, ex.function, ex.call, probes, wants, cases, ex.rtol, ex.atol, budget=CHECK_SECONDS)
    return decode_fixes(found, len(cases))


def show_case(exercise_id: str, number: int) -> dict | None:
    """Print public case ``number`` (1-based, as the check cell counts) of an exercise: its
    inputs, what it exercises and the expected outputs. Returns the inputs as a dict of
    keyword arguments, so you can call your function on them: ``f(**show_case(...))``.
    """
    if grading_folder() is not None:
        print("show_case does nothing while the notebook is graded.")
        return None
    import numpy as np
    from autograder.exercises import get
    from autograder.features import in_words

    ex = get(exercise_id)
    cases = ex.public_cases()
    if not 1 <= number <= len(cases):
        print(f"{exercise_id} has public cases 1 to {len(cases)}.")
        return None
    case = copy.deepcopy(cases[number - 1])
    want = as_outputs(ex.reference(**copy.deepcopy(case)))
    with np.printoptions(precision=4, suppress=True, threshold=200, edgeitems=3):
        print(f"{exercise_id}, public case {number} of {len(cases)} ({in_words(ex.describe(case))})")
        print(f"call: {ex.signature}")
        for name, value in case.items():
            shape = f" shape {value.shape} {value.dtype}" if isinstance(value, np.ndarray) else ""
            print(f"\n{name}{shape}:\n{value!r}")
        for i, value in enumerate(want):
            print(f"\nexpected {ex.name_of(i)} shape {value.shape}:\n{value!r}")
    return case


def _passes_public_cases(function: str, exercise_id: str, namespace: dict) -> bool:
    """Whether the exercise of ``function`` (same topic as ``exercise_id``) passes its public cases."""
    from autograder.exercises import by_function
    from autograder.judge import judge

    ex = by_function(exercise_id, function)
    if ex is None:
        return True
    cases = ex.public_cases()
    verdict = judge(ex, cases, run_cases(namespace, ex.function, ex.call, cases,
                                             signature=ex.signature), public=True)
    return verdict.passed == verdict.total


def _unavailable_while_graded(ex, namespace: dict) -> list[str]:
    """Advice: modules the learner's function reaches that the grading sandbox does not hold.

    Follows the global names the function (and the learner's functions it calls) reads. This
    is only advice, so that the check cell warns before a submission scores 0: the grade does
    not depend on it, since those modules are absent from the sandbox.
    """
    seen, hits = set(), set()
    todo = [namespace.get(f) for f in (ex.function, *ex.helpers)]
    while todo:
        fn = todo.pop()
        code = getattr(fn, "__code__", None)
        if code is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        for name in _global_names(code):
            obj = namespace.get(name)
            module = getattr(obj, "__name__", None) if type(obj).__name__ == "module" \
                else getattr(obj, "__module__", None)
            if isinstance(module, str) and any(module == f or module.startswith(f + ".")
                                               for f in ex.forbidden):
                hits.add(f"`{name}` (from `{module}`)")
            elif getattr(obj, "__module__", None) == "__main__":
                todo.append(obj)
    if not hits:
        return []
    return [f"`{ex.function}` uses {', '.join(sorted(hits))}, which is not available while the "
            "notebook is graded: this exercise asks you to write it yourself."]


def _global_names(code) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _global_names(const)
    return names
