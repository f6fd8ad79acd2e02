"""The nbgrader configuration of the course, shared by every entry point. [trusted]

The repository root is an nbgrader course directory: ``solutions/`` is nbgrader's source
directory and ``notebooks/`` its release directory, so ``nbgrader generate_assignment``,
``autograde``, ``formgrader`` and ``export`` all work from the root (``nbgrader_config.py``
there calls ``configure``). ``autograder submit`` uses the same settings in a scratch
course directory whose ``solutions`` is a link to this repository's; every course directory
the grader makes gets its ``nbgrader_config.py`` from ``config_file``.
(``autograder/config.py`` re-exports ``configure`` for the files written before it moved here.)
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbgrader.converters import GenerateAssignment
from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, IgnorePattern,
                                    IncludeHeaderFooter, LimitOutput, SaveAutoGrades)

from autograder.paths import REPO
from autograder.pipeline.execute import SandboxedExecute
from autograder.pipeline.feedback import NBGRADER_TEMPLATES, OFFLINE_TEMPLATES, FeedbackExporter
from autograder.pipeline.header import IncludeHeader
from autograder.pipeline.judge_outputs import JudgeOutputs
from autograder.pipeline.report import ReportGrades
from autograder.pipeline.sanitize import SanitizeOutputs


def _alembic_on_path() -> None:
    """nbgrader's gradebook runs the ``alembic`` command; find it beside this Python."""
    bindir = str(Path(sys.executable).parent)
    if shutil.which("alembic") is None and Path(bindir, "alembic").exists():
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")


def configure(c, root: Path = REPO) -> None:
    """Fill an nbgrader ``Config`` object ``c`` for a course directory at ``root``."""
    _alembic_on_path()
    c.CourseDirectory.root = str(root)
    c.CourseDirectory.course_id = "transformers"
    c.CourseDirectory.source_directory = "solutions"  # a scratch root links it to SOLUTIONS
    c.CourseDirectory.release_directory = "notebooks" if root == REPO else "release"
    # the header names each notebook's own submit command (header.py)
    steps = GenerateAssignment.class_traits()["preprocessors"].default()
    c.GenerateAssignment.preprocessors = [IncludeHeader if s is IncludeHeaderFooter else s for s in steps]
    c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
    # nbgrader's Execute is replaced by the sandboxed one (execute.py), and the verdict is
    # computed right after it, before nbgrader saves the grades; then nothing the learner made
    # may run where the formgrader or the feedback shows it (sanitize.py).
    c.Autograde.autograde_preprocessors = [
        SandboxedExecute, JudgeOutputs, SanitizeOutputs, IgnorePattern, ClearMetadataPreprocessor,
        LimitOutput, SaveAutoGrades, AssignLatePenalties, CheckCellMetadata]
    # every report (submit, a class worker, the formgrader's "generate feedback") reads offline
    # and names its exercises (feedback.py, report.py)
    c.GenerateFeedback.exporter_class = FeedbackExporter
    c.GenerateFeedback.preprocessors = [ReportGrades, CSSHTMLHeaderPreprocessor]
    # the formgrader's page of a submission loads no MathJax from a CDN either: its template's
    # mathjax.html.j2 is found in ours before nbconvert's; nbgrader's own stay where it looks
    # (the formgrader sets this to nbgrader's alone, before it reads this file)
    c.HTMLExporter.extra_template_basedirs = [str(OFFLINE_TEMPLATES), str(NBGRADER_TEMPLATES)]
    # late work: the instructor's policy (c.LatePolicy.*, none unless set), priced from a
    # submission time the learner cannot set back (classroom/late.py)
    # (named, not imported: classroom/ imports this module)
    c.AssignLatePenalties.plugin_class = "autograder.classroom.late.LatePolicy"
    c.ExchangeFactory.collect = "autograder.classroom.late.TrustedCollect"


def config_file(*settings: str) -> str:
    """The text of a course directory's ``nbgrader_config.py``: ``configure`` for the folder the
    file is in, then ``settings`` (lines of Python, on the config ``c``), e.g.
    ``config_file("c.Exchange.root = '/srv/exchange'")``."""
    return ("# nbgrader's configuration of this course directory: the course's grading pipeline\n"
            "# (autograder/pipeline/config.py), then this course's own settings.\n"
            "from pathlib import Path\n\nfrom autograder.pipeline.config import configure\n\n"
            "c = get_config()  # noqa: F821 (nbgrader provides it)\n"
            "configure(c, Path(__file__).resolve().parent)\n"
            + "".join(line + "\n" for line in settings))
