"""A term after grading: late penalties, grades out to Canvas and Moodle, and a regrade.

One class of notebook 00 (nbgrader's ``submitted/`` layout, as ``nbgrader collect`` leaves it)
is graded once with ``autograder grade`` into a course with a due date and a late policy:
ada (full marks, on time), bo (one exercise wrong, a day and a half late), cy (blank, on
time), dee (softmax without the max, four days late). The grades go out as Canvas and
Moodle CSVs. A grader gives cy points and a comment by hand, and feedback is released.

Then the instructor changes the grader, in a copy of this checkout as they would in theirs:
the backward-pass exercise gets a looser tolerance (bo's answer now passes) and one mistake
a new message (dee's, whose score stays 0). ``autograder regrade --release-feedback``,
interrupted with Ctrl-C after it regraded someone and run again, must say that bo's score
went up, that dee's feedback changed, regrade each learner once, keep cy's manual grade and
comment, and release feedback again to bo and dee only.
"""
from __future__ import annotations

import csv
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from nbgrader.api import Gradebook
from nbgrader.apps import NbGraderAPI
from nbgrader.utils import notebook_hash

from autograder.classroom.export import final_scores
from autograder.classroom.intake import find_submissions
from autograder.classroom.journal import Journal, course_config
from autograder.classroom.late import stamp
from autograder.pipeline.course import new_course
from ctrl_c import assert_hears_ctrl_c, terminal_ctrl_c
from helpers import NOTEBOOKS, REPO, SOLUTIONS, mutant

ASSIGNMENT, STEM = "00_start_here", "start_here"
SOLUTION = SOLUTIONS / ASSIGNMENT / "start_here.ipynb"
CLI = str(Path(sys.executable).with_name("autograder"))
DUE = datetime(2026, 1, 10, 12, 0)
HOUR, DAY = timedelta(hours=1), timedelta(days=1)
NO_MAX = ("np.exp(z - np.max(z, axis=axis, keepdims=True))", "np.exp(z)")
OLD_MESSAGE = "exp() of large logits overflows to inf and the result becomes NaN"
NEW_MESSAGE = "exp() of a large logit is inf, and inf / inf is NaN"
POLICY = ("c = get_config()\nc.LatePolicy.per_day = 0.25\nc.LatePolicy.max_share = 0.5\n"
          "c.LatePolicy.zero_after_days = 3\nc.Exchange.root = {exchange!r}\n")
ROSTER = [  # as Canvas exports its gradebook (and an e-mail column)
    {"Student": "Lovelace, Ada", "ID": "101", "SIS User ID": "S101", "SIS Login ID": "ada",
     "Section": "A", "Email address": "ada@uni.example", "00_start_here (777)": ""},
    {"Student": "Bo, Bo", "ID": "102", "SIS User ID": "S102", "SIS Login ID": "bo.b",
     "Section": "A", "Email address": "bo@uni.example", "00_start_here (777)": ""},
    {"Student": "Dee, Dee", "ID": "104", "SIS User ID": "S104", "SIS Login ID": "dee",
     "Section": "B", "Email address": "dee@uni.example", "00_start_here (777)": ""},
    {"Student": "Eve, Eve", "ID": "105", "SIS User ID": "S105", "SIS Login ID": "eve",
     "Section": "B", "Email address": "eve@uni.example", "00_start_here (777)": ""},
]


def run(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=600, cwd=cwd,
                          env={**os.environ, **(env or {})})


def handed_in(folder: Path, tmp: Path) -> None:
    """The class, in nbgrader's layout: each notebook with its timestamp and submission secret."""
    (tmp / "bo").mkdir()
    (tmp / "dee").mkdir()
    work = {"ada": (SOLUTION, DUE - HOUR),
            "bo": (mutant(SOLUTION, "warmup_softmax_jvp", "return s * (g - np.sum(g * s, axis=axis, "
                          "keepdims=True))", "return s * g", tmp / "bo"), DUE + 1.5 * DAY),
            "cy": (NOTEBOOKS / ASSIGNMENT / "start_here.ipynb", DUE - HOUR),
            "dee": (mutant(SOLUTION, "warmup_softmax", *NO_MAX, tmp / "dee"), DUE + 4 * DAY)}
    for student, (notebook, when) in work.items():  # (mutant() wrote two into tmp/bo and tmp/dee)
        dest = folder / student / ASSIGNMENT
        dest.mkdir(parents=True)
        shutil.copyfile(notebook, dest / "start_here.ipynb")
        (dest / "timestamp.txt").write_text(stamp(when))
        (dest / "submission_secret.txt").write_text(f"secret of {student}")


def released(course: Path) -> dict[str, str]:
    """student -> the feedback nbgrader's exchange holds for them."""
    out = {}
    for student in ("ada", "bo", "cy", "dee"):
        name = notebook_hash(secret=f"secret of {student}", notebook_id=STEM) + ".html"
        path = course / "exchange" / "transformers" / "feedback" / name
        out[student] = path.read_text() if path.exists() else None
    return out


