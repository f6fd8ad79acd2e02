"""How much work a notebook cell should do: full, ci or grade mode.

Set by the environment variable ``COURSE_MODE``:
- ``full`` (default): what a learner runs; training cells train for real.
- ``ci``: the test suite; every cell runs, long loops are cut short.
- ``grade``: the autograder; long cells do the least that keeps later cells working.
  nbgrader sets ``NBGRADER_EXECUTION`` while it runs a notebook, which selects this mode
  whatever ``COURSE_MODE`` says (a learner who set ``COURSE_MODE=full`` and submits from
  the notebook must not have the grader train for minutes).
Graded exercises never depend on training results, so the mode never changes a score.
"""
from __future__ import annotations

import os

MODES = ("full", "ci", "grade")


def mode() -> str:
    if os.environ.get("NBGRADER_EXECUTION"):
        return "grade"
    value = os.environ.get("COURSE_MODE", "full")
    if value not in MODES:
        raise ValueError(f"COURSE_MODE={value!r}; expected one of {', '.join(MODES)}")
    return value


def pick(full, ci, grade=None):
    """``full`` in full mode, ``ci`` in CI mode, ``grade`` (default: ``ci``) when grading.

    >>> steps = pick(full=3000, ci=200, grade=0)
    """
    return {"full": full, "ci": ci, "grade": ci if grade is None else grade}[mode()]


def progress(iterable, **kwargs):
    """``iterable`` wrapped in a progress bar with an ETA (tqdm), shown in full mode only.

    In the CI and grading modes the loops are short and their output is kept clean: the bar
    is disabled (it still iterates and accepts ``set_postfix``). Keyword arguments go to tqdm.

    >>> for step in progress(range(steps), desc="training"): ...
    """
    # lazy: tqdm.auto takes 0.1 s; every notebook imports this module, some never show a bar
    from tqdm.auto import tqdm

    return tqdm(iterable, disable=mode() != "full", **kwargs)
