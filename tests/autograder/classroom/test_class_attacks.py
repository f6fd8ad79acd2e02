"""A learner against class grading, with the source in hand (issue 23).

In a class, what a learner controls is files and names in the folder ``autograder grade``
reads with the instructor's rights: their file and folder names, what lies inside their own
folder, what kind of file each is, and ``timestamp.txt``. Each test is one attack, checked
where it would land: whose a notebook is (``intake.find_submissions``), what a task carries
to a worker (``grade.make_task``), what a rerun trusts in the journal, and what recording puts
into the course. None grades a notebook: these attacks act before grading or after it.
"""
from __future__ import annotations

import contextlib
import json
import os
import pickle
import sqlite3
import stat
import tempfile
import threading
import zipfile
from pathlib import Path

import pytest

from autograder.classroom.grade import make_task
from autograder.classroom.intake import NotHandedIn, extras_of, find_submissions, place_submission, unpacked
from autograder.classroom.jobs import Outcome, Task, answer_to, points
from autograder.classroom.journal import JOURNALLED, NEW, Journal
from autograder.pipeline import plan
from autograder.pipeline.course import new_course
from helpers import NOTEBOOKS, SOLUTIONS

ASSIGNMENT, NAME = "00_start_here", "start_here.ipynb"
SOLUTION = SOLUTIONS / ASSIGNMENT / NAME
RELEASE = NOTEBOOKS / ASSIGNMENT / NAME


def _put(path: Path, data: bytes = b"{}") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _found(folder: Path) -> tuple[dict, dict]:
    """(student -> notebooks found, refused name -> reason) as ``autograder grade`` sees ``folder``."""
    with unpacked(folder) as (inside, skipped):
        found, refused = find_submissions(inside, ASSIGNMENT, NAME, skipped=skipped)
        return ({s: [p.relative_to(inside).as_posix() for p in paths] for s, paths in found.items()},
                {o.student: o.reason for o in refused})


def test_a_notebook_in_a_learners_folder_is_theirs_whatever_its_path_names(tmp_path):
    """Mallory hands in a folder holding ``bo/00_start_here/start_here.ipynb``: nbgrader's layout
    naming her classmate. It was graded as bo's, in place of bo's own ``my_work.ipynb`` (the
    assignment's file name wins), so one learner's work could be recorded for another. In
    nbgrader's own layout (``nbgrader submit`` copies a learner's subfolders too) the same."""
    folder = tmp_path / "class"
    _put(folder / "bo" / "my_work.ipynb")
    _put(folder / "mallory" / "bo" / ASSIGNMENT / NAME)
    assert _found(folder) == ({"bo": ["bo/my_work.ipynb"],
                               "mallory": [f"mallory/bo/{ASSIGNMENT}/{NAME}"]}, {})

    zipped = tmp_path / "submitted.zip"  # a zip of nbgrader's submitted/ is read inside it
    with zipfile.ZipFile(zipped, "w") as zf:
        zf.writestr(f"submitted/cy/{ASSIGNMENT}/{NAME}", "{}")
        zf.writestr(f"submitted/eve/{ASSIGNMENT}/{NAME}", "{}")
        zf.writestr(f"submitted/eve/{ASSIGNMENT}/cy/{ASSIGNMENT}/{NAME}", "{}")
    found, refused = _found(zipped)
    assert found["cy"] == [f"cy/{ASSIGNMENT}/{NAME}"] and not refused
    assert sorted(found["eve"]) == [f"eve/{ASSIGNMENT}/cy/{ASSIGNMENT}/{NAME}", f"eve/{ASSIGNMENT}/{NAME}"]