def edited_checkout(top: Path) -> Path:
    """A copy of this checkout whose grader the instructor changed (see the module doc)."""
    for part in ("autograder", "course_lib", "solutions"):
        shutil.copytree(REPO / part, top / part, ignore=shutil.ignore_patterns("__pycache__"))
    warmup = top / "autograder" / "exercises" / "warmup.py"
    source = warmup.read_text()
    assert OLD_MESSAGE in source and 'id="warmup.softmax_jvp",' in source
    warmup.write_text(source.replace(OLD_MESSAGE, NEW_MESSAGE)
                      .replace('id="warmup.softmax_jvp",', 'id="warmup.softmax_jvp", atol=10.0,'))
    return top


@pytest.fixture(scope="module")
def term(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("term")
    course, folder = tmp / "course", tmp / "class"
    course.mkdir()
    new_course(course)
    with open(course / "nbgrader_config.py", "a") as f:
        f.write(POLICY.format(exchange=str(course / "exchange")))
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "transformers") as gb:
        gb.update_or_create_assignment(ASSIGNMENT, duedate=DUE)  # nbgrader db assignment add
        gb.update_or_create_student("bo", email="bo@uni.example")  # nbgrader db student add
    handed_in(folder, tmp)
    secret = {"AUTOGRADER_SECRET_FILE": str(tmp / "secret")}
    graded = run("grade", str(folder), "-a", ASSIGNMENT, "--course", str(course), "--no-progress",
                 "--csv", str(course / "grades.csv"), env=secret)
    assert "graded 4, failed 0" in graded.stdout, graded.stdout + graded.stderr
    scores = final_scores(course)

    roster = tmp / "roster.csv"
    with open(roster, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(ROSTER[0]))
        writer.writeheader()
        writer.writerows(ROSTER)
    exports = {layout: (run("export", layout, "--roster", str(roster), "--course", str(course),
                            "--out", str(tmp / f"{layout}.csv")),
                        list(csv.reader(open(tmp / f"{layout}.csv", newline=""))))
               for layout in ("canvas", "moodle")}

    # a grader's points and comment for cy, then everyone's feedback, released
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "transformers") as gb:
        gb.find_grade("grade_warmup_softmax", STEM, ASSIGNMENT, "cy").manual_score = 1.5
        gb.find_comment("warmup_softmax", STEM, ASSIGNMENT, "cy").manual_comment = "Nearly: mind the max."
        gb.db.commit()
    api = NbGraderAPI(config=course_config(course))
    assert api.generate_feedback(ASSIGNMENT)["success"] and api.release_feedback(ASSIGNMENT)["success"]
    first = released(course)
    history = len(Journal(course, ASSIGNMENT).history())

    checkout = edited_checkout(tmp / "checkout")
    regrade = ["regrade", ASSIGNMENT, "--course", str(course), "--release-feedback", "--no-progress"]
    edited = {**secret, "PYTHONPATH": str(checkout)}
    # one submission at a time, so that seconds pass between the first learner regraded and
    # the last (with 2 at a time a CI run once finished all 4 before the Ctrl-C)
    interrupted(subprocess.Popen([CLI, *regrade, "--jobs", "1"], cwd=checkout, env={**os.environ, **edited},
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 preexec_fn=terminal_ctrl_c), course)
    again = run(*regrade, env=edited, cwd=checkout)  # the same command again; as from ~/course
    return course, scores, exports, first, history, again


def interrupted(proc: subprocess.Popen, course: Path) -> None:
    """Ctrl-C to a regrade once it has regraded someone, and not everyone."""
    journal = Journal(course, ASSIGNMENT).folder
    before = journal / "regrade" / "before.json"
    deadline = time.monotonic() + 300
    while proc.poll() is None and not regraded_someone(journal, before):
        assert time.monotonic() < deadline, "the regrade regraded no one in time"
        time.sleep(0.02)
    assert proc.poll() is None, "the regrade finished before it could be interrupted"
    assert_hears_ctrl_c(proc.pid, "the regrade")  # as a terminal's Ctrl-C would find it
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Run the same command again" in err, out + err
    assert before.exists() and len(list(journal.glob("*.done"))) < 4  # stopped half-way


def regraded_someone(journal: Path, before: Path) -> bool:
    """A ``.done`` newer than the regrade's start; the regrade unlinks each one it starts
    on, so a file globbed here may be gone when it is read (a CI run once died of that)."""
    def mtime(path: Path) -> float | None:
        try:
            return path.stat().st_mtime
        except FileNotFoundError:
            return None
    start = mtime(before)
    return start is not None and any((m := mtime(p)) is not None and m > start
                                     for p in journal.glob("*.done"))


