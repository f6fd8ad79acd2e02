"""header.py: each released notebook's banner gives the command that submits that notebook."""
import nbformat

from autograder.pipeline.header import PLACEHOLDER, header_cells, release_path
from autograder.paths import HEADER, REPO

from helpers import NOTEBOOKS


def test_the_header_has_the_placeholder_once():
    assert nbformat.read(HEADER, as_version=4).cells[0].source.count(PLACEHOLDER) == 1


def test_every_released_notebook_opens_with_its_own_submit_command():
    released = sorted(NOTEBOOKS.glob("*/*.ipynb"))
    assert len(released) >= 8
    for path in released:
        first = nbformat.read(path, as_version=4).cells[0]
        command = f"`autograder submit {path.relative_to(REPO).as_posix()}`"
        assert command in first.source and "<" not in first.source and PLACEHOLDER not in first.source, path
        assert first.source == header_cells(path.parent.name, path.stem)[0].source


def test_release_path():
    assert release_path("06_gpt", "gpt") == "notebooks/06_gpt/gpt.ipynb"
