"""The course glossary is stated once, and every symbol in it keeps its one meaning.

Notebook 00 shows the table of course_lib/README.md. The checks below read that table and scan
the course's text for the uses of a symbol that a machine can tell apart from its meaning: the
notebooks' markdown, their code comments and strings, and the comments and strings (docstrings,
check messages) of course_lib, autograder/exercises and autograder/judge. A shape, a comparison,
a formula 'x = ...', a symbol used outside the notebooks its row names, and a symbol called by
the name of another row ('the shift m' where m is a maximum) each give a symbol away.
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
NOTEBOOK = re.compile(r"notebooks? (\d\d)")
# what comes before a row's kind ('notebook 07: the running maximum' is a maximum) and ends it
KIND_PREFIX = re.compile(r"\s*(?:notebooks? \d\d(?:'s)?[,:]?\s*)?(?:(?:the|a|an|one)\s+)?")
KIND_END = re.compile(r"[,;:(`$]| (?:of|in|at|on|per|for|with|applied|arriving|before|that)\b")
ARTICLE = r"(?:the|a|an|every|each|its)"
GREEK = re.compile(r"\\(alpha|beta|gamma|delta|Delta|epsilon|ell|mu|sigma|tau|phi|theta|omega)(?![a-z])")
ROLES = "[qkvo]+"  # a subscript that names a role, as in W_q, b_k, X_{kv}, W_o
NUMBER = re.compile(r"[\d\s.,{}^+\-]*(?:\\(?:times|infty|dots|ldots)[\d\s.,{}^+\-]*)*")


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


def _math_symbols(math, letters="A-Z"):
    """The capital letters (or ``letters``) a formula uses as operands (not inside words, bold
    or scripts)."""
    math = re.sub(r"\\(?:mathrm|text|operatorname|mathbf|mathcal|texttt)\{[^}]*\}", " ", math)
    math = re.sub(r"[\^_](?:\{[^}]*\}|\\?\w)", " ", math)
    math = re.sub(r"\\[A-Za-z]+", " ", math)
    return set(re.findall(rf"(?<![a-z])[{letters}](?![a-z])", math))  # QK is Q and K


def _definitions(text):
    """(symbol, right-hand side) for each plain 'X = ...' or 'x = ...' in the formulas of a
    markdown text."""
    for m in MATH.finditer(text):
        math = m.group(1) or m.group(2)
        # a capital anywhere; a small letter only where a formula or a clause starts ('J g = ...'
        # is a product, 'q \cdot k = ...' an inner product)
        for d in re.finditer(r"(?:(?<![\w\\{}^_.|])([A-Z])|(?:^|(?<!\\)[,;(]|\\q?quad|\\text\{[^}]*\})\s*([a-z]))"
                             r"\s*=\s*([^=$]+?)(?=\$|,|;|\\qquad|\\\\|=|$)", math):
            yield d.group(1) or d.group(2), d.group(3)


def _outside_glossary(text):
    """``text`` without the rows of the glossary's table (notebook 00 shows it)."""
    if "| symbol |" not in text:
        return text
    return "\n".join(line for line in text.splitlines() if not line.startswith("|"))


def _kinds():
    """{symbol: words}: what the row of each symbol says it is, the last word before its
    first comma, bracket or preposition ('a shift of the positions': shift)."""
    kinds = {}
    for symbols, meaning in _rows():
        head = KIND_END.split(KIND_PREFIX.sub("", meaning, count=1), maxsplit=1)[0].split()
        for symbol in symbols:
            kinds.setdefault(symbol, set()).update(head[-1:])
    return kinds


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
    """A formula 'X = ...' or 'x = ...' for a glossary letter uses only the capital operands of
    one of the glossary's own formulas for it ($Q = XW^Q$, $S = QK^\\top/\\sqrt{d_k}$,
    $g = \\partial L/\\partial x$): $Q = AX$ (the blog's keys), $P = e^{S - m}$ (a tile in
    notebook 07) or $k = 0, 1, \\ldots$ (an index, where `k` is a key) would give the letter a
    second meaning. Numbers are always fine ($T = 4096$, $m = -\\infty$), and so is a size
    set to sizes ($t = 1 \\dots T$); the blog's letters are bold and not checked."""
    glossary = _glossary()
    sizes = {s for s, is_array in glossary.items() if not is_array}
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
            if symbol.islower() and symbol in sizes and _math_symbols(rhs) <= sizes:
                continue
            if not any(_math_symbols(rhs) <= ops for ops in allowed.get(symbol, [])):
                wrong.add(f"{where}: {symbol} = {rhs.strip()}")
    assert sorted(wrong) == []


