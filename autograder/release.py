"""Generate the learners' notebooks (``notebooks/``) from the source (``solutions/``). [trusted]

This is ``nbgrader generate_assignment`` with the course configuration: solution regions
become ``raise NotImplementedError()``, graded cells are locked and checksummed, outputs are
cleared, and a header says where the source is.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from nbgrader.apps import NbGraderAPI
from traitlets.config import Config

from autograder.paths import REPO, SOLUTIONS
from autograder.pipeline.config import configure
from autograder.pipeline.course import GradingError, new_course, run_step


def assignments() -> list[str]:
    return sorted(p.name for p in SOLUTIONS.iterdir() if p.is_dir() and any(p.glob("*.ipynb")))


def generate(names: list[str] | None = None, root: Path = REPO) -> list[Path]:
    """Generate ``names`` (default: all); return the notebooks written.

    With ``root`` the repository they go to ``notebooks/``; with another folder (a scratch
    course) to ``<root>/release/``.
    """
    names = names or assignments()
    unknown = sorted(set(names) - set(assignments()))
    if unknown:
        raise GradingError(f"no such assignment(s): {', '.join(unknown)}; known: {', '.join(assignments())}")
    if root == REPO:
        config = Config()
        configure(config, REPO)
        api = NbGraderAPI(config=config)
        release = REPO / "notebooks"
    else:
        api = new_course(root)
        release = root / "release"
    written = []
    for name in names:
        run_step(lambda: api.generate_assignment(name), f"generate_assignment {name}")
        written += sorted((release / name).glob("*.ipynb"))
    return written


def generate_to_temp(names: list[str] | None = None) -> tuple[tempfile.TemporaryDirectory, list[Path]]:
    """Generate into a scratch course; the caller keeps the directory object alive."""
    tmp = tempfile.TemporaryDirectory(prefix="autograder-release-")
    return tmp, generate(names, Path(tmp.name))
