"""Grade a whole class: in parallel, resumably, into an nbgrader course directory.

``grade_class`` takes nbgrader's ``submitted/<student>/<assignment>/`` layout (what
``nbgrader collect`` makes), a flat folder of ``<student>.ipynb`` files, a folder of
``<student>/<anything>.ipynb``, or a .zip of any of these. Each learner's file is copied
unchanged into the course's ``submitted/`` and graded by a worker (``worker.py``): one per
``--jobs`` here, or the workers of a Dask cluster (``distributed.py``). Every kernel runs in
its own sandbox; a submission past ``time_limit`` seconds is stopped and reported, and the
others go on. The instructor's process alone writes the results, one submission at a time,
journal first (``gradebook_io.py``), so an interrupted run continues where it stopped when
the same command is run again: what was graded is not graded twice.

The results are nbgrader's: ``autograded/``, ``feedback/``, the gradebook, so the formgrader,
``nbgrader generate_feedback``, ``release_feedback`` and ``export`` work on them as usual.
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import zipfile
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from queue import Queue

from tqdm import tqdm

# Light imports only: the workers start before nbgrader and nbconvert are imported here.
from autograder.classroom.journal import Journal, course_config, place_submission, record
from autograder.classroom.jobs import Outcome, Task, job_digest
from autograder.paths import REPO, SOLUTIONS
from autograder.pipeline.sandbox import isolation
from autograder.startup import quick_alembic_head
from autograder.classroom.worker import GradingProcess

TIME_LIMIT = 180.0  # seconds per submission: kernel start, every cell, judge and feedback


def find_submissions(folder: Path, assignment: str, notebook: str) -> dict[str, list[Path]]:
    """student id -> the notebooks found for them, for any of the accepted layouts.

    nbgrader's layout may hold more than one notebook per learner: the assignment's own
    name, when present, is the one graded.
    """
    found: dict[str, list[Path]] = {}
    for nb in sorted(folder.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in nb.parts:
            continue
        rel = nb.relative_to(folder).parts
        if len(rel) == 1:
            student = nb.stem
        elif len(rel) >= 3 and rel[-2] == assignment:
            student = rel[-3]
        else:
            student = rel[0]
        found.setdefault(student, []).append(nb)
    if not found:
        from autograder.grading import GradingError
        raise GradingError(f"no notebooks found in {folder}")
    return {s: [p for p in paths if p.name == notebook] or paths for s, paths in found.items()}


@dataclass
class Summary:
    """What a run did: graded now, found graded before, failed (with the reason)."""
    graded: list[Outcome] = field(default_factory=list)
    earlier: int = 0
    failed: list[Outcome] = field(default_factory=list)
    workers: int = 1

    def report(self) -> str:
        lines = [f"graded {len(self.graded)}"
                 + (f" (and {self.earlier} graded by an earlier run)" if self.earlier else "")
                 + f", failed {len(self.failed)}"]
        lines += [f"  {o.student}: {o.reason}" for o in sorted(self.failed, key=lambda o: o.student)]
        if self.failed:
            lines.append("  (a rerun retries these with --retry-failed)")
        times = [o.seconds for o in self.graded]
        if times:
            worst = max(self.graded, key=lambda o: o.seconds)
            lines.append(f"time per submission: median {statistics.median(times):.1f} s, worst "
                         f"{worst.seconds:.1f} s ({worst.student}), on {self.workers} worker(s)")
        return "\n".join(lines)


class LocalPool:
    """``jobs`` grading processes on this machine, started at once, each lent to one thread."""

    def __init__(self, jobs: int, time_limit: float, log: Path, assignment: str):
        self.workers = max(1, jobs)
        self._all = [GradingProcess(time_limit, log, assignment) for _ in range(self.workers)]
        self._idle: Queue[GradingProcess] = Queue()
        for process in self._all:
            self._idle.put(process)
        self._threads = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="grade")

    def _grade(self, task: Task) -> Outcome:
        process = self._idle.get()
        try:
            return process.grade(task)
        finally:
            self._idle.put(process)

    def submit(self, task: Task):
        return self._threads.submit(self._grade, task)

    @staticmethod
    def wait_any(pending):
        return wait(pending, return_when=FIRST_COMPLETED)

    @staticmethod
    def outcome(future, task: Task) -> Outcome:
        return future.result()

    def close(self, interrupted: bool = False) -> None:
        if interrupted:  # stop the graders first, so the threads waiting on them return
            for process in self._all:
                process.close()
        self._threads.shutdown(wait=True, cancel_futures=True)
        for process in self._all:
            process.close(kill=False)


def make_task(folder: Path, student: str, assignment: str, name: str) -> Task:
    """The job of grading ``folder/name``, with the key of its cases (never the secret)."""
    from nbformat import v4 as nbformat_v4

    from autograder.pipeline.plan import submission_key
    from autograder.pipeline.submission import prepare

    stamp = folder / "timestamp.txt"
    content = (folder / name).read_bytes()
    try:
        key = submission_key(prepare(folder / name, assignment, name).nb)  # as the worker sees it
    except Exception:  # the worker fails it too, and says why; its key does not matter then
        key = submission_key(nbformat_v4.new_notebook())
    return Task(student, assignment, name, content, job_digest(content, assignment, name),
                stamp.read_text().strip() if stamp.exists() else None, key)


def grade_submissions(submissions: Path, assignment: str, course_root: Path = REPO, jobs: int = 2,
                      time_limit: float = TIME_LIMIT, scheduler: str | None = None,
                      retry_failed: bool = False, progress: bool = True) -> Summary:
    """Grade what is not graded yet; return what happened (see the module doc)."""
    isolated, note = isolation()
    if not isolated:
        print(note, file=sys.stderr)
    names = sorted(p.name for p in (SOLUTIONS / assignment).glob("*.ipynb"))
    if len(names) != 1:
        from autograder.grading import GradingError
        raise GradingError(f"assignment {assignment!r} should hold one notebook, found {names}")
    name, course_root = names[0], Path(course_root).resolve()
    journal = Journal(course_root, assignment)
    if scheduler:
        from autograder.classroom.pools import DaskPool
        pool = DaskPool(scheduler, time_limit)
    else:  # the workers get ready while the submissions are looked at
        pool = LocalPool(jobs, time_limit, journal.log(), assignment)
    try:
        config = course_config(course_root)
        quick_alembic_head()
        _ensure_assignment(course_root, assignment, config)
        summary, todo = _triage(Path(submissions), assignment, name, course_root, journal, config,
                                retry_failed)
    except BaseException:
        pool.close(interrupted=True)
        raise
    summary.workers = pool.workers
    if not todo:
        pool.close(interrupted=True)  # nothing to do: stop them without waiting
        return summary

    def task(student: str) -> Task:
        return make_task(course_root / "submitted" / student / assignment, student, assignment, name)

    bar = tqdm(total=len(todo), desc=f"grading {assignment}", unit="notebook", disable=not progress,
               file=sys.stderr, dynamic_ncols=True)
    pending, queue = {}, list(reversed(todo))
    try:
        while queue or pending:
            while queue and len(pending) < 2 * pool.workers:  # a bounded window: tasks carry files
                t = task(queue.pop())
                pending[pool.submit(t)] = t
            done, _ = pool.wait_any(list(pending))
            for future in done:
                outcome = pool.outcome(future, pending.pop(future))
                journal.save(outcome)
                if outcome.ok:
                    if _record(course_root, assignment, name, outcome, journal, config, summary):
                        summary.graded.append(outcome)
                else:
                    summary.failed.append(outcome)
                bar.update(1)
                bar.set_postfix(failed=len(summary.failed), refresh=False)
    except BaseException:
        pool.close(interrupted=True)
        raise
    finally:
        bar.close()
    pool.close()
    return summary


def _triage(submissions: Path, assignment: str, name: str, course_root: Path, journal: Journal,
            config, retry_failed: bool) -> tuple[Summary, list[str]]:
    """Copy the submissions into ``submitted/``; sort them into done, failed and to grade.

    A submission graded by an earlier run whose outcome did not reach the gradebook (the
    run was killed in between) is recorded from the journal here, not graded again.
    """
    summary, todo = Summary(), []
    with tempfile.TemporaryDirectory() as tmp:
        if submissions.suffix == ".zip":
            with zipfile.ZipFile(submissions) as zf:
                zf.extractall(tmp)
            submissions = Path(tmp)
        for student, paths in find_submissions(submissions, assignment, name).items():
            folder = course_root / "submitted" / student / assignment
            if len(paths) > 1:
                summary.failed.append(Outcome(student, "", False, reason="more than one notebook: "
                                              + ", ".join(p.name for p in paths)))
                continue
            try:
                place_submission(paths[0], folder / name, with_extras=paths[0].parent.name == assignment)
                digest = job_digest((folder / name).read_bytes(), assignment, name)
            except OSError as err:
                summary.failed.append(Outcome(student, "", False, reason=f"could not be read: {err}"))
                continue
            earlier = journal.outcome(student)
            if journal.recorded(student) == digest:
                summary.earlier += 1
            elif earlier and earlier.digest == digest and (earlier.ok or not retry_failed):
                if earlier.ok:
                    summary.earlier += _record(course_root, assignment, name, earlier, journal, config, summary)
                else:
                    summary.failed.append(earlier)
            else:
                todo.append(student)
    return summary, todo


def _record(course_root, assignment, name, outcome, journal, config, summary) -> bool:
    """Write a graded outcome into the course; False (and a failure noted) if it could not be."""
    try:
        record(course_root, assignment, name, outcome, course_root / "submitted" / outcome.student / assignment,
               config)
    except Exception as err:  # the gradebook locked or full: the journal keeps the outcome
        summary.failed.append(Outcome(outcome.student, outcome.digest, False, reason=(
            f"graded, but not written to the gradebook ({err}); run again to write it")))
        return False
    journal.mark_recorded(outcome)
    return True


def _ensure_assignment(course_root: Path, assignment: str, config) -> None:
    """Generate the assignment into the course's gradebook unless it is there already."""
    from nbgrader.api import Gradebook, MissingEntry
    from nbgrader.apps import NbGraderAPI

    from autograder.grading import require_success

    db = course_root / "gradebook.db"
    if db.exists():
        with Gradebook(f"sqlite:///{db}") as gb:
            try:
                if gb.find_assignment(assignment).notebooks:
                    return
            except MissingEntry:
                pass
    require_success(NbGraderAPI(config=config).generate_assignment(assignment), f"generate_assignment {assignment}")


def export_csv(course_root: Path, csv_path: Path) -> Path:
    """``nbgrader export``: the gradebook as CSV, with the course's export plugin."""
    from nbgrader.api import Gradebook
    from nbgrader.apps.exportapp import ExportApp

    config = course_config(course_root)
    csv_path = Path(csv_path).resolve()
    plugin = ExportApp(config=config).plugin_class(config=config)
    plugin.to = str(csv_path)
    course_id = config.CourseDirectory.get("course_id", "default_course")
    with Gradebook(f"sqlite:///{Path(course_root) / 'gradebook.db'}", course_id) as gb:
        plugin.export(gb)
    return csv_path


def grade_class(submissions: Path, assignment: str, jobs: int = 2, csv_path: Path = Path("grades.csv"),
                course_root: Path = REPO, **options) -> Path:
    """Grade a class (``grade_submissions``), print the summary, return the exported CSV."""
    summary = grade_submissions(Path(submissions), assignment, course_root, jobs, **options)
    print(summary.report(), file=sys.stderr)
    return export_csv(course_root, csv_path)
