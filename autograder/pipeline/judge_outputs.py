"""The step of ``nbgrader autograde`` that turns recorded outputs into scores [trusted]

``JudgeOutputs`` runs right after ``execute.SandboxedExecute``, which hands it, in nbgrader's
``resources``, the cases each graded cell was given (``plan``, drawn once per grading). For
each graded cell it reads the outputs the learner's kernel displayed (plain numbers, checked
by ``transport``), computes the reference itself, names recognised mistakes (``judge``, with
the edits of the learner's code the kernel found to fix it, named only where the reference
confirms them on every case), and replaces the cell's outputs with the verdict: its messages
as text, and the score as an ``execute_result`` (nbgrader's partial credit) that also carries
the whole verdict as data (``VERDICT``), which ``grading.read_results`` reads back; below a
failing one, the difference pictures of its failing public cases (``pictures``). The
exercise comes from the cell's source, which nbgrader has restored from the gradebook, never
from the learner's outputs. It runs no learner code and reads nothing else the sandbox wrote.
"""
from __future__ import annotations

from nbformat.v4 import new_output
from nbgrader.preprocessors import NbGraderPreprocessor

from autograder.pipeline.execute import FAULT_KEY, recorded_payload
from autograder.exercises import get
from autograder.judge.verdict import Verdict, helper_note, judge, without_values
from autograder.pipeline.pictures import Budget, difference_outputs
from autograder.pipeline.plan import PLAN
from autograder.kernel import wire
from autograder.kernel.hints import shorten
from autograder.kernel.repair import decode_fixes
from autograder.kernel.transport import Raised, decode_results

MAX_MESSAGE = 300  # characters of a learner's error text quoted in feedback
VERDICT = "application/vnd.autograder.verdict+json"  # the verdict as data, beside its score


def _fault(cell) -> str | None:
    """Why the grader stopped this cell, if it did (``execute.FAULT_KEY``)."""
    return cell.metadata.get(FAULT_KEY)


def verdict_for_cell(cell, ex, cases, earlier_faults: list[str], alone: dict | None = None) -> Verdict:
    """The verdict on one graded cell; ``earlier_faults``: why cells above it were stopped;
    ``alone``: case index -> its twin run again alone (``rerun.run_again``), for the judge."""
    payload = recorded_payload(cell, ex.id)
    if payload is None:
        fault = _fault(cell)
        if fault:
            messages = [f"The graded cell was {fault}."]
        else:
            errors = [shorten(without_values(str(o.get("ename", ""))), 60) for o in cell.get("outputs", [])
                      if o.output_type == "error"]
            messages = ["The graded cell did not record its outputs"
                        + (f" ({', '.join(errors)})" if errors else "")
                        + "; run the notebook top to bottom and leave the graded cell unchanged."]
        return Verdict(ex.id, 0.0, float(ex.points), 0, len(cases), messages + earlier_faults)
    try:
        wire.check(payload)
    except wire.Unreadable as err:
        return _unread(ex, cases, err)
    if "failure" in payload:
        return Verdict(ex.id, 0.0, float(ex.points), 0, len(cases),
                       ["The graded cell could not run: "
                        + shorten(without_values(str(payload["failure"])), MAX_MESSAGE)])
    try:
        results = decode_results(payload)
    except (KeyError, ValueError, TypeError, AttributeError) as err:
        return _unread(ex, cases, err)
    results = [Raised(shorten(r.text, MAX_MESSAGE), r.stub) if isinstance(r, Raised) else r for r in results]
    verdict = judge(ex, cases, results, fixes=decode_fixes(payload.get("fixes"), len(cases)),
                    changed=payload.get("changed"), alone=alone)
    if verdict.passed < verdict.total:
        verdict.messages += earlier_faults
    return verdict


def _unread(ex, cases, err) -> Verdict:
    """The verdict on a graded cell whose recorded payload as a whole cannot be read."""
    return Verdict(ex.id, 0.0, float(ex.points), 0, len(cases),
                   [f"The graded cell's answer could not be read ({shorten(without_values(str(err)), MAX_MESSAGE)}); "
                    "run the notebook top to bottom and leave the graded cell unchanged."])


