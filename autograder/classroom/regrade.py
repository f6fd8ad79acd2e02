"""Regrade a whole assignment after the grader changed [trusted]

``autograder grade`` grades a submission once: the same file against the same source is the
same job (``jobs.job_digest``). After the instructor changes what judges it (a case, a
tolerance, a mistake's message, in ``autograder/exercises/``), ``autograder regrade
ASSIGNMENT`` grades every submission in the course's ``submitted/`` again, with the same
machinery (``grade.grade_submissions``: in parallel, on a Dask cluster if asked, each kernel
in its sandbox), then says whose score changed and by how much.

**Resumable.** Before anything is graded, the scores as they stand are written to
``.autograder/journal/<assignment>/regrade/before.json`` and each learner's journalled outcome
moves beside it (``Journal.forget``). An interrupted regrade run again continues: the
scores it compares with are still the first ones, and who was regraded is not regraded again.
The folder goes when the regrade is over.

**What is kept.** Only the automatic scores and comments are replaced, as ``grade`` does:
a grader's manual score still wins (and the cell stays flagged for review), manual comments
stay, and a learner's feedback is made again by nbgrader from the gradebook, with them.

**Feedback.** A learner's result *changed* when a score or the grader's feedback did (a
changed message counts, with the same points). With ``release``, nbgrader releases the new
feedback to those learners only (``nbgrader release_feedback`` for each): the others'
released feedback is left as it was.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from autograder.classroom.export import final_scores
from autograder.classroom.grade import Summary, grade_submissions
from autograder.classroom.journal import Journal, course_config, write_atomic


@dataclass
class Regrade:
    """What a regrade did: the class summary, and each learner's before and after."""
    summary: Summary
    before: dict[str, float]
    after: dict[str, float]
    feedback_changed: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)

    @property
    def score_changed(self) -> list[str]:
        return sorted(s for s in self.after if s in self.before and self.after[s] != self.before[s])

    def report(self) -> str:
        lines = [self.summary.report()]
        changed = self.score_changed
        lines.append(f"score changed for {len(changed)}" + (":" if changed else ""))
        lines += [f"  {s}: {self.before[s]:g} -> {self.after[s]:g} "
                  f"({self.after[s] - self.before[s]:+g})" for s in changed]
        quiet = sorted(set(self.feedback_changed) - set(changed))
        if quiet:
            lines.append("feedback changed, score did not: " + ", ".join(quiet))
        new = sorted(set(self.after) - set(self.before))
        if new:
            lines.append("graded for the first time: " + ", ".join(new))
        if self.released:
            lines.append("feedback released again to: " + ", ".join(self.released))
        return "\n".join(lines)

    @property
    def changed(self) -> list[str]:
        return sorted(set(self.score_changed) | set(self.feedback_changed) | (set(self.after) - set(self.before)))


def regrade(assignment: str, course_root: Path, release: bool = False, **options) -> Regrade:
    """Regrade every submission of ``assignment`` in ``course_root`` (see the module doc);
    ``options`` go to ``grade_submissions`` (jobs, time_limit, scheduler, progress)."""
    course_root = Path(course_root).resolve()
    journal = Journal(course_root, assignment)
    state = journal.folder / "regrade"
    before_file = state / "before.json"
    if not before_file.exists():
        state.mkdir(exist_ok=True)
        before = {s: score for (s, _), score in final_scores(course_root, [assignment]).items()}
        write_atomic(before_file, json.dumps(before))
    before = json.loads(before_file.read_text())
    for student in journal.students():
        if not (state / f"{student}.json").exists():  # not already moved by an interrupted run
            journal.forget(student, state)
    summary = grade_submissions(course_root / "submitted", assignment, course_root,
                                retry_failed=True, **options)
    after = {s: score for (s, _), score in final_scores(course_root, [assignment]).items()}
    result = Regrade(summary, before, after, _feedback_changed(journal, state))
    _feedback_with_manual_grades(course_root, assignment)
    if release:
        result.released = _release(course_root, assignment, result.changed)
    shutil.rmtree(state)
    return result


def _feedback_changed(journal: Journal, state: Path) -> list[str]:
    """Learners whose new outcome's scores or feedback differ from the one moved to ``state``."""
    changed = []
    for old_file in state.glob("*.json"):
        if old_file.name == "before.json":
            continue
        old, new = json.loads(old_file.read_text()), journal.outcome(old_file.stem)
        if new is not None and new.ok and (not old.get("ok") or old.get("scores") != new.scores
                                           or old.get("feedback") != new.feedback):
            changed.append(old_file.stem)
    return sorted(changed)


def _feedback_with_manual_grades(course_root: Path, assignment: str) -> None:
    """nbgrader's feedback again for each learner a grader scored or commented by hand: the
    grader's workers made theirs without the gradebook's manual grades and comments."""
    # lazy: nbgrader, which these import, is slow to import (see grade.py)
    from nbgrader.api import Gradebook
    from nbgrader.apps import NbGraderAPI
    from autograder.pipeline.course import run_step

    with Gradebook(f"sqlite:///{course_root / 'gradebook.db'}") as gb:
        by_hand = sorted({sub.student.id for sub in gb.assignment_submissions(assignment)
                          for nb in sub.notebooks
                          if any(g.manual_score is not None for g in nb.grades)
                          or any(c.manual_comment for c in nb.comments)})
    api = NbGraderAPI(config=course_config(course_root))
    for student in by_hand:
        run_step(lambda: api.generate_feedback(assignment, student), f"generate_feedback {student}")


def _release(course_root: Path, assignment: str, students: list[str]) -> list[str]:
    """``nbgrader release_feedback`` for each of ``students``; the ones released."""
    # lazy: as above
    from nbgrader.apps import NbGraderAPI
    from autograder.pipeline.course import run_step

    api = NbGraderAPI(config=course_config(course_root))
    for student in students:
        run_step(lambda: api.release_feedback(assignment, student), f"release_feedback {student}")
    return students
