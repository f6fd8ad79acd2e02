"""How long grading takes when a learner's cell kills its kernel, against nbclient's own watch.

A cell that ends the kernel (``os._exit``, a crash, the memory limit) gets no reply: nbclient
notices by looking at the kernel's process, once a second, then the grader restarts the kernel
and runs the rest of the notebook. The grader looks every ``autograder.pipeline.execute.ALIVE_EVERY``
seconds (0.1). This grades one notebook whose first solution cell calls ``os._exit(3)`` with
each setting in turn (the same process, taking turns, so a slow spell of the machine hits
both), and prints the median wall time of each, their ratio, and the score (the same under
both, or the script says so).

    .venv/bin/python benchmarks/dead_kernel.py [--notebook solutions/00_start_here/start_here.ipynb]
                                               [--runs 5]
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import nbformat

from autograder.grading import grade_notebook
from autograder.pipeline import execute

ROOT = Path(__file__).resolve().parents[1]
NBCLIENT_EVERY = 1.0  # nbclient's own: asyncio.sleep(1) in NotebookClient._async_poll_kernel_alive


def dying_copy(notebook: Path, folder: Path) -> Path:
    """The notebook with ``os._exit(3)`` at the top of its first solution cell."""
    nb = nbformat.read(notebook, as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution"))
    cell.source = "import os\nos._exit(3)\n" + cell.source
    path = folder / notebook.name
    nbformat.write(nb, path)
    return path


def _seconds(times):
    return " ".join(f"{t:.2f}" for t in sorted(times))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebook", type=Path,
                        default=ROOT / "solutions" / "00_start_here" / "start_here.ipynb")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    ours = execute.ALIVE_EVERY
    times = {NBCLIENT_EVERY: [], ours: []}
    scores = {NBCLIENT_EVERY: set(), ours: set()}
    with tempfile.TemporaryDirectory(dir=ROOT) as tmp:
        path = dying_copy(args.notebook, Path(tmp))
        grade_notebook(path)  # warm: imports, the sandbox's first start
        for _ in range(args.runs):
            for every in times:
                execute.ALIVE_EVERY = every
                start = time.perf_counter()
                result = grade_notebook(path)
                times[every].append(time.perf_counter() - start)
                scores[every].add((result.total, result.max_total))
    execute.ALIVE_EVERY = ours
    base, fast = (statistics.median(times[e]) for e in (NBCLIENT_EVERY, ours))
    print(f"{args.notebook.name} with os._exit(3) in its first solution cell, {args.runs} gradings each")
    print(f"look every {NBCLIENT_EVERY} s (nbclient): median {base:.2f} s  {_seconds(times[NBCLIENT_EVERY])}")
    print(f"look every {ours} s (the grader): median {fast:.2f} s  {_seconds(times[ours])}")
    print(f"ratio nbclient / grader: {base / fast:.2f}x")
    same = scores[NBCLIENT_EVERY] == scores[ours] and len(scores[ours]) == 1
    print(f"scores: {sorted(scores[ours])}" + ("" if same else f" against {sorted(scores[NBCLIENT_EVERY])}: NOT THE SAME"))


if __name__ == "__main__":
    main()
