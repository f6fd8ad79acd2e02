"""Grade a whole class: import submissions, autograde in parallel, feedback, CSV export.

Everything lands in an nbgrader course directory (the repository root by default), so the
formgrader, ``nbgrader export`` and the gradebook keep working on the results. Accepted
inputs: nbgrader's ``submitted/<student>/<assignment>/`` layout, a flat folder of
``<student>.ipynb`` files, a folder of ``<student>/<anything>.ipynb``, or a .zip of any of these.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import zipfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import nbformat
from tqdm.auto import tqdm

from autograder.config import REPO, SOLUTIONS
from autograder.grading import GradingError
from autograder.sandbox import isolation
from autograder.submission import prepare

RETRIES = 3  # parallel nbgrader processes share one SQLite gradebook; a locked write is retried


def find_submissions(folder: Path, assignment: str) -> dict[str, Path]:
    """student id -> notebook path, for any of the accepted layouts."""
    found: dict[str, Path] = {}
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
        if student in found:
            raise GradingError(f"two notebooks for student {student!r}: {found[student]} and {nb}")
        found[student] = nb
    if not found:
        raise GradingError(f"no notebooks found in {folder}")
    return found


def _nbgrader(root: Path, *args: str) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("nbgrader")
    return subprocess.run([str(exe), *args], cwd=root, capture_output=True, text=True)


def _autograde(root: Path, assignment: str, student: str) -> tuple[str, str | None]:
    for _ in range(RETRIES):
        proc = _nbgrader(root, "autograde", assignment, "--student", student, "--force")
        if proc.returncode == 0:
            return student, None
    return student, proc.stderr[-2000:]


def grade_class(submissions: Path, assignment: str, jobs: int = 2,
                csv_path: Path = Path("grades.csv"), course_root: Path = REPO) -> Path:
    """Grade every submission of ``assignment``; return the CSV nbgrader exported.

    Each notebook's kernel runs in the grading sandbox; with ``AUTOGRADER_ISOLATION=required``
    (the ``grade`` command's default) grading stops before it starts where there is none.
    """
    isolated, note = isolation()
    if not isolated:
        print(note, file=sys.stderr)
    names = sorted(p.name for p in (SOLUTIONS / assignment).glob("*.ipynb"))
    if len(names) != 1:
        raise GradingError(f"assignment {assignment!r} should hold one notebook, found {names}")
    with tempfile.TemporaryDirectory() as tmp:
        if submissions.suffix == ".zip":
            with zipfile.ZipFile(submissions) as zf:
                zf.extractall(tmp)
            submissions = Path(tmp)
        found = find_submissions(submissions, assignment)
        for student, nb in found.items():
            dest = course_root / "submitted" / student / assignment
            dest.mkdir(parents=True, exist_ok=True)
            prepared = prepare(nb, assignment, names[0])  # read before it may be overwritten
            nbformat.write(prepared.nb, dest / names[0])

    proc = _nbgrader(course_root, "generate_assignment", assignment, "--force")
    if proc.returncode:
        raise GradingError(f"nbgrader generate_assignment failed:\n{proc.stderr[-2000:]}")
    failures = {}
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(_autograde, course_root, assignment, s) for s in found]
        for future in tqdm(as_completed(futures), total=len(futures), desc=f"grading {assignment}",
                           unit="notebook"):
            student, error = future.result()
            if error:
                failures[student] = error
    for student, error in failures.items():
        print(f"could not grade {student}:\n{error}", file=sys.stderr)

    proc = _nbgrader(course_root, "generate_feedback", assignment, "--force")
    if proc.returncode:
        print(f"nbgrader generate_feedback reported a problem:\n{proc.stderr[-2000:]}", file=sys.stderr)
    csv_path = Path(csv_path).resolve()
    proc = _nbgrader(course_root, "export", "--to", str(csv_path))
    if proc.returncode:
        raise GradingError(f"nbgrader export failed:\n{proc.stderr[-2000:]}")
    return csv_path
