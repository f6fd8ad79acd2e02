"""Grade one learner's notebook with real nbgrader, in a scratch course [trusted]

``grade_notebook`` repairs the submission where it must be (``submission.prepare``), grades
it in a scratch course generated from ``solutions/`` (``pipeline.course``: nbgrader's
``autograde``, the sandboxed execution and the judge included, and ``generate_feedback``),
and reads each exercise's score and messages from what nbgrader saved (``read_results``).
It takes at most ``DEADLINE`` seconds, whatever the file holds (``run_budget``).
"""
from __future__ import annotations

import json
import tempfile
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from time import monotonic

import nbformat

from autograder.paths import SOLUTIONS
from autograder.pipeline.assignment import assignments, notebooks, source
from autograder.pipeline.course import Graded, GradingError, SandboxError, ScratchCourse
from autograder.pipeline.execute import SandboxedExecute
from autograder.pipeline.judge_outputs import recorded_verdict
from autograder.pipeline.plan import recorded_exercise, submission_key
from autograder.pipeline.sandbox import isolation, isolation_setting, unisolated
from autograder.pipeline.submission import prepare
from autograder.terminal import shown

STUDENT = "learner"
DEADLINE = 90        # seconds for one submission's grading, reading the file included
AROUND_THE_RUN = 10  # seconds nbgrader takes besides running the cells: start-up, judge, feedback


@dataclass
class ExerciseResult:
    id: str
    points: float
    max_points: float
    messages: list[str] = field(default_factory=list)


@dataclass
class Result:
    notebook: str
    assignment: str
    exercises: list[ExerciseResult]
    feedback_html: str | None = None
    notes: list[str] = field(default_factory=list)  # repairs to the file, isolation
    autograded: str = field(default="", repr=False)  # nbgrader's autograded notebook (JSON)

    @property
    def total(self) -> float:
        return round(sum(e.points for e in self.exercises), 3)

    @property
    def max_total(self) -> float:
        return round(sum(e.max_points for e in self.exercises), 3)

    def __repr__(self) -> str:  # what a notebook shows under the submit() cell
        return f"<{Path(self.notebook).name}: {self.total:g} / {self.max_total:g} points>"

    def by_id(self, exercise_id: str) -> ExerciseResult:
        return next(e for e in self.exercises if e.id == exercise_id)

    def to_json(self) -> dict:
        return {"notebook": self.notebook, "assignment": self.assignment, "total": self.total,
                "max_total": self.max_total, "feedback_html": self.feedback_html, "notes": self.notes,
                "exercises": [asdict(e) for e in self.exercises]}

    def table(self) -> str:
        width = max([len(e.id) for e in self.exercises] + [8])
        lines = [f"{'exercise':<{width}}  points", "-" * (width + 14)]
        for e in self.exercises:
            mark = "\u2714" if e.points >= e.max_points else "\u2718"
            lines.append(f"{e.id:<{width}}  {e.points:>5g} / {e.max_points:<5g} {mark}")
        lines += ["-" * (width + 14), f"{'total':<{width}}  {self.total:>5g} / {self.max_total:g}"]
        return "\n".join(lines)


def find_assignment(notebook: Path) -> str:
    """The assignment (folder of ``solutions/``) holding a notebook of this name; for a copy
    under another name ("attention-Copy1.ipynb"), the assignment its folder is named after."""
    matches = [a for a in assignments() if notebook.name in notebooks(a)]
    if not matches and notebook.resolve().parent.name in assignments():
        matches = [notebook.resolve().parent.name]
    if len(matches) != 1:
        known = ", ".join(f"{a}/{n}" for a in assignments() for n in notebooks(a))
        raise GradingError(f"cannot tell which assignment {notebook.name} belongs to "
                           f"(found {len(matches)}); pass --assignment. Known notebooks: {known}")
    return matches[0]


def _canonical_name(notebook: Path, assignment: str) -> str:
    names = notebooks(assignment)
    if not names:
        raise GradingError(f"no assignment {assignment!r} in {SOLUTIONS}")
    if notebook.name in names:
        return notebook.name
    if len(names) == 1:  # a renamed copy ("attention-Copy1.ipynb") of a one-notebook assignment
        return names[0]
    raise GradingError(f"{notebook.name} is not one of {', '.join(names)}")


def _graded_cells(nb) -> dict[str, tuple[str, object]]:
    """grade_id -> (exercise id, cell) for the graded cells of a notebook, in order."""
    return {cell.metadata["nbgrader"]["grade_id"]: (ex_id, cell)
            for cell in nb.cells if (ex_id := recorded_exercise(cell))}


