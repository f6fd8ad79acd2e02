"""Class throughput: plain ``nbgrader autograde`` against ``autograder grade``, side by side.

N varied copies of notebook 02 (honest, partial, blank, faulty) are graded twice, each into
a fresh course directory with the assignment already generated (as an instructor's is):

- **nbgrader, the usual way**: ``nbgrader autograde 02_attention`` then ``nbgrader
  generate_feedback 02_attention``: one process, one submission after another, with this
  course's configuration (every kernel in the sandbox, the judge after it);
- **autograder grade** with isolation required and ``--jobs 2``: the same grading in warm
  worker processes (``autograder/classroom/worker.py``), one gradebook transaction per submission,
  resumable.

Both wall clocks include everything from the command's start to its exit (process start,
imports, feedback, and for ``autograder grade`` the CSV export). It prints submissions per
minute for each, their ratio, and checks that both gave every learner the same score.

    .venv/bin/python benchmarks/class_throughput.py [N] [--jobs 2]
"""
from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from autograder.pipeline.course import new_course  # noqa: E402
from autograder.pipeline.sandbox import ISOLATION_ENV  # noqa: E402

ASSIGNMENT, NOTEBOOK = "02_attention", "attention.ipynb"
SOLUTION = REPO / "solutions" / ASSIGNMENT / NOTEBOOK
RELEASE = REPO / "notebooks" / ASSIGNMENT / NOTEBOOK
BIN = Path(sys.executable).parent


def _edit(grade_id: str, old: str, new: str, extra_cell: str | None = None):
    nb = nbformat.read(SOLUTION, as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    assert old in cell.source, (grade_id, old)
    cell.source = cell.source.replace(old, new)
    if extra_cell:
        nb.cells.insert(nb.cells.index(cell) + 1, new_code_cell(extra_cell))
    return nb


def varied_class(n: int) -> list[tuple[str, nbformat.NotebookNode]]:
    """n submissions cycling through honest, partial (a causal mask one row off), blank,
    and faulty (a cell that kills the kernel, so the grader restarts it)."""
    kinds = [("honest", nbformat.read(SOLUTION, as_version=4)),
             ("partial", _edit("attention_causal_mask", "np.tril(np.ones((T, T), dtype=bool))",
                               "np.tril(np.ones((T, T), dtype=bool), k=-1)")),
             ("blank", nbformat.read(RELEASE, as_version=4)),
             ("faulty", _edit("attention_causal_mask", "return np.tril", "return np.tril",
                              extra_cell="import os\nos._exit(1)"))]
    return [(f"{kinds[i % 4][0]}{i:03d}", kinds[i % 4][1]) for i in range(n)]


def _course(root: Path) -> Path:
    root.mkdir()
    new_course(root)
    _run(root, "nbgrader", "generate_assignment", ASSIGNMENT)  # done before, as in a real course
    return root


def _run(cwd: Path, tool: str, *args: str) -> float:
    start = time.perf_counter()
    proc = subprocess.run([str(BIN / tool), *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        sys.exit(f"{tool} {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return time.perf_counter() - start


def _scores(csv_path: Path) -> dict[str, float]:
    return {r["student_id"]: float(r["raw_score"]) for r in csv.DictReader(csv_path.open())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("n", nargs="?", type=int, default=16, help="submissions (default 16)")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    os.environ[ISOLATION_ENV] = "required"
    os.environ["PATH"] = f"{BIN}{os.pathsep}{os.environ['PATH']}"  # nbgrader runs alembic
    with tempfile.TemporaryDirectory(prefix="class-throughput-") as tmp:
        tmp = Path(tmp)
        folder = tmp / "class"
        folder.mkdir()
        plain, ours = _course(tmp / "nbgrader"), _course(tmp / "autograder")
        for student, nb in varied_class(args.n):
            nbformat.write(nb, folder / f"{student}.ipynb")
            dest = plain / "submitted" / student / ASSIGNMENT
            dest.mkdir(parents=True)
            shutil.copyfile(folder / f"{student}.ipynb", dest / NOTEBOOK)

        t_plain = _run(plain, "nbgrader", "autograde", ASSIGNMENT)
        t_feedback = _run(plain, "nbgrader", "generate_feedback", ASSIGNMENT)
        _run(plain, "nbgrader", "export", "--to", str(tmp / "plain.csv"))
        t_ours = _run(ours, "autograder", "grade", str(folder), "-a", ASSIGNMENT, "--course", str(ours),
                      "--jobs", str(args.jobs), "--csv", str(tmp / "ours.csv"), "--no-progress")

        plain_total = t_plain + t_feedback
        rate_plain, rate_ours = 60 * args.n / plain_total, 60 * args.n / t_ours
        same = _scores(tmp / "plain.csv") == _scores(tmp / "ours.csv")
        history = (ours / ".autograder" / "journal" / ASSIGNMENT / "history.tsv").read_text().splitlines()
        per = sorted(float(line.split("\t")[4]) for line in history)
        print(f"{args.n} submissions of notebook 02 (honest, partial, blank, faulty), isolation on, "
              f"{os.cpu_count()} CPUs")
        print(f"nbgrader autograde + generate_feedback: {plain_total:6.1f} s "
              f"({t_plain:.1f} + {t_feedback:.1f})  {rate_plain:6.1f} submissions/min")
        print(f"autograder grade --jobs {args.jobs}:          {t_ours:6.1f} s"
              f"{'':14}{rate_ours:6.1f} submissions/min")
        print(f"ratio: {rate_ours / rate_plain:.2f}x   (per submission in a warm worker: median "
              f"{per[len(per) // 2]:.2f} s, worst {per[-1]:.2f} s)")
        print("same score for every learner:", "yes" if same else "NO")
        if not same:
            sys.exit(1)


if __name__ == "__main__":
    main()
