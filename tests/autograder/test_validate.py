"""nbgrader's Validate gives the grader's verdict: `nbgrader validate`, `autograder validate`.

(JupyterLab's Validate button: tests/notebooks/test_jupyterlab.py.) Each grading runs in the sandbox
where AUTOGRADER_ISOLATION=required (CI), as `submit` does.
"""
import html
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from autograder.grading import ExerciseResult
from autograder.validate import CourseValidator
from helpers import NOTEBOOKS, REPO, SOLUTIONS

RELEASE = NOTEBOOKS / "00_start_here" / "start_here.ipynb"
SOLUTION = SOLUTIONS / "00_start_here" / "start_here.ipynb"
BIN = Path(sys.executable).parent


def test_nbgrader_validate_lists_each_unfinished_exercise_with_the_judges_message():
    # from the course root, where nbgrader reads nbgrader_config.py
    proc = subprocess.run([str(BIN / "nbgrader"), "validate", str(RELEASE.relative_to(REPO))],
                          cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "Success" not in out
    assert "VALIDATION FAILED ON 2 CELL(S)!" in out
    assert out.count("The following cell failed:") == 2
    for exercise, function in (("warmup.softmax", "softmax"), ("warmup.softmax_jvp", "softmax_jvp")):
        assert f"{exercise}: 0 of 2 points" in out
        assert f"`{function}` is not implemented yet." in out


def test_autograder_validate_passes_the_solution(tmp_path):
    nb = tmp_path / "start_here.ipynb"
    shutil.copyfile(SOLUTION, nb)
    proc = subprocess.run([str(BIN / "autograder"), "validate", "--json", str(nb)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {}  # nbgrader's "Success! Your notebook passes all the tests."
    assert not list(tmp_path.glob("*feedback*"))  # validating writes no report


def test_autograder_validate_names_a_notebook_it_cannot_place(tmp_path):
    nb = tmp_path / "mine.ipynb"
    shutil.copyfile(RELEASE, nb)
    proc = subprocess.run([str(BIN / "autograder"), "validate", str(nb)], capture_output=True, text=True)
    assert proc.returncode == 2 and "--assignment" in proc.stderr


def test_validate_says_when_it_graded_without_the_sandbox(tmp_path):
    """AUTOGRADER_ISOLATION=auto where bubblewrap cannot run (none on the PATH): Validate grades
    without the sandbox, as ``submit`` does, and says so as ``submit`` does: in the JSON answer
    (which JupyterLab's handler forwards), at the head of the first failure (what Lab's dialog
    shows of it), and above the printout, a success's too. (Before, it said nothing.)"""
    env = {**os.environ, "PATH": str(BIN), "AUTOGRADER_ISOLATION": "auto"}
    for folder, source in (("blank", RELEASE), ("solved", SOLUTION)):
        (tmp_path / folder).mkdir()
        shutil.copyfile(source, tmp_path / folder / source.name)
    blank = subprocess.run([str(BIN / "autograder"), "validate", "--json", str(tmp_path / "blank" / RELEASE.name)],
                           capture_output=True, text=True, env=env)
    answer = json.loads(blank.stdout)
    (note,) = answer["notes"]
    assert note.startswith("Graded without isolation: bubblewrap (bwrap) is not installed."), note
    assert blank.returncode == 1 and len(answer["failed"]) == 2
    assert answer["failed"][0]["error"].startswith(f"<i>{html.escape(note)}</i>")
    assert note not in answer["failed"][0]["raw_error"] and note not in answer["failed"][1]["error"]
    solved = subprocess.run([str(BIN / "autograder"), "validate", str(tmp_path / "solved" / SOLUTION.name)],
                            capture_output=True, text=True, env=env)
    assert solved.returncode == 0, solved.stderr
    assert solved.stdout.startswith("Graded without isolation: bubblewrap (bwrap) is not installed.")
    assert solved.stdout.rstrip().endswith("Success! Your notebook passes all the tests.")


def test_a_failure_is_wrapped_for_the_terminal_and_escaped_for_the_dialog():
    message = "the <b>rows</b> sum to 1 over queries instead of keys: " * 4
    entry = CourseValidator()._failure(ExerciseResult("attention.forward", 1.5, 3, [message]))
    assert entry["source"] == "attention.forward: 1.5 of 3 points"
    lines = entry["raw_error"].splitlines()
    assert len(lines) > 1 and all(len(line) <= 90 - 4 - 3 for line in lines)
    assert " ".join(lines) == message.strip()
    assert "<b>" not in entry["error"] and "&lt;b&gt;" in entry["error"]  # rendered as HTML by Lab
