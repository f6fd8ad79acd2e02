"""Learner code made from the instructor's solution cells: one edit, then the real grading path.

A bug bank entry or an alternative solution is written as an edit of one solution cell of
``solutions/`` (what a learner would type there), so the rest of the notebook's code is the
course's own. ``verdict_with`` runs the notebook's set-up cell and every solution cell, the
edited one in its place, through ``kernel.run_cases`` and ``judge``, as a graded cell does.
"""
from __future__ import annotations

import functools
import hashlib
import linecache

import nbformat
import numpy as np

from autograder.exercises import get
from autograder.judge.verdict import judge
from autograder.kernel import run_cases
from autograder.kernel.repair import decode_fixes, fixes
from autograder.paths import REPO
from exercise_bank import TEST_KEY, held_alone

SOLUTIONS = REPO / "solutions"


@functools.lru_cache(maxsize=None)
def _notebooks() -> dict:
    """grade_id -> (notebook path, set-up source, [(grade_id, source) of every solution cell])."""
    out = {}
    for path in sorted(SOLUTIONS.glob("*/*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        setup, cells = "", []
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type != "code":
                continue
            if meta.get("grade_id") == "setup":
                setup = cell.source
            elif meta.get("solution"):
                cells.append((meta["grade_id"], cell.source))
        for grade_id, _ in cells:
            out[grade_id] = (path, setup, cells)
    return out


def _grade_id(exercise_id: str) -> str:
    """The solution cell that defines ``exercise_id``'s function (its grade id)."""
    function = get(exercise_id).function
    for grade_id, (_, _, cells) in _notebooks().items():
        if f"def {function}(" in dict(cells)[grade_id]:
            return grade_id
    raise KeyError(f"no solution cell defines {function} ({exercise_id})")


def solution_source(exercise_id: str) -> str:
    """The solution cell of ``exercise_id`` as the instructor wrote it."""
    grade_id = _grade_id(exercise_id)
    _, _, cells = _notebooks()[grade_id]
    return dict(cells)[grade_id]


def edited(exercise_id: str, old: str, new: str) -> str:
    """The solution cell with its one occurrence of ``old`` replaced by ``new``."""
    source = solution_source(exercise_id)
    if source.count(old) != 1:
        raise ValueError(f"{exercise_id}: {old!r} occurs {source.count(old)} times in the solution cell")
    return source.replace(old, new)


def namespace_with(exercise_id: str, source: str | None = None) -> dict:
    """The notebook's set-up and solution cells run in order, ``exercise_id``'s cell replaced by
    ``source`` (None: as written)."""
    grade_id = _grade_id(exercise_id)
    _, setup, cells = _notebooks()[grade_id]
    scope = {"__name__": "__main__", "np": np}
    _run_cell(setup, scope)
    for gid, cell in cells:
        _run_cell(source if (gid == grade_id and source is not None) else cell, scope)
    return scope


def _run_cell(source: str, scope: dict) -> None:
    """Run a cell's source as IPython does: under a file name of its own, of the form IPython
    gives (so that the kernel's hints read the learner's lines, ``hints.CELL_FILE``), kept in
    ``linecache`` so that ``inspect.getsource`` finds the functions it defines."""
    name = f"<ipython-input-{hashlib.sha1(source.encode()).hexdigest()[:12]}>"
    linecache.cache[name] = (len(source), None, source.splitlines(keepends=True), name)
    exec(compile(source, name, "exec"), scope)


def verdict_with(exercise_id: str, source: str | None = None, key: bytes = TEST_KEY, public=False):
    """The judge's verdict on the notebook with ``exercise_id``'s solution cell replaced by
    ``source``: on the graded cases drawn from ``key``, or on the check cell's public cases.
    The search for a fix of the learner's code runs as in the graded cell: on the public
    and hidden-kind cases of a public seed (the probes); its fixes run on the cases graded."""
    return verdict_in(exercise_id, namespace_with(exercise_id, source), key, public)


def verdict_in(exercise_id: str, scope: dict, key: bytes = TEST_KEY, public=False):
    """``verdict_with``'s judge path on learner code already run into ``scope``."""
    ex = get(exercise_id)
    cases = ex.public_cases() if public else ex.graded_cases(key)
    changed = []  # per case, the inputs the learner's call changed in place
    results = run_cases(scope, ex.function, ex.call, cases, signature=ex.signature,
                        memory=ex.memory_limits(cases), changed=changed)
    alone = {} if public else held_alone(ex, cases, key, results, scope)
    probes, wants = ex.probes()
    found = lambda: decode_fixes(fixes(scope, ex.function, ex.call, probes, wants, cases, ex.rtol, ex.atol),
                                 len(cases))
    return judge(ex, cases, results, public=public, fixes=found, changed=changed, alone=alone)

