"""The course glossary is stated once, and every symbol in it keeps its one meaning.

Notebook 00 shows the table of course_lib/README.md. The checks below read that table and scan
the course's text for the uses of a symbol that a machine can tell apart from its meaning: the
notebooks' markdown, their code comments and strings, and the comments and strings (docstrings,
check messages) of course_lib, autograder/exercises and autograder/judge.
"""
import io
import re
import tokenize

import nbformat

from helpers import REPO, SOLUTIONS

SCANNED = ("course_lib", "autograder/exercises", "autograder/judge")
SIZE_TOKEN = re.compile(r"[A-Za-z]|[A-Z]_[a-z]\w*")  # T, S, T_src: what can clash; not d_model
TUPLE = re.compile(r"(?<![\w\]])\(((?:\.\.\.|[\w*·/+ -]+)(?:, ?(?:\.\.\.|[\w*·/+ -]+))+),?\)")
# 'S ≠ T', 'T_q = T', not 'K = B X'
COMPARISON = re.compile(r"(?<![\w$\\])([A-Za-z](?:_[a-z]+)?) ?(?:≠|!=|=|<=|≤) ?"
                        r"([A-Za-z](?:_[a-z]+)?)(?= ?(?:≠|=)|[\"',)]|$)")
MATH = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$", re.S)
NUMBER = re.compile(r"[\d\s.,{}^+\-]*(?:\\times[\d\s.,{}^+\-]*)*")


