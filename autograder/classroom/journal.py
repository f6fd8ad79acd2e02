"""Where a graded class is kept: a journal of outcomes, then the course directory [trusted]

Only the instructor's process writes here; workers, local or on a Dask cluster, send their
``Outcome`` back (``jobs.py``, ``worker.py``). ``Journal.keep`` does, for each submission, in
this order:

1. the outcome, whole, in ``.autograder/journal/<assignment>/<student>.json`` (written
   beside, synced, then renamed: a file is there complete or not at all);
2. the autograded notebook and the feedback into ``autograded/`` and ``feedback/`` (each
   written beside and renamed), then every score and comment of the submission into the
   gradebook in **one** transaction;
3. the job's digest in ``<student>.done``.

Killed anywhere (Ctrl-C, SIGKILL, a restart), a rerun finds each submission in one of three
states (``Journal.state``): recorded (skipped), journalled (``Journal.record`` does steps 2
and 3 from the journal, not regrading: step 2 is idempotent), or neither (graded). SQLite
rolls back a transaction cut short, so the gradebook holds each submission's scores entirely
or not at all.
"""
from __future__ import annotations

import csv
import io
import json
import os
import shutil
import threading
import time
from dataclasses import asdict
from functools import cached_property
from pathlib import Path
from typing import BinaryIO

from autograder.classroom.files import NotHandedIn, open_handed_in
from autograder.classroom.jobs import Outcome
from autograder.paths import SOLUTIONS


