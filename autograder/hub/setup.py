"""``autograder hub setup FILE``: the accounts, folders and configuration of a hub, as root. [trusted]

From a course file (``course_file.py``) it makes, idempotently (run it again after editing
the file):

- a Unix user with a private home (mode 0700) for every instructor and learner, and for every
  course its grader account ``grader-<course>``;
- nbgrader's exchange (mode 1777, as nbgrader requires, and sticky), with a folder per course
  owned by that course's grader account (no one else can make or fill it before the course
  releases anything);
- each course directory ``<home>/grader-<course>/<course>/``, the grader account's alone:
  ``solutions/`` (the assignments the file lists), its ``nbgrader_config.py`` (the course's
  grading pipeline) and a gradebook that knows the learners and the deadlines;
- ``<root>/etc/jupyter/nbgrader_config.py``, read by everyone's nbgrader; the formgrader
  services' instructor tools under ``<root>/instructor/``;
- ``<root>/jupyterhub_config.py`` (``hub_config.py``), root's alone.

``autograder hub remove FILE`` undoes it: it deletes the accounts that setup made (listed in
``<root>/state/accounts``), their homes, the exchange's course folders and ``<root>``.
"""
from __future__ import annotations

import datetime as dt
import os
import pwd
import shutil
import subprocess
from pathlib import Path

from autograder.hub.course_file import Course, Hub
from autograder.hub.hub_config import (BIN, course_directory, instructor_config_prefix, jupyterhub_config,
                                       nbgrader_config, shared_config_dir, state_dir)
from autograder.lab import set_instructor_mode
from autograder.paths import SOLUTIONS


class SetupError(RuntimeError):
    """The hub cannot be set up here (not root, a command failed): the message says why."""


def setup(hub: Hub, source: Path) -> list[str]:
    """Make everything ``hub`` describes; returns what it did, one line each."""
    if os.geteuid() != 0:
        raise SetupError("run it as root: it makes Unix users and folders other users may not change")
    done = []
    _folder(hub.root, 0o755)
    _folder(state_dir(hub), 0o700)
    accounts = state_dir(hub) / "accounts"
    made = set(accounts.read_text().split()) if accounts.exists() else set()
    for name in [*hub.people, *(c.grader for c in hub.courses)]:
        if _user(name, hub.home):
            made.add(name)
            done.append(f"made user {name}")
        accounts.write_text("".join(f"{m}\n" for m in sorted(made)))
    _folder(shared_config_dir(hub), 0o755)
    _write(shared_config_dir(hub) / "nbgrader_config.py", nbgrader_config(hub), 0o644)
    for path in set_instructor_mode(True, prefix=instructor_config_prefix(hub)):
        path.chmod(0o644)
    # nbgrader wants its exchange writable by all; sticky, so that no one removes or renames a
    # course's folder, which setup makes now, owned by the course's grader account
    _folder(hub.exchange, 0o1777)
    for course in hub.courses:
        _folder(hub.exchange / course.id, 0o755, owner=course.grader)
        # nbgrader's release would make inbound 2733 (learners write, the graders' group is
        # inherited); sticky as well, so that no learner renames or removes another's folder
        _folder(hub.exchange / course.id / "inbound", 0o3733, owner=course.grader)
        done.append(f"course {course.id}: {_course_directory(course, course_directory(hub, course))}")
    _write(hub.root / "jupyterhub_config.py", jupyterhub_config(hub, source), 0o600)
    done.append(f"wrote {hub.root / 'jupyterhub_config.py'}")
    return done


def remove(hub: Hub) -> list[str]:
    """Delete what ``setup`` made for ``hub``: its accounts and homes, course folders, ``root``.
    Stop the hub first (its servers run as those accounts, and userdel refuses a busy one)."""
    if os.geteuid() != 0:
        raise SetupError("run it as root")
    accounts = state_dir(hub) / "accounts"
    done = []
    for name in (accounts.read_text().split() if accounts.exists() else []):
        proc = subprocess.run(["userdel", "--remove", name], capture_output=True, text=True)
        done.append(f"removed user {name}" if proc.returncode == 0 else f"userdel {name}: {proc.stderr.strip()}")
    for course in hub.courses:
        shutil.rmtree(hub.exchange / course.id, ignore_errors=True)
    shutil.rmtree(hub.root, ignore_errors=True)
    return done


def _user(name: str, home: Path) -> bool:
    """A Unix user ``name`` with a home of its own under ``home`` (mode 0700); True if made now."""
    try:
        pwd.getpwnam(name)
        made = False
    except KeyError:
        _run(["useradd", "--create-home", "--base-dir", str(home), "--shell", "/bin/bash",
              "--comment", "transformer course", name])
        made = True
    Path(pwd.getpwnam(name).pw_dir).chmod(0o700)  # Debian's useradd leaves homes world-readable
    return made


def _course_directory(course: Course, root: Path) -> Path:
    """The course directory ``root``: the course's sources, config and gradebook."""
    _folder(root, 0o700, owner=course.grader)
    for assignment in course.assignments:
        shutil.copytree(SOLUTIONS / assignment.name, root / "solutions" / assignment.name, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    from autograder.pipeline.config import config_file  # lazy: it imports nbgrader (see _gradebook)

    _write(root / "nbgrader_config.py", config_file(f"c.CourseDirectory.course_id = {course.id!r}"), 0o644)
    _gradebook(course, root)
    _run(["chown", "-R", f"{course.grader}:{course.grader}", str(root)])
    return root


def _gradebook(course: Course, root: Path) -> None:
    """The course's learners and assignments (with their deadlines) in its gradebook."""
    from nbgrader.api import Gradebook  # lazy: nbgrader takes seconds to import

    # nbgrader makes a new gradebook with the ``alembic`` command, installed beside this Python
    os.environ["PATH"] = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", course.id) as gb:
        for learner in course.learners:
            gb.update_or_create_student(learner)
        for assignment in course.assignments:
            due = assignment.due and assignment.due.astimezone(dt.timezone.utc).replace(tzinfo=None)
            gb.update_or_create_assignment(assignment.name, duedate=due)  # nbgrader keeps UTC, naive


def _folder(path: Path, mode: int, owner: str | None = None) -> None:
    path.mkdir(parents=True, exist_ok=True)
    if owner:
        account = pwd.getpwnam(owner)
        os.chown(path, account.pw_uid, account.pw_gid)
    path.chmod(mode)  # after chown, which may clear the set-group-id bit


def _write(path: Path, text: str, mode: int) -> None:
    path.write_text(text)
    path.chmod(mode)


def _run(command: list[str]) -> None:
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode:
        raise SetupError(f"{' '.join(command)} failed: {proc.stderr.strip()}")
