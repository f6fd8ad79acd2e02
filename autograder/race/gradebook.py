"""The class race's points, written into the course's nbgrader gradebook as extra credit. [trusted]

``autograder leaderboard ... --points N --gradebook`` gives each ranked learner their race
points (``board.points``: by the line, or by rank) in the gradebook the class was graded into,
so the formgrader shows them and ``nbgrader export`` counts them.

nbgrader's one place for points beyond a notebook's own is a grade row's ``extra_credit``, and
a row's ``score`` adds it only to a score the row has (``auto_score`` or ``manual_score``: a
row of neither scores 0 whatever its extra credit). The race's cell (``race_entry``) has no row:
it is neither a solution nor a graded cell, so the solution keeps full marks and a blank
notebook zero. So the points go on the row of the **graded cell nearest above the race's
cell** in the assignment's source (``carrier``: ``grade_scaling_train_time`` for notebook 06),
which autograding has scored for every submission, and which the formgrader shows just above
the race. Its own score is left as it is.

The race owns that row's extra credit and keeps what it wrote in
``.autograder/race/<assignment>.json`` of the course: where the row holds extra credit the race
did not write (given by hand in the formgrader), it is left as it is, and said. A learner not in
the gradebook, a submission not autograded yet, and an entry the race could not run to the end
(``Run.grader_fault``) get nothing written, and a line that says why.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from autograder.classroom.journal import course_config, write_atomic
from autograder.pipeline.assignment import notebooks, source
from autograder.race import board
from autograder.race.leaderboard import ENTRY_ID


class GradebookError(ValueError):
    """The race's points cannot go into this course's gradebook at all; the message says why."""


@dataclass
class Written:
    """What ``write_points`` did: points written per learner, and why the others got none."""
    row: str
    points: dict[str, float] = field(default_factory=dict)
    not_written: list[str] = field(default_factory=list)

    def report(self) -> str:
        lines = [f"race points written to the gradebook for {len(self.points)} learner(s), as extra "
                 f"credit on {self.row}"]
        return "\n".join(lines + [f"  not written: {line}" for line in self.not_written])


def carrier(assignment: str) -> tuple[str, str]:
    """(notebook file name, grade id) of the graded cell nearest above the race's entry cell in
    ``assignment``'s source: the row that carries the race's points."""
    names = notebooks(assignment)
    if len(names) != 1:
        raise GradebookError(f"assignment {assignment!r} should hold one notebook, found {names}")
    above = None
    for cell in source(assignment, names[0]).read().cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade_id") == ENTRY_ID:
            if above is None:
                raise GradebookError(f"{assignment} has no graded cell above its race cell to carry the points")
            return names[0], above
        if meta.get("grade"):
            above = meta["grade_id"]
    raise GradebookError(f"{assignment} has no race cell (nbgrader id {ENTRY_ID!r})")


def _database(course_root: Path) -> str:
    db = Path(course_root) / "gradebook.db"
    if not db.is_file():  # nbgrader would make an empty one
        raise GradebookError(f"no gradebook at {db}: grade the class into that course first (autograder grade)")
    return f"sqlite:///{db}"


def check(course_root: Path, assignment: str) -> str:
    """The grade id ``write_points`` will write to, once it has checked that the course's gradebook
    holds ``assignment`` (before a race of hours, rather than after); ``GradebookError`` if not."""
    from nbgrader.api import Gradebook, MissingEntry  # lazy: nbgrader, only for a gradebook

    name, row = carrier(assignment)
    with Gradebook(_database(course_root), _course_id(course_root)) as gb:
        try:
            gb.find_grade_cell(row, Path(name).stem, assignment)
        except MissingEntry:
            raise GradebookError(f"{assignment} is not in the gradebook of {course_root}: grade the class "
                                 f"first (autograder grade SUBMISSIONS -a {assignment})") from None
    return row


def _course_id(course_root: Path) -> str:
    return course_config(course_root).CourseDirectory.get("course_id", "default_course")


def race_points(ranked: list[board.Standing], five_gram: float, most: float, award: str) -> dict[str, float | None]:
    """Learner id -> their points out of ``most`` by ``award`` (``board.points``); None for an
    entry whose race did not run to the end (the grader's fault: nothing to write yet)."""
    return {s.name: None if any(r.grader_fault for r in s.runs) else board.points(s, ranked, five_gram, most, award)
            for s in ranked if s.name != board.BASELINE}


def write_points(course_root: Path, assignment: str, points: dict[str, float | None]) -> Written:
    """Write ``points`` (``race_points``) as the extra credit of each learner's ``carrier`` row, in
    one transaction; what was written and what not (see the module's text)."""
    from sqlalchemy.exc import SQLAlchemyError  # lazy: as in check

    row = check(course_root, assignment)
    kept = Path(course_root) / ".autograder" / "race" / f"{assignment}.json"
    wrote = json.loads(kept.read_text()) if kept.is_file() else {}
    try:
        done = _write(course_root, assignment, row, points, wrote)
    except SQLAlchemyError as err:  # locked by a formgrader's save, say: nothing was written
        raise GradebookError(f"the gradebook did not take the race's points ({str(err)[:200]}); the "
                             "leaderboard is written: run the same command again to write them") from None
    write_atomic(kept, json.dumps({**wrote, **done.points}, indent=1, sort_keys=True))
    return done


def _write(course_root: Path, assignment: str, row: str, points: dict, wrote: dict) -> Written:
    """``write_points``' one transaction; ``wrote``: what the race wrote before."""
    from nbgrader.api import Gradebook  # lazy: as in check

    stem, done = Path(carrier(assignment)[0]).stem, Written(row)
    with Gradebook(_database(course_root), _course_id(course_root)) as gb:
        for student, got in sorted(points.items()):
            if got is None:
                done.not_written.append(f"{student}: the race could not run the entry to the end (the grader's "
                                        "fault, not theirs); run the race again")
                continue
            grade = _row(gb, row, stem, assignment, student)
            if isinstance(grade, str):
                done.not_written.append(f"{student}: {grade}")
                continue
            mine = wrote.get(student)
            if grade.extra_credit not in (None, 0.0, mine, got):
                done.not_written.append(f"{student}: {row} holds {grade.extra_credit:g} points of extra credit the "
                                        "race did not write (given by hand?): left as it is")
                continue
            grade.extra_credit = got
            done.points[student] = got
        gb.db.commit()
    return done


def _row(gb, row: str, notebook: str, assignment: str, student: str):
    """``student``'s grade row ``row`` of ``assignment``, scored by autograding; else why there is none."""
    from nbgrader.api import MissingEntry  # lazy: as in check

    try:
        grade = gb.find_grade(row, notebook, assignment, student)
    except MissingEntry:
        try:
            gb.find_student(student)
        except MissingEntry:
            return "not a student of the gradebook"
        return f"no submission of {assignment} in the gradebook; grade it first (autograder grade)"
    if grade.auto_score is None and grade.manual_score is None:
        return (f"{assignment} is not autograded yet, and nbgrader counts extra credit only on a scored "
                "cell; grade it first (autograder grade)")
    return grade
