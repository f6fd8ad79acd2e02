"""The course glossary is stated once: notebook 00 shows the table of course_lib/README.md."""
import nbformat

from helpers import REPO, SOLUTIONS


def _table(text):
    """The first markdown table after a line that starts it with '| symbol |'."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| symbol |"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return lines[start:end]


def test_notebook_00_shows_the_glossary_of_course_lib():
    readme = (REPO / "course_lib" / "README.md").read_text()
    nb = nbformat.read(SOLUTIONS / "00_start_here" / "start_here.ipynb", as_version=4)
    notation = next(c.source for c in nb.cells if c.source.startswith("## 2. Notation"))
    assert _table(notation) == _table(readme)


def test_glossary_names_the_symbols_of_the_course():
    rows = _table((REPO / "course_lib" / "README.md").read_text())
    table = "\n".join(rows)
    for name in ("B", "T", "T_q", "T_k", "d_model", "n_heads", "d_k", "d_v", "vocab_size", "X",
                 "Q", "K", "V", "S", "A", "out", "W_q", "W_o", "mask", "dout"):
        assert f"`{name}`" in table, name
