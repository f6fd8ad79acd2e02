"""A class on a real JupyterHub, driven in headless Chromium as its people would.

The hub comes up from the commands in docs/instructor.md (``hub_site.py``). The instructor
generates and releases ``02_attention`` in the course's formgrader; three learners log in,
see their courses in the Assignment List (one takes both courses on the hub), fetch the
assignment, answer it (the solution; the solution with a known mistake; nothing), press
Validate and submit. The instructor collects and autogrades in the formgrader, grades the
same submissions again with ``autograder grade`` from the course directory (the same
scores), writes a comment by hand, and releases the feedback; each learner fetches theirs
and sees their own report and no one else's. The instructor of the other course is turned
away from this course's formgrader. Screenshots of every step go to $AUTOGRADER_ARTIFACTS,
or to a folder ``hub-artifacts*`` under pytest's tmp folder.

Learners answer by saving the notebook through their server's contents API from the page
(what JupyterLab's save and upload do); typing a whole notebook's functions into the editor
would test CodeMirror, not the course.
"""
from __future__ import annotations

import csv
import os
import subprocess
from pathlib import Path

import nbformat
import pytest

from autograder.hub.hub_config import environment
from helpers import CHROMIUM, SOLUTIONS, chromium, mutant, shown_to_all_users
from hub_site import AFTER_CLASS, ASSIGNMENT, GUESSES, Person, missed, refused

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                reason="Debian's chromium is not installed (.ci/run installs it)")
SOLUTION = SOLUTIONS / ASSIGNMENT / "attention.ipynb"
MISTAKE = ("dS = A * (dA - np.sum(dA * A, axis=-1, keepdims=True))", "dS = A * dA")
MISTAKE_NAME = "softmax backward missing the sum term"
COMMENT = "Look again at the softmax Jacobian: diag(a) - a a^T."
FULL = 17.0


def _answer(role: str, tmp_path: Path) -> dict | None:
    """What each learner writes: the solution, the solution with a known mistake, nothing."""
    if role == "honest":
        return nbformat.read(SOLUTION, as_version=4)
    if role == "mistake":
        return nbformat.read(mutant(SOLUTION, "attention_backward", *MISTAKE, tmp_path), as_version=4)
    return None


def _gradebook_scores(site) -> dict[str, float]:
    from nbgrader.api import Gradebook  # lazy: nbgrader (seconds), only once the class is graded

    with Gradebook(f"sqlite:///{site.course_dir() / 'gradebook.db'}", site.course) as gb:
        return {s.student.id: s.score for s in gb.assignment_submissions(ASSIGNMENT) if s.notebooks}


def _notebook_ids(site) -> dict[str, str]:
    """Each learner's submitted notebook's id in the gradebook (the formgrader's page for it)."""
    from nbgrader.api import Gradebook  # lazy: nbgrader (seconds), only once the class is graded

    with Gradebook(f"sqlite:///{site.course_dir() / 'gradebook.db'}", site.course) as gb:
        return {s.student.id: s.notebooks[0].id for s in gb.assignment_submissions(ASSIGNMENT) if s.notebooks}


