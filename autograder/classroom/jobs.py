"""What travels between the instructor's process and a grading worker [trusted]

``Task`` out, ``Outcome`` back (pickled, over a pipe or through Dask), and the digest that names one grading job.

Trusted side (class scale): imported by the worker, the pools, the journal and ``classroom``.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from autograder.paths import SOLUTIONS


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
    h.update(b"\0" + (SOLUTIONS / assignment / notebook).read_bytes())
    return h.hexdigest()