REFUSED_NAMES = {
    "..": "...ipynb",                        # submitted/../<assignment>: outside submitted/
    ".": "..ipynb",
    'q";alert(1);"': 'q";alert(1);".ipynb',  # the formgrader writes ids into a <script> unescaped
    "<img src=x onerror=alert(1)>": "<img src=x onerror=alert(1)>/start_here.ipynb",
    "x\tgraded\n": "x\tgraded\n.ipynb",     # a forged row in the journal's history
    "\x1b]0;owned\x07": "\x1b]0;owned\x07.ipynb",  # the instructor's terminal
    "a[b]": "a[b].ipynb",                    # a glob to nbgrader's commands
    "-rf": "-rf.ipynb",
    "a" * 65: "a" * 65 + ".ipynb",           # journal files past the file system's name limit
}


def test_a_name_that_is_not_a_student_id_is_refused_before_any_path_is_made(tmp_path):
    folder = tmp_path / "class"
    for path in REFUSED_NAMES.values():
        _put(folder / path)
    for fine in ("ada.ipynb", "José.ipynb", "a.b-c+d@x_1.ipynb"):
        _put(folder / fine)
    found, refused = _found(folder)
    assert set(found) == {"ada", "José", "a.b-c+d@x_1"}
    assert set(refused) == {ascii(name) for name in REFUSED_NAMES}
    for name, path in REFUSED_NAMES.items():
        reason = refused[ascii(name)]
        assert reason.startswith(ascii(path)) and "not a student id" in reason and reason.isprintable()


def test_links_are_never_followed(tmp_path, monkeypatch):
    """A learner's notebook that is a link to a classmate's file, to the gradebook, or lying in a
    linked folder, and a ``timestamp.txt`` linked to the grader's secret: the instructor's
    process read each (it may; the learner may not) and copied it into the course, or sent it on."""
    monkeypatch.setenv(plan.SECRET_ENV, str(tmp_path / "secret"))
    secret = plan.secret_key()
    course = tmp_path / "course"
    (course / "gradebook.db").parent.mkdir()
    sqlite3.connect(course / "gradebook.db").close()
    folder = tmp_path / "class"
    _put(folder / "bo.ipynb", SOLUTION.read_bytes())
    (folder / "eve.ipynb").symlink_to(folder / "bo.ipynb")
    (folder / "fay.ipynb").symlink_to(course / "gradebook.db")
    (folder / "gus").mkdir()
    (folder / "gus" / "mine").symlink_to(folder / "hal", target_is_directory=True)
    stamp = _put(folder / "hal" / ASSIGNMENT / NAME, RELEASE.read_bytes()).with_name("timestamp.txt")
    stamp.symlink_to(plan.secret_path())

    found, refused = _found(folder)
    assert set(found) == {"bo", "hal"} and {"eve", "fay"} <= set(refused) <= {"eve", "fay", "gus"}
    assert all("symbolic link" in r for r in refused.values())
    dest = course / "submitted" / "hal" / ASSIGNMENT / NAME
    with pytest.raises(NotHandedIn, match="timestamp.txt is a symbolic link"):
        place_submission(folder / found["hal"][0], dest, extras_of(folder / found["hal"][0], ASSIGNMENT))
    assert not dest.with_name("timestamp.txt").exists()
    assert not any(secret in p.read_bytes() for p in course.rglob("*") if p.is_file())


def _intake(folder: Path, course: Path) -> tuple[dict, dict]:
    """(student -> the file placed in ``course``'s submitted/, refused student -> reason): what
    ``autograder grade`` takes in from ``folder``, in a thread that must end within 20 s."""
    placed, refused, done = {}, {}, threading.Event()

    def take_in():
        with unpacked(folder) as (inside, skipped):
            found, failed = find_submissions(inside, ASSIGNMENT, NAME, skipped=skipped)
            refused.update({o.student: o.reason for o in failed})
            for student, (path, *_) in found.items():
                dest = course / "submitted" / student / ASSIGNMENT / NAME
                try:
                    place_submission(path, dest, extras_of(path, ASSIGNMENT))
                    placed[student] = dest
                except OSError as err:
                    refused[student] = str(err)
        done.set()

    threading.Thread(target=take_in, daemon=True).start()
    if not done.wait(20):
        for fifo in (p for p in folder.rglob("*") if p.is_fifo()):  # let the stuck thread go
            with contextlib.suppress(OSError):  # ENXIO: no reader waits on that one
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("the intake waited on a file")
    return placed, refused


