"""nbgrader's submit, with the submission kept from every learner but its author. [trusted]

Runs in each learner's Jupyter server, as the learner (the hub's shared nbgrader_config.py
names it as ``ExchangeFactory.submit``). nbgrader's own submit copies the assignment to
``<exchange>/<course>/inbound/<learner>+<assignment>+<time>+<random>/`` and leaves that
folder mode 0777 and its files 0644: the inbound folder cannot be listed, so the name's 12
random characters are all that keeps another learner out, and the name is in the log of
every server (``Destination: ...``). Here the submission is made the course graders' to read
and no one else's: nbgrader's release makes ``inbound`` set-group-id so that "student
submission will have the instructors group"; every file of the submission is given that
group, and the folder mode 0770, its files 0640. A learner who learns another's folder name
can then neither read the submission nor delete or replace its files.
"""
from __future__ import annotations

import stat
import tempfile
from pathlib import Path

from nbgrader.exchange.default.submit import ExchangeSubmit

FOLDER_MODE = 0o770   # the learner and the course's graders (who collect it, and may remove it)
FILE_MODE = 0o640     # the learner writes, the graders read, no one else either


class PrivateSubmit(ExchangeSubmit):
    """``nbgrader submit``: the inbound copy readable by its author and the course's graders only."""

    def _private(self, path: str) -> bool:
        """Whether ``path`` is the submission's inbound copy, in an inbound folder that gives
        what is made in it the graders' group (nbgrader's release makes it so; without it the
        graders could not read a private copy, and nbgrader's modes stay)."""
        inbound = Path(self.inbound_path)
        return Path(path).parent == inbound and bool(inbound.stat().st_mode & stat.S_ISGID)

    def do_copy(self, src, dest, log=None):
        super().do_copy(src, dest, log)
        if self._private(dest):
            _regroup(Path(dest))

    def set_perms(self, dest, fileperms, dirperms):
        if self._private(dest):
            fileperms, dirperms = FILE_MODE, FOLDER_MODE
        super().set_perms(dest, fileperms, dirperms)

    def copy_files(self):
        super().copy_files()
        dest = Path(self.inbound_path) / self.assignment_filename
        if self._private(dest):
            dest.chmod(FOLDER_MODE)  # nbgrader's copy_files ends by making it 0777


def _regroup(folder: Path) -> None:
    """Give ``folder`` (just copied into the set-group-id inbound folder) the inbound folder's
    group again, so that the files nbgrader writes into it next (timestamp.txt,
    submission_secret.txt) get that group too.

    copytree's last step copies the source folder's mode onto the copy, and a learner, who is
    not in the graders' group, cannot keep the set-group-id bit: the kernel drops it. A folder
    made afresh in ``inbound`` inherits group and bit; what copytree put into the old folder
    (already in that group) moves over by rename, which keeps each file's group.
    """
    fresh = Path(tempfile.mkdtemp(prefix=".submitting-", dir=folder.parent))
    for entry in folder.iterdir():
        entry.rename(fresh / entry.name)
    folder.rmdir()
    fresh.rename(folder)
