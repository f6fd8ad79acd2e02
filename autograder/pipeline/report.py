"""What the learner's feedback report says of each exercise, beside nbgrader's grades. [trusted]

``ReportGrades`` takes the place of nbgrader's ``GetGrades`` in ``nbgrader generate_feedback``
(``config.py``). It does what ``GetGrades`` does (each cell's score and comment from the
gradebook, for the page), and then, in the copy of the autograded notebook the page is made
from (the file, which the formgrader shows, keeps everything):

- each graded cell names its exercise for the page's summary (``feedback_template``): the
  exercise id its restored source records, the function the learner writes, and the grade id of
  the learner's solution cell for it, when the notebook has it;
- the graded cell's score result goes: it is there for nbgrader's partial credit
  (``judge_outputs.verdict_outputs``; ``SaveAutoGrades`` has read it by now), and the page
  would show it as a bare ``Out[n]: 3.0`` under the verdict, which already says
  "attention.forward: 3 / 3 points";
- every other code cell shows no output but the grader's own fault note (``execute.FAULT_KEY``:
  stopped, ran too long): the learner's code ran there with the hidden cases in reach (it may
  keep a case's inputs and print them later), and the learner's notebook has those outputs;
  but a course cell that the course's source gives a figure for the report shows that figure,
  drawn here from course code (``pictures.course_outputs``): an explorer's view, say, which no
  report can draw as a widget;
- a solution cell's comment is the grader's own only: nbgrader's automatic one, "No response."
  on a cell left as released, says less than the graded cell's verdict ("`attention_forward`
  is not implemented yet.");
- the release's header (``header.py``) goes: it tells instructors where to edit the notebook
  and learners how to submit it, neither of which the report of a submission needs.
"""
from __future__ import annotations

from nbgrader.preprocessors import GetGrades

from autograder.authoring import grade_id
from autograder.exercises import get
from autograder.pipeline.assignment import source
from autograder.pipeline.execute import FAULT_KEY, fault_output
from autograder.pipeline.header import header_cells
from autograder.pipeline.judge_outputs import is_verdict
from autograder.pipeline.pictures import course_outputs
from autograder.pipeline.plan import recorded_exercise


class ReportGrades(GetGrades):
    """nbgrader's ``GetGrades``, and each exercise named for the page (see the module doc)."""

    def _get_comment(self, cell, resources):
        comment = self.gradebook.find_comment(
            cell.metadata.nbgrader.grade_id, self.notebook_id, self.assignment_id, self.student_id)
        cell.metadata.nbgrader["comment"] = comment.manual_comment

    def preprocess(self, nb, resources):
        nb, resources = super().preprocess(nb, resources)
        info = resources["nbgrader"]
        header = {(c.cell_type, c.source) for c in header_cells(info["assignment"], info["notebook"])}
        nb.cells = [c for c in nb.cells if (c.cell_type, c.source) not in header]
        pictures = dict(source(info["assignment"], info["notebook"]).pictures)
        answers = {c.metadata.nbgrader.grade_id for c in nb.cells
                   if c.metadata.get("nbgrader", {}).get("solution")}
        for cell in nb.cells:
            exercise_id = recorded_exercise(cell)
            if exercise_id:
                answer = grade_id(exercise_id)
                cell.metadata["autograder"] = {"exercise": exercise_id, "function": get(exercise_id).function,
                                               "answer": answer if answer in answers else None}
                cell.outputs = [o for o in cell.get("outputs", []) if not is_verdict(o)]
            elif cell.cell_type == "code":
                fault = cell.metadata.get(FAULT_KEY)
                cell.outputs = ([fault_output(fault)] if fault
                                else course_outputs(pictures.get(cell.source.strip()), self.log))
        return nb, resources
