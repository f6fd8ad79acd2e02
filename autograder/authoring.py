"""Build the cells of a solution notebook (for authors; the committed .ipynb is the source). [trusted]

>>> nb.cells += [solution_cell("def f(x):\\n    return x", "warmup.f"),
...              check_cell("warmup.f"), graded_cell("warmup.f")]
"""
from __future__ import annotations

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell

from autograder.exercises import get


def _meta(grade_id: str, *, solution: bool, grade: bool, locked: bool, points=None) -> dict:
    meta = {"grade": grade, "solution": solution, "locked": locked,
            "grade_id": grade_id, "schema_version": 3}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


def grade_id(exercise_id: str) -> str:
    return exercise_id.replace(".", "_")


def solution_cell(body: str, exercise_id: str) -> nbformat.NotebookNode:
    """``body`` holds the whole cell; the solution part sits between the BEGIN/END markers."""
    if "### BEGIN SOLUTION" not in body:
        raise ValueError("a solution cell needs ### BEGIN SOLUTION / ### END SOLUTION markers")
    return new_code_cell(body, metadata=_meta(grade_id(exercise_id), solution=True,
                                              grade=False, locked=False))


def check_cell(exercise_id: str) -> nbformat.NotebookNode:
    get(exercise_id)  # fails early on a typo
    return new_code_cell(f'check("{exercise_id}", globals())')


def graded_cell(exercise_id: str) -> nbformat.NotebookNode:
    ex = get(exercise_id)
    # The import is repeated here so that a learner's own `record` cannot stand in for it.
    source = (f"# Graded: {ex.signature}. Do not edit.\n"
              f'from autograder.kernel import record\nrecord("{exercise_id}", globals())')
    return new_code_cell(source, metadata=_meta("grade_" + grade_id(exercise_id), solution=False,
                                                grade=True, locked=True, points=ex.points))


def exercise_cells(exercise_id: str, intro_md: str, body: str) -> list[nbformat.NotebookNode]:
    """Markdown introduction, solution, check and graded cell of one exercise."""
    return [new_markdown_cell(intro_md), solution_cell(body, exercise_id),
            check_cell(exercise_id), graded_cell(exercise_id)]
