"""``autograder.hub.exchange.PrivateSubmit`` without a hub: a learner (a Unix user without root,
``learner`` in tests/conftest.py) runs ``nbgrader submit`` with it, as the hub's shared
nbgrader_config.py has every learner's server do, into an exchange as nbgrader's release
leaves it (set-group-id, in a graders' group the learner is not in) and ``autograder hub setup``
makes it (sticky: mode 3733).

Every file and folder of the submission must end in the graders' group, the folder 0770 and
its files 0640, the files nbgrader writes after the copy (timestamp.txt,
submission_secret.txt) included; with ``inbound`` not set-group-id (an exchange nbgrader's
release did not make) nbgrader's own modes stay, since the graders could not read a private
copy. A second learner, bo, who knows the folder's name, can neither list, read nor remove it.
"""
from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path

import nbformat
import pytest

NOTEBOOK = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("answer = 42")])


@pytest.fixture
def exchange(learner):
    """(exchange root, graders' gid): course ``course`` with assignment ``a1`` released."""
    root = Path(tempfile.mkdtemp(prefix="ag-exchange-", dir="/var/tmp"))
    group = f"aggraders{os.getpid()}"
    subprocess.run(["groupadd", group], check=True)
    try:
        root.chmod(0o1777)  # as autograder hub setup makes the exchange
        outbound = root / "course" / "outbound" / "a1"
        outbound.mkdir(parents=True)
        nbformat.write(NOTEBOOK, outbound / "one.ipynb")
        for folder in (root / "course", outbound.parent, outbound):
            folder.chmod(0o755)
        (outbound / "one.ipynb").chmod(0o644)
        (root / "course" / "inbound").mkdir()
        yield root, grp.getgrnam(group).gr_gid
    finally:
        shutil.rmtree(root, ignore_errors=True)
        subprocess.run(["groupdel", group], capture_output=True)


def _submit(learner, root: Path) -> subprocess.CompletedProcess:
    """``nbgrader submit a1`` as the learner, from a folder in its home holding its answer."""
    work = learner.home / "work"
    (work / "a1").mkdir(parents=True, exist_ok=True)
    nbformat.write(NOTEBOOK, work / "a1" / "one.ipynb")
    subprocess.run(["chown", "-R", f"{learner.user}:{learner.user}", str(work)], check=True)
    env = {"HOME": str(learner.home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
           "PYTHONPATH": str(learner.clone)}
    return subprocess.run(
        ["runuser", "-u", learner.user, "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()),
         learner.python, "-m", "nbgrader", "submit", "a1", "--course", "course",
         f"--Exchange.root={root}", f"--Exchange.cache={work / 'cache'}",
         "--ExchangeFactory.submit=autograder.hub.exchange.PrivateSubmit"],
        cwd=work, capture_output=True, text=True, timeout=300)


def _modes(folder: Path) -> dict[str, tuple[str, int]]:
    """name ('.' for the folder) -> (octal mode, gid), for the folder and what it holds."""
    return {("." if p == folder else p.name): (oct(stat.S_IMODE(p.stat().st_mode)), p.stat().st_gid)
            for p in [folder, *folder.iterdir()]}


def test_the_submission_is_the_graders_to_read_and_no_one_elses(learner, exchange):
    root, gid = exchange
    inbound = root / "course" / "inbound"
    os.chown(inbound, 0, gid)
    inbound.chmod(0o3733)  # set-group-id (nbgrader's release), sticky (hub setup), not listable
    done = _submit(learner, root)
    assert done.returncode == 0, done.stdout + done.stderr
    (submission,) = inbound.iterdir()
    assert submission.name.startswith(f"{learner.user}+a1+")
    assert pwd.getpwuid(submission.stat().st_uid).pw_name == learner.user
    modes = _modes(submission)
    assert sorted(modes) == [".", "one.ipynb", "submission_secret.txt", "timestamp.txt"]
    assert modes == {name: (oct(0o770) if name == "." else oct(0o640), gid) for name in modes}, \
        json.dumps(modes)

    with another_learner() as bo:
        for command in (f"ls {inbound}", f"cat '{submission}/one.ipynb'",
                        f"cat '{submission}/submission_secret.txt'", f"ls '{submission}'",
                        f"rm -f '{submission}/one.ipynb'", f"rm -rf '{submission}'",
                        f"mv '{submission}' '{inbound}/{bo}+a1+stolen'"):
            tried = subprocess.run(["runuser", "-u", bo, "--", "sh", "-c", command],
                                   capture_output=True, text=True, timeout=60)
            assert tried.returncode != 0 and ("Permission denied" in tried.stderr or
                                              "Operation not permitted" in tried.stderr), (command, tried)
    assert _modes(submission) == modes  # all still there


def test_without_a_set_group_id_inbound_nbgraders_modes_stay(learner, exchange):
    root, _ = exchange
    inbound = root / "course" / "inbound"
    inbound.chmod(0o733)
    done = _submit(learner, root)
    assert done.returncode == 0, done.stdout + done.stderr
    (submission,) = inbound.iterdir()
    modes = _modes(submission)
    assert modes["."][0] == oct(0o777) and modes["one.ipynb"][0] == oct(0o644), json.dumps(modes)


@contextmanager
def another_learner():
    """A second user without root, for the length of a ``with``: its name."""
    name = f"agother{os.getpid()}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], capture_output=True)