def test_a_symbol_that_the_glossary_gives_to_some_notebooks_stays_in_them():
    """A row that starts 'notebook 07: ...' gives its symbols to the notebooks it names: `m`
    (a maximum of scores) in notebook 03 for a shift, Adam's $m$ in notebook 06, or $\\tau$ (`tau`,
    notebook 03's shift) for a temperature would be a second meaning. Checked in the notebooks'
    formulas, backticks and code comments, for the lower-case and longer names (the capitals
    are also the blog's letters and token names)."""
    scoped = [(symbols, meaning) for symbols, meaning in _rows() if NOTEBOOK.match(meaning.strip())]
    scopes = {s: set(NOTEBOOK.findall(meaning)) for symbols, meaning in scoped
              for s in symbols if not re.fullmatch("[A-Z]", s)}
    letters = {s: set(GREEK.findall(meaning)) for symbols, meaning in scoped for s in symbols}
    wrong = set()
    for where, text, is_markdown in _texts():
        if not where[:2].isdigit():
            continue                                   # course_lib and the grader serve several
        text = _outside_glossary(text)
        if is_markdown:
            used = set(re.findall(r"`([A-Za-z]\w*)`", text))
            for m in MATH.finditer(text):
                math = m.group(1) or m.group(2)
                math = re.sub(r"([a-z])_(?:\\(?:text|mathrm))?\{([a-z]{2,})\}", r"\1\2", math)  # n_{layers}: a name
                greek = set(GREEK.findall(math))                   # \tau is tau, \Delta delta
                used |= _math_symbols(math, "a-z") | {s for s in scopes if letters[s] & greek}
        else:
            text = re.sub(r"\\[a-z]|\{[^{}]*\}", " ", text)  # not escapes ("\\n"), nor f-string fields
            used = set(re.findall(r"(?<![\w.'])([A-Za-z]\w*)(?![\w'(\[])", text))
        wrong |= {f"{where}: {s}" for s in used & scopes.keys() if where[:2] not in scopes[s]}
    assert sorted(wrong) == []


def test_a_symbol_is_never_called_by_what_another_symbol_is():
    """'the shift $m$', '$m$ is the shift' or 'the candidate g' names a symbol by the kind
    of another row (`tau` is a shift, `c_tilde` the candidate) that its own row does not
    mention: a second meaning. Markdown writes the symbol as $m$ or `m`, Python text bare."""
    kinds, meanings = _kinds(), {s: m.lower() for symbols, m in _rows() for s in symbols}
    others = set().union(*kinds.values())
    named_before = re.compile(rf"\b{ARTICLE} (?:[a-z]+ )?([a-z]+) $")              # the shift |m
    named_after = re.compile(rf"^,? (?:is|denotes|stands for) {ARTICLE} ([a-z]+)(?: ([a-z]+))?")
    wrong = set()
    for where, text, is_markdown in _texts():
        symbol = (r"\$([A-Za-z])\$|`([A-Za-z]\w*)`" if is_markdown
                  else r"(?<![\w.'`])([A-Za-z]\w*)(?=[\s,.;:)]|$)(?! [A-Z]\b)")
        text = _outside_glossary(text)
        for m in re.finditer(symbol, text):
            name = m.group(1) or m.group(2) if is_markdown else m.group(1)
            if name not in meanings:
                continue
            said = named_before.search(text[max(0, m.start() - 40):m.start()])
            words = set(said.groups()) if said else set()
            if re.search(r"(?:^|[.;:(]\s*|\bwhere\s+)$", text[max(0, m.start() - 8):m.start()]):
                said = named_after.match(text[m.end():m.end() + 40])
                words |= set(said.groups()) if said else set()
            kind = {w for w in words if w} & (others - kinds[name])
            if kind and not any(w in meanings[name] for w in kind):
                wrong.add(f"{where}: {name} called a {', '.join(sorted(kind))}")
    assert sorted(wrong) == []


