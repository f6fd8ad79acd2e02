"""Which exercises a notebook grades, and the cases it is graded on [trusted]

Each graded cell names its exercise in its source, which nbgrader has restored from the
gradebook, never from what the learner wrote. The cases come from a seed derived from the
grader's secret key (a file in the course directory, never in the sandbox) and the
submission's code, so the same submission always meets the same cases, and nobody can
prepare answers for them in advance.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from autograder.paths import REPO
from autograder.judge.exercise import Exercise
from autograder.exercises import get

RECORD_CALL = re.compile(r"""^record\(\s*["']([\w.]+)["']\s*,\s*globals\(\)\s*\)\s*$""", re.M)
SECRET_ENV = "AUTOGRADER_SECRET_FILE"
PLAN = "plan"  # resources["autograder"][PLAN]: the ``Plan``, from execution to the judge


@dataclass
class Plan:
    """One grading's plan, made by the execute step and read by the steps after it: the
    submission's ``key``; ``graded``, graded cell index -> (exercise, its graded cases);
    ``alone``, graded cell index -> {case index -> ``verdict.Alone``}, its cases' twins run
    again alone and what they gave (``rerun.run_again``)."""
    key: bytes
    graded: dict[int, tuple[Exercise, list]]
    alone: dict[int, dict] = field(default_factory=dict)


def recorded_exercise(cell) -> str | None:
    """The exercise id a graded cell records, read from its (restored) source."""
    if cell.cell_type != "code" or not cell.metadata.get("nbgrader", {}).get("grade"):
        return None
    match = RECORD_CALL.search(cell.source)
    return match.group(1) if match else None


def secret_path() -> Path:
    return Path(os.environ.get(SECRET_ENV) or REPO / ".autograder" / "secret")


def secret_key() -> bytes:
    """The grader's secret, made on first use (readable by its owner only)."""
    path = secret_path()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # one draft per caller: threads of one grader (its pool prepares submissions) race too
        draft = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(6).hex()}")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(32).hex().encode())
        try:
            os.link(draft, path)  # whole or not at all; another grader may have won the race
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    key = path.read_bytes().strip()
    if len(key) < 32:
        raise RuntimeError(f"the grader's secret {path} is too short; delete it to make a new one")
    return key


def submission_key(nb) -> bytes:
    """A key for this submission: the secret and the code of the notebook, hashed together.

    Computed once per submission, by the trusted process that prepared it
    (``submission.prepare``), from the prepared notebook, before nbgrader restores its locked
    cells: ``autograder submit`` and ``autograder grade`` hash the same version, so the same
    submission meets the same cases both ways. It reaches the execute step as its
    ``submission_key`` setting, so a worker of ``autograder grade`` never holds the secret
    (nor learns anything about other submissions).
    """
    code = hashlib.sha256()
    for cell in nb.cells:
        if cell.cell_type == "code":
            code.update(cell.source.encode() + b"\0")
    return hmac.new(secret_key(), code.digest(), "sha256").digest()


def graded_cases(nb, key: bytes) -> dict[int, tuple[Exercise, list]]:
    """cell index -> (exercise, its graded cases drawn from ``key``) for every graded cell of ``nb``."""
    out = {}
    for i, cell in enumerate(nb.cells):
        ex_id = recorded_exercise(cell)
        if ex_id:
            ex = get(ex_id)
            out[i] = (ex, ex.graded_cases(key))
    return out
