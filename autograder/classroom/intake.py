"""What a class hands in, taken in: whose each notebook is, only regular files read [trusted]

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
- only **regular files** are read (``files.open_handed_in``: no link followed, no wait, then
  ``fstat``): a notebook that is a named pipe (whose copy would wait forever, and the class
  after it), a device, a socket or a folder is refused, and so is a hard link whose other
  names are not all in the submissions; a zip's members that are links or special files (the
  mode in ``external_attr``) are not unpacked, and a notebook or ``timestamp.txt`` among them
  refuses its learner's submission. Every other such file or member, whatever its name, is
  named once in the run's summary (``left_out``). No file makes the intake wait;
- ``timestamp.txt`` is read at most ``STAMP_LIMIT`` bytes, once, and must be a time
  nbgrader reads (``read_timestamp``).
"""
from __future__ import annotations

import os
import re
import stat
import tempfile
import zipfile
from collections import Counter
from collections.abc import Iterable, Mapping
from contextlib import contextmanager
from pathlib import Path

from autograder.classroom.files import NotHandedIn, kind, open_handed_in, read_handed_in
from autograder.classroom.identity import collisions, shown_ids
from autograder.classroom.jobs import Outcome
from autograder.classroom.journal import write_atomic
from autograder.paths import SOLUTIONS

STUDENT_ID = re.compile(r"[^\W_][\w.@+-]{0,63}")
STAMP_LIMIT = 256      # bytes of timestamp.txt: nbgrader writes ~30 ("2024-05-01 12:00:00.000000 UTC")
EXTRAS_LIMIT = 4096    # bytes of the other small files nbgrader's layout carries
EXTRAS = ("timestamp.txt", "submission_secret.txt")


@contextmanager
def unpacked(submissions: Path):
    """(the folder to read, its skipped files): ``submissions`` itself, or a zip's regular
    members in a temporary folder (``zipfile`` writes every member inside it, whatever its
    name: ``../x`` and ``/x`` too), with the members that are not regular files (a link, a
    pipe, a device: their mode in ``external_attr``) left out and named, path -> what it is."""
    if submissions.suffix != ".zip":
        yield _inside_submitted(Path(submissions).resolve()), {}
        return
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(submissions) as zf:
        skipped = {}
        for member in zf.infolist():
            mode = member.external_attr >> 16
            if member.is_dir() or stat.S_IFMT(mode) in (0, stat.S_IFREG):  # 0: made where no modes are
                zf.extract(member, tmp)
            else:
                skipped["/".join(p for p in member.filename.split("/") if p not in ("", ".", ".."))] = kind(mode)
        root = Path(tmp).resolve()
        folder = _inside_submitted(root)
        inside = "" if folder == root else folder.name + "/"
        yield folder, {path[len(inside):]: what for path, what in skipped.items() if path.startswith(inside)}


def _inside_submitted(folder: Path) -> Path:
    entries = list(folder.iterdir()) if folder.is_dir() else []  # none: "no notebooks found"
    only = entries[0] if len(entries) == 1 else None
    if only and only.name == "submitted" and only.is_dir() and not only.is_symlink():
        return only
    return folder


def find_submissions(folder: Path, assignment: str, notebook: str, known: Iterable[str] = (),
                     skipped: Mapping[str, str] = {}) -> tuple[dict[str, list[Path]], list[Outcome]]:
    """(student id -> the notebooks found for them, the submissions refused and why) in
    ``folder``, a resolved path, and its ``skipped`` zip members (both from ``unpacked``).
    ``known``: the ids the course holds already; an id that folds alike with another
    (``identity.id_key``) is refused (``_refuse_alike``). A notebook that is not a regular
    file of the folder's own (``_not_read``) costs its learner's submission, never the class.

    A learner's folder may hold more than one notebook: the assignment's own name, when
    present, is the one graded (``grade.py`` refuses a learner left with several). In
    nbgrader's layout, ``<student>/<another assignment>/`` is not this assignment's work:
    ``submitted/`` holds every assignment collected so far.
    """
    found: dict[str, list[Path]] = {}
    refused: dict[str, Outcome] = {}
    names = _NamesInside(folder)
    read = _read(skipped)
    for nb in _candidates(folder, assignment, skipped):
        rel = nb.relative_to(folder).parts
        student = Path(rel[0]).stem if len(rel) == 1 else rel[0]
        where = "/".join(rel)
        why = (f"{ascii(where)} is {read[where]} in the zip: the grader reads only regular files"
               if where in read else _not_read(nb, names))
        if not STUDENT_ID.fullmatch(student):
            shown = ascii(student)  # as the terminal and the journal can show it
            refused[shown] = Outcome(shown, "", False, reason=(
                f"{ascii(where)} is not graded: {shown} is not a student id (a letter or "
                "digit, then letters, digits and . _ @ + -, at most 64 characters); rename it"))
        elif why:
            refused[student] = Outcome(student, "", False, reason=f"{ascii(where)} {why}")
        elif nb.suffix == ".ipynb":
            found.setdefault(student, []).append(nb)
    for student in refused:
        found.pop(student, None)
    _refuse_alike(found, refused, set(known))
    if not found and not refused:
        from autograder.pipeline.course import GradingError  # lazy: it imports nbgrader (see grade.py)
        raise GradingError(f"no notebooks found in {folder}")
    chosen = {s: [p for p in paths if p.name == notebook] or paths for s, paths in found.items()}
    return chosen, list(refused.values())