def test_a_vector_of_the_glossary_is_never_an_index():
    """`k` is a key: $\\omega_k$ next to $\\omega_0$, or $z_k$ next to $z_i$, makes it a
    counter. A small letter that the glossary gives to a vector (`q`, `k`, `v`, `g`, `h`,
    `m`, `l`) is an index where a subscript holds it together with arithmetic ($x_{2k}$) or
    where the same base also takes a number or another index; $W_k$, $b_k$ next to $b_q$, and
    $X_{kv}$ name the keys' (and values') side, which is the glossary's meaning."""
    glossary = _glossary()
    vectors = {s for s, is_array in glossary.items() if is_array and re.fullmatch("[a-z]", s)}
    wrong = set()
    for where, text, is_markdown in _texts():
        if not is_markdown:
            continue
        for m in MATH.finditer(_outside_glossary(text)):
            math = re.sub(r"\\(?:mathrm|text|operatorname|mathbf|mathcal)\{[^}]*\}", " ", m.group(1) or m.group(2))
            subscripts = {}                                        # base: [subscripts]
            for sub in re.finditer(r"(\\?[A-Za-z]+)_(\{[^{}]*\}|\w)", math):
                subscripts.setdefault(sub.group(1), []).append(sub.group(2).strip("{}"))
            for base, subs in subscripts.items():
                indices = any(not re.fullmatch(ROLES, s) for s in subs)
                for s in subs:
                    letters = set(re.findall(r"(?<![A-Za-z])[a-z](?![A-Za-z])", s)) & vectors
                    if letters and (not re.fullmatch(ROLES, s) or indices):
                        wrong.add(f"{where}: {base}_{s}")
    assert sorted(wrong) == []


def test_the_lstm_gates_keep_their_letters_to_notebook_01():
    """$i$, $f$, $o$ are the LSTM's gates in notebook 01 only (a row in math form: a machine
    cannot tell an index $i$ from a gate by its shape): no other text calls a letter a gate,
    and notebook 01 uses the three letters only in its LSTM section (its die roll once
    counted faces with $i$)."""
    own = {"course_lib/rnn.py", "autograder/exercises/lm.py"}
    letter = re.compile(r"(?<![\w\\.'])([ifo])(?![\w'\"(])")  # not f"..."
    gate = re.compile(r"\bgates?\b")
    wrong = set()
    section = None
    for where, text, is_markdown in _texts():
        text = _outside_glossary(text)
        if where.startswith("01_"):
            heading = re.search(r"^## (\d+)\.", text, re.M)
            section = heading.group(1) if is_markdown and heading else section
            if section == "8":
                continue
            pieces = ([m.group(1) or m.group(2) for m in MATH.finditer(text)]
                      + re.findall(r"`([^`]+)`", text)) if is_markdown else [text]
            wrong |= {f"{where}: {p.strip()[:40]}" for p in pieces
                      if letter.search(re.sub(r"[\^_](?:\{[^}]*\}|\\?\w)", " ", p))}
        elif where not in own and gate.search(text) and letter.search(text):
            wrong.add(f"{where}: a gate named by a letter")
    assert sorted(wrong) == []
