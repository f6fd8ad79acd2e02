"""classroom/late.py: the course's late policy, and a submission time a learner cannot set back.

The policy is asked as nbgrader asks it, through its late-penalty step configured by the course;
the collected time is nbgrader's own fetch, submit and collect, run on a local exchange, with a
learner who rewrites the ``timestamp.txt`` of their submission in the exchange before it is
collected. (Penalties in a graded class: ``test_regrade.py``.)
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from nbgrader.preprocessors import AssignLatePenalties
from nbgrader.utils import parse_utc

from autograder.classroom.journal import course_config
from autograder.classroom.late import DAY, LatePolicy, stamp
from autograder.pipeline.course import new_course

BIN = Path(sys.executable).parent
ASSIGNMENT = "00_start_here"


def policy(**settings) -> LatePolicy:
    """The plugin nbgrader's late-penalty step makes in a course configured with ``settings``."""
    config = course_config(Path("/nonexistent"))  # no nbgrader_config.py: the course's defaults
    for name, value in settings.items():
        setattr(config.LatePolicy, name, value)
    step = AssignLatePenalties(config=config)
    step.init_plugin()
    return step.plugin_inst


def test_the_course_asks_nbgraders_late_step_for_its_policy():
    assert isinstance(policy(), LatePolicy)


@pytest.mark.parametrize("late, penalty", [
    (0, None), (60, 0.4), (DAY, 0.4), (DAY + 1, 0.8), (2.5 * DAY, 1.2),  # a started day counts
    (6 * DAY, 2.0), (7 * DAY, 2.0),                                        # capped at half
    (7 * DAY + 1, 4.0),                                                    # zero after a week
])
def test_a_share_per_day_capped_and_zero_after_a_week(late, penalty):
    plugin = policy(per_day=0.1, max_share=0.5, zero_after_days=7)
    assert plugin.late_submission_penalty("ada", 4.0, late) == penalty


def test_no_policy_takes_nothing_and_nbgraders_zero_still_works():
    assert policy().late_submission_penalty("ada", 4.0, 3 * DAY) is None
    assert policy(penalty_method="zero").late_submission_penalty("ada", 4.0, 60) == 4.0


def nbgrader(course: Path, *args: str, home: Path | None = None) -> subprocess.CompletedProcess:
    """An nbgrader command: the instructor's in the course, or a learner's in ``home``."""
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    extra = []
    if home is not None:  # the learner has no course config: the exchange's place is given
        env["HOME"] = str(home)
        extra = ["--course=transformers", f"--Exchange.root={course / 'exchange'}"]
    proc = subprocess.run([str(BIN / "nbgrader"), *args, *extra], cwd=home or course, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"nbgrader {args[0]}:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


def _handed_in(tmp_path):
    """A course with a local exchange, its assignment released, fetched and submitted once by
    a learner (this process's account, with a home of its own): (course, home, the
    submission's folder in the exchange's inbound/)."""
    course, home = tmp_path / "course", tmp_path / "home"
    course.mkdir()
    home.mkdir()
    new_course(course)  # its nbgrader_config.py is the course's: configure() plus the exchange
    with open(course / "nbgrader_config.py", "a") as f:
        f.write(f"get_config().Exchange.root = {str(course / 'exchange')!r}\n")
    nbgrader(course, "generate_assignment", ASSIGNMENT)
    nbgrader(course, "release_assignment", ASSIGNMENT)
    nbgrader(course, "fetch_assignment", ASSIGNMENT, home=home)
    nbgrader(course, "submit", ASSIGNMENT, home=home)
    (submission,) = (course / "exchange" / "transformers" / "inbound").iterdir()
    return course, home, submission


def test_a_backdated_timestamp_in_the_exchange_is_collected_with_the_files_time(tmp_path):
    """A learner hands in, is collected; hands in again and sets that submission's
    ``timestamp.txt`` back a year in the exchange (their own file there). The first is
    collected with its own stamp; the second with the time its files last changed."""
    course, home, first = _handed_in(tmp_path)
    nbgrader(course, "collect", ASSIGNMENT)
    (student,) = (course / "submitted").iterdir()
    collected = student / ASSIGNMENT / "timestamp.txt"
    assert collected.read_text() == (first / "timestamp.txt").read_text()  # honest: kept

    before = datetime.now(timezone.utc).replace(tzinfo=None)
    nbgrader(course, "submit", ASSIGNMENT, home=home)
    (second,) = set((course / "exchange" / "transformers" / "inbound").iterdir()) - {first}
    (second / "timestamp.txt").write_text("2025-11-26 08:00:00.000000 UTC")  # a year back
    log = nbgrader(course, "collect", "--update", ASSIGNMENT)
    said = parse_utc(collected.read_text())
    assert before - timedelta(seconds=2) <= said <= datetime.now(timezone.utc).replace(tzinfo=None), said
    assert "files last changed" in log.stdout + log.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="making a folder another account owns needs root")
def test_a_folder_in_the_exchange_named_for_another_learner_is_not_collected(tmp_path):
    """Any learner may make a folder in ``inbound/``, named as they like: a newer one named
    for a classmate (made by an account that is neither, here uid 60123) would be collected
    as the classmate's newest submission. It is left, and the classmate's own is collected;
    a forged folder for a learner who handed in nothing gives that learner nothing."""
    course, _, own = _handed_in(tmp_path)
    inbound = own.parent
    learner = own.name.split("+")[0]
    later = stamp(datetime.now(timezone.utc) + timedelta(hours=1))
    for name in (learner, "eve"):
        forged = inbound / f"{name}+{ASSIGNMENT}+{later}+forged123456"
        shutil.copytree(own, forged)
        (forged / "timestamp.txt").write_text(later)
        for path in (forged, *forged.rglob("*")):
            os.chown(path, 60123, 60123)
    log = nbgrader(course, "collect", ASSIGNMENT)
    said = log.stdout + log.stderr
    assert sorted(p.name for p in (course / "submitted").iterdir()) == [learner], said
    collected = course / "submitted" / learner / ASSIGNMENT / "timestamp.txt"
    assert collected.read_text() == (own / "timestamp.txt").read_text()
    assert said.count("made by uid 60123; not collected") == 2, said
