"""nbgrader's "Validate", answered by the course's grader. [trusted]

nbgrader's ``Validator`` runs the notebook and passes every graded cell that does not raise.
The course's graded cells never raise: they only record what the learner's functions return,
and the verdict is computed afterwards, by the judge, in the trusted process. So nbgrader's
Validator would say "Success!" on a blank notebook. ``CourseValidator`` keeps nbgrader's
Validator (its settings, its printout, its result format) but takes the verdict from
``grade_notebook``: the same sandbox, secret-seeded hidden cases and judge as ``submit``.

It answers ``autograder validate``, JupyterLab's Validate button (``autograder.lab``) and
``nbgrader validate`` (``nbgrader_config.py`` calls ``use_for_nbgrader_validate``). The notes
``submit`` prints (what was repaired in the file; a grading without the sandbox, and why) come
with the answer: under ``"notes"``, printed above nbgrader's printout, and, since nbgrader's
Lab dialog shows nothing but the failures, at the head of the first failure's text there.
"""
from __future__ import annotations

import html
import logging
import textwrap

import nbgrader.apps.validateapp
from nbconvert.filters import ansi2html
from nbgrader.validator import Validator

from autograder.grading import ExerciseResult, grade_notebook
from autograder.terminal import shown


class CourseValidator(Validator):
    """nbgrader's Validator whose verdict is the course grader's, one entry per exercise."""

    results: dict = {}  # what the last `validate` found, notes aside (`autograder validate`'s exit status)

    def validate(self, filename: str) -> dict:
        """nbgrader's result format: ``{}`` at full marks, else ``{"failed": [...]}``, and
        ``"notes"`` (a list of sentences) where grading left any.

        Each failure is ``{"source": <exercise and points>, "error": <html>, "raw_error":
        <the judge's messages>}``; the first one's ``error`` begins with the notes. With
        ``invert`` (``nbgrader validate --invert``) the exercises at full marks are listed
        under ``"passed"`` instead.
        """
        self.log.info("Validating %s with the course's grader", filename)
        self.log.addFilter(_warnings_only)  # nbgrader's steps in the scratch course log here too
        try:
            result = grade_notebook(filename)
        finally:
            self.log.removeFilter(_warnings_only)
        exercises, notes = result.exercises, result.notes
        if self.invert:
            passed = [{"source": _title(e)} for e in exercises if e.points >= e.max_points]
            self.results = {"passed": passed} if passed else {}
        else:
            failed = [self._failure(e) for e in exercises if e.points < e.max_points]
            if failed and notes:
                failed[0]["error"] = "".join(f"<i>{html.escape(n)}</i>\n\n" for n in notes) + failed[0]["error"]
            self.results = {"failed": failed} if failed else {}
        return {**self.results, "notes": notes} if notes else self.results

    def validate_and_print(self, filename: str) -> None:
        """nbgrader's printout (of the failures, or with ``invert`` the passes), below the notes,
        its learner text through ``terminal.shown``."""
        results = self.validate(filename)
        for note in results.get("notes", []):
            self.stream.write(shown(textwrap.fill(note, self.width)) + "\n\n")
        if self.invert:
            self._print_num_passed(len(results.get("passed", [])))
            for entry in results.get("passed", []):
                self._print_pass(shown(entry["source"]))
        else:
            self._print_num_failed(len(results.get("failed", [])))
            for entry in results.get("failed", []):
                self._print_error(shown(entry["source"]), shown(entry["raw_error"]))

    def _failure(self, e: ExerciseResult) -> dict:
        # nbgrader indents each line and cuts it at `width`: wrap the judge's sentences instead
        room = self.width - len(self.indent) - 3
        lines = [wrapped for message in e.messages or ["Not every case matches the reference."]
                 for wrapped in textwrap.wrap(message, room, break_long_words=False) or [""]]
        raw = "\n".join(lines)
        return {"source": _title(e), "error": ansi2html(raw), "raw_error": raw}


def _warnings_only(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.WARNING


def _title(e: ExerciseResult) -> str:
    return f"{e.id}: {e.points:g} of {e.max_points:g} points"


def use_for_nbgrader_validate() -> None:
    """Make ``nbgrader validate`` build a CourseValidator.

    nbgrader's ValidateApp builds its ``Validator`` by name and offers no setting to choose
    another class (``Validator.preprocessors`` is not configurable either), so the name is
    rebound; ``nbgrader_config.py`` calls this, before the app's ``start`` looks the name up.
    """
    nbgrader.apps.validateapp.Validator = CourseValidator
