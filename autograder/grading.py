"""Grade one learner's notebook with real nbgrader, in a scratch course directory.

``grade_notebook`` generates the assignment from ``solutions/`` into a temporary course
directory (so the gradebook holds the locked cells to restore), places the submission,
repaired where it must be (``submission.prepare``), in ``submitted/``, runs ``autograde``
(the sandboxed execution and ``JudgeOutputs`` included) and ``generate_feedback``, and reads
the scores back from nbgrader's gradebook.
"""
from __future__ import annotations

import json
import shutil
import tempfile
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook
from traitlets.config import Config

from autograder.config import SOLUTIONS, configure
from autograder.pipeline.plan import recorded_exercise
from autograder.pipeline.sandbox import isolation
from autograder.startup import quick_alembic_head
from autograder.pipeline.submission import prepare

STUDENT = "learner"


class GradingError(RuntimeError):
    """nbgrader could not grade the notebook; the message says why."""


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
    """The assignment (folder of ``solutions/``) holding a notebook of this name."""
    matches = sorted(p.parent.name for p in SOLUTIONS.glob(f"*/{notebook.name}"))
    if len(matches) != 1:
        known = ", ".join(sorted(p.parent.name + "/" + p.name for p in SOLUTIONS.glob("*/*.ipynb")))
        raise GradingError(f"cannot tell which assignment {notebook.name} belongs to "
                           f"(found {len(matches)}); pass --assignment. Known notebooks: {known}")
    return matches[0]


def _canonical_name(notebook: Path, assignment: str) -> str:
    names = sorted(p.name for p in (SOLUTIONS / assignment).glob("*.ipynb"))
    if not names:
        raise GradingError(f"no assignment {assignment!r} in {SOLUTIONS}")
    if notebook.name in names:
        return notebook.name
    if len(names) == 1:  # a renamed copy ("attention-Copy1.ipynb") of a one-notebook assignment
        return names[0]
    raise GradingError(f"{notebook.name} is not one of {', '.join(names)}")


def require_success(app_result: dict, what: str) -> None:
    """Raise ``GradingError`` with nbgrader's log unless its step ``what`` succeeded."""
    if not app_result.get("success"):
        raise GradingError(f"nbgrader {what} failed:\n{app_result.get('error') or app_result.get('log')}")


def new_course(root: Path):
    """An nbgrader API object for a scratch course at ``root`` sharing our solutions/."""
    from nbgrader.apps import NbGraderAPI

    (root / "solutions").symlink_to(SOLUTIONS, target_is_directory=True)
    (root / "nbgrader_config.py").write_text(  # so nbgrader's own commands work there too
        "from pathlib import Path\nfrom autograder.config import configure\n"
        "configure(get_config(), Path(__file__).resolve().parent)\n")
    config = Config()
    configure(config, root)
    # a private exchange: the system-wide one may not exist, and nbgrader checks it on start
    config.Exchange.root = str(root / "exchange")
    (root / "exchange").mkdir()
    return NbGraderAPI(config=config)


def _graded_cells(nb) -> dict[str, tuple[str, object]]:
    """grade_id -> (exercise id, cell) for the graded cells of a notebook, in order."""
    return {cell.metadata["nbgrader"]["grade_id"]: (ex_id, cell)
            for cell in nb.cells if (ex_id := recorded_exercise(cell))}


def read_results(root: Path, assignment: str, student: str, name: str) -> list[ExerciseResult]:
    """Scores from the gradebook, messages from the autograded notebook's graded cells.

    Every graded cell of the assignment's source counts, so a learner who deletes one (or
    strips its metadata) gets 0 for it rather than a smaller maximum.
    """
    expected = _graded_cells(nbformat.read(SOLUTIONS / assignment / name, as_version=4))
    present = _graded_cells(nbformat.read(root / "autograded" / student / assignment / name, as_version=4))
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        sub = gb.find_submission_notebook(Path(name).stem, assignment, student)
        scores = {g.name: float(g.score) for g in sub.grades}
    results = []
    for grade_id, (ex_id, source_cell) in expected.items():
        max_points = float(source_cell.metadata["nbgrader"]["points"])
        if grade_id not in present:
            results.append(ExerciseResult(ex_id, 0.0, max_points, [
                "The graded cell of this exercise is missing from the notebook: copy it back "
                "from the released notebook, below your function."]))
            continue
        cell = present[grade_id][1]
        messages = [line for o in cell.outputs if o.output_type == "stream"
                    for line in o.text.splitlines()[1:] if line.strip()]
        results.append(ExerciseResult(ex_id, scores.get(grade_id, 0.0), max_points, messages))
    return results


def grade_notebook(notebook: str | Path, assignment: str | None = None,
                   feedback_to: str | Path | None = None) -> Result:
    """Autograde one notebook; copy nbgrader's HTML feedback to ``feedback_to`` if given."""
    notebook = Path(notebook).resolve()
    if not notebook.is_file():
        raise GradingError(f"no such notebook: {notebook}")
    assignment = assignment or find_assignment(notebook)
    name = _canonical_name(notebook, assignment)
    isolated, isolation_note = isolation()
    quick_alembic_head()  # saves the 3 s `alembic heads` subprocess per new gradebook
    # nbgrader's gradebook warns about its own SQLAlchemy internals: nothing a learner can act on
    with tempfile.TemporaryDirectory(prefix="autograder-") as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        root = Path(tmp)
        api = new_course(root)
        require_success(api.generate_assignment(assignment), "generate_assignment")
        dest = root / "submitted" / STUDENT / assignment
        dest.mkdir(parents=True)
        prepared = prepare(notebook, assignment, name)
        nbformat.write(prepared.nb, dest / name)
        require_success(api.autograde(assignment, STUDENT), "autograde")
        exercises = read_results(root, assignment, STUDENT, name)
        html = None
        if feedback_to is not None:
            require_success(api.generate_feedback(assignment, STUDENT), "generate_feedback")
            feedback = root / "feedback" / STUDENT / assignment / (Path(name).stem + ".html")
            shutil.copyfile(feedback, feedback_to)
            html = str(Path(feedback_to).resolve())
    notes = prepared.notes + ([] if isolated else [isolation_note])
    return Result(str(notebook), assignment, exercises, html, notes)


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
        print(f"Graded {notebook} (the version saved on disk: save before you submit).\n")
        print("\n".join(result.notes + [""]) if result.notes else "", end="")
        print(result.table())
        for e in result.exercises:
            if e.points < e.max_points:
                print(f"\n{e.id}:\n  " + "\n  ".join(e.messages))
        print(f"\nFeedback report: {result.feedback_html}")
    return result
