"""One submission's grading is bounded whatever its file holds, and saved outputs never cost marks.

Each worst case is the notebook 00 solution with something huge added, written a piece at a
time (the files reach hundreds of MB; the test never holds one whole). Each is graded once,
as ``autograder submit`` grades it (``grade_notebook``, the feedback written), in a process
of its own whose peak memory (the grader's process, not the kernel's) and time are what is
asserted, with the score and the notes, on that one result.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time

import nbformat
import pytest
from nbformat.v4 import new_code_cell

from autograder.grading import DEADLINE, run_budget
from autograder.pipeline.course import ScratchCourse
from autograder.pipeline.plan import submission_key
from autograder.pipeline.submission import prepare
from helpers import REPO, SOLUTIONS, outputs_as_saved, padded_notebook, saved_outputs

SOLUTION = SOLUTIONS / "00_start_here" / "start_here.ipynb"
PEAK_MB = 300  # the grader's process: 130 MB for a plain submission; main took 1.5 GB on 100,000 cells
MB = 1 << 20

# The peak is the grader's process's own VmHWM: ru_maxrss would count the test's too, as Linux
# keeps a process's maximum across the exec that starts the grader.
GRADE = """
import json, re, sys
from pathlib import Path
from autograder.grading import grade_notebook
path = Path(sys.argv[1])
result = grade_notebook(path, feedback_to=path.with_suffix(".html"))
peak_kb = int(re.search(r"VmHWM:\\s+(\\d+) kB", Path("/proc/self/status").read_text())[1])
print(json.dumps({"total": result.total, "max_total": result.max_total, "notes": result.notes,
                  "peak_mb": peak_kb / 1024, "feedback_mb": path.with_suffix(".html").stat().st_size / 2**20}))
