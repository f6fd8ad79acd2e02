"""Grading a class on a Dask cluster: ``autograder grade ... --scheduler`` [trusted]

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

from autograder.classroom.jobs import Outcome, Task
from autograder.classroom.worker import GradingProcess

_local = threading.local()


def grade_on_worker(task: Task, time_limit: float) -> Outcome:
    """Runs on a Dask worker: grade ``task`` in this thread's grading process."""
    process = getattr(_local, "process", None)
    if process is None:
        process = _local.process = GradingProcess(time_limit)
    process.time_limit = time_limit
    return process.grade(task)


class DaskPool:
    """The cluster behind ``scheduler``, seen as ``classroom.LocalPool`` sees its processes."""

    def __init__(self, scheduler: str, time_limit: float):
        from distributed import Client  # lazy: Dask (1 s) only when a cluster is named

        self.client = Client(scheduler, timeout="30s")
        self.time_limit = time_limit
        threads = sum(self.client.nthreads().values())
        if not threads:
            self.client.close()
            raise RuntimeError(f"the Dask cluster at {scheduler} has no workers")
        self.workers = threads

    def submit(self, task: Task):
        # pure=False: a regrade after a change is a new task even for the same student
        return self.client.submit(grade_on_worker, task, self.time_limit, pure=False,
                                  key=f"grade-{task.student}-{task.digest[:12]}")

    @staticmethod
    def wait_any(pending):
        from distributed import wait  # lazy: as in __init__

        return wait(pending, return_when="FIRST_COMPLETED")

    @staticmethod
    def outcome(future, task: Task) -> Outcome:
        try:
            return future.result()
        except Exception as err:  # KilledWorker (died too often), lost connection, ...
            return Outcome(task.student, task.digest, False,
                           reason=f"the cluster could not grade it: {type(err).__name__}: {err}"[:1500])

    def close(self, interrupted: bool = False) -> None:
        self.client.close()
