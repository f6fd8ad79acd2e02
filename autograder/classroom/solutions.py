"""The model solutions, released to a course's learners once the assignment is over [trusted]

``autograder release-solutions 02_attention`` releases, through nbgrader's exchange, an
assignment named ``02_attention_solutions``: the learners find it in the same Assignment List
they fetched the exercise from (or ``nbgrader fetch_assignment 02_attention_solutions``), and
it lands beside their own work as ``~/02_attention_solutions/attention.ipynb``, to run and
compare. It is nbgrader's own release, so the exchange's permissions are nbgrader's.

The notebook is the instructor's source, ``solutions/02_attention/``, as a learner should read
it: the solution markers and nbgrader's cell metadata taken out, and a first cell saying what
it is. It is refused before the due date, or the latest extension nbgrader's gradebook holds,
has passed (``before_due`` lets the instructor release early, deliberately).
"""
from __future__ import annotations

import re
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import nbformat

from autograder.paths import SOLUTIONS

MARKER = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.M)
SUFFIX = "_solutions"


def readable(nb: nbformat.NotebookNode, assignment: str) -> nbformat.NotebookNode:
    """The solution notebook ``nb`` as a learner gets it (see the module doc)."""
    nb = nbformat.from_dict(nb)
    for cell in nb.cells:
        cell.metadata.pop("nbgrader", None)
        cell.source = MARKER.sub("", cell.source)
    nb.cells.insert(0, nbformat.v4.new_markdown_cell(
        f"**Model solution of {assignment}**, released after its due date. Compare it with your "
        "own notebook; nothing here is graded, and your grade stays what it was."))
    return nb


def due(course_root: Path, assignment: str, config) -> datetime | None:
    """The latest time anyone may still hand ``assignment`` in (UTC, naive, as nbgrader keeps
    it): its due date, or a learner's extension past it; None without a due date."""
    from nbgrader.api import Gradebook, MissingEntry  # lazy: nbgrader is slow to import

    course_id = config.CourseDirectory.get("course_id", "default_course")
    with Gradebook(f"sqlite:///{Path(course_root) / 'gradebook.db'}", course_id) as gb:
        try:
            found = gb.find_assignment(assignment)
        except MissingEntry:
            return None
        if found.duedate is None:
            return None
        return max([found.duedate] + [s.duedate for s in found.submissions if s.duedate])


def release_solutions(assignment: str, course_root: Path, before_due: bool = False) -> str:
    """Release the solutions of ``assignment`` to the course's learners; the name released."""
    # lazy: nbgrader, which these import, is slow to import (as in due)
    from nbgrader.apps import NbGraderAPI
    from nbgrader.utils import temp_attrs
    from autograder.classroom.journal import course_config
    from autograder.pipeline.assignment import notebooks, source
    from autograder.pipeline.course import GradingError, run_step

    config = course_config(course_root)
    sources = notebooks(assignment)
    if not sources:
        raise GradingError(f"no assignment {assignment!r} in {SOLUTIONS}")
    until = due(course_root, assignment, config)
    if not before_due:
        now = datetime.now(timezone.utc).replace(tzinfo=None)
        if until is None:
            raise GradingError(f"{assignment} has no due date in the gradebook (nbgrader db assignment "
                               "add ... --duedate=...); pass --before-due-date to release anyway")
        if now < until:
            raise GradingError(f"{assignment} may still be handed in until {until} UTC (its due date "
                               "or an extension); pass --before-due-date to release anyway")
    name = assignment + SUFFIX
    api = NbGraderAPI(config=config)
    with tempfile.TemporaryDirectory(prefix="ag-solutions-") as tmp:
        for notebook in sources:
            (Path(tmp) / name).mkdir(exist_ok=True)
            nbformat.write(readable(source(assignment, notebook).read(), assignment), Path(tmp) / name / notebook)
        with temp_attrs(api.coursedir, release_directory=tmp):  # an absolute path: no copy in the course
            run_step(lambda: api.release_assignment(name), f"release_assignment {name}")
    return name
