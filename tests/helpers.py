"""Shared test tools: run a notebook, grade one, make a mutant of a solution notebook."""
from __future__ import annotations

import os
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from autograder.grading import Result, grade_notebook

REPO = Path(__file__).resolve().parent.parent
SOLUTIONS = REPO / "solutions"
NOTEBOOKS = REPO / "notebooks"


def run_notebook(path: str | Path, mode: str = "ci", timeout: int = 300) -> nbformat.NotebookNode:
    """Execute a notebook top to bottom in COURSE_MODE=mode; any cell error fails the test."""
    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    old = os.environ.get("COURSE_MODE")
    os.environ["COURSE_MODE"] = mode
    try:
        NotebookClient(nb, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()
    finally:
        if old is None:
            os.environ.pop("COURSE_MODE", None)
        else:
            os.environ["COURSE_MODE"] = old
    return nb


def grade(path: str | Path, assignment: str | None = None) -> Result:
    """Grade a notebook through the real nbgrader pipeline."""
    return grade_notebook(path, assignment)


def mutant(solution_path: str | Path, grade_id: str, old: str, new: str, tmp_path: Path,
           base: str | Path | None = None) -> Path:
    """A copy of a solution notebook with ``old`` replaced by ``new`` in one solution cell.

    ``base`` lets several mutants (in different cells) pile up in one file; the result keeps
    the solution notebook's file name, so the grader finds its assignment.
    """
    src = Path(base or solution_path)
    nb = nbformat.read(src, as_version=4)
    cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id]
    assert len(cells) == 1, f"no single cell with grade_id {grade_id!r} in {src}"
    assert old in cells[0].source, f"{old!r} not in cell {grade_id!r}"
    cells[0].source = cells[0].source.replace(old, new)
    out = tmp_path / Path(solution_path).name
    nbformat.write(nb, out)
    return out


def grade_mutant_bank(solution: Path, edits, tmp_path: Path) -> None:
    """Apply ``edits`` to a solution notebook, grade it once, and check the verdicts.

    ``edits``: (grade_id, old, new, exercise_id, name) tuples. Each named exercise loses
    points and, when ``name`` is given, its feedback contains it (``exercise_id`` None: an
    edit that only sets up another one). Exercises no edit touched keep full marks, unless
    they run a touched function (``helpers``): then their feedback says so.
    """
    from autograder.exercises import get

    path = None
    for grade_id, old, new, *_ in edits:
        path = mutant(solution, grade_id, old, new, tmp_path, base=path)
    result = {e.id: e for e in grade(path).exercises}
    for _, _, _, exercise_id, name in edits:
        if exercise_id is None:
            continue
        verdict = result[exercise_id]
        assert verdict.points < verdict.max_points, (exercise_id, verdict.messages)
        if name:
            assert any(name in m for m in verdict.messages), (exercise_id, name, verdict.messages)
    touched = {e[3] for e in edits}
    broken = {get(i).function for i in touched if i}
    for i in set(result) - touched:
        if set(get(i).helpers) & broken and result[i].points < result[i].max_points:
            assert any("fix that first" in m for m in result[i].messages), (i, result[i].messages)
        else:
            assert result[i].points == result[i].max_points, (i, result[i].messages)
