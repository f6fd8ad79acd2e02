"""Grade a whole class in parallel, resumably, into an nbgrader course directory [trusted]

``grade_class`` takes nbgrader's ``submitted/<student>/<assignment>/`` layout (what
``nbgrader collect`` makes), a flat folder of ``<student>.ipynb`` files, a folder of
``<student>/<anything>.ipynb``, or a .zip of any of these (``intake.py``: whose each file is,
and which it refuses). Each learner's file is copied unchanged into the course's
``submitted/``, prepared here (``submission.prepare``, in a thread of its own: a huge file
delays no other) and graded by a worker (``worker.py``): one per ``--jobs`` here, or the
workers of a Dask cluster (both pools in ``pools.py``). Every kernel runs in its own sandbox;
a submission past ``time_limit`` seconds is stopped and reported, and the others go on. The
instructor's process alone writes the results, one submission at a time, journal first
(``journal.py``), so an interrupted run continues where it stopped when the same command is
run again: what was graded is not graded twice.

The results are nbgrader's: ``autograded/``, ``feedback/``, the gradebook, so the formgrader,
``nbgrader generate_feedback``, ``release_feedback`` and ``export`` work on them as usual.
"""
from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from tqdm import tqdm

# Light imports only: the workers start before nbgrader and nbconvert are imported here.
from autograder.classroom.export import export_csv
from autograder.classroom.intake import (extras_of, find_submissions, left_out, place_submission,
                                        read_timestamp, unpacked)
from autograder.classroom.journal import JOURNALLED, RECORDED, Journal
from autograder.classroom.jobs import Outcome, Task, job_digest
from autograder.classroom.pools import DaskPool, LocalPool  # Dask itself only for a cluster
from autograder.paths import REPO
from autograder.pipeline.assignment import notebooks
from autograder.pipeline.sandbox import isolation
from autograder.startup import quick_alembic_head
from autograder.terminal import shown

TIME_LIMIT = 180.0  # seconds per submission: kernel start, every cell, judge and feedback


@dataclass
class Summary:
    """What a run did: graded now, found graded before, failed (with the reason)."""
    graded: list[Outcome] = field(default_factory=list)
    earlier: int = 0
    failed: list[Outcome] = field(default_factory=list)
    workers: int = 1
    left_out: list[str] = field(default_factory=list)  # files not read for what they are (intake.left_out)

    def report(self) -> str:
        lines = [f"graded {len(self.graded)}"
                 + (f" (and {self.earlier} graded by an earlier run)" if self.earlier else "")
                 + f", failed {len(self.failed)}"]
        lines += [f"  {shown(o.student, layout=False)}: {shown(o.reason, layout=False)}"
                  for o in sorted(self.failed, key=lambda o: o.student)]
        if self.failed:
            lines.append("  (a rerun retries these with --retry-failed)")
        if self.left_out:
            lines.append(f"left out {len(self.left_out)} file(s) of the submissions:")
            lines += [f"  {shown(line, layout=False)}" for line in self.left_out]
        times = [o.seconds for o in self.graded]
        if times:
            worst = max(self.graded, key=lambda o: o.seconds)
            lines.append(f"time per submission: median {statistics.median(times):.1f} s, worst "
                         f"{worst.seconds:.1f} s ({worst.student}), on {self.workers} worker(s)")
        return "\n".join(lines)  # one line per submission: a reason's own breaks are escaped


def make_task(folder: Path, student: str, assignment: str, name: str) -> Task | Outcome:
    """The job of grading ``folder/name``: the notebook prepared for grading, with the key of its
    cases (never the secret); or a failed ``Outcome`` saying why it could not be prepared."""
    # lazy: nbformat and the pipeline load while the workers start (see the imports above)
    import nbformat

    from autograder.pipeline.plan import submission_key
    from autograder.pipeline.submission import prepare

    digest = job_digest(folder / name, assignment, name)
    try:
        timestamp = read_timestamp(folder)
    except OSError as err:  # a link, a file too large, not a time: nothing of it goes further
        return Outcome(student, digest, False, reason=f"not graded: {err}")
    try:
        prepared = prepare(folder / name, assignment, name)
    except Exception as err:  # a bug of ours must cost one submission, not the class
        return Outcome(student, digest, False, reason=f"grading failed: could not prepare it ({err})"[:1500])
    return Task(student, assignment, name, nbformat.writes(prepared.nb), prepared.notes, digest,
                timestamp, submission_key(prepared.nb))