def test_only_regular_files_are_read_and_none_makes_the_intake_wait(tmp_path):
    """A named pipe ``bo.ipynb`` stopped ``autograder grade`` for good (the copy waited for a
    writer) and the learners after it were never graded; a hard link to a file outside the
    folder (another name of the gradebook, say) was copied as the learner's. Each is refused
    with what it is, and the others are taken in."""
    course, folder, outside = tmp_path / "course", tmp_path / "class", tmp_path / "outside"
    _put(folder / "ada.ipynb", RELEASE.read_bytes())
    os.mkfifo(folder / "bo.ipynb")
    (folder / "cy.ipynb").symlink_to(_put(outside / "secret.ipynb", b"secret"))
    os.link(outside / "secret.ipynb", folder / "dee.ipynb")
    (folder / "eve.ipynb").mkdir()
    _put(folder / "fay" / "start_here.ipynb", RELEASE.read_bytes())
    os.link(folder / "fay" / "start_here.ipynb", folder / "fay" / "copy.ipynb")  # both names inside: hers
    os.mkfifo(_put(folder / "gus" / ASSIGNMENT / NAME, RELEASE.read_bytes()).with_name("timestamp.txt"))
    _put(folder / "zed.ipynb", RELEASE.read_bytes())
    placed, refused = _intake(folder, course)
    assert sorted(placed) == ["ada", "fay", "zed"]
    assert placed["ada"].read_bytes() == RELEASE.read_bytes()
    assert sorted(refused) == ["bo", "cy", "dee", "eve", "gus"]
    assert "named pipe" in refused["bo"] and "symbolic link" in refused["cy"]
    assert "hard link" in refused["dee"] and "a folder" in refused["eve"]
    assert "timestamp.txt is not a regular file" in refused["gus"]
    assert not any(b"secret" in p.read_bytes() for p in course.rglob("*") if p.is_file())


def test_a_zips_links_and_special_members_are_left_out_and_named(tmp_path):
    """``zipfile`` wrote a member that is a symbolic link (its mode in ``external_attr``) as a
    file holding the link's target, graded as the learner's notebook; likewise a pipe."""
    zipped = tmp_path / "class.zip"
    with zipfile.ZipFile(zipped, "w") as zf:
        zf.writestr("ada.ipynb", RELEASE.read_bytes())
        for name, mode in (("bo.ipynb", stat.S_IFLNK | 0o777), ("cy.ipynb", stat.S_IFIFO | 0o644),
                           (f"dee/{ASSIGNMENT}/timestamp.txt", stat.S_IFLNK | 0o777)):
            member = zipfile.ZipInfo(name)
            member.external_attr = mode << 16
            zf.writestr(member, "../../gradebook.db")
        zf.writestr(f"dee/{ASSIGNMENT}/{NAME}", RELEASE.read_bytes())
    found, refused = _found(zipped)
    assert found == {"ada": ["ada.ipynb"]}
    assert sorted(refused) == ["bo", "cy", "dee"]
    assert "'bo.ipynb' is a symbolic link in the zip" in refused["bo"]
    assert "named pipe" in refused["cy"] and "timestamp.txt" in refused["dee"]


def _task_or_failure(tmp_path: Path, student: str, make_stamp) -> Task | Outcome:
    folder = tmp_path / "submitted" / student / ASSIGNMENT
    _put(folder / NAME, RELEASE.read_bytes())
    make_stamp(folder / "timestamp.txt")
    return make_task(folder, student, ASSIGNMENT, NAME)


