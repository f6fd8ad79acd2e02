"""Turn whatever a learner submitted into a notebook nbgrader can grade; say what was wrong. [trusted]

Runs in the trusted parent before nbgrader sees the file, so no submission can make nbgrader
fail ("Please see the above traceback") or touch another learner's grade. The notebook is
rebuilt cell by cell from the parsed JSON, against the assignment's source:

- unreadable (empty, not JSON, not a notebook, too large) or another assignment's notebook:
  graded as the blank release, with a note naming the problem;
- nbformat 3 and 4 are read (cells rebuilt as version 4; odd cells dropped);
- nbgrader metadata is the source's for every grade id the source knows, and dropped from
  cells claiming an unknown id or the wrong cell type; of duplicated ids the last cell keeps
  it (the others stay as plain cells);
- a course cell that is missing (a deleted graded or set-up cell) is put back below the
  nearest course cell that precedes it in the source.

The notes go into a markdown cell at the top of the graded notebook, so the HTML feedback
shows them too.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_raw_cell

from autograder.paths import SOLUTIONS

MAX_BYTES = 20 << 20
NOTES_HEADING = "**Notes from the grader on this submission**"
MAKERS = {"code": new_code_cell, "markdown": new_markdown_cell, "raw": new_raw_cell}


@dataclass
class Prepared:
    nb: nbformat.NotebookNode
    notes: list[str] = field(default_factory=list)


def _grade_id(cell) -> str | None:
    meta = cell.get("metadata", {}).get("nbgrader")
    gid = meta.get("grade_id") if isinstance(meta, dict) else None
    return gid if isinstance(gid, str) else None


def _parse(path: Path) -> tuple[list | None, str | None]:
    """The raw cells of a notebook file, or None and why it cannot be read."""
    try:
        size = path.stat().st_size
    except OSError as err:
        return None, f"could not be opened ({err.strerror})"
    if size == 0:
        return None, "is empty"
    if size > MAX_BYTES:
        return None, f"is {size / 2**20:.0f} MB, more than the {MAX_BYTES >> 20} MB the grader reads"
    try:
        nb = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except ValueError as err:
        return None, f"is not a notebook nbformat can read (not JSON: {str(err)[:120]})"
    if not isinstance(nb, dict):
        return None, "is not a notebook nbformat can read (not a JSON object)"
    cells = nb.get("cells")
    if cells is None and isinstance(nb.get("worksheets"), list):  # nbformat 3
        cells = [c for w in nb["worksheets"] if isinstance(w, dict) for c in w.get("cells", [])]
    if not isinstance(cells, list):
        return None, "is not a notebook nbformat can read (no list of cells)"
    return cells, None


def _rebuild(raw) -> nbformat.NotebookNode | None:
    """A fresh, valid cell with the raw cell's type, source and nbgrader metadata."""
    if not isinstance(raw, dict):
        return None
    kind = "markdown" if raw.get("cell_type") == "heading" else raw.get("cell_type")  # nbformat 3
    if kind not in MAKERS:
        return None
    source = raw.get("source", raw.get("input", ""))
    if isinstance(source, list):
        source = "".join(s for s in source if isinstance(s, str))
    if not isinstance(source, str):
        return None
    if raw.get("cell_type") == "heading" and isinstance(raw.get("level"), int):
        source = "#" * raw["level"] + " " + source
    cell = MAKERS[kind](source)
    meta = raw.get("metadata", {})
    if isinstance(meta, dict) and isinstance(meta.get("nbgrader"), dict):
        cell.metadata["nbgrader"] = json.loads(json.dumps(meta["nbgrader"]))
    return cell


def _exercise_cell(cell) -> bool:
    """A solution or graded cell: its grade id belongs to one assignment (``setup`` does not)."""
    meta = cell.metadata.get("nbgrader", {})
    return bool(meta.get("solution") or meta.get("grade"))


def _other_assignment(ids: set[str], assignment: str) -> str | None:
    for path in sorted(SOLUTIONS.glob("*/*.ipynb")):
        if path.parent.name == assignment:
            continue
        theirs = {_grade_id(c) for c in nbformat.read(path, as_version=4).cells if _exercise_cell(c)}
        if ids & theirs:
            return f"{path.parent.name}/{path.name}"
    return None


def prepare(path: Path, assignment: str, notebook_name: str) -> Prepared:
    """The notebook to grade for the file at ``path``, and notes on what was repaired."""
    source = nbformat.read(SOLUTIONS / assignment / notebook_name, as_version=4)
    release = Path(SOLUTIONS.parent / "notebooks" / assignment / notebook_name)
    blank = nbformat.read(release, as_version=4) if release.exists() else source
    raw_cells, problem = _parse(path)
    if problem:
        return _with_notes(blank, [f"The submitted file {problem}; it was graded as the blank notebook."])

    cells = [c for c in (_rebuild(r) for r in raw_cells) if c is not None]
    wanted = {_grade_id(c): c for c in source.cells if _grade_id(c)}
    claimed = {_grade_id(c) for c in cells} - {None}
    own = {gid for gid, c in wanted.items() if _exercise_cell(c)}
    if claimed and not claimed & own:
        other = _other_assignment(claimed, assignment)
        if other:
            return _with_notes(blank, [
                f"This is the notebook of another assignment ({other}), not of {assignment}: "
                "submit the right notebook. It was graded as the blank notebook."])

    notes = []
    last = {}
    for i, cell in enumerate(cells):
        gid = _grade_id(cell)
        if gid in wanted and wanted[gid].cell_type == cell.cell_type:
            last[gid] = i
    for i, cell in enumerate(cells):
        gid = _grade_id(cell)
        if gid is None:
            continue
        if last.get(gid) == i:
            cell.metadata["nbgrader"] = json.loads(json.dumps(wanted[gid].metadata["nbgrader"]))
        else:
            del cell.metadata["nbgrader"]
            if gid in wanted and wanted[gid].metadata["nbgrader"].get("grade"):
                notes.append(f"The graded cell `{gid}` appeared more than once; the last one counts.")
    notes += _restore_missing(cells, source)
    nb = nbformat.v4.new_notebook(cells=cells, metadata=json.loads(json.dumps(source.metadata)))
    return _with_notes(nb, sorted(set(notes), key=notes.index))


def _restore_missing(cells: list, source) -> list[str]:
    """Put back course cells the submission lacks, below the course cell before them."""
    notes, present = [], {_grade_id(c) for c in cells}
    anchor = None
    for src in source.cells:
        gid = _grade_id(src)
        if gid is None:
            continue
        if gid in present:
            anchor = gid
            continue
        meta = src.metadata["nbgrader"]
        if meta.get("solution"):
            continue  # the learner's own cell: nothing of the course's to restore
        where = 0 if anchor is None else next(
            i for i, c in enumerate(cells) if _grade_id(c) == anchor) + 1
        cells.insert(where, MAKERS[src.cell_type](src.source, metadata=json.loads(json.dumps(src.metadata))))
        present.add(gid)
        anchor = gid
        if meta.get("grade"):
            notes.append(f"The graded cell `{gid}` was missing; the grader put it back below "
                         "the cell before it in the assignment. Keep it in your notebook.")
        else:
            notes.append(f"The course cell `{gid}` was missing; the grader put it back.")
    return notes


def _with_notes(nb, notes: list[str]) -> Prepared:
    if notes:
        nb.cells.insert(0, new_markdown_cell(NOTES_HEADING + "\n\n" + "\n".join(f"- {n}" for n in notes)))
    return Prepared(nb, notes)
