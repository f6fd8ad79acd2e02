"""The header of every released notebook, which names the notebook's own submit command. [trusted]

``nbgrader generate_assignment`` puts ``release_header.ipynb`` atop each learner's notebook
(``IncludeHeader``, in the place of nbgrader's ``IncludeHeaderFooter``: ``config.py``). Its
``{notebook}`` becomes the notebook's path from the repository root, so the banner reads
``autograder submit notebooks/06_gpt/gpt.ipynb``, a command to copy, not a placeholder.
The sanitizer (``pipeline/sanitize.py``) counts these cells as the course's own.
"""
from __future__ import annotations

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor

from autograder.paths import HEADER, RELEASE, REPO

PLACEHOLDER = "{notebook}"


def release_path(assignment: str, notebook: str) -> str:
    """``("06_gpt", "gpt")`` -> ``"notebooks/06_gpt/gpt.ipynb"``: the learner's copy, from the
    repository root."""
    return f"{RELEASE.relative_to(REPO).as_posix()}/{assignment}/{notebook}.ipynb"


def header_cells(assignment: str, notebook: str) -> list[nbformat.NotebookNode]:
    """The header's cells as they open ``notebook`` (its name, without ``.ipynb``) of ``assignment``."""
    cells = nbformat.read(HEADER, as_version=4).cells
    for cell in cells:
        cell.source = cell.source.replace(PLACEHOLDER, release_path(assignment, notebook))
    return cells


class IncludeHeader(NbGraderPreprocessor):
    """Put the header's cells, made for this notebook, at its top."""

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        nb.cells = header_cells(info["assignment"], info["notebook"]) + nb.cells
        return nb, resources
