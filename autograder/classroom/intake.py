"""What a class hands in, taken in: whose each notebook is, read without following a link [trusted]

Everything below the folder ``autograder grade`` is given was made by learners: their file
and folder names, what is inside their folders (nbgrader's ``submit`` copies a learner's
whole assignment folder, subfolders included), and what a file is (a git clone or a shared
folder keeps symbolic links). The instructor's process reads it with the instructor's
rights, so here

- **whose** a notebook is depends on where it lies, never on a name below the learner's own
  folder: the first component of its path inside the folder (``<student>.ipynb``,
  ``<student>/...``). A folder that holds nothing but nbgrader's ``submitted/`` (a zip of it)
  is read inside it;
- a **student id** becomes a folder name (``submitted/<student>/``), a journal file name, a
  key in the gradebook and a word in nbgrader's formgrader pages, which write it into HTML and
  JavaScript unescaped. So an id is what a JupyterHub or Unix user name is: ``STUDENT_ID``,
  a letter or digit, then letters, digits and ``. _ @ + -``, at most 64 characters. A
  notebook whose place names anything else is refused, with the reason;
- a **link** (the notebook, a folder above it, ``timestamp.txt``) is never followed: it could
  name a classmate's file, the gradebook or the grader's secret, which the learner cannot
  read but the instructor's process can. A submission that holds one is refused;
- ``timestamp.txt`` is read at most ``STAMP_LIMIT`` bytes, once, and must be a time
  nbgrader reads (``read_timestamp``).
"""
from __future__ import annotations

import errno
import os
import re
import stat
import tempfile
import zipfile
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path

from autograder.classroom.identity import collisions, shown_ids
from autograder.classroom.jobs import Outcome
from autograder.classroom.journal import write_atomic
from autograder.paths import SOLUTIONS

STUDENT_ID = re.compile(r"[^\W_][\w.@+-]{0,63}")
STAMP_LIMIT = 256      # bytes of timestamp.txt: nbgrader writes ~30 ("2024-05-01 12:00:00.000000 UTC")
EXTRAS_LIMIT = 4096    # bytes of the other small files nbgrader's layout carries
EXTRAS = ("timestamp.txt", "submission_secret.txt")


class NotHandedIn(OSError):
    """A file of a submission the grader does not read: a link, or larger than it may be."""


@contextmanager
def unpacked(submissions: Path):
    """The folder to read: ``submissions`` itself, or a zip's contents in a temporary folder
    (``zipfile`` writes every member inside it, whatever its name: ``../x`` and ``/x`` too)."""
    if submissions.suffix != ".zip":
        yield _inside_submitted(Path(submissions).resolve())
        return
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(submissions) as zf:
        zf.extractall(tmp)
        yield _inside_submitted(Path(tmp).resolve())


def _inside_submitted(folder: Path) -> Path:
    entries = list(folder.iterdir()) if folder.is_dir() else []  # none: "no notebooks found"
    only = entries[0] if len(entries) == 1 else None
    if only and only.name == "submitted" and only.is_dir() and not only.is_symlink():
        return only
    return folder