def grade_submissions(submissions: Path, assignment: str, course_root: Path = REPO, jobs: int = 2,
                      time_limit: float = TIME_LIMIT, scheduler: str | None = None,
                      retry_failed: bool = False, progress: bool = True) -> Summary:
    """Grade what is not graded yet; return what happened (see the module doc)."""
    isolated, note = isolation()
    if not isolated:
        print(note, file=sys.stderr)
    names = notebooks(assignment)
    if len(names) != 1:
        from autograder.pipeline.course import GradingError  # lazy: it imports nbgrader (see above)
        raise GradingError(f"assignment {assignment!r} should hold one notebook, found {names}")
    name, course_root = names[0], Path(course_root).resolve()
    journal = Journal(course_root, assignment)
    if scheduler:
        pool = DaskPool(scheduler, time_limit)
    else:  # the workers get ready while the submissions are looked at
        pool = LocalPool(jobs, time_limit, journal.log(), assignment)
    try:
        quick_alembic_head()
        _ensure_assignment(course_root, assignment, journal.config)
        summary, todo = _triage(Path(submissions), assignment, name, course_root, journal, retry_failed)
    except BaseException:
        pool.close(interrupted=True)
        raise
    summary.workers = pool.workers
    if not todo:
        pool.close(interrupted=True)  # nothing to do: stop them without waiting
        return summary

    def keep(outcome: Outcome) -> None:
        if _keep(journal, outcome, summary):
            (summary.graded if outcome.ok else summary.failed).append(outcome)
        bar.update(1)
        bar.set_postfix(failed=len(summary.failed), refresh=False)

    bar = tqdm(total=len(todo), desc=f"grading {assignment}", unit="notebook", disable=not progress,
               file=sys.stderr, dynamic_ncols=True)
    pending, queue = set(), list(reversed(todo))
    try:
        while queue or pending:
            while queue and len(pending) < 2 * pool.workers:  # a bounded window: tasks carry files
                student = queue.pop()
                pending.add(pool.submit(partial(make_task, course_root / "submitted" / student / assignment,
                                                student, assignment, name)))
            done, pending = pool.wait_any(pending)
            for future in done:
                keep(future.result())
    except BaseException:
        pool.close(interrupted=True)
        raise
    finally:
        bar.close()
    pool.close()
    return summary


def _triage(submissions: Path, assignment: str, name: str, course_root: Path, journal: Journal,
            retry_failed: bool) -> tuple[Summary, list[str]]:
    """Copy the submissions into ``submitted/``; sort them into done, failed and to grade.

    A submission graded by an earlier run whose outcome did not reach the gradebook (the
    run was killed in between) is recorded from the journal here, not graded again.
    """
    summary, todo = Summary(), []
    with unpacked(submissions) as (folder, skipped):
        found, summary.failed = find_submissions(folder, assignment, name, _known_students(course_root),
                                                 skipped)
        summary.left_out = left_out(folder, assignment, skipped)
        for student, paths in found.items():
            folder = course_root / "submitted" / student / assignment
            if len(paths) > 1:
                summary.failed.append(Outcome(student, "", False, reason="more than one notebook: "
                                              + ", ".join(ascii(p.name) for p in paths)))
                continue
            try:
                place_submission(paths[0], folder / name, extras_of(paths[0], assignment))
                digest = job_digest(folder / name, assignment, name)
            except OSError as err:
                summary.failed.append(Outcome(student, "", False, reason=f"could not be read: {err}"))
                continue
            state, earlier = journal.state(student, digest)
            if state == RECORDED:
                summary.earlier += 1
            elif state == JOURNALLED and earlier.ok:
                summary.earlier += _keep(journal, earlier, summary, again=True)
            elif state == JOURNALLED and not retry_failed:
                summary.failed.append(earlier)
            else:
                todo.append(student)
    return summary, todo


def _known_students(course_root: Path) -> list[str]:
    """The ids the course holds already: its ``submitted/`` folders and its gradebook's students."""
    from nbgrader.api import Gradebook  # lazy: loaded by now (_ensure_assignment); see the imports

    submitted = course_root / "submitted"
    ids = [p.name for p in submitted.iterdir()] if submitted.is_dir() else []
    with Gradebook(f"sqlite:///{course_root / 'gradebook.db'}") as gb:
        return ids + [s.id for s in gb.students]


def _keep(journal: Journal, outcome: Outcome, summary: Summary, again: bool = False) -> bool:
    """Keep an outcome in the journal and the course (``again``: one the journal holds already);
    False, and a failure noted, when the gradebook could not take it."""
    try:
        journal.record(outcome) if again else journal.keep(outcome)
    except Exception as err:  # the gradebook locked or full: the journal keeps the outcome
        summary.failed.append(Outcome(outcome.student, outcome.digest, False, reason=(
            f"graded, but not written to the gradebook ({err}); run again to write it")))
        return False
    return True


def _ensure_assignment(course_root: Path, assignment: str, config) -> None:
    """Generate the assignment into the course's gradebook unless it is there already, so that
    nbgrader records its notebook and cells as ``nbgrader generate_assignment`` does; refuse,
    before anything is graded, where that did not put it in the gradebook the scores go to."""
    # lazy: nbgrader loads while the workers start (see the imports above)
    from nbgrader.api import Gradebook, MissingEntry
    from nbgrader.apps import NbGraderAPI

    from autograder.pipeline.course import GradingError, run_step

    db = course_root / "gradebook.db"

    def registered() -> bool:
        if not db.exists():
            return False
        with Gradebook(f"sqlite:///{db}") as gb:
            try:
                return bool(gb.find_assignment(assignment).notebooks)
            except MissingEntry:
                return False

    if registered():
        return
    run_step(lambda: NbGraderAPI(config=config).generate_assignment(assignment),
             f"generate_assignment {assignment}")
    if not registered():  # the course's config names another gradebook (CourseDirectory.db_url)
        raise GradingError(f"{assignment} is not in {db} after nbgrader generate_assignment; run "
                           f"`nbgrader generate_assignment {assignment} --db sqlite:///{db}` in "
                           f"{course_root} and grade again")


def grade_class(submissions: Path, assignment: str, jobs: int = 2, csv_path: Path = Path("grades.csv"),
                course_root: Path = REPO, **options) -> Path:
    """Grade a class (``grade_submissions``), print the summary, return the exported CSV."""
    summary = grade_submissions(Path(submissions), assignment, course_root, jobs, **options)
    print(summary.report(), file=sys.stderr)
    return export_csv(course_root, csv_path)
