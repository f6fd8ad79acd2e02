"""`autograder grade` over a class: parallel, time-limited, resumable, never half-written.

One class of notebook 00 is graded once, uninterrupted, through the command line (module
fixture); the tests assert on that run and compare every other run with it. The class:
an honest, a partial, a blank and an unreadable submission, and one that loops past the
time limit.
"""
from __future__ import annotations

import csv
import glob
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from nbformat.v4 import new_code_cell

from autograder.classroom.journal import Journal
from autograder.pipeline.course import new_course
from ctrl_c import assert_hears_ctrl_c, terminal_ctrl_c
from helpers import NOTEBOOKS, SOLUTIONS, mutant, outputs_as_saved, padded_notebook, saved_outputs

ASSIGNMENT = "00_start_here"
SOLUTION = SOLUTIONS / ASSIGNMENT / "start_here.ipynb"
RELEASE = NOTEBOOKS / ASSIGNMENT / "start_here.ipynb"
JVP = "return s * (g - np.sum(g * s, axis=axis, keepdims=True))"
CLI = str(Path(sys.executable).with_name("autograder"))
TIME_LIMIT = 12  # the looping cell would run 15 s (SandboxedExecute.cell_timeout)
EXPECTED = {"ada": 4.0, "bo": 2.0, "cy": 0.0, "dee": 0.0}


def make_class(folder: Path, tmp: Path, looper: bool) -> Path:
    folder.mkdir()
    (folder / "ada.ipynb").write_bytes(SOLUTION.read_bytes())
    (folder / "bo.ipynb").write_bytes(mutant(SOLUTION, "warmup_softmax_jvp", JVP, "return s * g", tmp).read_bytes())
    (folder / "cy.ipynb").write_bytes(RELEASE.read_bytes())
    (folder / "dee.ipynb").write_text("{ this is not a notebook")
    if looper:
        import nbformat
        nb = nbformat.read(SOLUTION, as_version=4)
        nb.cells.append(new_code_cell("while True:\n    pass"))
        nbformat.write(nb, folder / "eve.ipynb")
    return folder


def grade_cmd(folder: Path, course: Path, *extra: str) -> list[str]:
    return [CLI, "grade", str(folder), "-a", ASSIGNMENT, "--course", str(course), "--jobs", "2",
            "--csv", str(course / "grades.csv"), *extra]


def gradebook(course: Path) -> dict:
    """student -> {grade or comment id: (auto score, needs manual grade) or auto comment}."""
    from nbgrader.api import Gradebook

    out = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for sub in gb.assignment_submissions(ASSIGNMENT):
            (nb,) = sub.notebooks
            out[sub.student.id] = {**{g.name: (g.auto_score, g.needs_manual_grade) for g in nb.grades},
                                   **{c.name: c.auto_comment for c in nb.comments}}
    return out