def write_atomic(path: Path, data: bytes | str | Path | BinaryIO) -> None:
    """Write ``path`` so that readers, and a rerun after a crash, see old or new, never half.

    ``data``: what to write, or a file (a path, or one open for reading) to copy, a megabyte at
    a time: a submission may be large.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    draft = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.part")  # per thread
    with open(draft, "wb") as f:
        if isinstance(data, Path):
            with data.open("rb") as source:
                shutil.copyfileobj(source, f, 1 << 20)
        elif hasattr(data, "read"):
            shutil.copyfileobj(data, f, 1 << 20)
        else:
            f.write(data.encode() if isinstance(data, str) else data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(draft, path)


def _copy_extra(extra: Path, dest: Path) -> None:
    """Copy a learner's other file to ``dest`` if it is a regular file of theirs alone: a link,
    a pipe, a folder or a hard link is left out (it is no part of the feedback)."""
    try:
        with open_handed_in(extra, alone=True) as f:
            write_atomic(dest, f)
    except NotHandedIn:
        pass


RECORDED, JOURNALLED, NEW = "recorded", "journalled", "new"  # a submission's state, see state()


class Journal:
    """The outcomes of one assignment's grading in a course directory, one file per student."""

    def __init__(self, course_root: Path, assignment: str):
        self.course_root, self.assignment = Path(course_root), assignment
        self.folder = self.course_root / ".autograder" / "journal" / assignment
        self.folder.mkdir(parents=True, exist_ok=True)
        for stale in self.folder.glob(".*.part"):  # drafts of a run that was killed
            stale.unlink(missing_ok=True)

    @cached_property
    def config(self):
        """The course's nbgrader configuration (read when first recording: nbgrader is slow to import)."""
        return course_config(self.course_root)

    @cached_property
    def notebook(self) -> str:
        """The file name of the assignment's notebook (a class grades one-notebook assignments)."""
        return next((SOLUTIONS / self.assignment).glob("*.ipynb")).name

    def state(self, student: str, digest: str) -> tuple[str, Outcome | None]:
        """Where the job ``digest`` of ``student`` stands: (RECORDED, its outcome) in the
        gradebook, (JOURNALLED, its outcome) graded but maybe not recorded, or (NEW, None)."""
        done = self.folder / f"{student}.done"
        earlier = self.outcome(student)
        if done.exists() and done.read_text().strip() == digest:
            return RECORDED, earlier
        if earlier is not None and earlier.digest == digest:
            return JOURNALLED, earlier
        return NEW, None

    def outcome(self, student: str) -> Outcome | None:
        """The outcome journalled for ``student``; None for none, and for a file that is not
        one whole outcome of theirs (cut short, or planted): that submission is graded again."""
        try:
            earlier = Outcome(**json.loads((self.folder / f"{student}.json").read_text()))
        except (FileNotFoundError, ValueError, TypeError):  # none; not JSON, UTF-8, an Outcome's fields
            return None
        return earlier if earlier.student == student and isinstance(earlier.digest, str) else None

    def keep(self, outcome: Outcome) -> None:
        """Step 1 for any outcome, then steps 2 and 3 for a graded one (see the module doc).

        Raises what writing the course raised (the gradebook locked or full); the outcome is
        in the journal by then, and a rerun records it (``record``)."""
        write_atomic(self.folder / f"{outcome.student}.json", json.dumps(asdict(outcome)))
        # and one line in the history: who was graded when, where, how long (one write: whole)
        # (tab-separated, quoted where a field holds a tab or a quote: a reason may name a file)
        line = io.StringIO()
        csv.writer(line, delimiter="\t", lineterminator="\n").writerow([
            time.strftime("%Y-%m-%dT%H:%M:%S"), outcome.student, outcome.digest[:12],
            "graded" if outcome.ok else "failed", f"{outcome.seconds:.2f}", outcome.worker,
            " ".join((outcome.reason or "").splitlines())])
        fd = os.open(self.folder / "history.tsv", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.getvalue().encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        if outcome.ok:
            self.record(outcome)

    def record(self, outcome: Outcome) -> None:
        """Steps 2 and 3: put a graded outcome into the course, then mark it recorded.

        The submission's other files in ``submitted/`` (``timestamp.txt``,
        ``submission_secret.txt``, which ``nbgrader release_feedback`` needs) go beside the
        autograded notebook and the feedback, as nbgrader's own commands do; links are not
        followed, and only regular files are copied (``release_feedback`` hands every ``.html``
        there to the learner; ``_copy_extra``), and the
        notebook and the feedback are written last, over any file of the learner's so named.
        """
        submitted = self.course_root / "submitted" / outcome.student / self.assignment
        stem = Path(self.notebook).stem
        for folder, name, text in (("autograded", self.notebook, outcome.autograded),
                                   ("feedback", stem + ".html", outcome.feedback)):
            dest = self.course_root / folder / outcome.student / self.assignment
            dest.mkdir(parents=True, exist_ok=True)
            for extra in submitted.iterdir() if submitted.is_dir() else ():
                if extra.suffix != ".ipynb":
                    _copy_extra(extra, dest / extra.name)
            write_atomic(dest / name, text)
        _save_grades(self.course_root, self.assignment, stem, outcome, self.config)
        write_atomic(self.folder / f"{outcome.student}.done", outcome.digest)

    def forget(self, student: str, into: Path) -> None:
        """Make ``student``'s submission new again, for a regrade: its mark goes first, then its
        outcome moves into the folder ``into`` (to compare with the new one). Killed in
        between, the outcome is still here and unmarked: calling this again finishes it."""
        (self.folder / f"{student}.done").unlink(missing_ok=True)
        if (self.folder / f"{student}.json").exists():
            os.replace(self.folder / f"{student}.json", Path(into) / f"{student}.json")

    def students(self) -> list[str]:
        """Everyone with an outcome journalled."""
        return sorted(p.stem for p in self.folder.glob("*.json"))

    def history(self) -> list[list[str]]:
        path = self.folder / "history.tsv"
        if not path.exists():
            return []
        with path.open(newline="") as f:
            return list(csv.reader(f, delimiter="\t"))

    def log(self) -> Path:
        return self.folder / "workers.log"


def course_config(course_root: Path):
    """The nbgrader configuration of a course directory, as its ``nbgrader_config.py`` makes it,
    with the directory itself as the course's root.

    The root is pinned because the class commands write into ``course_root`` (the gradebook, the
    autograded notebooks, the feedback) whatever the file says: a copy of the repository holds
    its ``nbgrader_config.py`` of old, ``configure(get_config())``, whose root is the repository,
    and nbgrader's own steps (generate_assignment, release_feedback) would work there instead.
    """
    # lazy: pipeline.config imports nbgrader, which must not delay the workers' start
    from traitlets.config import Config
    from traitlets.config.loader import PyFileConfigLoader

    from autograder.pipeline.config import configure

    path = Path(course_root) / "nbgrader_config.py"
    if path.exists():
        config = PyFileConfigLoader(path.name, path=str(path.parent)).load_config()
    else:
        config = Config()
        configure(config, Path(course_root))
    config.CourseDirectory.root = str(Path(course_root).resolve())
    return config


def _save_grades(course_root, assignment, stem, outcome: Outcome, config) -> None:
    """What nbgrader's autograde saves (student, submission, scores, comments, late
    penalty), with one commit at the end instead of one per cell."""
    # lazy: nbgrader, as in course_config
    from nbgrader import utils
    from nbgrader.api import (Comment, Grade, Gradebook, Student, SubmittedAssignment,
                              SubmittedNotebook)
    from nbgrader.preprocessors import AssignLatePenalties

    course_id = config.CourseDirectory.get("course_id", "default_course")
    with Gradebook(f"sqlite:///{Path(course_root) / 'gradebook.db'}", course_id) as gb:
        db = gb.db
        student = db.get(Student, outcome.student)
        if student is None:
            student = Student(id=outcome.student)
            db.add(student)
        try:
            submission = gb.find_submission(assignment, outcome.student)
        except Exception:  # MissingEntry: first time; mirror the assignment as add_submission does
            submission = SubmittedAssignment(assignment=gb.find_assignment(assignment), student=student)
            for nb in submission.assignment.notebooks:
                snb = SubmittedNotebook(notebook=nb, assignment=submission)
                for cell in nb.grade_cells:
                    Grade(cell_id=cell.id, notebook=snb)
                for cell in list(nb.solution_cells) + list(nb.task_cells):
                    Comment(cell_id=cell.id, notebook=snb)
                for cell in nb.task_cells:
                    Grade(cell_id=cell.id, notebook=snb)
            db.add(submission)
        if outcome.timestamp:
            submission.timestamp = utils.parse_utc(outcome.timestamp)
        db.flush()
        notebook = next(nb for nb in submission.notebooks if nb.name == stem)
        for grade in notebook.grades:
            grade.auto_score = outcome.scores.get(grade.name)
            # as nbgrader: a grader's earlier manual score, or no automatic one, needs a look
            grade.needs_manual_grade = grade.manual_score is not None or grade.auto_score is None
        for comment in notebook.comments:
            comment.auto_comment = outcome.comments.get(comment.name)
        db.flush()
        notebook.late_submission_penalty = None
        if submission.total_seconds_late > 0:
            late = AssignLatePenalties(config=config)
            late.init_plugin()
            penalty = late.plugin_inst.late_submission_penalty(
                outcome.student, notebook.score, submission.total_seconds_late)
            if penalty is not None:
                notebook.late_submission_penalty = late._check_late_penalty(notebook, penalty)
        db.commit()
