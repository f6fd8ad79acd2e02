"""nbgrader's own workflow on the local filesystem exchange, end to end, with our grader.

The instructor generates and releases notebook 00; three learners, each with a home of
their own (and a Unix user of their own where the test runs as root), fetch it, fill it
(honest: the solution; partial: one exercise wrong; blank: as released) and submit; the
instructor collects, runs ``autograder grade`` on the collected submissions, generates
and releases feedback; each learner fetches their own feedback and no one else's. Scores
in the gradebook, ``nbgrader export``'s CSV and each feedback file agree.
"""
from __future__ import annotations

import csv
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from autograder.paths import SOLUTIONS
from autograder.pipeline.config import config_file
from helpers import mutant, shown_to_all_users

ASSIGNMENT, NOTEBOOK, COURSE_ID = "00_start_here", "start_here.ipynb", "transformers"
SOLUTION = SOLUTIONS / ASSIGNMENT / NOTEBOOK
JVP = "return s * (g - np.sum(g * s, axis=axis, keepdims=True))"
BIN = Path(sys.executable).parent
# each pytest-xdist worker has users of its own: two workers may both build this module's site,
# and one's clean-up must not remove the users the other is running as
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
ADA, BO, CY = (f"agx-{name}{_WORKER}" for name in ("ada", "bo", "cy"))
LEARNERS = {ADA: 4.0, BO: 2.0, CY: 0.0}  # honest, partial, blank


# nbgrader names a learner by their Unix user, so three learners need three users: we must be
# root (bubblewrap shows them the course's Python where a folder above it is closed to them)
AS_USERS = bool(os.geteuid() == 0 and shutil.which("useradd") and shutil.which("bwrap"))
pytestmark = pytest.mark.skipif(
    not AS_USERS, reason="needs root, useradd and bwrap: nbgrader tells learners apart by their Unix user")


@pytest.fixture(scope="module")
def site():
    """A world-traversable folder for the exchange, the course and the learners' homes,
    and the learners' Unix users (removed afterwards)."""
    top = Path(tempfile.mkdtemp(prefix="agx-", dir="/tmp"))
    top.chmod(0o755)
    made = []
    try:
        for name in LEARNERS if AS_USERS else ():
            if subprocess.run(["id", name], capture_output=True).returncode:
                subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
                made.append(name)
        yield top
    finally:
        for name in made:
            subprocess.run(["userdel", name], capture_output=True)
        shutil.rmtree(top, ignore_errors=True)