def outputs(course: Path, student: str) -> tuple[list, str]:
    """The autograded notebook's cells (without nbclient's timings) and the feedback HTML."""
    import nbformat

    nb = nbformat.read(course / "autograded" / student / ASSIGNMENT / "start_here.ipynb", as_version=4)
    cells = [(c.id, c.cell_type, c.source, c.get("outputs")) for c in nb.cells]
    return cells, (course / "feedback" / student / ASSIGNMENT / "start_here.html").read_text()


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The uninterrupted run, then the same command again."""
    tmp = tmp_path_factory.mktemp("class")
    folder = make_class(tmp / "class", tmp, looper=True)
    course = tmp / "course"
    course.mkdir()
    new_course(course)
    first = subprocess.run(grade_cmd(folder, course, "--time-limit", str(TIME_LIMIT)),
                           capture_output=True, text=True, timeout=300)
    again = subprocess.run(grade_cmd(folder, course, "--time-limit", str(TIME_LIMIT)),
                           capture_output=True, text=True, timeout=300)
    return folder, course, first, again


def test_a_class_graded_in_parallel_with_a_progress_bar_and_a_summary(graded):
    folder, course, first, _ = graded
    assert first.returncode == 1, first.stderr  # one submission could not be graded
    rows = {r["student_id"]: float(r["raw_score"]) for r in csv.DictReader((course / "grades.csv").open())}
    assert rows == EXPECTED  # the looper is reported, not given a score nobody decided
    assert "graded 4, failed 1" in first.stdout
    assert f"eve: stopped: grading ran past the time limit of {TIME_LIMIT} s" in first.stdout
    assert "time per submission: median" in first.stdout and "on 2 worker(s)" in first.stdout
    bar = first.stderr.rsplit("\r", 1)[-1]
    assert f"grading {ASSIGNMENT}: 100%" in bar and "5/5" in bar and "failed=1" in bar
    assert "<" in first.stderr  # tqdm's elapsed<remaining: the ETA

    book = gradebook(course)
    assert set(book) == set(EXPECTED)
    for student, total in EXPECTED.items():
        scores = [v[0] for k, v in book[student].items() if k.startswith("grade_")]
        assert sum(scores) == total and all(not v[1] for k, v in book[student].items()
                                            if k.startswith("grade_"))
    assert book["cy"]["warmup_softmax"] == "No response."  # nbgrader's own comment on a blank cell
    autograded, feedback = outputs(course, "dee")
    assert "graded as the blank notebook" in autograded[0][2] and "graded as the blank notebook" in feedback
    _, feedback = outputs(course, "bo")
    assert "warmup.softmax_jvp: 0 / 2 points" in feedback
    # the learner's files are in submitted/ as they were handed in
    assert (course / "submitted" / "dee" / ASSIGNMENT / "start_here.ipynb").read_bytes() == \
        (folder / "dee.ipynb").read_bytes()
    history = Journal(course, ASSIGNMENT).history()
    assert sorted(h[1] for h in history if h[3] == "graded") == sorted(EXPECTED)


def test_running_the_same_command_again_grades_nothing_twice(graded):
    _, course, first, again = graded
    assert again.returncode == 1, again.stderr
    assert "graded 0 (and 4 graded by an earlier run), failed 1" in again.stdout
    assert "grading" not in again.stderr  # no workers started, no progress bar
    assert "--retry-failed" in again.stdout
    assert len(Journal(course, ASSIGNMENT).history()) == 5  # no line added by the second run


def test_a_copy_of_the_course_gets_the_assignment_in_its_own_gradebook_in_one_run(tmp_path):
    """A course directory copied from the repository before any ``nbgrader generate_assignment``:
    its ``nbgrader_config.py`` is the repository's as it was (``configure(get_config())``, which
    names the repository as the course's root). One run registers the assignment in the copy's
    own gradebook, as nbgrader's generate_assignment records it, and writes the score there;
    the repository's gradebook is not touched. Before, the assignment went into the
    repository's gradebook, and every score was "not written to the gradebook"."""
    from nbgrader.api import Gradebook

    folder, course = tmp_path / "class", tmp_path / "course"
    folder.mkdir()
    course.mkdir()
    (course / "solutions").symlink_to(SOLUTIONS, target_is_directory=True)
    (course / "nbgrader_config.py").write_text("from autograder.config import configure\n"
                                               "configure(get_config())\n")
    (folder / "ada.ipynb").write_bytes(SOLUTION.read_bytes())
    repo_gradebook = SOLUTIONS.parent / "gradebook.db"
    before = repo_gradebook.stat().st_mtime_ns if repo_gradebook.exists() else None
    run = subprocess.run(grade_cmd(folder, course, "--no-progress"), capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0 and "graded 1, failed 0" in run.stdout, run.stdout + run.stderr
    scores = gradebook(course)["ada"]
    assert sum(s for k, (s, _) in ((k, v) for k, v in scores.items() if k.startswith("grade_"))) == 4.0
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        (notebook,) = gb.find_assignment(ASSIGNMENT).notebooks
        assert notebook.name == "start_here" and notebook.max_score == 4.0
    assert (repo_gradebook.stat().st_mtime_ns if repo_gradebook.exists() else None) == before


def _wait_for_recorded(course: Path, count: int, proc: subprocess.Popen, timeout: float = 120) -> None:
    journal = Journal(course, ASSIGNMENT).folder
    deadline = time.monotonic() + timeout
    while len(list(journal.glob("*.done"))) < count and proc.poll() is None:
        assert time.monotonic() < deadline, "nothing was recorded in time"
        time.sleep(0.05)


def _interrupt(proc: subprocess.Popen, how: signal.Signals) -> None:
    """Send ``how`` to the grading command; wait until it and its graders are gone."""
    family = psutil.Process(proc.pid).children(recursive=True) if proc.poll() is None else []
    if how == signal.SIGINT and proc.poll() is None:
        assert_hears_ctrl_c(proc.pid, "the grade")
    proc.send_signal(how)
    proc.wait(timeout=60)
    gone, alive = psutil.wait_procs(family, timeout=20)
    assert not alive, f"graders outlived the command: {alive}"


def test_killed_at_random_points_it_resumes_and_ends_as_the_uninterrupted_run(graded, tmp_path):
    _, reference, _, _ = graded
    folder = make_class(tmp_path / "class", tmp_path, looper=False)
    course = tmp_path / "course"
    course.mkdir()
    new_course(course)
    rng = random.Random(11)
    for n, how in ((1, signal.SIGINT), (2, signal.SIGKILL)):  # Ctrl-C, then a machine gone
        proc = subprocess.Popen(grade_cmd(folder, course), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, preexec_fn=terminal_ctrl_c)
        _wait_for_recorded(course, n, proc)
        time.sleep(rng.uniform(0, 1.5))
        _interrupt(proc, how)
        if how == signal.SIGINT and proc.returncode == 130:
            assert "Run the same command again to continue" in proc.stderr.read()
        book, want = gradebook(course), gradebook(reference)
        assert book and all(book[s] == want[s] for s in book)  # whole submissions only
        for student in book:
            assert outputs(course, student) == outputs(reference, student)
    final = subprocess.run(grade_cmd(folder, course), capture_output=True, text=True, timeout=300)
    assert final.returncode == 0, final.stderr
    assert gradebook(course) == gradebook(reference)
    for student in EXPECTED:
        assert outputs(course, student) == outputs(reference, student)
    graded_lines = [h[1] for h in Journal(course, ASSIGNMENT).history() if h[3] == "graded"]
    assert all(graded_lines.count(s) <= 1 for s in EXPECTED), graded_lines  # none graded twice
    rows = {r["student_id"]: float(r["raw_score"]) for r in csv.DictReader((course / "grades.csv").open())}
    assert rows == EXPECTED
    made_by = (re.fullmatch(r"ag-(?:worker|sandbox|key)-(\d+)-.*", Path(p).name)
               for pattern in ("/dev/shm/ag-worker-*", "/tmp/ag-sandbox-*", "/tmp/ag-key-*")
               for p in glob.glob(pattern))
    orphans = [m.string for m in made_by if m and not psutil.pid_exists(int(m.group(1)))]
    assert not orphans, f"scratch left behind by killed graders: {orphans}"


PROBE = '''
import glob, os
_places = ["/dev/shm/*", "/dev/shm/**/gradebook.db", "/tmp/ag-*", "/tmp/**/gradebook.db",
           "{course}/gradebook.db", "{course}/.autograder/*", "{folder}/ada.ipynb",
           "{course}/submitted/*", "{course}/autograded/*", os.path.expanduser("~") + "/*"]
_own = os.path.dirname(os.environ.get("AUTOGRADER_CASES", "/nonexistent"))  # its own sandbox
reached = sorted({{p for pattern in _places for p in glob.glob(pattern, recursive=True)
                   if os.access(p, os.R_OK) and p != _own}})
print("REACHED", reached)
print("OWN", sorted(os.listdir(_own)) if os.path.isdir(_own) else None)
'''


def test_a_learner_in_a_class_reaches_no_grader_scratch_secret_gradebook_or_classmate(tmp_path):
    """Graded by the long-lived graders of `autograder grade`: a learner's set-up-time code
    looks for the graders' scratch courses in /dev/shm, the secret's temporary copy in /tmp,
    the gradebook, the secret, the other submissions and the instructor's home. It reads
    nothing but its own sandbox (its inputs, its site packages, its kernel's sockets), and
    its classmate's score is what it is alone."""
    import nbformat

    folder, course = tmp_path / "class", tmp_path / "course"
    folder.mkdir()
    course.mkdir()
    new_course(course)
    (folder / "ada.ipynb").write_bytes(SOLUTION.read_bytes())
    nb = nbformat.read(SOLUTION, as_version=4)
    (solution_cell,) = [c for c in nb.cells
                        if c.metadata.get("nbgrader", {}).get("grade_id") == "warmup_softmax"]
    solution_cell.source = PROBE.format(course=course, folder=folder) + solution_cell.source
    nbformat.write(nb, folder / "snoop.ipynb")
    run = subprocess.run(grade_cmd(folder, course, "--no-progress"), capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    cells, _ = outputs(course, "snoop")
    printed = "".join(o.get("text", "") for _, _, source, outs in cells if "REACHED" in source
                      for o in outs or [])
    reached, own = printed.splitlines()
    assert reached == "REACHED []", printed
    assert set(eval(own.removeprefix("OWN "))) <= {"site", "cases", "comm", "work"}, printed
    scores = gradebook(course)
    assert sum(s for s, _ in (v for v in scores["ada"].values() if isinstance(v, tuple))) == 4.0
    assert sum(s for s, _ in (v for v in scores["snoop"].values() if isinstance(v, tuple))) == 4.0


def test_a_huge_submission_is_read_beside_the_others_and_graded_from_its_code(tmp_path):
    """Aaron's notebook, first of the class, holds 230 MB of saved outputs: reading it takes a
    second or more, in a thread of its own, while bo's, read in a moment, goes to the one grading
    process (``--jobs 1``) first. Before, the instructor's process read each file before it
    handed out the next, and Aaron's was graded first whatever the others waited. It is graded
    from its code: full marks, no note."""
    folder, course = tmp_path / "class", tmp_path / "course"
    try:
        folder.mkdir()
        course.mkdir()
        new_course(course)
        huge = padded_notebook(folder / "aaron.ipynb", SOLUTION, saved_outputs,
                               outputs=[outputs_as_saved(lines=15, images=1)])
        assert huge.stat().st_size > 200 << 20
        (folder / "bo.ipynb").write_bytes(SOLUTION.read_bytes())
        (folder / "cy.ipynb").write_bytes(RELEASE.read_bytes())
        run = subprocess.run(grade_cmd(folder, course, "--jobs", "1", "--no-progress"),
                             capture_output=True, text=True, timeout=300)
        assert run.returncode == 0 and "graded 3, failed 0" in run.stdout, run.stdout + run.stderr
        order = [row[1] for row in Journal(course, ASSIGNMENT).history()]
        assert sorted(order) == ["aaron", "bo", "cy"] and order.index("bo") < order.index("aaron"), order
        rows = {r["student_id"]: float(r["raw_score"]) for r in csv.DictReader((course / "grades.csv").open())}
        assert rows == {"aaron": 4.0, "bo": 4.0, "cy": 0.0}
        autograded, _ = outputs(course, "aaron")
        assert not any("Notes from the grader" in source for _, _, source, _ in autograded)
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)  # its files are large
