"""Who grades a class's submissions: threads of the instructor's process, and the Dask cluster [trusted]

``Pool`` is what ``grade.grade_submissions`` hands submissions to: each one is read and prepared
(``grade.make_task``: seconds for a gigabyte of saved outputs) and then graded in a thread of
its own, ``2 * workers`` at a time, so that a huge file delays no other submission; the
instructor's main thread only hands out and keeps what comes back. ``LocalPool`` grades
in processes of this machine; ``DaskPool`` on a cluster (``autograder grade ... --scheduler``).

Each Dask worker thread keeps one grading process (``worker.GradingProcess``), exactly as
``--jobs`` does on one machine: every submission is graded there in its own sandbox and
the ``Outcome`` (scores, comments, autograded notebook, feedback HTML) comes back to the
instructor's process, which alone writes the journal and the gradebook
(``grade.py``, ``journal.py``). A task carries the learner's notebook, prepared for grading,
and the key its cases are drawn from (computed by the instructor's process from the secret
and the submission's code; the secret never leaves it), so workers need no shared storage, only this repository (the same commit)
installed with bubblewrap.

A worker that dies takes its grading processes with it; Dask's scheduler gives its tasks to
the other workers (up to ``distributed.scheduler.allowed-failures`` deaths per task), and
since a submission's cases follow from its key, the regraded result is the one it would
have had.
"""
from __future__ import annotations

import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from queue import Queue
from typing import Callable

from autograder.classroom.jobs import Outcome, Task, answer_to
from autograder.classroom.worker import GradingProcess

_local = threading.local()


def grade_on_worker(task: Task, time_limit: float) -> Outcome:
    """Runs on a Dask worker: grade ``task`` in this thread's grading process."""
    process = getattr(_local, "process", None)
    if process is None:
        process = _local.process = GradingProcess(time_limit)
    process.time_limit = time_limit
    return process.grade(task)


class Pool:
    """``workers`` graders, each task prepared and graded in a thread of this process (see above)."""

    def __init__(self, workers: int):
        self.workers = max(1, workers)
        # twice the graders: the window of tasks grade_submissions keeps out, each prepared at once
        self._threads = ThreadPoolExecutor(max_workers=2 * self.workers, thread_name_prefix="grade")

    def submit(self, prepare: Callable[[], Task | Outcome]) -> Future:
        """A future of the outcome of ``prepare()``'s task: the grader's answer to that task
        (``answer_to``), or the failed outcome ``prepare`` returned instead of a task."""
        return self._threads.submit(self._prepare_and_grade, prepare)

    def _prepare_and_grade(self, prepare) -> Outcome:
        task = prepare()
        return task if isinstance(task, Outcome) else answer_to(task, self.grade(task))

    def grade(self, task: Task) -> Outcome:
        raise NotImplementedError

    @staticmethod
    def wait_any(pending):
        return wait(pending, return_when=FIRST_COMPLETED)

    def close(self, interrupted: bool = False) -> None:
        self._threads.shutdown(wait=True, cancel_futures=True)


class LocalPool(Pool):
    """``jobs`` grading processes on this machine, started at once, each lent to one thread."""

    def __init__(self, jobs: int, time_limit: float, log: Path, assignment: str):
        super().__init__(jobs)
        self._all = [GradingProcess(time_limit, log, assignment) for _ in range(self.workers)]
        self._idle: Queue[GradingProcess] = Queue()
        for process in self._all:
            self._idle.put(process)

    def grade(self, task: Task) -> Outcome:
        process = self._idle.get()
        try:
            return process.grade(task)
        finally:
            self._idle.put(process)

    def close(self, interrupted: bool = False) -> None:
        if interrupted:  # stop the graders first, so the threads waiting on them return
            for process in self._all:
                process.close()
        super().close(interrupted)
        for process in self._all:
            process.close(kill=False)


class NoWorkers(RuntimeError):
    """The Dask cluster named has no workers."""


def connect(scheduler: str):
    """(a Dask client of the cluster behind ``scheduler``, the threads of its workers);
    ``NoWorkers`` where it has none, ``OSError`` where it cannot be reached.
    ``autograder leaderboard --scheduler`` uses it too."""
    from distributed import Client  # lazy: Dask (1 s) only when a cluster is named

    client = Client(scheduler, timeout="30s")
    threads = sum(client.nthreads().values())
    if not threads:
        client.close()
        raise NoWorkers(f"the Dask cluster at {scheduler} has no workers")
    return client, threads


class DaskPool(Pool):
    """The cluster behind ``scheduler``: one grader per thread of its workers."""

    def __init__(self, scheduler: str, time_limit: float):
        self.client, threads = connect(scheduler)
        self.time_limit = time_limit
        super().__init__(threads)

    def grade(self, task: Task) -> Outcome:
        # pure=False: a regrade after a change is a new task even for the same student
        future = self.client.submit(grade_on_worker, task, self.time_limit, pure=False,
                                    key=f"grade-{task.student}-{task.digest[:12]}")
        try:
            return future.result()
        except Exception as err:  # KilledWorker (died too often), lost connection, ...
            return Outcome(task.student, task.digest, False,
                           reason=f"the cluster could not grade it: {type(err).__name__}: {err}"[:1500])

    def close(self, interrupted: bool = False) -> None:
        self.client.close()  # first: a thread waiting on the cluster then returns
        super().close(interrupted)
