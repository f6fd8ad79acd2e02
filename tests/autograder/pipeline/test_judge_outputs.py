"""pipeline/judge_outputs.py: the verdict leaves the judge as data, and only the judge's counts."""
import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output
from nbgrader.utils import determine_grade

from autograder.grading import read_results
from autograder.judge.verdict import Verdict
from autograder.pipeline.course import Graded
from autograder.pipeline.judge_outputs import VERDICT, JudgeOutputs, recorded_verdict, verdict_outputs
from autograder.pipeline.plan import PLAN, Plan, recorded_exercise
from autograder.pipeline.sanitize import SanitizeOutputs

from helpers import SOLUTIONS

ASSIGNMENT, NAME = "00_start_here", "start_here.ipynb"


def _graded_cell(points=2.0):
    return new_code_cell('record("warmup.softmax", globals())', metadata={"nbgrader": {
        "grade": True, "solution": False, "points": points, "grade_id": "g", "locked": True}})


def test_the_verdict_travels_as_data_beside_the_score_nbgrader_reads():
    cell = _graded_cell()
    verdict = Verdict("warmup.softmax", 1.5, 2.0, 3, 4, ["Looks like the wrong axis.", "Case 4 of 4: ..."])
    cell.outputs = verdict_outputs(verdict)
    assert determine_grade(cell, None) == (1.5, 2.0)  # nbgrader's partial credit, as before
    assert recorded_verdict(cell) == {"exercise": "warmup.softmax", "points": 1.5, "max_points": 2.0,
                                      "messages": verdict.messages}
    assert "Looks like the wrong axis." in cell.outputs[0].text  # what feedback and formgrader show
    assert recorded_verdict(new_code_cell("x = 1")) is None


def test_the_judge_refuses_to_run_without_the_cases_execution_drew():
    nb = new_notebook(cells=[_graded_cell()])
    with pytest.raises(RuntimeError, match="SandboxedExecute"):
        JudgeOutputs().preprocess(nb, {"nbgrader": {"assignment": ASSIGNMENT, "notebook": "start_here"}})


def test_sanitizing_keeps_the_judges_verdict_and_drops_one_a_learner_displays():
    forged = {"exercise": "warmup.softmax", "points": 2.0, "max_points": 2.0, "messages": []}
    judged = _graded_cell()
    judged.outputs = verdict_outputs(Verdict("warmup.softmax", 0.0, 2.0, 0, 4, ["wrong"]))
    learner = new_code_cell("display(...)", outputs=[new_output(
        "display_data", data={VERDICT: forged, "text/plain": "2.0"})])
    nb = new_notebook(cells=[judged, learner])
    SanitizeOutputs().preprocess(nb, {"nbgrader": {"assignment": ASSIGNMENT, "notebook": "start_here"},
                                      "autograder": {PLAN: Plan(b"", {0: None})}})
    assert recorded_verdict(judged)["points"] == 0.0
    assert VERDICT not in learner.outputs[0].data and learner.outputs[0].data["text/plain"] == "2.0"


def test_results_come_from_the_verdicts_and_the_gradebook_never_from_the_printed_text():
    nb = nbformat.read(SOLUTIONS / ASSIGNMENT / NAME, as_version=4)
    graded = [c for c in nb.cells if recorded_exercise(c)]
    assert len(graded) >= 2
    for cell in graded:
        cell.outputs = verdict_outputs(Verdict(recorded_exercise(cell), 0.5, 1.0, 1, 2, [f"about {cell.source}"]))
        cell.outputs[0].text = "1 / 1 points\nAll cases match.\n"  # text that says otherwise
    scores = {c.metadata.nbgrader.grade_id: 0.25 for c in graded}
    nb.cells.remove(graded[-1])  # a learner deleted this graded cell
    results = read_results(ASSIGNMENT, NAME, Graded(scores, {}, nbformat.writes(nb), None))
    assert [r.id for r in results] == [recorded_exercise(c) for c in graded]
    for result, cell in zip(results[:-1], graded):
        assert result.points == 0.25  # the gradebook's score
        assert result.max_points == cell.metadata.nbgrader.points
        assert result.messages == [f"about {cell.source}"]
    assert results[-1].points == 0.0 and "missing from the notebook" in results[-1].messages[0]
