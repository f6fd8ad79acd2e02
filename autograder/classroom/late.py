"""Late work: the course's penalty, and a submission time a learner cannot set back [trusted]

Both plug into nbgrader where it expects them (``config.py`` sets them for every course):

- ``LatePolicy`` is nbgrader's late-submission plugin (``c.AssignLatePenalties.plugin_class``),
  which both nbgrader's ``autograde`` and ``autograder grade`` ask for each late notebook's
  penalty. The instructor sets it in the course's ``nbgrader_config.py``::

      c.LatePolicy.per_day = 0.1          # a tenth of the notebook's score per day late (or part)
      c.LatePolicy.max_share = 0.5        # never more than half of it
      c.LatePolicy.zero_after_days = 7    # nothing for work more than a week late

  The due date is nbgrader's (``nbgrader db assignment add 02_attention --duedate=...``), and a
  learner's extension counts as nbgrader counts it. Unset, nothing is taken off.

- ``TrustedCollect`` is nbgrader's ``collect`` (``c.ExchangeFactory.collect``) with one check.
  The time a submission says it was made, ``timestamp.txt`` and its folder's name in the
  exchange's ``inbound/``, are written by the learner's own process into files the learner
  owns: they can be rewritten before the instructor collects. The inode change time (ctime)
  of those files cannot be set back by their owner (only a change of the system clock
  could), and any later change moves it forward. So the latest ctime of anything in the
  submission is a time the submission as collected cannot predate; where the learner's
  stamp is earlier than it by more than ``tolerance`` seconds (clock skew, a slow copy), the
  collected ``timestamp.txt`` says the trusted time instead, and the log says whose.

  And a folder's name says whose submission it is, but any learner can make a folder in
  ``inbound/`` named for another (nbgrader's collect only warns, "cheating attempt?", and
  collects it as the named learner's newest submission). Here a folder owned by neither the
  named learner's account nor the collecting grader is never collected: that learner's newest
  folder of their own is, and the log names both accounts.
"""
from __future__ import annotations

import math
import os
import pwd
from datetime import datetime, timedelta, timezone
from pathlib import Path

from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.plugins import LateSubmissionPlugin
from nbgrader.utils import parse_utc
from traitlets import Float

from autograder.classroom.intake import NotHandedIn, read_timestamp
from autograder.terminal import shown

DAY = 86400.0  # seconds


class LatePolicy(LateSubmissionPlugin):
    """A share of the notebook's score per day late (a started day counts), capped, and
    nothing at all past ``zero_after_days``. nbgrader's own ``penalty_method = 'zero'`` still
    means nothing for any late work."""

    per_day = Float(0.0, help="Share of the notebook's score taken per day late, or part of a "
                    "day (0.1: a tenth).").tag(config=True)
    max_share = Float(1.0, help="The most that per_day takes, as a share of the score.").tag(config=True)
    zero_after_days = Float(None, allow_none=True, help="Work later than this many days "
                            "(after the due date and any extension) scores 0.").tag(config=True)

    def late_submission_penalty(self, student_id: str, score: float, total_seconds_late: float) -> float | None:
        """Points to take off a notebook that scored ``score``, ``total_seconds_late`` s late.

        e.g. per_day 0.1, max_share 0.5, score 4: 1 h late -> 0.4, 2.5 days -> 1.2, 9 days -> 2.
        """
        if total_seconds_late <= 0:
            return None
        if self.penalty_method == "zero" or (
                self.zero_after_days is not None and total_seconds_late > self.zero_after_days * DAY):
            return score
        share = min(self.max_share, self.per_day * math.ceil(total_seconds_late / DAY))
        return round(score * share, 6) if share > 0 else None


def received_at(folder: Path) -> datetime:
    """The latest inode change time of ``folder`` and everything in it (links not followed), UTC
    without a time zone, as nbgrader's gradebook keeps times."""
    latest = os.lstat(folder).st_ctime
    for top, dirs, files in os.walk(folder):
        for name in dirs + files:
            latest = max(latest, os.lstat(os.path.join(top, name)).st_ctime)
    return datetime.fromtimestamp(latest, timezone.utc).replace(tzinfo=None)


def stamp(when: datetime) -> str:
    """``when`` (UTC) as nbgrader writes ``timestamp.txt``: '2026-11-26 08:41:11.000000 UTC'."""
    return when.strftime("%Y-%m-%d %H:%M:%S.%f") + " UTC"


class TrustedCollect(ExchangeCollect):
    """nbgrader's collect; a ``timestamp.txt`` earlier than the files it came with is corrected,
    and a folder made by another learner than the one it names is not collected."""

    tolerance = Float(120.0, help="Seconds a learner's timestamp may precede the time their "
                      "files last changed before it is replaced by that time.").tag(config=True)

    def _path_to_record(self, path):
        record = super()._path_to_record(path)
        record["forger"] = self._forger(record)
        if record["forger"]:
            self.log.error("%s: named for %s but made by %s; not collected",
                           shown(record["filename"], layout=False), record["username"], record["forger"])
        return record

    def _sort_by_timestamp(self, records):
        # a learner's own folders first, newest first, so that nbgrader's pick of one learner's
        # newest (its [0]) is a forged folder only where that learner has none of their own
        return sorted(super()._sort_by_timestamp(records), key=lambda r: bool(r["forger"]))

    def init_src(self):
        super().init_src()
        self.src_records = [r for r in self.src_records if not r["forger"]]

    def _forger(self, record) -> str | None:
        """The account that made ``record``'s folder, where that is neither the learner it is
        named for nor the grader collecting it (None: the folder is trusted)."""
        uid = os.stat(Path(self.inbound_path) / record["filename"]).st_uid
        if uid == os.geteuid():
            return None
        try:
            owner = pwd.getpwuid(uid).pw_name
        except KeyError:
            return f"uid {uid}"
        return None if owner == record["username"] else owner

    def do_copy(self, src, dest, log=None):
        super().do_copy(src, dest, log)
        trusted = received_at(Path(src))
        try:
            claimed = read_timestamp(Path(dest))
        except NotHandedIn:
            claimed = None
        if claimed is not None and parse_utc(claimed) >= trusted - timedelta(seconds=self.tolerance):
            return
        (Path(dest) / "timestamp.txt").write_text(stamp(trusted))
        self.log.warning("%s: its timestamp says %s, but its files last changed at %s UTC; "
                         "collected with the later time", shown(Path(src).name, layout=False),
                         shown(claimed, layout=False), trusted)
