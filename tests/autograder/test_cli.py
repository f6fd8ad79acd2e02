"""The autograder command as learners and instructors use it."""
import csv
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from autograder.classroom.grade import grade_class
from autograder.pipeline.course import new_course
from autograder.terminal import shown
from helpers import NOTEBOOKS, SOLUTIONS, mutant

SOLUTION = SOLUTIONS / "00_start_here" / "start_here.ipynb"
RELEASE = NOTEBOOKS / "00_start_here" / "start_here.ipynb"
CLI = [str(Path(sys.executable).with_name("autograder"))]


def run_cli(*args):
    return subprocess.run(CLI + list(args), capture_output=True, text=True)


def test_submit_full_marks_exits_zero_and_writes_feedback(tmp_path):
    nb = tmp_path / "start_here.ipynb"
    shutil.copyfile(SOLUTION, nb)
    proc = run_cli("submit", str(nb))
    assert proc.returncode == 0, proc.stderr
    assert "total" in proc.stdout and "4 / 4" in proc.stdout
    html = (tmp_path / "start_here_feedback.html").read_text()
    assert "warmup.softmax" in html and "<html" in html.lower()


def test_submit_race_grades_then_says_why_a_notebook_without_an_entry_is_not_raced(tmp_path):
    nb = tmp_path / "start_here.ipynb"
    shutil.copyfile(SOLUTION, nb)
    proc = run_cli("submit", str(nb), "--race")
    assert proc.returncode == 2 and "4 / 4" in proc.stdout, proc.stderr
    assert "not raced: the notebook has no race entry cell" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "race").exists()


def test_submit_json_and_nonzero_exit_below_full_marks(tmp_path):
    proc = run_cli("submit", str(RELEASE), "--json", "--feedback", str(tmp_path / "fb.html"))
    assert proc.returncode == 1
    result = json.loads(proc.stdout)
    assert result["total"] == 0 and result["max_total"] == 4
    assert {e["id"] for e in result["exercises"]} == {"warmup.softmax", "warmup.softmax_jvp"}
    assert all(e["messages"] for e in result["exercises"])


def test_submit_a_renamed_copy_in_its_assignments_folder(tmp_path):
    """JupyterLab's "Duplicate" makes start_here-Copy1.ipynb beside the original: its folder
    says which assignment it is."""
    folder = tmp_path / "00_start_here"
    folder.mkdir()
    nb = folder / "start_here-Copy1.ipynb"
    shutil.copyfile(SOLUTION, nb)
    proc = run_cli("submit", str(nb))
    assert proc.returncode == 0, proc.stderr
    assert "4 / 4" in proc.stdout and (folder / "start_here-Copy1_feedback.html").is_file()


def test_learner_text_reaches_the_terminal_escaped(tmp_path):
    """A learner's exception message and notebook file name were printed raw: ``ESC ] 0 ; ...
    BEL`` retitled the terminal, ``ESC [ 2 J`` cleared it. Now each shows as its escape."""
    folder = tmp_path / "00_start_here"
    folder.mkdir()
    raises = 'raise ValueError("\\x1b]0;pwned\\x07\\x1b[2J")\n    e = np.exp('
    raising = mutant(SOLUTION, "warmup_softmax", "e = np.exp(", raises, tmp_path)
    nb = folder / "start\x1b[31mhere\x07.ipynb"
    shutil.copyfile(raising, nb)
    proc = subprocess.run(CLI + ["submit", str(nb)], capture_output=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert b"pwned" in out and b"\\x1b[31mhere" in out
    assert b"\x1b" not in out and b"\x07" not in out, out
    assert b"\\x1b]0;pwned\\x07\\x1b[2J" in out


def test_shown_escapes_controls_and_keeps_a_messages_lines():
    assert shown("a\x1b[2Jb\x07\x9b\r\u202e\x00") == "a\\x1b[2Jb\\x07\\x9b\\r\\u202e\\x00"
    assert shown("one\n\ttwo") == "one\n\ttwo" and shown("one\ntwo", layout=False) == "one\\ntwo"
    assert shown("José ａ K") == "José ａ K"


def test_submit_unknown_notebook_says_what_to_do(tmp_path):
    nb = tmp_path / "mine.ipynb"
    shutil.copyfile(RELEASE, nb)
    proc = run_cli("submit", str(nb))
    assert proc.returncode == 2 and "--assignment" in proc.stderr


def test_grade_a_class_from_a_zip_into_the_gradebook_and_csv(tmp_path):
    course = tmp_path / "course"
    course.mkdir()
    new_course(course)
    wrong = mutant(SOLUTION, "warmup_softmax_jvp", "return s * (g - np.sum(g * s, axis=axis, keepdims=True))",
                   "return s * g", tmp_path)
    archive = tmp_path / "class.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(SOLUTION, "ada.ipynb")
        zf.write(RELEASE, "bob.ipynb")
        zf.write(wrong, "cy/start_here.ipynb")
    out = grade_class(archive, "00_start_here", jobs=2, csv_path=tmp_path / "grades.csv", course_root=course)
    rows = {r["student_id"]: float(r["raw_score"]) for r in csv.DictReader(out.open())}
    assert rows == {"ada": 4.0, "bob": 0.0, "cy": 2.0}
    assert (course / "feedback" / "cy" / "00_start_here" / "start_here.html").exists()
