"""Turn whatever a learner submitted into a notebook nbgrader can grade; say what was wrong. [trusted]

Runs in the trusted parent before nbgrader sees the file, so no submission can make nbgrader
fail ("Please see the above traceback") or touch another learner's grade. The file is read
by ``skim.skim``, which keeps each cell's type, source and nbgrader metadata and never reads
the outputs, in bounded time and memory whatever the file holds; the notebook is rebuilt
cell by cell from that, against the assignment's source:

- unreadable (empty, not JSON, not a notebook, over 1 GB) or another assignment's notebook:
  graded as the blank release, with a note naming the problem;
- past a limit (``skim.Limits``), with a note naming it: cells past the assignment's count
  plus ``EXTRA_CELLS`` are not read; a cell's source past 100 KB, or past what 1 MB holds for
  all cells together, is graded as empty; nbgrader metadata past 4 KB is ignored;
- nbformat 3 and 4 are read (cells rebuilt as version 4, for nbformat 3 with a note; odd cells
  dropped);
- a notebook that asks for another kernel (``kernelspec``: R's ``ir``, a made-up one) is run
  with the course's, as every submission is, with a note;
- a cell whose type changed (a solution cell turned markdown) gets its type back, with a note;
- nbgrader metadata is the source's for every grade id the source knows, and dropped from
  cells claiming an unknown id; of duplicated ids the last cell keeps it (the others stay as
  plain cells);
- a course cell that is missing (a deleted graded or set-up cell) is put back below the
  nearest course cell that precedes it in the source; a missing solution cell comes back
  blank, as the release has it, with a note.

The notes go into a markdown cell at the top of the graded notebook, so the HTML feedback
shows them too.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_raw_cell

from autograder.paths import RELEASE
from autograder.pipeline.assignment import assignments, notebooks, source as read_source
from autograder.pipeline.skim import Cut, Limits, Skimmed, Unreadable, size_text, skim

EXTRA_CELLS = 500  # cells a learner may add to the assignment's: scratch work, many times over
NOTES_HEADING = "**Notes from the grader on this submission**"
MAKERS = {"code": new_code_cell, "markdown": new_markdown_cell, "raw": new_raw_cell}
KERNEL_NAME = re.compile(r"[A-Za-z0-9_.+-]{1,64}")  # a name the note may quote (jupyter's own are so)


@dataclass
class Prepared:
    nb: nbformat.NotebookNode
    notes: list[str] = field(default_factory=list)


def _meta(cell, key: str):
    """``cell.metadata[key]``, or None where the metadata is not a dict (a submitted file's may be anything)."""
    meta = cell.get("metadata")
    return meta.get(key) if isinstance(meta, dict) else None


def _grade_id(cell) -> str | None:
    meta = _meta(cell, "nbgrader")
    gid = meta.get("grade_id") if isinstance(meta, dict) else None
    return gid if isinstance(gid, str) else None


def _rebuild(raw) -> nbformat.NotebookNode | None:
    """A fresh, valid cell with the raw cell's type, source and grade id (nothing else of its
    metadata, which may be anything: a ``grade`` flag without an id, nesting without end)."""
    if not isinstance(raw, dict):
        return None
    kind = "markdown" if raw.get("cell_type") == "heading" else raw.get("cell_type")  # nbformat 3
    if kind not in MAKERS:
        return None
    source = raw.get("source", raw.get("input", ""))
    if isinstance(source, Cut):
        source = _emptied(kind, source)
    if isinstance(source, list):
        source = "".join(s for s in source if isinstance(s, str))
    if not isinstance(source, str):
        return None
    if raw.get("cell_type") == "heading" and isinstance(raw.get("level"), int):
        source = "#" * min(max(raw["level"], 1), 6) + " " + source  # markdown has six levels
    cell = MAKERS[kind](source)
    gid = _grade_id(raw)
    if gid is not None:  # all ``prepare`` reads of it: the course's own metadata replaces it, or none
        cell.metadata["nbgrader"] = {"grade_id": gid}
    return cell


def _emptied(kind: str, cut: Cut) -> str:
    """What a cell whose source was not read holds instead: why, in the feedback too."""
    why = (f"the cells above it already hold the {size_text(cut.limit)} of source the grader reads"
           if cut.total else f"its source is {size_text(cut.size)}, more than the {size_text(cut.limit)} "
                             "one cell may hold")
    return ("# " if kind == "code" else "") + f"The grader emptied this cell: {why}."


def _reading_notes(skimmed: Skimmed, limits: Limits, course_cells: int) -> list[str]:
    """What the grader did not read of the file, for the learner."""
    notes = []
    if skimmed.more_cells:
        notes.append(f"The notebook has more than {limits.cells} cells (the assignment's {course_cells} and "
                     f"{EXTRA_CELLS} of your own): only the first {limits.cells} were read and graded.")
    big, over, meta = [], [], []
    for number, raw in enumerate(skimmed.cells, 1):
        if not isinstance(raw, dict):
            continue
        for source in (raw.get("source"), raw.get("input")):
            if isinstance(source, Cut):
                (over if source.total else big).append(number)
        if isinstance(_meta(raw, "nbgrader"), Cut):
            meta.append(number)
    if big:
        notes.append(f"{_numbers(big)} graded as empty: a cell's source may be at most "
                     f"{size_text(limits.source)}.")
    if over:
        notes.append(f"{_numbers(over)} graded as empty: the cells' sources may add up to at most "
                     f"{size_text(limits.sources)}.")
    if meta:
        notes.append(f"The nbgrader metadata of {_numbers(meta, verb=False).lower()} was ignored: it may "
                     f"be at most {size_text(limits.nbgrader)}.")
    if skimmed.crowded:
        notes.append(f"The notebook holds more than {limits.entries:,} entries (cells, their keys and "
                     f"metadata): only its first {len(skimmed.cells)} cells were read and graded.")
    return notes


def _numbers(cells: list[int], verb: bool = True) -> str:
    """``[4]`` -> "Cell 4 was"; ``[4, 9, 12]`` -> "Cells 4, 9 and 12 were" (at most 5 named)."""
    if len(cells) == 1:
        return f"Cell {cells[0]}" + (" was" if verb else "")
    named = [str(n) for n in cells[:5]] + ([f"{len(cells) - 5} more"] if len(cells) > 5 else [])
    return "Cells " + ", ".join(named[:-1]) + " and " + named[-1] + (" were" if verb else "")


def _exercise_cell(cell) -> bool:
    """A solution or graded cell: its grade id belongs to one assignment (``setup`` does not)."""
    meta = cell.metadata.get("nbgrader", {})
    return bool(meta.get("solution") or meta.get("grade"))


def _other_assignment(ids: set[str], assignment: str) -> str | None:
    for other in assignments():
        for name in notebooks(other) if other != assignment else ():
            if ids & read_source(other, name).owned:
                return f"{other}/{name}"
    return None


def prepare(path: Path, assignment: str, notebook_name: str) -> Prepared:
    """The notebook to grade for the file at ``path``, and notes on what was repaired."""
    source = read_source(assignment, notebook_name).read()
    release = RELEASE / assignment / notebook_name
    blank = nbformat.read(release, as_version=4) if release.exists() else source
    limits = Limits(cells=len(source.cells) + EXTRA_CELLS)
    try:
        skimmed = skim(path, limits)
    except Unreadable as problem:
        return _with_notes(blank, [f"The submitted file {problem}; it was graded as the blank notebook."])

    cells = [c for c in (_rebuild(r) for r in skimmed.cells) if c is not None]
    wanted = {_grade_id(c): c for c in source.cells if _grade_id(c)}
    claimed = {_grade_id(c) for c in cells} - {None}
    own = {gid for gid, c in wanted.items() if _exercise_cell(c)}
    if claimed and not claimed & own:
        other = _other_assignment(claimed, assignment)
        if other:
            return _with_notes(blank, [
                f"This is the notebook of another assignment ({other}), not of {assignment}: "
                "submit the right notebook. It was graded as the blank notebook."])

    notes = _reading_notes(skimmed, limits, len(source.cells))
    if skimmed.worksheets:
        notes.append("The notebook is in an old format (nbformat 3, from IPython 2 or earlier); the grader "
                     "read it as nbformat 4. Open it in the course's JupyterLab and save it, which converts "
                     "it, before you submit.")
    notes += _kernel_note(skimmed.kernel, source.metadata.get("kernelspec", {}))
    notes += _retyped(cells, wanted)
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
    notes += _restore_missing(cells, source, blank)
    nb = nbformat.v4.new_notebook(cells=cells, metadata=json.loads(json.dumps(source.metadata)))
    return _with_notes(nb, sorted(set(notes), key=notes.index))


def _kernel_note(asked, course: dict) -> list[str]:
    """A note where the file asks for a kernel other than the course's (``asked``: its
    ``kernelspec.name`` as ``skim`` read it; None where it names none)."""
    if asked is None or asked == course.get("name"):
        return []
    named = f"`{asked}`" if isinstance(asked, str) and KERNEL_NAME.fullmatch(asked) else "another one"
    return [f"The notebook asks for a kernel other than the course's ({named}); the grader ran it with "
            f"the course's {course.get('display_name', 'Python')} kernel, as it runs every notebook. "
            "Choose that kernel in JupyterLab (Kernel → Change Kernel) before you submit."]


def _retyped(cells: list, wanted: dict) -> list[str]:
    """Give a learner's cell whose type changed (a solution cell turned markdown, JupyterLab's
    "M" key pressed by mistake) the type of the assignment's cell of its grade id, in place."""
    notes = []
    for i, cell in enumerate(cells):
        gid = _grade_id(cell)
        if gid in wanted and wanted[gid].cell_type != cell.cell_type:
            kind = wanted[gid].cell_type
            cells[i] = MAKERS[kind](cell.source, metadata={"nbgrader": {"grade_id": gid}})
            notes.append(f"The cell `{gid}` had become a {cell.cell_type} cell; the grader read it "
                         f"as the {kind} cell it is in the assignment. Change it back in your notebook.")
    return notes


def _restore_missing(cells: list, source, blank) -> list[str]:
    """Put back course cells the submission lacks, below the course cell before them; a
    missing solution cell comes back as the release has it (blank), said in a note."""
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
        if meta.get("solution"):  # the learner's own cell: back as the release has it
            src = next((c for c in blank.cells if _grade_id(c) == gid), None)
            if src is None or meta.get("grade"):  # a written answer: its manual grade says so
                continue
        where = 0 if anchor is None else next(
            i for i, c in enumerate(cells) if _grade_id(c) == anchor) + 1
        cells.insert(where, MAKERS[src.cell_type](src.source, metadata=json.loads(json.dumps(src.metadata))))
        present.add(gid)
        anchor = gid
        if meta.get("solution"):
            notes.append(f"Your solution cell `{gid}` was missing; the grader put the blank one back "
                         "there, so its exercise scores nothing. Keep the cell in your notebook.")
        elif meta.get("grade"):
            notes.append(f"The graded cell `{gid}` was missing; the grader put it back below "
                         "the cell before it in the assignment. Keep it in your notebook.")
        else:
            notes.append(f"The course cell `{gid}` was missing; the grader put it back.")
    return notes


def _with_notes(nb, notes: list[str]) -> Prepared:
    if notes:
        nb.cells.insert(0, new_markdown_cell(NOTES_HEADING + "\n\n" + "\n".join(f"- {n}" for n in notes)))
    return Prepared(nb, notes)