def test_a_timestamp_is_read_once_bounded_never_through_a_link_and_as_a_time(tmp_path, monkeypatch):
    """``timestamp.txt`` was read whole by the instructor's process and sent to the worker as it
    was: a link to the grader's secret sent the secret with the task (to a Dask worker), a FIFO
    stopped the whole run, a gigabyte was read into memory, and text that is no time failed
    only in the worker, after it had started grading."""
    monkeypatch.setenv(plan.SECRET_ENV, str(tmp_path / "secret"))
    secret = plan.secret_key()
    on_time = "2024-05-01 12:00:00.000000 UTC"
    task = _task_or_failure(tmp_path, "ada", lambda p: p.write_text(on_time + "\n"))
    assert isinstance(task, Task) and task.timestamp == on_time
    attacks = {
        "link": (lambda p: p.symlink_to(plan.secret_path()), "is a symbolic link"),
        "fifo": (os.mkfifo, "is not a regular file"),
        "huge": (lambda p: p.write_bytes(b" " * (8 << 20) + on_time.encode()), "larger than"),
        "not a time": (lambda p: p.write_text("when I am ready"), "does not hold a time"),
    }
    for student, (make, words) in attacks.items():
        failed = _task_or_failure(tmp_path, student.replace(" ", "_"), make)
        assert isinstance(failed, Outcome) and not failed.ok and words in failed.reason, (student, failed)
        assert secret not in pickle.dumps(failed)


