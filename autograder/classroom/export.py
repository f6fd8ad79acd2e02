"""Grades out: the CSV layouts that Canvas's and Moodle's gradebooks import [trusted]

``autograder export canvas|moodle --roster ROSTER.csv`` reads the course's nbgrader gradebook
(each submission's score, manual grades included, less its late penalty: ``late.py``) and
writes one row per learner of the school's roster, one column per assignment.

**The roster** is the learners as the school knows them: a CSV with a login column (``login``,
``username``, ``SIS Login ID``...) and/or an e-mail column (``email``, ``Email address``...).
The gradebook export of Canvas (Grades, Export) is one: its identity columns are then copied
as Canvas wrote them, and an assignment column it already has (``02_attention (1234)``) keeps
its header, so the import updates that assignment instead of making a new one. A learner of the
gradebook (their hub login) is the roster's row whose login is theirs, or whose e-mail is
their login or the e-mail nbgrader holds for them (``nbgrader db student add --email``).
Logins and e-mails are compared as ``identity.id_key`` writes them (NFKC, case folded), never
in a set's order: where one key names two learners of the gradebook (``Kim`` and ``kim``, or
``\u212aim`` with the Kelvin sign), a learner has two rows, or a row names two learners, those
learners are not written, and the report names them (``Matching.collisions``).

**Layouts.** Canvas (its "Import" of the Grades page): ``Student, ID, SIS User ID, SIS Login
ID, Section``, then the assignments; a blank cell changes nothing. Moodle (Grades, Import,
CSV file): one identifier column (``Email address``, ``Username`` or ``ID number``, which
the import's "Map from" names), then the assignments. Moodle stops a whole import at the first
user it does not know, so the file holds only learners of the roster.

Nothing is dropped silently: learners graded here but not on the roster, and roster learners
without a submission, are returned (``Export``) and printed.

``export_csv`` is nbgrader's own export (``nbgrader export``), the CSV ``autograder grade``
writes after grading.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

from autograder.classroom.identity import id_key, shown_ids
from autograder.terminal import shown

CANVAS_IDENTITY = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
MOODLE_IDS = {"email": "Email address", "username": "Username", "idnumber": "ID number"}
# roster headers (lower case) that name a learner's login, e-mail, or Moodle ID number
LOGIN = ("login", "username", "sis login id", "user", "student_id", "student id")
EMAIL = ("email", "email address", "e-mail", "mail")
IDNUMBER = ("id number", "idnumber", "sis user id")


def final_scores(course_root: Path, assignments: list[str] | None = None) -> dict[tuple[str, str], float]:
    """(student, assignment) -> the submission's score (manual grades win) less its late penalty,
    for every submission in the course's gradebook (only ``assignments``, if given)."""
    # lazy: nbgrader, which these import, is slow to import (see grade.py)
    from nbgrader.api import Gradebook
    from autograder.classroom.journal import course_config

    config = course_config(course_root)
    course_id = config.CourseDirectory.get("course_id", "default_course")
    out = {}
    with Gradebook(f"sqlite:///{Path(course_root) / 'gradebook.db'}", course_id) as gb:
        for assignment in gb.assignments:
            if assignments and assignment.name not in assignments:
                continue
            for sub in gb.assignment_submissions(assignment.name):
                late = sub.late_submission_penalty or 0.0
                out[sub.student.id, assignment.name] = round(max(0.0, sub.score - late), 4)
    return out


def student_emails(course_root: Path) -> dict[str, str]:
    """student id -> the e-mail nbgrader's gradebook holds for them (where it holds one)."""
    from nbgrader.api import Gradebook  # lazy: as in final_scores

    with Gradebook(f"sqlite:///{Path(course_root) / 'gradebook.db'}") as gb:
        return {s.id: s.email for s in gb.students if s.email}


def export_csv(course_root: Path, csv_path: Path) -> Path:
    """``nbgrader export``: the gradebook as CSV, with the course's export plugin."""
    # lazy: nbgrader, which these import, is slow to import (see grade.py)
    from nbgrader.api import Gradebook
    from nbgrader.apps.exportapp import ExportApp
    from autograder.classroom.journal import course_config

    config = course_config(course_root)
    csv_path = Path(csv_path).resolve()
    plugin = ExportApp(config=config).plugin_class(config=config)
    plugin.to = str(csv_path)
    course_id = config.CourseDirectory.get("course_id", "default_course")
    with Gradebook(f"sqlite:///{Path(course_root) / 'gradebook.db'}", course_id) as gb:
        plugin.export(gb)
    return csv_path


@dataclass
class Export:
    """What an export wrote and what it could not place."""
    path: Path
    rows: int
    unknown: list[str] = field(default_factory=list)    # graded here, not on the roster
    missing: list[str] = field(default_factory=list)    # on the roster, no submission here
    collisions: list[str] = field(default_factory=list)  # learners not written: ids alike

    def report(self) -> str:
        lines = [f"wrote {self.rows} learner(s) to {self.path}"]
        if self.unknown:
            lines.append("not on the roster, so not in the file (add them to the roster, or "
                         "give nbgrader their e-mail): " + _names(self.unknown))
        if self.missing:
            lines.append("on the roster without a submission (left blank): " + _names(self.missing))
        lines += [f"ids alike, so not in the file: {c}" for c in self.collisions]
        return "\n".join(lines)


def _names(ids: list[str]) -> str:
    """``ids`` on one line of the report, as a terminal shows them (``terminal.shown``)."""
    return ", ".join(shown(i, layout=False) for i in ids)