def verdict_outputs(verdict: Verdict) -> list:
    """The graded cell's outputs: the messages as text, the score as nbgrader reads it, and
    the verdict as data (nbconvert shows the ``text/plain`` score, not the data)."""
    text = (f"{verdict.exercise_id}: {verdict.points:g} / {verdict.max_points:g} points\n"
            + "\n".join(verdict.messages) + "\n")
    data = {"exercise": verdict.exercise_id, "points": float(verdict.points),
            "max_points": float(verdict.max_points), "messages": list(verdict.messages)}
    return [new_output("stream", name="stdout", text=text),
            new_output("execute_result", data={"text/plain": repr(float(verdict.points)), VERDICT: data},
                       execution_count=None)]


def is_verdict(output) -> bool:
    """Whether ``output`` is the score result ``verdict_outputs`` made (the verdict as data)."""
    return output.get("output_type") == "execute_result" and VERDICT in output.get("data", {})


def recorded_verdict(cell) -> dict | None:
    """The verdict ``JudgeOutputs`` put in an autograded graded cell, if any."""
    return next((o.data[VERDICT] for o in cell.get("outputs", []) if is_verdict(o)), None)


class JudgeOutputs(NbGraderPreprocessor):
    """Replace recorded outputs in graded cells by the trusted verdict (see module doc)."""

    def _verdict(self, cell, ex, cases, earlier_faults: list[str], alone) -> Verdict:
        """``verdict_for_cell``; should judging what the sandbox sent fail in a way no reader
        foresaw, the cell's answer is unread (logged for the instructor, in one line): it costs
        this exercise, never the grading of the others."""
        try:
            return verdict_for_cell(cell, ex, cases, earlier_faults, alone)
        except Exception as err:  # noqa: BLE001
            self.log.warning("%s: the graded cell's answer could not be judged: %s: %s",
                             ex.id, type(err).__name__, str(err)[:MAX_MESSAGE])
            return _unread(ex, cases, type(err).__name__)

    def _pictures(self, cell, ex, verdict: Verdict, budget: Budget) -> list:
        """Below a failing verdict, the pictures of its failing public cases (``pictures``);
        advice only: a payload they cannot be drawn from gives none, and costs nothing."""
        payload = recorded_payload(cell, ex.id)
        if verdict.full_marks or payload is None or "failure" in payload:
            return []
        try:
            wire.check(payload)
            return difference_outputs(ex, payload, budget)
        except Exception as err:  # noqa: BLE001
            self.log.warning("%s: no pictures: %s: %s", ex.id, type(err).__name__, str(err)[:MAX_MESSAGE])
            return []

    def preprocess(self, nb, resources):
        faults, graded, budget = [], [], Budget()
        made = resources.get("autograder", {}).get(PLAN)
        if made is None:
            raise RuntimeError("JudgeOutputs needs SandboxedExecute right before it in "
                               "Autograde.autograde_preprocessors: it draws the cases judged here")
        for i, cell in enumerate(nb.cells):
            if i in made.graded:
                ex, ex_cases = made.graded[i]
                verdict = self._verdict(cell, ex, ex_cases, list(faults), made.alone.get(i))
                graded.append((cell, verdict, self._pictures(cell, ex, verdict, budget)))
            elif cell.cell_type == "code" and _fault(cell):
                faults.append(f"Cell {i + 1} above it was {_fault(cell)}.")
        failing = {get(v.exercise_id).function for _, v, _ in graded if not v.full_marks}
        for cell, verdict, pictures in graded:
            note = helper_note(get(verdict.exercise_id), failing)
            if note and not verdict.full_marks:
                verdict.messages.append(note)
            cell.outputs = verdict_outputs(verdict) + pictures
            self.log.info("%s: %s/%s", verdict.exercise_id, verdict.points, verdict.max_points)
        return nb, resources