def _as_grader(site, *command: str) -> subprocess.CompletedProcess:
    """A command run by the course's grader account in the course directory, with the
    environment of its formgrader (what its Lab's terminal gives)."""
    grader = f"grader-{site.course}"
    (course,) = [c for c in site.hub.courses if c.id == site.course]
    env = {**environment(site.hub, course), "HOME": str(site.home(grader)), "LANG": "C.UTF-8",
           **({"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {})}
    return subprocess.run([*shown_to_all_users(), "runuser", "-u", grader, "--", "env", "-i",
                           *(f"{k}={v}" for k, v in env.items()), *command],
                          cwd=site.course_dir(), capture_output=True, text=True, timeout=600)


def test_a_class_on_the_hub_in_a_browser(site, artifacts, tmp_path):
    learners = site.learners
    with chromium() as browser:
        teacher = Person(browser, site, site.instructor, artifacts)
        teacher.assignment_action(site.course, "assign")    # generate the learners' version
        teacher.assignment_action(site.course, "release")
        # the other course's instructor releases there, and is turned away from this course's formgrader
        other = Person(browser, site, site.other_instructor, artifacts)
        other.assignment_action(site.other_course, "assign")
        other.assignment_action(site.other_course, "release")
        assert other.formgrader(site.course).status == 403
        other.shot("0-other-instructor-refused")

        people = {role: Person(browser, site, user, artifacts) for role, user in learners.items()}
        for role, learner in people.items():
            panel = learner.assignment_list(site.course)
            expected = [site.course, site.other_course] if role == "honest" else [site.course]
            assert sorted(learner.courses()) == sorted(expected)  # the courses they take, no other
            released = panel.locator("#released_assignments_list .list_item", has_text=ASSIGNMENT)
            learner.shot("1-assignment-list")
            released.locator("button", has_text="Fetch").click()
            panel.locator("#fetched_assignments_list .list_item", has_text=ASSIGNMENT).first.wait_for()
            path = f"{site.course}/{ASSIGNMENT}/attention.ipynb"
            answer = _answer(role, tmp_path)
            if answer is not None:
                learner.save(path, answer)
            verdict = learner.validate(path)
            if role == "honest":
                assert "Success! Your notebook passes all the tests." in verdict, verdict
            else:
                assert "Success" not in verdict and "failed" in verdict, verdict
            if role == "mistake":
                assert MISTAKE_NAME in verdict, verdict
            panel = learner.assignment_list(site.course)
            panel.locator("#fetched_assignments_list .list_item", has_text=ASSIGNMENT).first \
                .locator("button", has_text="Submit").click()
            panel.locator("#submitted_assignments_list .list_item", has_text=ASSIGNMENT).first.wait_for()
            learner.shot("4-submitted")

        teacher.assignment_action(site.course, "collect")
        page = teacher.page
        teacher.formgrader(site.course, f"manage_submissions/{ASSIGNMENT}")
        for user in learners.values():
            page.locator("#main-table tr", has_text=user).locator("td.autograde a").click()
            teacher.outcome(f"6-autograde-{user}")
        teacher.shot("6-autograded")
        in_formgrader = _gradebook_scores(site)
        assert in_formgrader[learners["honest"]] == FULL and in_formgrader[learners["blank"]] == 0
        assert 0 < in_formgrader[learners["mistake"]] < FULL

        # the same class graded from the course directory's terminal: the same scores
        graded = _as_grader(site, "autograder", "grade", "submitted", "-a", ASSIGNMENT, "--csv", "grades.csv",
                            "--no-progress")
        assert graded.returncode == 0, graded.stdout[-3000:] + graded.stderr[-3000:]
        with (site.course_dir() / "grades.csv").open() as f:
            exported = {r["student_id"]: float(r["score"]) for r in csv.DictReader(f)}
        assert exported == in_formgrader == _gradebook_scores(site)

        # a comment written by hand in the formgrader, on the mistaken learner's backward pass
        teacher.formgrader(site.course, f"submissions/{_notebook_ids(site)[learners['mistake']]}")
        comment = page.locator("textarea.comment[placeholder]").first  # the placeholder: its view is up
        comment.fill(COMMENT)
        with page.expect_response(lambda r: "/formgrader/api/comment/" in r.url and r.request.method == "PUT"):
            comment.press("Tab")  # formgrader saves a comment on the field's change event, on leaving it
        teacher.shot("7-manual-comment")

        teacher.assignment_action(site.course, "generate-feedback")
        teacher.assignment_action(site.course, "release-feedback")

        for role, learner in people.items():
            panel = learner.assignment_list(site.course)
            item = panel.locator("#submitted_assignments_list .list_item", has_text=ASSIGNMENT).first
            item.locator("button", has_text="Fetch Feedback").click()
            item.locator("a", has_text="view feedback").wait_for()
            learner.shot("8-feedback-fetched")
            reports = sorted((site.home(learner.user) / site.course / ASSIGNMENT / "feedback").glob("*/attention.html"))
            assert len(reports) == 1, reports
            relative = reports[0].relative_to(site.home(learner.user))
            learner.page.goto(f"{learner.lab}/files/{relative}")
            learner.page.wait_for_selector("text=Score")
            learner.shot("9-feedback")
            text = learner.page.locator("body").inner_text()
            assert f"attention (Score: {in_formgrader[learner.user]} / {FULL})" in text
            others = set(learners.values()) - {learner.user}
            assert not any(name in text for name in others)
            if role == "mistake":
                assert COMMENT in text and MISTAKE_NAME in text
    # now that the class has made them: a learner of this course only is refused the exchange's
    # folders, the other learners' work and submissions and the course secret, and cannot guess
    # their way to a submission (test_hub_people_apart.py: the rest); the guesses first, as
    # AFTER_CLASS ends by trying to remove a submission
    attempts = {what: missed(site, learners["mistake"], command) for what, command in GUESSES.items()}
    attempts |= {what: refused(site, learners["mistake"], command) for what, command in AFTER_CLASS.items()}
    failed = [f"{what}: {why}" for what, why in attempts.items() if why]
    assert not failed, "\n".join(failed)