def find_submissions(folder: Path, assignment: str, notebook: str,
                     known: Iterable[str] = ()) -> tuple[dict[str, list[Path]], list[Outcome]]:
    """(student id -> the notebooks found for them, the submissions refused and why) in
    ``folder``, a resolved path (``unpacked``). ``known``: the ids the course holds already;
    an id that folds alike with another (``identity.id_key``) is refused (``_refuse_alike``).

    A learner's folder may hold more than one notebook: the assignment's own name, when
    present, is the one graded (``grade.py`` refuses a learner left with several). In
    nbgrader's layout, ``<student>/<another assignment>/`` is not this assignment's work:
    ``submitted/`` holds every assignment collected so far.
    """
    found: dict[str, list[Path]] = {}
    refused: dict[str, Outcome] = {}
    others = {p.name for p in SOLUTIONS.iterdir() if p.is_dir()} - {assignment}
    for nb in sorted(folder.rglob("*.ipynb")):
        rel = nb.relative_to(folder).parts
        if ".ipynb_checkpoints" in rel or (len(rel) > 2 and rel[1] in others):
            continue  # (nbgrader's layout: that learner's work on another assignment of the course)
        student = Path(rel[0]).stem if len(rel) == 1 else rel[0]
        if not STUDENT_ID.fullmatch(student):
            shown = ascii(student)  # as the terminal and the journal can show it
            refused[shown] = Outcome(shown, "", False, reason=(
                f"{ascii('/'.join(rel))} is not graded: {shown} is not a student id (a letter or "
                "digit, then letters, digits and . _ @ + -, at most 64 characters); rename it"))
        elif nb.resolve() != nb:
            refused[student] = Outcome(student, "", False, reason=(
                f"{ascii('/'.join(rel))} is a symbolic link (or lies in a linked folder): the grader "
                "reads only files handed in, never what a link points to"))
        else:
            found.setdefault(student, []).append(nb)
    for student in refused:
        found.pop(student, None)
    _refuse_alike(found, refused, set(known))
    if not found and not refused:
        from autograder.pipeline.course import GradingError  # lazy: it imports nbgrader (see grade.py)
        raise GradingError(f"no notebooks found in {folder}")
    chosen = {s: [p for p in paths if p.name == notebook] or paths for s, paths in found.items()}
    return chosen, list(refused.values())


def _refuse_alike(found: dict[str, list[Path]], refused: dict[str, Outcome], known: set[str]) -> None:
    """Move from ``found`` to ``refused`` every student whose id is one with another's, found
    here or ``known`` to the course, once folded (``identity``): their folders, journals and
    roster rows would be one, so none of them is graded rather than one for the other."""
    for same in collisions([*found, *known]).values():
        before = [s for s in same if s in known and s not in found]
        why = (f"{shown_ids(same)} are one id to the grader (compared after NFKC and case folding"
               + (f"; {shown_ids(before)} already in the course" if before else "")
               + "): none of them is graded; rename all but one")
        for student in same:
            if student in found:
                del found[student]
                refused[student] = Outcome(student, "", False, reason=why)


def read_handed_in(path: Path, limit: int) -> bytes:
    """The bytes of a learner's file, never through a link, at most ``limit`` of them
    (``NotHandedIn`` otherwise)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise NotHandedIn(f"{path.name} is a symbolic link: the grader does not follow it") from None
        raise
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotHandedIn(f"{path.name} is not a regular file")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise NotHandedIn(f"{path.name} is larger than the {limit} bytes the grader reads of it")
    return data


def read_timestamp(folder: Path) -> str | None:
    """The submission's time as ``timestamp.txt`` in ``folder`` says it (None without one),
    checked as nbgrader will parse it; ``NotHandedIn`` when it is not a time."""
    # lazy: nbgrader is slow to import, and grade.py imports this before its workers start
    from nbgrader.utils import parse_utc

    path = folder / "timestamp.txt"
    if not path.exists() and not path.is_symlink():
        return None
    text = read_handed_in(path, STAMP_LIMIT).decode(errors="replace").strip()
    try:
        parse_utc(text)
    except (ValueError, OverflowError):
        raise NotHandedIn("timestamp.txt does not hold a time nbgrader can read") from None
    return text or None


def place_submission(source: Path, dest: Path, with_extras: bool) -> None:
    """Copy a learner's file into ``submitted/`` unchanged (nbgrader's hashes depend on it).

    ``with_extras``: ``source`` sits in nbgrader's layout, whose ``timestamp.txt`` and
    submission secret come along (``NotHandedIn`` if one is a link or too large).
    """
    if source.resolve() == dest.resolve():
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(dest, source)
    for name in EXTRAS if with_extras else ():
        extra = source.parent / name
        if extra.exists() or extra.is_symlink():
            write_atomic(dest.parent / name, read_handed_in(extra, EXTRAS_LIMIT))