"""


@pytest.fixture
def folder(tmp_path):
    """A folder for one worst case, removed after it: its files are large."""
    yield tmp_path
    shutil.rmtree(tmp_path, ignore_errors=True)


def _write(folder, edit, **pads):
    """The solution, ``edit``ed and padded (``helpers.padded_notebook``), in ``folder``."""
    return padded_notebook(folder / SOLUTION.name, SOLUTION, edit, **pads)


def _graded(path) -> dict:
    """Grade ``path`` in a process of its own: the result, its peak memory and its time."""
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-c", GRADE, str(path)], cwd=REPO, env=os.environ,
                         capture_output=True, text=True, timeout=2 * DEADLINE)
    seconds = time.monotonic() - started
    assert run.returncode == 0, run.stderr[-3000:]
    return {**json.loads(run.stdout.splitlines()[-1]), "seconds": seconds}


def _first_code_cell(nb):
    return next(c for c in nb["cells"] if c["cell_type"] == "code" and "nbgrader" not in c["metadata"])


def _learner_cell(source, **metadata):
    return {"cell_type": "code", "execution_count": None, "metadata": metadata, "outputs": [],
            "source": source}


def _extra_cells(nb):
    nb["cells"] += [_learner_cell("x = 1") for _ in range(100_000)]


def _long_line(nb):
    nb["cells"].insert(3, _learner_cell("@line@"))


def _deep(nb):
    nb["cells"].insert(3, _learner_cell("x = 1", nbgrader="@deep@"))
    _first_code_cell(nb)["outputs"] = [{"output_type": "display_data", "metadata": {},
                                        "data": {"application/json": "@deep@"}}]
    nb["metadata"]["deep"] = "@deep@"


def _tiny_outputs(nb):
    _first_code_cell(nb)["outputs"] = "@outputs@"


def _printers(nb):
    nb["cells"] += [_learner_cell("print('x' * 999_000)") for _ in range(8)]


def _attachment(nb):
    markdown = next(c for c in nb["cells"] if c["cell_type"] == "markdown")
    markdown["attachments"] = {"big.png": {"image/png": "@png@"}}


TINY = json.dumps({"output_type": "stream", "name": "stdout", "text": "x"}).encode()
WORST = {  # edit, pads, words a note must hold ("" for no note at all)
    "100,000 extra cells": (_extra_cells, {}, "more than 523 cells"),
    "one 50 MB source line": (_long_line, {"line": [b'"x = \'', *[b"a" * MB] * 50, b'\'"']},
                              "a cell's source may be at most 100 KB"),
    "JSON nested 100,000 deep": (_deep, {"deep": [b"[" * 100_000, b"]" * 100_000]},
                                 "The nbgrader metadata of cell 4 was ignored: it may be at most 4 KB"),
    "a million tiny outputs": (_tiny_outputs, {"outputs": [b"[", b",".join([TINY] * 1000),
                                                           *[b"," + b",".join([TINY] * 1000)] * 999, b"]"]}, ""),
    "a 100 MB attachment": (_attachment, {"png": [b'"', *[b"iVBORw0KGgo=" * (MB // 12)] * 100, b'"']}, ""),
    "eight cells printing a megabyte each": (_printers, {}, ""),  # outputs made, not saved
}


@pytest.mark.parametrize("case", WORST, ids=list(WORST))
def test_a_worst_case_is_graded_in_time_and_memory_with_a_note(folder, case):
    edit, pads, words = WORST[case]
    result = _graded(_write(folder, edit, **pads))
    assert result["seconds"] < DEADLINE and result["peak_mb"] < PEAK_MB, result
    assert (result["total"], result["max_total"]) == (4, 4), result
    assert result["feedback_mb"] < 8, result  # main wrote 66 MB for the 100,000 cells
    if words:
        assert len(result["notes"]) == 1 and words in result["notes"][0], result["notes"]
    else:
        assert result["notes"] == [], result["notes"]


def test_a_notebook_large_only_for_its_outputs_is_graded_from_its_code(folder):
    """Outputs past 500 MB (main refused anything past 20 MB, and would have held it all)."""
    outputs = outputs_as_saved(lines=36, images=2)  # about 41 MB on each of the 13 code cells
    path = _write(folder, saved_outputs, outputs=[outputs])
    assert path.stat().st_size > 500 * MB
    result = _graded(path)
    assert (result["total"], result["max_total"], result["notes"]) == (4, 4, []), result
    assert result["seconds"] < DEADLINE and result["peak_mb"] < PEAK_MB, result


def test_sources_past_what_the_cells_may_hold_together_are_emptied(tmp_path):
    nb = nbformat.read(SOLUTION, as_version=4)
    nb.cells[3:3] = [new_code_cell(f"x{i} = '{'a' * 90_000}'") for i in range(13)]
    path = tmp_path / SOLUTION.name
    nbformat.write(nb, path)
    prepared = prepare(path, "00_start_here", SOLUTION.name)
    assert prepared.notes == ["Cells 15 and 16 were graded as empty: the cells' sources may add up to "
                              "at most 1 MB."]
    emptied = [c.source for c in prepared.nb.cells if "emptied" in c.source]
    assert emptied == ["# The grader emptied this cell: the cells above it already hold the 1 MB of "
                       "source the grader reads."] * 2


def test_a_file_past_1_gb_is_graded_as_the_blank_notebook_with_a_note(tmp_path):
    path = tmp_path / SOLUTION.name
    with path.open("wb") as f:
        f.truncate(5 << 28)  # 1.25 GB, sparse: nothing is written
    prepared = prepare(path, "00_start_here", SOLUTION.name)
    assert prepared.notes == ["The submitted file is 1.2 GB, more than the 1 GB the grader reads; it "
                              "was graded as the blank notebook."]


def test_reading_a_huge_file_leaves_its_cells_less_time_to_run(tmp_path):
    """Reading counts against the deadline: past a few seconds, the run's budget shrinks by it."""
    assert run_budget(0.2) == run_budget(5) == 75 and run_budget(30) == 50
    nb = nbformat.read(SOLUTION, as_version=4)
    nb.cells.append(new_code_cell("import time\ntime.sleep(60)"))
    graded = ScratchCourse("00_start_here", tmp_path / "course").grade(
        nb, "learner", SOLUTION.name, submission_key(nb), feedback=False, time_budget=8)
    faults = [o["evalue"] for c in nbformat.reads(graded.autograded, as_version=4).cells
              if c.cell_type == "code" for o in c.outputs if o.get("ename") == "GradingFault"]
    budget = r"stopped: this cell ran longer than [1-8] s .*|not run: grading stopped after 8 s .*"
    assert faults and all(re.fullmatch(budget, f) for f in faults), faults  # not the 15 s a cell may take
