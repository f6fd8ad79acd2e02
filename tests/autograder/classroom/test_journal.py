"""classroom/journal.py: what a rerun finds, for each state an interrupted run can leave.

Recording a graded outcome into the gradebook is exercised by test_classroom.py (a class
graded, interrupted and resumed); here, the journal's own states.
"""
from autograder.classroom.jobs import Outcome
from autograder.classroom.journal import JOURNALLED, NEW, RECORDED, Journal

ASSIGNMENT = "00_start_here"


def test_a_failed_outcome_is_journalled_and_never_marked_recorded(tmp_path):
    journal = Journal(tmp_path, ASSIGNMENT)
    assert journal.state("ada", "d1") == (NEW, None)
    failed = Outcome("ada", "d1", False, reason="stopped: grading ran past the time limit of 1 s")
    journal.keep(failed)
    assert journal.state("ada", "d1") == (JOURNALLED, failed)
    assert journal.state("ada", "d2") == (NEW, None)  # the learner resubmitted: a new job
    assert not (journal.folder / "ada.done").exists()
    assert [row[1:4] for row in journal.history()] == [["ada", "d1", "failed"]]


def test_a_recorded_job_is_recorded_whatever_the_journal_holds(tmp_path):
    journal = Journal(tmp_path, ASSIGNMENT)
    (journal.folder / "bo.done").write_text("d1")
    assert journal.state("bo", "d1") == (RECORDED, None)
    assert journal.state("bo", "d0") == (NEW, None)


def test_drafts_of_a_killed_run_are_cleared(tmp_path):
    folder = Journal(tmp_path, ASSIGNMENT).folder
    (folder / ".ada.json.123.part").write_text("{")
    Journal(tmp_path, ASSIGNMENT)
    assert not list(folder.glob(".*.part"))