def as_learner(name: str, home: Path, *args: str, exchange: Path) -> subprocess.CompletedProcess:
    """Run an nbgrader command as the learner would on a JupyterHub: their uid, their home."""
    cmd = [str(BIN / "nbgrader"), *args, f"--course={COURSE_ID}", f"--Exchange.root={exchange}"]
    if AS_USERS:
        user = pwd.getpwnam(name)
        cmd = [*shown_to_all_users(), "setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}",
               "--init-groups", "--", *cmd]
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}
    proc = subprocess.run(cmd, cwd=home, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{name}: nbgrader {args[0]} failed:\n{proc.stderr[-3000:]}"
    return proc


def instructor(course: Path, *args: str, tool: str = "nbgrader") -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    proc = subprocess.run([str(BIN / tool), *args], cwd=course, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, f"{tool} {args[0]} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def term(site):
    """The whole term, once: release, fetch, fill, submit, collect, grade, feedback."""
    exchange, course, homes = site / "exchange", site / "course", site / "home"
    exchange.mkdir(mode=0o777)
    exchange.chmod(0o777)  # as nbgrader's docs set up /srv/nbgrader/exchange
    course.mkdir()
    homes.mkdir(mode=0o755)
    (course / "solutions").symlink_to(SOLUTIONS, target_is_directory=True)
    (course / "nbgrader_config.py").write_text(config_file(f"c.Exchange.root = {str(exchange)!r}"))
    instructor(course, "generate_assignment", ASSIGNMENT)
    instructor(course, "release_assignment", ASSIGNMENT)

    filled = {ADA: SOLUTION.read_bytes(),
              BO: mutant(SOLUTION, "warmup_softmax_jvp", JVP, "return s * g", site).read_bytes(),
              CY: None}

    def learner_works(name: str) -> None:
        home = homes / name
        home.mkdir(mode=0o700)
        if AS_USERS:
            os.chown(home, pwd.getpwnam(name).pw_uid, pwd.getpwnam(name).pw_gid)
        as_learner(name, home, "fetch_assignment", ASSIGNMENT, exchange=exchange)
        mine = home / ASSIGNMENT / NOTEBOOK
        assert mine.exists()
        if filled[name] is not None:
            mine.write_bytes(filled[name])  # the learner saves their work
        as_learner(name, home, "submit", ASSIGNMENT, exchange=exchange)

    with ThreadPoolExecutor(len(LEARNERS)) as learners:  # a class works at the same time
        list(learners.map(learner_works, LEARNERS))

    instructor(course, "collect", ASSIGNMENT)
    grade = instructor(course, "grade", "submitted", "-a", ASSIGNMENT, "--csv", str(course / "ours.csv"),
                       "--no-progress", tool="autograder")
    instructor(course, "generate_feedback", ASSIGNMENT)
    instructor(course, "release_feedback", ASSIGNMENT)
    instructor(course, "export", "--to", str(course / "grades.csv"))
    with ThreadPoolExecutor(len(LEARNERS)) as learners:
        list(learners.map(lambda name: as_learner(name, homes / name, "fetch_feedback", ASSIGNMENT,
                                                  exchange=exchange), LEARNERS))
    return exchange, course, homes, grade


def _feedback_of(home: Path) -> list[Path]:
    return sorted((home / ASSIGNMENT / "feedback").glob(f"*/{Path(NOTEBOOK).stem}.html"))


def test_gradebook_export_and_feedback_agree(term):
    from nbgrader.api import Gradebook

    exchange, course, homes, grade = term
    assert "graded 3, failed 0" in grade.stdout
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", COURSE_ID) as gb:
        book = {s.student.id: s.score for s in gb.assignment_submissions(ASSIGNMENT)}
        stamps = {s.student.id: s.timestamp for s in gb.assignment_submissions(ASSIGNMENT)}
    assert book == LEARNERS
    assert all(stamps.values())  # the submission times nbgrader's exchange recorded
    for export in ("grades.csv", "ours.csv"):
        rows = {r["student_id"]: float(r["score"]) for r in csv.DictReader((course / export).open())}
        assert rows == LEARNERS, export
    for name, score in LEARNERS.items():
        (mine,) = _feedback_of(homes / name)
        html = mine.read_text()
        assert f"start_here (Score: {score} / 4.0)" in html
        # the feedback fetched is the one the instructor released for this learner
        assert html == (course / "feedback" / name / ASSIGNMENT / "start_here.html").read_text()
    partial = _feedback_of(homes / BO)[0].read_text()
    assert "warmup.softmax_jvp: 0 / 2 points" in partial  # the judge's message reaches the learner


def test_each_learner_gets_their_own_feedback_and_no_one_elses(term):
    exchange, course, homes, _ = term
    released = sorted((exchange / COURSE_ID / "feedback").glob("*.html"))
    assert len(released) == 3
    mine = {name: _feedback_of(homes / name)[0].read_text() for name in LEARNERS}
    assert len(set(mine.values())) == 3  # three different reports, one each
    # the released feedback is named by a hash of each submission's secret: a learner can
    # fetch their own by name but cannot list the others'
    mode = (exchange / COURSE_ID / "feedback").stat().st_mode
    assert not mode & stat.S_IROTH and mode & stat.S_IXOTH
    inbound = (exchange / COURSE_ID / "inbound").stat().st_mode
    assert not inbound & stat.S_IROTH  # nor list the others' submissions
    if not AS_USERS:
        pytest.skip("not root: the learners ran under one uid, file permissions untested")
    for name in LEARNERS:
        home = homes / name
        assert pwd.getpwuid(home.stat().st_uid).pw_name == name
        assert not home.stat().st_mode & 0o077  # a home only its learner can enter
        for f in _feedback_of(home):
            assert pwd.getpwuid(f.stat().st_uid).pw_name == name
    listing = subprocess.run(["setpriv", f"--reuid={pwd.getpwnam(CY).pw_uid}", "--regid=65534",
                              "--clear-groups", "--", "ls", str(exchange / COURSE_ID / "feedback"),
                              str(homes / ADA)], capture_output=True, text=True)
    assert listing.returncode != 0 and listing.stderr.count("Permission denied") == 2
    assert not re.search(r"[0-9a-f]{32}\.html", listing.stdout)
