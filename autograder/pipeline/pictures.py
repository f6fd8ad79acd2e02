"""The pictures a grading report shows, drawn in the grader's own process [trusted]

A report has no browser to draw widgets and runs none of the course's teaching cells, so two
kinds of picture are made here, as embedded PNG images (no network):

- **where a graded cell's matrix is wrong**: the check cell's difference picture
  (``autograder.picture``) for each failing *public* case, the check cell's own cases, which a
  learner may look at anyway (``show_case``). The graded cell runs them after its graded cases
  (``shown_cases``: the case file's ``SHOWN``) and records their outcomes beside the graded
  ones; they are advice, never the score, and a payload that cannot be read draws nothing.
  The hidden cases are never drawn: the report does not print their values either.
- **the course's own figures in teaching cells**: a code cell of the course's source whose
  metadata names a figure (``"autograder": {"report_picture": "module:function"}``; the
  instructor's source, never the learner's metadata) gets that function's picture in the
  report (``report.ReportGrades``), drawn from course code alone, when the learner's cell is
  the course's unchanged.

Drawing is bounded: at most ``PER_EXERCISE`` pictures per graded cell and ``SECONDS`` for a
report; what is left out is said.
"""
from __future__ import annotations

import base64
import copy
import importlib
import io
import time
from functools import lru_cache

import numpy as np
from nbformat.v4 import new_output

from autograder.exercises import get
from autograder.kernel.cases import SHOWN
from autograder.kernel.transport import as_outputs, decode_results, encode_value
from autograder.picture import case_figure, failing_matrices

PER_EXERCISE = 3     # pictures under one graded cell: the first failing public cases
SECONDS = 8.0        # for all of a report's pictures (one takes about 0.2 s); then a line says so
DPI = 72             # 12 x 4 inches: 864 x 288 pixels, about 40 KB
REPORT_PICTURE = "report_picture"  # the key of a course cell's "autograder" metadata


@lru_cache(maxsize=256)
def _public(exercise_id: str) -> tuple[list, list]:
    """The public cases of an exercise and the reference's outputs on them (the same for every
    learner: computed once per process)."""
    ex = get(exercise_id)
    cases = ex.public_cases()
    return cases, [as_outputs(ex.reference(**copy.deepcopy(c))) for c in cases]


def shown_cases(ex) -> dict:
    """What the case file of ``ex`` adds for the report's pictures: its public cases where at
    least one has a matrix output (``SHOWN`` and their memory limits), else nothing."""
    cases, wants = _public(ex.id)
    if not any(np.ndim(a) >= 2 for want in wants for a in want):
        return {}
    return {SHOWN: [encode_value(c) for c in cases], "shown_memory": ex.memory_limits(cases)}


def png_output(fig, text: str) -> dict:
    """A display output holding ``fig`` as an embedded PNG, with ``text`` where images are not shown."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    return new_output("display_data", data={"image/png": base64.b64encode(buffer.getvalue()).decode(),
                                            "text/plain": text})


class Budget:
    """The time a report's pictures may still take (``SECONDS`` from the first)."""

    def __init__(self, seconds: float = SECONDS):
        self.until = time.monotonic() + seconds

    @property
    def left(self) -> bool:
        return time.monotonic() < self.until


def difference_outputs(ex, payload: dict, budget: Budget) -> list:
    """The report's pictures of the failing public cases whose outcomes ``payload`` (the graded
    cell's, already checked by ``wire``) recorded, as outputs; [] where none can be drawn."""
    shown = payload.get(SHOWN)
    if not isinstance(shown, list):
        return []
    cases, wants = _public(ex.id)
    try:
        results = decode_results({"cases": shown})
    except ValueError:
        return []
    if len(results) != len(cases):
        return []  # not the outcomes of the cases sent
    failing = list(failing_matrices(ex, results, wants))
    outputs = []
    for k, (number, i) in enumerate(failing):
        if k == PER_EXERCISE or not budget.left:
            rest = ", ".join(str(n) for n, _ in failing[k:])
            why = "" if k == PER_EXERCISE else " (the report's time for pictures ran out)"
            outputs.append(new_output("stream", name="stdout", text=(
                f"Not drawn here{why}: public case{'s' if len(failing) - k > 1 else ''} {rest}; the "
                f"check cell draws the first, and show_case({ex.id!r}, n) prints any.\n")))
            break
        try:
            fig = case_figure(ex, number, cases[number - 1], results[number - 1], wants[number - 1], i)
        except Exception:  # noqa: BLE001  a picture is advice: one that cannot be drawn is left out
            fig = None
        if fig is not None:
            outputs.append(png_output(fig, f"{ex.function}, public case {number}: yours, expected "
                                           "and the difference (a picture)"))
    return outputs


@lru_cache(maxsize=16)
def course_picture(name: str) -> dict:
    """The output of the course figure ``name`` ("course_lib.module:function", a function of no
    arguments returning a matplotlib Figure or an object with ``static()``), drawn once per
    process. Raises ValueError for a name outside ``course_lib``."""
    module, _, function = name.partition(":")
    if not module.startswith("course_lib.") or not function.isidentifier() or function.startswith("_"):
        raise ValueError(f"a report picture is a function of course_lib, not {name!r}")
    made = getattr(importlib.import_module(module), function)()
    fig = made.static() if hasattr(made, "static") else made
    return png_output(fig, f"{function.replace('_', ' ')} (a picture: reports draw no widgets)")


def course_outputs(name: str | None, log) -> list:
    """The outputs of a teaching cell whose course source names the figure ``name`` (None: no
    figure, no outputs); should drawing it fail, none, and a line in ``log``."""
    if not name:
        return []
    try:
        return [course_picture(name)]
    except Exception as err:  # noqa: BLE001  the course's own figure failing costs no grade
        log.warning("the report picture %s could not be drawn: %s: %s", name, type(err).__name__, str(err)[:300])
        return []