def test_late_work_is_priced_by_the_policy(term):
    _, scores, *_ = term
    assert scores == {("ada", ASSIGNMENT): 4.0,  # on time
                      ("bo", ASSIGNMENT): 1.0,   # 2 of 4, two days started late: half of it taken
                      ("cy", ASSIGNMENT): 0.0,
                      ("dee", ASSIGNMENT): 0.0}  # four days late: zero after three


def test_canvas_gets_its_columns_and_the_assignment_it_has(term):
    _, _, exports, *_ = term
    proc, rows = exports["canvas"]
    assert proc.returncode == 1  # a learner could not be placed: said, and the status says so
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "00_start_here (777)"]
    assert rows[1:] == [["Lovelace, Ada", "101", "S101", "ada", "A", "4"],
                        ["Bo, Bo", "102", "S102", "bo.b", "A", "1"],  # matched by e-mail
                        ["Dee, Dee", "104", "S104", "dee", "B", "0"],
                        ["Eve, Eve", "105", "S105", "eve", "B", ""]]  # no submission: left blank
    assert "not on the roster, so not in the file" in proc.stdout and "cy" in proc.stdout
    assert "without a submission (left blank): eve" in proc.stdout


def test_moodle_gets_an_identifier_column_and_only_learners_it_knows(term):
    _, _, exports, *_ = term
    proc, rows = exports["moodle"]
    assert rows == [["Email address", "00_start_here"], ["ada@uni.example", "4"],
                    ["bo@uni.example", "1"], ["dee@uni.example", "0"]]  # eve: nothing to import
    assert "not on the roster, so not in the file" in proc.stdout and "cy" in proc.stdout
    assert "without a submission (left blank): eve" in proc.stdout


def test_regrade_says_whose_score_changed_and_by_how_much(term):
    course, _, _, _, history, again = term
    assert again.returncode == 0, again.stdout + again.stderr
    done = re.search(r"graded (\d) \(and (\d) graded by an earlier run\), failed 0", again.stdout)
    assert done and int(done[1]) + int(done[2]) == 4, again.stdout  # the rest, after Ctrl-C
    assert "score changed for 1:\n  bo: 1 -> 2 (+1)\n" in again.stdout  # 4 of 4 now, still half off
    assert "feedback changed, score did not: dee" in again.stdout
    scores = final_scores(course)
    assert scores[("bo", ASSIGNMENT)] == 2.0 and scores[("ada", ASSIGNMENT)] == 4.0
    graded = [h[1] for h in Journal(course, ASSIGNMENT).history()[history:] if h[3] == "graded"]
    assert sorted(graded) == ["ada", "bo", "cy", "dee"]  # each once
    assert not (Journal(course, ASSIGNMENT).folder / "regrade").exists()
    assert NEW_MESSAGE in (course / "feedback" / "dee" / ASSIGNMENT / "start_here.html").read_text()


def test_regrade_keeps_the_manual_grade_and_comment(term):
    course, *_ = term
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "transformers") as gb:
        grade = gb.find_grade("grade_warmup_softmax", STEM, ASSIGNMENT, "cy")
        assert (grade.manual_score, grade.auto_score, grade.needs_manual_grade) == (1.5, 0.0, True)
        assert gb.find_comment("warmup_softmax", STEM, ASSIGNMENT, "cy").manual_comment == "Nearly: mind the max."
        assert gb.find_submission(ASSIGNMENT, "cy").score == 1.5
    feedback = (course / "feedback" / "cy" / ASSIGNMENT / "start_here.html").read_text()
    assert "Nearly: mind the max." in feedback


def test_feedback_is_released_again_only_where_something_changed(term):
    course, _, _, first, _, again = term
    assert "feedback released again to: bo, dee" in again.stdout
    now = released(course)
    assert all(first.values()) and "Nearly: mind the max." in first["cy"]
    assert now["ada"] == first["ada"] and now["cy"] == first["cy"]
    assert now["bo"] != first["bo"] and now["dee"] != first["dee"]
    assert NEW_MESSAGE in now["dee"] and OLD_MESSAGE in first["dee"]


def test_submitted_holding_other_assignments_gives_only_this_ones_work(tmp_path):
    """``regrade`` (and ``grade submitted``) read the course's ``submitted/``, where every
    assignment collected so far lies. bo handed in only notebook 00: his 00 notebook was found as
    his work on 02 (the only notebook in his folder), graded against 02 and copied over as
    ``submitted/bo/02_attention/attention.ipynb``."""
    for student, assignment, name in (("ada", ASSIGNMENT, "start_here.ipynb"),
                                      ("ada", "02_attention", "attention.ipynb"),
                                      ("bo", ASSIGNMENT, "start_here.ipynb")):
        (tmp_path / student / assignment).mkdir(parents=True)
        (tmp_path / student / assignment / name).write_text("{}")
    found, refused = find_submissions(tmp_path, "02_attention", "attention.ipynb")
    assert found == {"ada": [tmp_path / "ada" / "02_attention" / "attention.ipynb"]} and not refused
