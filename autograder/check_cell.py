"""The check cell and ``show_case``: the public cases and the judge's advice. [learner's kernel]

In the learner's own kernel: the public cases, the judge's advice and a picture of the first
failing case. Never staged in the grading sandbox, and nothing here decides a grade.
"""
from __future__ import annotations

import contextlib
import copy
import threading
import warnings

import numpy as np

from autograder.exercises import by_function, get
from autograder.judge.features import in_words
from autograder.judge.verdict import helper_note, judge
from autograder.kernel.cases import DIAGNOSIS_SECONDS, grading_folder, run_cases
from autograder.kernel.repair import CHECK_SECONDS, CHECK_SHARE, decode_fixes, fixes
from autograder.kernel.transport import as_outputs
from autograder.picture import show_first_failure

PATIENCE = 1.0  # seconds before the check cell says that it is still looking


@contextlib.contextmanager
def _looking(after: float | None = None):
    """Print "Looking for the mistake…" once if the block runs longer than ``after`` seconds
    (``PATIENCE``), so that a learner waiting on the search sees more than a busy prompt."""
    timer = threading.Timer(PATIENCE if after is None else after, lambda: print("Looking for the mistake\u2026", flush=True))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def check(exercise_id: str, namespace: dict) -> None:
    """Run the public cases of an exercise and print a success line or a diagnosis.

    Returns nothing, so that the cell shows the message alone.
    """
    if grading_folder() is not None:
        print("Check cells do nothing while the notebook is graded.")
        return
    ex = get(exercise_id)
    cases = ex.public_cases()
    # numpy's RuntimeWarnings ("invalid value encountered in divide") from wrong code say less
    # than the verdict, and printed above it they read as if the check itself broke
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        changed = []
        with _looking():
            results = run_cases(namespace, ex.function, ex.call, cases, signature=ex.signature,
                                memory=ex.memory_limits(cases), changed=changed)
            verdict = judge(ex, cases, results, public=True, fixes=lambda: _public_fixes(ex, namespace, cases),
                            seconds=DIAGNOSIS_SECONDS, changed=changed)
    advice = _unavailable_while_graded(ex, namespace)
    if verdict.passed == verdict.total and not advice:
        print(f"\u2714 {ex.function}: all {verdict.total} public cases match. "
              "Hidden cases are checked when you submit.")
        return
    lines = list(verdict.messages) if verdict.passed < verdict.total else []
    failing = {h for h in ex.helpers if not _passes_public_cases(h, exercise_id, namespace)}
    if failing:
        lines.append(helper_note(ex, failing))
    lines += advice
    mark = "\u2718" if verdict.passed < verdict.total or advice else "\u2714"
    print(f"{mark} {ex.function}: " + "\n  ".join(line for line in lines if line)
          + f"\n  To look at a failing case: show_case({exercise_id!r}, <case number>).")
    if verdict.passed < verdict.total:
        show_first_failure(ex, cases, results)


def _public_fixes(ex, namespace: dict, cases: list) -> list:
    """The check cell's search for one edit that fixes the learner's code on the public cases."""
    probes, wants = ex.probes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = fixes(namespace, ex.function, ex.call, probes, wants, cases, ex.rtol, ex.atol,
                      budget=CHECK_SECONDS, wall=CHECK_SECONDS + 1.0, sites=round(CHECK_SHARE * ex.search_sites))
    return decode_fixes(found, len(cases))


def show_case(exercise_id: str, number: int) -> dict | None:
    """Print public case ``number`` (1-based, as the check cell counts) of an exercise: its
    inputs, what it exercises and the expected outputs. Returns the inputs as a dict of
    keyword arguments, so you can call your function on them: ``f(**show_case(...))``.
    """
    if grading_folder() is not None:
        print("show_case does nothing while the notebook is graded.")
        return None
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
    ex = by_function(exercise_id, function)
    if ex is None:
        return True
    cases = ex.public_cases()
    verdict = judge(ex, cases, run_cases(namespace, ex.function, ex.call, cases, signature=ex.signature,
                                         memory=ex.memory_limits(cases)), public=True)
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
