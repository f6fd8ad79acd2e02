"""The assignment's source notebook, read once: what every step of grading knows of it [trusted]

``solutions/<assignment>/<notebook>.ipynb`` is the instructor's source of an assignment. Grading
needs several things of it (its graded cells and their points, the course's own code and text
cells, a digest that names its version), in the instructor's process, in every worker and in
nbgrader's steps alike. ``source`` reads the file once per version (a changed file is read
again) and hands out one ``Source``; nothing else under ``autograder/`` reads or globs the
assignment's source notebook.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from autograder.paths import SOLUTIONS


class NoSuchAssignment(LookupError):
    """``solutions/`` holds no such assignment or notebook; the message says which."""


@dataclass(frozen=True)
class Source:
    """One version of an assignment's source notebook.

    ``graded``: grade id -> (exercise id or None, points) of each graded cell, in order;
    ``owned``: the grade ids of its solution and graded cells (``setup`` cells belong to no
    one assignment); ``teaching``: the sources (stripped) of the course's unmarked code cells, which grading
    does not run; ``text``: the sources of its markdown and raw cells; ``digest``: sha256 of
    the file's bytes; ``pictures``: (source, figure) of the teaching cells whose report shows a
    course figure (their metadata's ``autograder.report_picture``, ``pictures.py``)."""
    assignment: str
    notebook: str   # the file's name, "start_here.ipynb"
    path: Path
    raw: bytes
    digest: str
    graded: dict
    owned: frozenset
    teaching: frozenset
    text: frozenset
    pictures: tuple = ()

    def read(self):
        """The notebook (an ``nbformat.NotebookNode``), a new copy on each call (callers may change it)."""
        import nbformat  # lazy: a class's grader lists notebooks before its workers start

        return nbformat.reads(self.raw.decode("utf-8"), as_version=4)

    @property
    def exercises(self) -> list[str]:
        """The exercise ids of the graded cells, in order."""
        return [ex_id for ex_id, _ in self.graded.values() if ex_id]


def assignments() -> list[str]:
    """The assignments of ``solutions/``: its folders that hold a notebook (sorted)."""
    return sorted(p.name for p in SOLUTIONS.iterdir() if p.is_dir() and any(p.glob("*.ipynb")))


def notebooks(assignment: str) -> list[str]:
    """The names of the notebooks of ``assignment`` in ``solutions/`` (sorted; [] if none)."""
    folder = SOLUTIONS / assignment
    return sorted(p.name for p in folder.glob("*.ipynb")) if folder.is_dir() else []


def source(assignment: str, notebook: str | None = None) -> Source:
    """The source of ``assignment``'s ``notebook`` (a file name, or its stem as nbgrader names
    it; None: the assignment's one notebook). Raises ``NoSuchAssignment``."""
    if notebook is None:
        names = notebooks(assignment)
        if len(names) != 1:
            raise NoSuchAssignment(f"assignment {assignment!r} should hold one notebook in {SOLUTIONS}, "
                                   f"found {names}")
        notebook = names[0]
    if not notebook.endswith(".ipynb"):
        notebook += ".ipynb"
    path = SOLUTIONS / assignment / notebook
    if "/" in assignment or "/" in notebook or not path.is_file():
        raise NoSuchAssignment(f"no notebook {notebook!r} of assignment {assignment!r} in {SOLUTIONS}")
    stat = path.stat()
    return _read(path, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=64)
def _read(path: Path, mtime_ns: int, size: int) -> Source:
    """The ``Source`` at ``path`` in the version its modification time and size name."""
    # lazy: plan imports the exercise registry, which this module's importers need not load
    import nbformat

    from autograder.pipeline.plan import recorded_exercise

    raw = path.read_bytes()
    nb = nbformat.reads(raw.decode("utf-8"), as_version=4)
    graded, owned, teaching, text, pictures = {}, set(), set(), set(), []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade"):
            graded[meta["grade_id"]] = (recorded_exercise(cell), float(meta.get("points") or 0))
        if meta.get("grade") or meta.get("solution"):
            owned.add(meta["grade_id"])
        if cell.cell_type == "code" and "nbgrader" not in cell.metadata and cell.source.strip():
            teaching.add(cell.source.strip())
            picture = cell.metadata.get("autograder", {}).get("report_picture")
            if picture:
                pictures.append((cell.source.strip(), picture))
        if cell.cell_type != "code":
            text.add(cell.source)
    return Source(path.parent.name, path.name, path, raw, hashlib.sha256(raw).hexdigest(), graded,
                  frozenset(owned), frozenset(teaching), frozenset(text), tuple(pictures))
