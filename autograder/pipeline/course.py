"""A scratch nbgrader course that grades one prepared submission at a time [trusted]

Both ways of grading go through it: ``grading.grade_notebook`` (one learner's notebook, in a
course made for it and thrown away) and a class worker (``classroom.worker``: one course per
assignment, kept, and reset for each submission). ``ScratchCourse.grade`` takes a notebook
already repaired by ``submission.prepare``, puts it in ``submitted/``, runs nbgrader's
``autograde`` (the sandboxed execution, the judge and the sanitizer: ``config.py``) and
``generate_feedback``, and returns what nbgrader saved: the gradebook's scores and comments,
the autograded notebook and the HTML feedback.
"""
from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import nbformat
from nbgrader.api import Gradebook
from nbgrader.apps import NbGraderAPI
from traitlets.config import Config

from autograder.pipeline.config import config_file, configure
from autograder.paths import SOLUTIONS
from autograder.pipeline.execute import watch_sandbox
from autograder.pipeline.interrupt import watch_ctrl_c
from autograder.startup import quick_alembic_head


class GradingError(RuntimeError):
    """nbgrader could not grade the notebook; the message says why."""


class SandboxError(GradingError):
    """The grading sandbox could not run the notebook (it could not start the notebook's first
    kernel, or isolation is required and missing); the message says why in one line."""


def run_step(step: Callable[[], dict], what: str) -> None:
    """Run nbgrader's step ``what`` (``step``: a call of nbgrader's API, which answers with a
    ``capture_log`` dictionary) and raise ``GradingError`` unless it succeeded: ``SandboxError``
    with the one line that says why when the grading sandbox could not run the notebook,
    ``KeyboardInterrupt`` again when Ctrl-C stopped the step, else with nbgrader's log.

    Both are told by the grader's own records (``execute.watch_sandbox``,
    ``interrupt.watch_ctrl_c``), never by the answer's text: the learner's kernel can write into
    nbgrader's log, and a failure's traceback may end in any line.
    """
    with watch_ctrl_c() as pressed, watch_sandbox() as unavailable:
        result = step()
    if result.get("success"):
        return
    if pressed():
        raise KeyboardInterrupt  # nbgrader's API catches whatever stopped its step, Ctrl-C too
    if unavailable:
        raise SandboxError(unavailable[-1])
    raise GradingError(f"nbgrader {what} failed:\n{result.get('error') or result.get('log')}")


def new_course(root: Path) -> NbGraderAPI:
    """An nbgrader API object for a scratch course at ``root`` sharing our solutions/."""
    (root / "solutions").symlink_to(SOLUTIONS, target_is_directory=True)
    (root / "nbgrader_config.py").write_text(config_file())  # so nbgrader's own commands work there too
    config = Config()
    configure(config, root)
    # a private exchange: the system-wide one may not exist, and nbgrader checks it on start
    config.Exchange.root = str(root / "exchange")
    (root / "exchange").mkdir()
    return NbGraderAPI(config=config)


@dataclass
class Graded:
    """What nbgrader saved for one submission."""
    scores: dict[str, float | None]   # grade id -> automatic score, as in the gradebook
    comments: dict[str, str | None]   # grade id -> automatic comment, as in the gradebook
    autograded: str                   # the autograded notebook (JSON), verdicts in its graded cells
    feedback: str | None              # the HTML feedback, when asked for


class ScratchCourse:
    """An nbgrader course directory at ``root`` (a new or empty folder) with one assignment generated.

    Its feedback uses ``feedback.FeedbackExporter`` (``config.py``), whose compiled template a
    class worker shares between the reports it writes.
    """

    def __init__(self, assignment: str, root: Path):
        quick_alembic_head()  # saves the 3 s `alembic heads` subprocess per new gradebook
        self.root, self.assignment = Path(root), assignment
        self.root.mkdir(parents=True, exist_ok=True)
        self.api = new_course(self.root)
        run_step(lambda: self.api.generate_assignment(assignment), "generate_assignment")
        self.blank_gradebook = (self.root / "gradebook.db").read_bytes()

    def grade(self, nb: nbformat.NotebookNode, student: str, notebook: str, key: bytes,
              timestamp: str | None = None, feedback: bool = True, time_budget: int | None = None,
              isolate: bool = True) -> Graded:
        """Autograde the prepared notebook ``nb`` as ``student``'s ``notebook`` (a file name),
        on the cases of ``key`` (``plan.submission_key`` of ``nb``, computed by whoever
        prepared it); ``time_budget``: the seconds its cells may run, if not
        ``SandboxedExecute``'s own; ``isolate`` False: without the sandbox, whatever
        ``AUTOGRADER_ISOLATION`` says."""
        run = self.api.config.SandboxedExecute
        run.isolate, run.submission_key = isolate, key.hex()
        if time_budget is None:
            run.pop("time_budget", None)
        else:
            run.time_budget = time_budget
        for folder in ("submitted", "autograded", "feedback"):
            shutil.rmtree(self.root / folder, ignore_errors=True)
        (self.root / "gradebook.db").write_bytes(self.blank_gradebook)
        dest = self.root / "submitted" / student / self.assignment
        dest.mkdir(parents=True)
        nb = nbformat.from_dict(nb)
        for i, cell in enumerate(nb.cells):  # the same submission, the same feedback
            cell.id = hashlib.sha1(f"{i}\0{cell.source}".encode()).hexdigest()[:8]
        nbformat.write(nb, dest / notebook)
        if timestamp:
            (dest / "timestamp.txt").write_text(timestamp)
        run_step(lambda: self.api.autograde(self.assignment, student), "autograde")
        if feedback:
            run_step(lambda: self.api.generate_feedback(self.assignment, student), "generate_feedback")
        stem = Path(notebook).stem
        with Gradebook(f"sqlite:///{self.root / 'gradebook.db'}") as gb:
            saved = gb.find_submission_notebook(stem, self.assignment, student)
            scores = {g.name: g.auto_score for g in saved.grades}
            comments = {c.name: c.auto_comment for c in saved.comments}
        made = lambda folder, ext: self.root / folder / student / self.assignment / (stem + ext)  # noqa: E731
        return Graded(scores, comments, made("autograded", ".ipynb").read_text(encoding="utf-8"),
                      made("feedback", ".html").read_text(encoding="utf-8") if feedback else None)
