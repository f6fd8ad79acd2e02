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
from pathlib import Path

from autograder.paths import REPO
from autograder.judge.exercise import Exercise
from autograder.exercises import get

RECORD_CALL = re.compile(r"""^record\(\s*["']([\w.]+)["']\s*,\s*globals\(\)\s*\)\s*$""", re.M)
SECRET_ENV = "AUTOGRADER_SECRET_FILE"
KEY_ENV = "AUTOGRADER_SUBMISSION_KEY_FILE"  # a class grader's worker: the one submission's key
GRADED = "graded"  # resources["autograder"][GRADED]: what graded_cases gave, from execution to judge


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

    A worker of ``autograder grade`` never holds the secret: the instructor's process computes
    the key of the submission it hands out, and the worker reads it from the file ``KEY_ENV``
    names (so a worker, or whoever watches its network, learns nothing about other submissions).
    """
    given = os.environ.get(KEY_ENV)
    if given:
        return Path(given).read_bytes()
    code = hashlib.sha256()
    for cell in nb.cells:
        if cell.cell_type == "code":
            code.update(cell.source.encode() + b"\0")
    return hmac.new(secret_key(), code.digest(), "sha256").digest()


def graded_cases(nb) -> dict[int, tuple[Exercise, list]]:
    """cell index -> (exercise, its graded cases) for every graded cell of ``nb``."""
    key = submission_key(nb)
    out = {}
    for i, cell in enumerate(nb.cells):
        ex_id = recorded_exercise(cell)
        if ex_id:
            ex = get(ex_id)
            out[i] = (ex, ex.graded_cases(key))
    return out