def test_a_journal_entry_cut_short_or_not_the_learners_is_not_trusted(tmp_path):
    """A rerun trusted ``<student>.json`` as it found it: one cut short (a disk that filled, a
    copy interrupted) stopped the whole class with a JSONDecodeError, and one holding another
    student's outcome was recorded for that other student."""
    journal = Journal(tmp_path, ASSIGNMENT)
    own = Outcome("ada", "d1", False, reason="stopped: grading ran past the time limit of 1 s")
    journal.keep(own)
    entry = journal.folder / "ada.json"
    whole = entry.read_text()
    assert journal.state("ada", "d1") == (JOURNALLED, own)
    foreign = json.dumps({**json.loads(whole), "student": "bo", "ok": True, "scores": {"grade_x": 99.0}})
    for planted in (whole[: len(whole) // 2], foreign, "[]", '{"student": "ada"}', b"\xff\xfe{"):
        entry.write_bytes(planted if isinstance(planted, bytes) else planted.encode())
        assert journal.state("ada", "d1") == (NEW, None), planted


def test_the_history_keeps_one_row_per_outcome_whatever_its_reason_says(tmp_path):
    """A reason may name a learner's files ("more than one notebook: ..."), whose names may
    hold tabs, quotes and line breaks: the history split them into forged rows and columns."""
    journal = Journal(tmp_path, ASSIGNMENT)
    reasons = ["more than one notebook: 'a\\tb.ipynb', x\tgraded\t1.0\"q\".ipynb",
               "line one\nada\tgraded\r\nthree", ""]
    for n, reason in enumerate(reasons):
        journal.keep(Outcome(f"s{n}", f"d{n}", False, reason=reason, worker="host:1>2"))
    rows = journal.history()
    assert [row[1:] for row in rows] == [
        [f"s{n}", f"d{n}", "failed", "0.00", "host:1>2", " ".join(r.splitlines())] for n, r in enumerate(reasons)]


def test_a_learners_extra_files_cannot_replace_the_feedback_or_carry_a_link(tmp_path, monkeypatch):
    """Recording copies a submission's other files beside its feedback, and ``nbgrader
    release_feedback`` hands every ``.html`` there to the learner. A learner's
    ``start_here.html`` must not stand for the feedback, and a ``leak.html`` linked to the
    gradebook (or a file linked to the secret) must not be copied: it was, gradebook and all."""
    from nbgrader.api import Gradebook
    from nbgrader.apps import NbGraderAPI

    monkeypatch.setenv(plan.SECRET_ENV, str(tmp_path / "secret"))
    course = tmp_path / "course"
    course.mkdir()
    new_course(course)
    journal = Journal(course, ASSIGNMENT)
    assert NbGraderAPI(config=journal.config).generate_assignment(ASSIGNMENT)["success"]
    handed_in = course / "submitted" / "mallory" / ASSIGNMENT
    _put(handed_in / NAME, RELEASE.read_bytes())
    _put(handed_in / "start_here.html", b"<h1>start_here (Score: 4.0 / 4.0)</h1>")
    _put(handed_in / "data.csv", b"1,2\n")
    (handed_in / "leak.html").symlink_to(course / "gradebook.db")
    (handed_in / "peek.txt").symlink_to(plan.secret_path())
    plan.secret_key()
    stamp = "2024-05-01 12:00:00 UTC"
    ours = Outcome("mallory", "d1", True, scores={}, comments={}, autograded=RELEASE.read_text(),
                   feedback="<html>the grader's feedback</html>", timestamp=stamp)
    journal.keep(ours)
    made = {folder: course / folder / "mallory" / ASSIGNMENT for folder in ("feedback", "autograded")}
    assert sorted(p.name for p in made["feedback"].iterdir()) == ["data.csv", "start_here.html"]
    assert sorted(p.name for p in made["autograded"].iterdir()) == ["data.csv", "start_here.html", NAME]
    assert (made["feedback"] / "start_here.html").read_text() == ours.feedback
    assert (made["autograded"] / NAME).read_text() == ours.autograded
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert str(gb.find_submission(ASSIGNMENT, "mallory").timestamp) == "2024-05-01 12:00:00"


def test_a_zip_writes_nothing_outside_its_folder(tmp_path, monkeypatch):
    """Members named ``../../x.ipynb`` or ``/x.ipynb`` land inside the folder it is read in."""
    work = tmp_path / "deep" / "er"
    work.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(work))  # where the zip is read: 2 levels down
    zipped = tmp_path / "class.zip"
    with zipfile.ZipFile(zipped, "w") as zf:
        zf.writestr("../../escape.ipynb", "{}")
        zf.writestr("/abs/abs.ipynb", "{}")
        zf.writestr("ada/start_here.ipynb", "{}")
    before = sorted(tmp_path.rglob("*"))
    found, refused = _found(zipped)
    assert sorted(tmp_path.rglob("*")) == before
    assert found == {"escape": ["escape.ipynb"], "abs": ["abs/abs.ipynb"], "ada": ["ada/start_here.ipynb"]}
    assert not refused


def test_a_workers_answer_counts_only_for_its_task_and_within_the_points():
    """A worker that lied (a sandbox escape on a Dask machine, say) could name another student,
    another submission, a cell that is not graded, or more points than a cell has: none of it
    reaches the gradebook; the task fails with the reason. An honest answer passes unchanged,
    with the instructor's timestamp."""
    task = Task("ada", ASSIGNMENT, NAME, "{}", [], "d1", "2026-01-01 10:00:00 UTC", b"k")
    allowed = points(ASSIGNMENT, NAME)
    grade_id, top = next(iter(allowed.items()))
    honest = Outcome("ada", "d1", True, scores={grade_id: top}, timestamp="1999-01-01 UTC")
    assert answer_to(task, honest).ok and answer_to(task, honest).timestamp == task.timestamp
    lies = {"another student": Outcome("bob", "d1", True, scores={grade_id: top}),
            "another submission": Outcome("ada", "d2", True, scores={grade_id: top}),
            "a cell that is not graded": Outcome("ada", "d1", True, scores={"setup": 1.0}),
            "more points than the cell has": Outcome("ada", "d1", True, scores={grade_id: top + 1}),
            "negative points": Outcome("ada", "d1", True, scores={grade_id: -1.0}),
            "not a number": Outcome("ada", "d1", True, scores={grade_id: float("nan")})}
    for lie, outcome in lies.items():
        kept = answer_to(task, outcome)
        assert (kept.student, kept.digest, kept.ok, kept.scores) == ("ada", "d1", False, {}), lie
        assert "not recorded" in kept.reason, (lie, kept.reason)


def test_the_class_reports_show_learner_text_escaped(tmp_path):
    """A reason quotes a learner's exception or file name, a roster row a learner's name: the
    summary of ``grade`` (and ``regrade``) and the report of ``export`` printed them raw, so
    ``ESC ] 0 ;...BEL`` retitled the instructor's terminal and a line break forged a row."""
    from autograder.classroom.export import Export
    from autograder.classroom.grade import Summary

    attack = "\x1b]0;pwned\x07\x1b[2J\nada: graded 4/4"
    summary = Summary(failed=[Outcome("bo", "", False, reason=f"grading failed: {attack}")])
    export = Export(tmp_path / "out.csv", 0, unknown=["bo"], missing=[attack])
    for report in (summary.report(), export.report()):
        assert "\x1b" not in report and "\x07" not in report and "\\x1b]0;pwned\\x07" in report
        assert not any(line.startswith("ada:") for line in report.splitlines())


def test_every_file_left_out_for_what_it_is_is_named_once(tmp_path):
    """A zip member that is a link and not a notebook was dropped without a word; so were a
    folder's links, pipes and notebooks on another assignment. Each is named once: in its
    learner's refusal (a notebook, ``timestamp.txt``) or in the run's list of files left out."""
    from autograder.classroom.intake import left_out

    zipped = tmp_path / "class.zip"
    with zipfile.ZipFile(zipped, "w") as zf:
        zf.writestr("ada/start_here.ipynb", RELEASE.read_bytes())
        for name, mode in (("ada/data.csv", stat.S_IFLNK | 0o777), ("ada/notes", stat.S_IFIFO | 0o644),
                           ("bo.ipynb", stat.S_IFLNK | 0o777),
                           ("ada/.ipynb_checkpoints/start_here-checkpoint.ipynb", stat.S_IFLNK | 0o777)):
            member = zipfile.ZipInfo(name)
            member.external_attr = mode << 16
            zf.writestr(member, "/etc/passwd")
    with unpacked(zipped) as (inside, skipped):
        _, refused = find_submissions(inside, ASSIGNMENT, NAME, skipped=skipped)
        lines = left_out(inside, ASSIGNMENT, skipped)
    assert [o.student for o in refused] == ["bo"]
    assert lines == ["'ada/.ipynb_checkpoints/start_here-checkpoint.ipynb' is a symbolic link: not read "
                     "(the grader reads only regular files)",
                     "'ada/data.csv' is a symbolic link: not read (the grader reads only regular files)",
                     "'ada/notes' is a named pipe (FIFO): not read (the grader reads only regular files)"]

    folder = tmp_path / "class"
    _put(folder / "ada" / NAME, RELEASE.read_bytes())
    (folder / "ada" / "data.csv").symlink_to("/etc/passwd")
    (folder / "ada" / "cache").symlink_to("/etc", target_is_directory=True)
    os.mkfifo(folder / "ada" / "pipe")
    (folder / "cy.ipynb").symlink_to(folder / "ada" / NAME)
    # nbgrader's layout: its timestamp.txt comes along, and a link there is the learner's refusal
    stamp = _put(folder / "di" / ASSIGNMENT / NAME, RELEASE.read_bytes()).with_name("timestamp.txt")
    stamp.symlink_to("/etc/passwd")
    _, refused = find_submissions(folder, ASSIGNMENT, NAME)
    assert [o.student for o in refused] == ["cy"]
    assert extras_of(folder / "di" / ASSIGNMENT / NAME, ASSIGNMENT)[0] == stamp
    assert extras_of(folder / "ada" / NAME, ASSIGNMENT) == []  # a flat folder: nothing comes along
    assert [line.split(" is ")[0] for line in left_out(folder, ASSIGNMENT)] == [
        "'ada/cache'", "'ada/data.csv'", "'ada/pipe'"]
    from autograder.classroom.grade import Summary

    report = Summary(left_out=left_out(folder, ASSIGNMENT)).report()
    assert "left out 3 file(s) of the submissions:\n  'ada/cache' is a symbolic link" in report
