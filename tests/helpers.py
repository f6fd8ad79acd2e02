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