def _table(text):
    """The first markdown table after a line that starts it with '| symbol |'."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| symbol |"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return lines[start:end]


def _rows():
    """[(symbols, meaning)]: the backticked names of each row's first column, and the row's text."""
    rows = []
    for line in _table((REPO / "course_lib" / "README.md").read_text())[2:]:
        first, meaning = line.strip("|").split("|", 1)
        rows.append((re.findall(r"`([^`]+)`", first), meaning))
    return rows


def _glossary():
    """{symbol: is_array}: an array's row gives its shape in backticks, a size's does not."""
    return {s: bool(re.search(r"`\([^`]*\)`", meaning)) for symbols, meaning in _rows()
            for s in symbols}


def _py_text(source):
    """The comments and string literals of Python source, one string each."""
    kinds = {tokenize.COMMENT, tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", -1)}
    try:
        return [t.string for t in tokenize.generate_tokens(io.StringIO(source).readline)
                if t.type in kinds]
    except (tokenize.TokenError, SyntaxError):
        return [source]


def _texts():
    """(where, text, is_markdown) for every piece of course text the glossary governs."""
    for path in sorted(SOLUTIONS.glob("*/*.ipynb")):
        for i, cell in enumerate(nbformat.read(path, as_version=4).cells):
            where = f"{path.parent.name} cell {i}"
            if cell.cell_type == "markdown":
                yield where, cell.source, True
            elif cell.cell_type == "code":
                code = "\n".join(line for line in cell.source.splitlines()
                                 if not line.lstrip().startswith(("%", "!")))
                for text in _py_text(code):
                    yield where, text, False
    for folder in SCANNED:
        for path in sorted((REPO / folder).rglob("*.py")):
            where = str(path.relative_to(REPO))
            for text in _py_text(path.read_text()):
                yield where, text, False


def _math_symbols(math):
    """The capital letters a formula uses as operands (not inside words, bold or scripts)."""
    math = re.sub(r"\\(?:mathrm|text|operatorname|mathbf|mathcal)\{[^}]*\}", " ", math)
    math = re.sub(r"[\^_](?:\{[^}]*\}|\\?\w)", " ", math)
    math = re.sub(r"\\[A-Za-z]+", " ", math)
    return set(re.findall(r"(?<![a-z])[A-Z](?![a-z])", math))  # QK is Q and K


def _definitions(text):
    """(symbol, right-hand side) for each plain 'X = ...' in the formulas of a markdown text."""
    for m in MATH.finditer(text):
        math = m.group(1) or m.group(2)
        for d in re.finditer(r"(?<![\w\\{}^_.|])([A-Z])\s*=\s*([^=$]+?)(?=\$|,|;|\\qquad|\\\\|=|$)",
                             math):
            yield d.group(1), d.group(2)


def test_notebook_00_shows_the_glossary_of_course_lib():
    readme = (REPO / "course_lib" / "README.md").read_text()
    nb = nbformat.read(SOLUTIONS / "00_start_here" / "start_here.ipynb", as_version=4)
    notation = next(c.source for c in nb.cells if c.source.startswith("## 2. Notation"))
    assert _table(notation) == _table(readme)


def test_glossary_names_the_symbols_of_the_course():
    table = "\n".join(_table((REPO / "course_lib" / "README.md").read_text()))
    for name in ("B", "T", "T_q", "T_k", "T_src", "d_model", "n_heads", "d_k", "d_v",
                 "vocab_size", "X", "Q", "K", "V", "S", "A", "out", "W_q", "W_o", "mask", "dout",
                 "P", "D", "delta", "A_tilde", "h", "g"):
        assert f"`{name}`" in table, name


def test_every_symbol_has_one_row_of_the_glossary():
    symbols = [s for row, _ in _rows() for s in row]
    assert sorted({s for s in symbols if symbols.count(s) > 1}) == []


def test_shapes_spell_sizes_with_the_glossarys_sizes():
    """A shape such as `(B, S)` uses a letter only for a size the glossary names: S (the
    scores), P, M, V and h are arrays there, so `(B, S)` for a source length is a second meaning.
    A tuple counts as a shape when at least half its entries are sizes or numbers; calls,
    argument lists (`f(x, n_heads)`, `(dout, Q, K, V, A)`) and pairs of indices do not."""
    glossary = _glossary()
    sizes = {s for s, is_array in glossary.items() if not is_array}
    wrong = set()
    for where, text, _ in _texts():
        for m in TUPLE.finditer(text):
            parts = [p for p in re.split(r"[\s,*·/+-]+", m.group(1)) if p and p != "..."]
            if (2 * sum(p in sizes or p.isdigit() for p in parts) < len(parts)
                    or all(re.fullmatch(r"[a-z]", p) for p in parts)):
                continue  # an argument list, or indices such as (i, t)
            wrong |= {f"{where}: {m.group(0)} ({p})" for p in parts
                      if SIZE_TOKEN.fullmatch(p) and p not in sizes}
    assert sorted(wrong) == []


def test_sizes_are_compared_with_sizes():
    """'S ≠ T' in a check message compares a length with T: S must then be a size."""
    glossary = _glossary()
    wrong = set()
    for where, text, _ in _texts():
        for m in COMPARISON.finditer(text):
            a, b = m.groups()
            kinds = {glossary.get(a), glossary.get(b)}
            if kinds == {True, False}:
                wrong.add(f"{where}: {m.group(0)}")
    assert sorted(wrong) == []


def test_formulas_define_a_symbol_as_the_glossary_does():
    """A formula 'X = ...' for a glossary letter uses only the operands of one of the
    glossary's own formulas for X ($Q = XW^Q$, $S = QK^\\top/\\sqrt{d_k}$): $Q = AX$ (the blog's
    keys) or $P = e^{S - m}$ (a tile in notebook 07) would give the letter a second meaning.
    Numbers are always fine ($T = 4096$); the blog's letters are bold and not checked."""
    glossary = _glossary()
    table = "\n".join(_table((REPO / "course_lib" / "README.md").read_text()))
    allowed = {}
    for symbol, rhs in _definitions(table):
        allowed.setdefault(symbol, []).append(_math_symbols(rhs))
    wrong = set()
    for where, text, is_markdown in _texts():
        if not is_markdown:
            continue
        for symbol, rhs in _definitions(text):
            if symbol not in glossary or NUMBER.fullmatch(rhs.strip()):
                continue
            if not any(_math_symbols(rhs) <= ops for ops in allowed.get(symbol, [])):
                wrong.add(f"{where}: {symbol} = {rhs.strip()}")
    assert sorted(wrong) == []