def _column(header: list[str], names: tuple[str, ...]) -> str | None:
    return next((h for h in header if h.strip().lower() in names), None)


def read_roster(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """The roster's header and rows; a Canvas export's "Points Possible" row is skipped."""
    with open(path, newline="", encoding="utf-8-sig") as f:  # a spreadsheet's BOM
        reader = csv.DictReader(f)
        rows = [r for r in reader if (r.get("Student") or "").strip() != "Points Possible"]
        return list(reader.fieldnames or []), rows


@dataclass
class Matching:
    """Which roster row is which learner, and the learners refused for a collision."""
    found: dict[int, str] = field(default_factory=dict)   # roster row index -> student id
    refused: set[str] = field(default_factory=set)        # students not written: a collision
    skipped: set[int] = field(default_factory=set)        # the roster rows of those students
    collisions: list[str] = field(default_factory=list)   # one message per collision


def match(header: list[str], rows: list[dict], students: set[str],
          emails: dict[str, str]) -> Matching:
    """Which roster row is which student of the gradebook (see the module doc): ids and e-mails
    are compared by ``identity.id_key``; where one key names two learners, or one learner has
    two rows, or one row names two learners, none of them is matched (``Matching.collisions``)."""
    login, email = _column(header, LOGIN), _column(header, EMAIL)
    if login is None and email is None:
        raise ValueError(f"the roster has neither a login nor an e-mail column: {header}")
    owners: dict[str, set[str]] = {}
    for s in sorted(students):
        for name in (s, emails.get(s)):
            if name:
                owners.setdefault(id_key(name), set()).add(s)
    done = Matching()
    for same in sorted({tuple(sorted(who)) for who in owners.values() if len(who) > 1}):
        _refuse(done, same, "are one id to the roster (compared after NFKC and case folding); "
                "give them ids and e-mails that differ in more than case or letter form")
    claims: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        keys = {id_key((row.get(column) or "").strip()) for column in (login, email) if column}
        who = sorted(set().union(*(owners.get(key, set()) for key in keys if key)))
        if len(who) > 1:
            _refuse(done, who, f"are both the roster's row of {ascii(_who(header, row))} (its login "
                    "names one, its e-mail the other); correct the row")
        for s in who:
            claims.setdefault(s, []).append(i)
    for s, found in sorted(claims.items()):
        if len(found) > 1:
            _refuse(done, [s], "has more than one row in the roster ("
                    + shown_ids(_who(header, rows[i]) for i in found) + "); keep one")
    for s, found in claims.items():
        if s in done.refused:
            done.skipped.update(found)
        else:
            done.found[found[0]] = s
    return done


def _refuse(done: Matching, students, why: str) -> None:
    """Note a collision: ``students`` are not written, and the message says why."""
    done.refused.update(students)
    done.collisions.append(f"{shown_ids(students)} {why}")


def export(layout: str, roster: Path, out: Path, course_root: Path,
           assignments: list[str] | None = None, moodle_id: str = "email") -> Export:
    """Write the ``layout`` ("canvas" or "moodle") CSV of the course's grades to ``out``."""
    scores = final_scores(course_root, assignments)
    names = assignments or sorted({a for _, a in scores})
    graded = {s for s, _ in scores}
    header, rows = read_roster(roster)
    matching = match(header, rows, graded, student_emails(course_root))
    found = matching.found
    if layout == "canvas":
        # an assignment Canvas has already: its column, "02_attention (1234)", is kept as it is
        columns = {a: next((h for h in header if h == a or h.startswith(a + " (")), a) for a in names}
        fields = [*CANVAS_IDENTITY, *columns.values()]
        login = _column(header, LOGIN)

        def identity(row: dict) -> dict:
            kept = {k: row.get(k, "") for k in CANVAS_IDENTITY}
            kept["SIS Login ID"] = kept["SIS Login ID"] or (row.get(login, "") if login else "")
            kept["Student"] = kept["Student"] or kept["SIS Login ID"]
            return kept
    elif layout == "moodle":
        source = {"email": _column(header, EMAIL), "username": _column(header, LOGIN),
                  "idnumber": _column(header, IDNUMBER)}[moodle_id]
        if source is None:
            raise ValueError(f"the roster has no {moodle_id} column for Moodle to identify learners by")
        columns = {a: a for a in names}
        fields = [MOODLE_IDS[moodle_id], *columns.values()]

        def identity(row: dict) -> dict:
            return {MOODLE_IDS[moodle_id]: row[source]}
    else:
        raise ValueError(f"unknown layout {layout!r}: canvas or moodle")
    written = 0
    with open(out, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for i, row in enumerate(rows):
            student = found.get(i)
            if i in matching.skipped or (layout == "moodle" and student is None):
                continue  # nothing graded here to import (a blank Canvas cell changes nothing)
            writer.writerow({**identity(row), **{column: _points(scores.get((student, a)))
                                                 for a, column in columns.items()}})
            written += 1
    missing = sorted(_who(header, rows[i]) for i in range(len(rows)) if i not in matching.skipped
                     and not any((found.get(i), a) in scores for a in names))
    return Export(Path(out), written, sorted(graded - set(found.values()) - matching.refused), missing,
                  matching.collisions)


def _points(score: float | None) -> str:
    return "" if score is None else f"{score:g}"


def _who(header: list[str], row: dict) -> str:
    column = _column(header, LOGIN) or _column(header, EMAIL)
    return row.get(column) or row.get("Student") or "?"