def _read(skipped: Mapping[str, str]) -> dict[str, str]:
    """The skipped zip members that would have been read: notebooks and nbgrader's files."""
    return {path: what for path, what in skipped.items() if path.endswith(".ipynb") or Path(path).name in EXTRAS}


def _candidates(folder: Path, assignment: str, skipped: Mapping[str, str]) -> list[Path]:
    """The notebooks (and skipped members that would have been read) ``find_submissions`` judges."""
    others = {p.name for p in SOLUTIONS.iterdir() if p.is_dir()} - {assignment}
    judged = []
    for nb in sorted({*folder.rglob("*.ipynb"), *(folder / path for path in _read(skipped))}):
        rel = nb.relative_to(folder).parts
        if ".ipynb_checkpoints" in rel or (len(rel) > 2 and rel[1] in others):
            continue  # (nbgrader's layout: that learner's work on another assignment of the course)
        judged.append(nb)
    return judged


def left_out(folder: Path, assignment: str, skipped: Mapping[str, str] = {}) -> list[str]:
    """One line for the instructor per file of ``folder`` (and per ``skipped`` zip member) that
    the grader leaves out for what it is (a link, a pipe, a device, a socket), whatever its
    name, but those whose learner's submission ``find_submissions`` refuses for it, saying so.

    >>> left_out(Path("/nonexistent"), "00_start_here", {"ada/data.csv": "a symbolic link"})
    ["'ada/data.csv' is a symbolic link: not read (the grader reads only regular files)"]
    """
    special = dict(skipped)
    for top, dirs, files in os.walk(folder):  # os.walk follows no link
        for name in dirs + files:
            mode = os.lstat(os.path.join(top, name)).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                special[Path(top, name).relative_to(folder).as_posix()] = kind(mode)
    notebooks = _candidates(folder, assignment, skipped)
    judged = {p.relative_to(folder).as_posix()  # a refusal of its learner names them
              for nb in notebooks for p in [nb, *extras_of(nb, assignment)]}
    return [f"{ascii(path)} is {what}: not read (the grader reads only regular files)"
            for path, what in sorted(special.items()) if path not in judged]


class _NamesInside:
    """How many names each hard-linked file has inside ``folder`` (counted on first use)."""

    def __init__(self, folder: Path):
        self.folder, self.counts = folder, None

    def __getitem__(self, st: os.stat_result) -> int:
        if self.counts is None:
            self.counts = Counter()
            for top, _, files in os.walk(self.folder):  # os.walk follows no link
                for name in files:
                    inner = os.lstat(os.path.join(top, name))
                    if stat.S_ISREG(inner.st_mode) and inner.st_nlink > 1:
                        self.counts[inner.st_dev, inner.st_ino] += 1
        return self.counts[st.st_dev, st.st_ino]


def _not_read(nb: Path, names: _NamesInside) -> str | None:
    """Why the grader does not read ``nb`` (None: it does): a symbolic link, or a file in a linked
    folder; not a regular file (a pipe would stop the copy for good); a hard link whose other
    names are not all in the submissions (it may be a file the learner could not read)."""
    if nb.resolve() != nb:
        return ("is a symbolic link (or lies in a linked folder): the grader reads only files "
                "handed in, never what a link points to")
    st = os.lstat(nb)
    if not stat.S_ISREG(st.st_mode):
        return f"is {kind(st.st_mode)}, not a regular file: the grader reads only regular files"
    if st.st_nlink > 1 and st.st_nlink > names[st]:
        return (f"is a hard link to a file with {st.st_nlink - names[st]} name(s) outside the "
                "submissions: the grader reads only files handed in")
    return None


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


def extras_of(notebook: Path, assignment: str) -> list[Path]:
    """The files that come along with ``notebook`` (``EXTRAS``): those beside it where it sits
    in nbgrader's layout (``<student>/<assignment>/<notebook>``), none in a flat folder."""
    return [notebook.parent / name for name in EXTRAS] if notebook.parent.name == assignment else []


def place_submission(source: Path, dest: Path, extras: list[Path]) -> None:
    """Copy a learner's file into ``submitted/`` unchanged (nbgrader's hashes depend on it),
    read as ``open_handed_in`` reads it (no link, no wait, a regular file only).

    ``extras`` (``extras_of``): the ``timestamp.txt`` and submission secret that come along,
    where they exist (``NotHandedIn`` if one is a link or too large).
    """
    if source.resolve() == dest.resolve():
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open_handed_in(source) as f:
        write_atomic(dest, f)
    for extra in extras:
        if extra.exists() or extra.is_symlink():
            write_atomic(dest.parent / extra.name, read_handed_in(extra, EXTRAS_LIMIT))
