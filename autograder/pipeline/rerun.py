"""The cases held to a memory limit, run again alone under a limit the learner cannot lift [trusted]

The kernel's count of a call's allocations runs in the learner's process, which can stop or
replace it (``autograder.kernel.fresh`` says how). So for each case with a memory limit that
the kernel got right, the grader runs the learner's function again (pickled by value in the
graded cell) in a fresh process of the sandbox, under the operating system's limit, on the
case's twin: a case of the same kind and shapes, drawn from the submission's key for this
purpose and never given to the kernel, so no answer prepared there fits it. The case keeps its
kernel result only if the twin's outputs, read back as plain data, equal the reference's.
"""
from __future__ import annotations

import hmac
import json
import sys
import time
from pathlib import Path
from typing import Callable

from autograder.judge.exercise import Exercise
from autograder.judge.verdict import close
from autograder.kernel.cases import CASE_SECONDS, CODE, WALL_FACTOR
from autograder.kernel.transport import as_outputs, decode_results, encode_cases, over_memory

SECONDS = 10  # of the notebook's time budget, kept for its reruns: an honest one takes under one
ALONE = "alone"  # resources["autograder"][ALONE]: graded cell index -> ``failures``
AGAIN = "run again alone in a fresh process, on a case of the same kind the grader drew for it"
# run(argv, stdin, timeout) -> standard output: ``Sandbox.run_alone``, or a plain process in tests
Runner = Callable[[list, str, float], str]


def twins(ex: Exercise, key: bytes) -> list:
    """Cases of the kinds of ``ex.graded_cases(key)``, in its order, with other values."""
    return ex.graded_cases(hmac.new(key, b"held alone: " + ex.id.encode(), "sha256").digest())


def limited(ex: Exercise, cases: list) -> list[int]:
    """The indices of the cases that ``ex`` holds to a memory limit."""
    return [i for i, c in enumerate(cases) if ex.memory is not None and ex.memory(c) is not None]


def failures(ex: Exercise, cases: list, key: bytes, payload, site: Path, run: Runner,
             deadline: float | None = None) -> dict[int, str]:
    """Case index -> why it fails after all: for each case with a memory limit whose kernel
    result is right, its twin run alone (``site``: where the sandbox stages ``autograder``)
    either went over the limit (``OVER_MEMORY``, as the verdict words it), raised, did not
    finish (by ``deadline`` on the monotonic clock, for all of a grading's reruns together),
    or gave other outputs than the reference's."""
    at = limited(ex, cases)
    if not at or not isinstance(payload, dict):
        return {}
    try:
        results = decode_results(payload)
    except (KeyError, ValueError, TypeError, AttributeError):
        return {}  # the judge says why the recorded outputs are unreadable
    if len(results) != len(cases):
        return {}
    code, drawn, out = payload.get(CODE), twins(ex, key), {}
    for i in at:
        got = results[i]
        if isinstance(got, str) or not close(ex, got, as_outputs(ex.reference(**cases[i]))):
            continue  # the kernel's own result already fails: its message says more
        twin = drawn[i]
        limit = (ex.memory(twin) or ex.memory(cases[i]))[0]  # one kind, one limit
        if not isinstance(code, str):
            out[i] = f"{AGAIN}: the graded cell could not pickle `{ex.function}` to run it there"
            continue
        spec = {**encode_cases(ex.id, ex.function, ex.call, [twin], ex.signature, memory=[limit]),
                CODE: code, "seconds": CASE_SECONDS}
        left = WALL_FACTOR * CASE_SECONDS + 10 if deadline is None else deadline - time.monotonic()
        stdout = run([sys.executable, str(site / "autograder" / "kernel" / "fresh.py"), str(limit)],
                     json.dumps(spec), min(left, WALL_FACTOR * CASE_SECONDS + 10)) if left > 1 else ""
        try:
            again = decode_results(json.loads(stdout))
            again = again[0] if len(again) == 1 else None
        except (ValueError, KeyError, TypeError, AttributeError):
            again = None
        if again is None:
            out[i] = f"{AGAIN}, it stopped without a result (a crash, or out of time)"
        elif over_memory(again) is not None:
            out[i] = again
        elif isinstance(again, str):
            out[i] = f"{AGAIN}: {again[:300]}"
        elif not close(ex, again, as_outputs(ex.reference(**twin))):
            out[i] = f"{AGAIN}, its outputs differ from the reference's there"
    return out
