"""The trusted step of ``nbgrader autograde``: turn recorded outputs into scores.

``JudgeOutputs`` runs right after nbgrader's ``Execute``. For each graded cell that calls
``record("<id>", globals())`` it reads the recorded arrays, judges them (``judge.judge``),
scans the learner's code for forbidden names (``codescan``), and replaces the cell's outputs
with the messages and the score as an ``execute_result`` (nbgrader's partial credit). The
exercise id comes from the cell's source, which nbgrader has already restored from the
gradebook (``OverwriteCells``), never from the learner's outputs. Anything the learner's
code printed to stderr in a graded cell is dropped with the rest of its outputs.
"""
from __future__ import annotations

import re

from nbformat.v4 import new_output
from nbgrader.preprocessors import NbGraderPreprocessor

from autograder.codescan import forbidden_uses
from autograder.exercises import get
from autograder.judge import Verdict, helper_note, judge
from autograder.transport import MIME, decode_results

RECORD_CALL = re.compile(r"""^record\(\s*["']([\w.]+)["']\s*,\s*globals\(\)\s*\)\s*$""", re.M)


def _is_locked(cell) -> bool:
    """A course cell: locked, with a grade_id the gradebook knows.

    nbgrader's OverwriteCells has already run: it drops grade_ids the gradebook does not
    know, and resets the locked flag (and a locked cell's source) from the gradebook, so a
    learner who marks their own cell as locked does not get it past the scan.
    """
    meta = cell.metadata.get("nbgrader", {})
    course_cell = meta.get("locked") or meta.get("grade") and not meta.get("solution")
    return bool(meta.get("grade_id") and course_cell)


def _errored(cell) -> bool:
    return any(o.get("output_type") == "error" for o in cell.get("outputs", []))


def recorded_exercise(cell) -> str | None:
    """The exercise id a graded cell records, read from its (restored) source."""
    if cell.cell_type != "code" or not cell.metadata.get("nbgrader", {}).get("grade"):
        return None
    match = RECORD_CALL.search(cell.source)
    return match.group(1) if match else None


def verdict_for_cell(cell, earlier_cells) -> Verdict:
    """``earlier_cells``: the code cells above ``cell``, for the forbidden-code scan."""
    ex = get(recorded_exercise(cell))
    payloads = [o for o in cell.get("outputs", []) if MIME in o.get("data", {})]
    hits = forbidden_uses(ex, [(c.source, _is_locked(c), _errored(c)) for c in earlier_cells])
    if len(payloads) != 1 or payloads[0]["data"][MIME].get("exercise") != ex.id:
        errors = [o.get("ename", "") for o in cell.get("outputs", []) if o.output_type == "error"]
        why = f" ({', '.join(errors)})" if errors else ""
        return Verdict(ex.id, 0.0, float(ex.points), 0, 0,
                       [f"The graded cell did not record its outputs{why}; "
                        "run the notebook top to bottom and leave the graded cell unchanged."])
    try:
        results = decode_results(payloads[0]["data"][MIME])
    except (KeyError, ValueError, TypeError) as err:
        return Verdict(ex.id, 0.0, float(ex.points), 0, 0, [f"Unreadable recorded outputs: {err}"])
    return judge(ex, results, hidden=True, forbidden_hits=hits)


def verdict_outputs(verdict: Verdict) -> list:
    text = (f"{verdict.exercise_id}: {verdict.points:g} / {verdict.max_points:g} points\n"
            + "\n".join(verdict.messages) + "\n")
    return [new_output("stream", name="stdout", text=text),
            new_output("execute_result", data={"text/plain": repr(float(verdict.points))},
                       execution_count=None)]


class JudgeOutputs(NbGraderPreprocessor):
    """Replace recorded outputs in graded cells by the trusted verdict (see module doc)."""

    def preprocess(self, nb, resources):
        code = [c for c in nb.cells if c.cell_type == "code"]
        graded = [(cell, verdict_for_cell(cell, code[:i])) for i, cell in enumerate(code)
                  if recorded_exercise(cell) is not None]
        failing = {get(v.exercise_id).function for _, v in graded if not v.full_marks}
        for cell, verdict in graded:
            note = helper_note(get(verdict.exercise_id), failing)
            if note and not verdict.full_marks:
                verdict.messages.append(note)
            cell.outputs = verdict_outputs(verdict)
            self.log.info("%s: %s/%s", verdict.exercise_id, verdict.points, verdict.max_points)
        return nb, resources
