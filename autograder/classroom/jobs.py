"""What travels between the instructor's process and a grading worker [trusted]

``Task`` out, ``Outcome`` back (pickled, over a pipe or through Dask), and the digest that names one grading job.

Trusted side (class scale): imported by the worker, the pools, the journal and ``classroom``.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field, replace
from pathlib import Path



@dataclass
class Task:
    """One submission to grade, with everything a worker on another machine needs."""
    student: str
    assignment: str
    notebook: str          # the assignment's notebook file name, e.g. "attention.ipynb"
    prepared: str          # the notebook to grade (JSON): the learner's file after submission.prepare
    notes: list[str]       # what prepare repaired, for the learner
    digest: str            # identifies this grading job (submission and source), see job_digest
    timestamp: str | None  # nbgrader's timestamp.txt, when the submission has one
    key: bytes             # plan.submission_key of the prepared notebook: its cases on any machine


@dataclass
class Outcome:
    """What grading one ``Task`` gave, or why it could not be graded."""
    student: str
    digest: str
    ok: bool
    reason: str | None = None  # why it could not be graded
    seconds: float = 0.0       # grading this submission (the worker's start-up not counted)
    scores: dict[str, float | None] = field(default_factory=dict)    # grade id -> auto score
    comments: dict[str, str | None] = field(default_factory=dict)    # grade id -> auto comment
    autograded: str = ""       # the autograded notebook (JSON)
    feedback: str = ""         # nbgrader's HTML feedback
    notes: list[str] = field(default_factory=list)
    worker: str = ""           # host:parent pid>grading process pid
    timestamp: str | None = None  # the task's (``intake.read_timestamp``), for the gradebook


def job_digest(submission: Path, assignment: str, notebook: str) -> str:
    """Same submission against the same source: same job (graded once, whatever the run).

    The file is hashed a megabyte at a time: a submission may be large (its saved outputs).
    """
    h = hashlib.sha256()
    with submission.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    from autograder.pipeline.assignment import source  # lazy: nbformat, after the workers start

    h.update(b"\0" + source(assignment, notebook).digest.encode())
    return h.hexdigest()


def points(assignment: str, notebook: str) -> dict[str, float]:
    """grade id -> points of every graded cell of the assignment's source notebook."""
    from autograder.pipeline.assignment import source  # lazy: as in job_digest

    return {grade_id: pts for grade_id, (_, pts) in source(assignment, notebook).graded.items()}


def answer_to(task: Task, outcome: Outcome) -> Outcome:
    """``outcome`` if it is a worker's answer to ``task``, else a failed outcome for the task.

    The instructor's process records what a worker sends back into the gradebook under the
    student it names. A worker is trusted code, but it runs learners' notebooks, on machines of
    a Dask cluster too: should one ever be made to lie, its answer counts only for the task it
    was given (same student, same submission) and only with scores its cells allow.
    """
    allowed = points(task.assignment, task.notebook)

    def refused(why: str) -> Outcome:
        return Outcome(task.student, task.digest, False, reason=f"grading failed: the worker's "
                       f"answer was not recorded ({why})", worker=outcome.worker)
    if (outcome.student, outcome.digest) != (task.student, task.digest):
        return refused(f"it answered for {outcome.student!a}, another submission")
    for grade_id, score in outcome.scores.items():
        if grade_id not in allowed:
            return refused(f"a score for {grade_id!a}, which is no graded cell")
        if score is not None and not (isinstance(score, (int, float)) and math.isfinite(score)
                                      and 0 <= score <= allowed[grade_id]):
            return refused(f"{score!a} points for {grade_id!a}, out of 0 to {allowed[grade_id]:g}")
    return replace(outcome, timestamp=task.timestamp)