def read_results(assignment: str, name: str, graded: Graded) -> list[ExerciseResult]:
    """Each exercise's score (the gradebook's) and messages (the verdict ``JudgeOutputs`` left
    in the autograded notebook's graded cell), from what nbgrader saved.

    Every graded cell of the assignment's source counts, so a learner who deletes one (or
    strips its metadata) gets 0 for it rather than a smaller maximum.
    """
    expected = {gid: graded_cell for gid, graded_cell in source(assignment, name).graded.items() if graded_cell[0]}
    present = _graded_cells(nbformat.reads(graded.autograded, as_version=4))
    results = []
    for grade_id, (ex_id, max_points) in expected.items():
        verdict = recorded_verdict(present[grade_id][1]) if grade_id in present else None
        if verdict is None:
            results.append(ExerciseResult(ex_id, 0.0, max_points, [
                "The graded cell of this exercise is missing from the notebook: copy it back "
                "from the released notebook, below your function."]))
            continue
        results.append(ExerciseResult(ex_id, float(graded.scores.get(grade_id) or 0.0), max_points,
                                      list(verdict["messages"])))
    return results


def run_budget(reading: float) -> int:
    """Seconds the cells may run after reading the file took ``reading`` seconds: the usual
    ``SandboxedExecute.time_budget``, less what reading took past the few seconds ``DEADLINE``
    spares, so that a gigabyte file whose code runs as long as it may still ends in time."""
    usual = SandboxedExecute.time_budget.default_value
    return max(1, min(usual, int(DEADLINE - AROUND_THE_RUN - reading)))


def grade_notebook(notebook: str | Path, assignment: str | None = None,
                   feedback_to: str | Path | None = None) -> Result:
    """Autograde one notebook; write nbgrader's HTML feedback to ``feedback_to`` if given.

    Where the sandbox cannot start a kernel, the notebook is graded without it, as on a machine
    without bubblewrap, and a note says why (unless ``AUTOGRADER_ISOLATION=required``)."""
    notebook = Path(notebook).resolve()
    if not notebook.is_file():
        raise GradingError(f"no such notebook: {notebook}")
    assignment = assignment or find_assignment(notebook)
    name = _canonical_name(notebook, assignment)
    isolated, isolation_note = isolation()
    started = monotonic()
    prepared = prepare(notebook, assignment, name)
    key = submission_key(prepared.nb)  # as a class's grader draws it (``classroom.grade.make_task``)
    budget = run_budget(monotonic() - started)
    # nbgrader's gradebook warns about its own SQLAlchemy internals: nothing a learner can act on
    with tempfile.TemporaryDirectory(prefix="autograder-") as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        course = ScratchCourse(assignment, Path(tmp))
        run = dict(feedback=feedback_to is not None, time_budget=budget)
        try:
            graded = course.grade(prepared.nb, STUDENT, name, key, isolate=isolated, **run)
        except SandboxError as err:
            if not (isolated and isolation_setting() == "auto"):  # as where bwrap is missing
                raise
            isolated, isolation_note = False, unisolated(str(err))
            graded = course.grade(prepared.nb, STUDENT, name, key, isolate=False, **run)
    html = None
    if feedback_to is not None:
        Path(feedback_to).write_text(graded.feedback, encoding="utf-8")
        html = str(Path(feedback_to).resolve())
    notes = prepared.notes + ([] if isolated else [isolation_note])
    return Result(str(notebook), assignment, read_results(assignment, name, graded), html, notes,
                  graded.autograded)


def submit(notebook: str | Path, assignment: str | None = None, as_json: bool = False) -> Result | None:
    """Grade a saved notebook, print the score table, write ``<name>_feedback.html`` beside it.

    ``autograder.submit``, which a notebook's last cell calls, skips this while the notebook
    is itself being graded or tested, so grading never recurses.
    """
    notebook = Path(notebook)
    result = grade_notebook(notebook, assignment,
                            feedback_to=notebook.with_name(notebook.stem + "_feedback.html"))
    if as_json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(f"Graded {shown(notebook, layout=False)} (the version saved on disk: save before "
              "you submit).\n")
        print(shown("\n".join(result.notes + [""])) if result.notes else "", end="")
        print(shown(result.table()))
        for e in result.exercises:
            if e.points < e.max_points:
                lines = (shown(line) for m in e.messages for line in m.splitlines())
                print(f"\n{e.id}:\n  " + "\n  ".join(lines))
        print(f"\nFeedback report: {shown(result.feedback_html, layout=False)}")
    return result
