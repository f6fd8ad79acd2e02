"""Find forbidden calls in the learner's code, by reading it (never running it).

Cells are read as the kernel runs them: IPython's own input transformer turns magics and
shell lines into Python first. Two scans follow.

- Anywhere in the learner's cells: ``ALWAYS_FORBIDDEN`` names (the grader, dynamic imports,
  ``exec``, ``globals()``), ``FORBIDDEN_ATTRIBUTES`` (``f.__globals__``, a frame's
  ``f_globals``), ``FORBIDDEN_IMPORTS`` (pickle and friends turn bytes into any function),
  imports of modules that no installed distribution provides (a file the notebook wrote),
  shell commands, and magics outside ``SAFE_MAGICS``.
- In the code the exercise's function can reach: the exercise's own ``forbidden`` modules,
  widened to every ``course_lib`` module that hands out something from them
  (``course_lib.viz`` exposes ``mha_forward``). Reaching means: the function's ``def``, and,
  name by name, whatever global names that code reads, scopes resolved by ``symtable``
  (a parameter or local variable is never mistaken for a global of the same name).

A name may be bound several times before the graded cell. A binding settles it only when it
is a plain top-level statement of a cell that ran without an error; a binding inside
``if``/``for``/``try``/``with``, one made through ``global`` in a function, or one in a cell
that raised may not have happened, so the bindings before it stay in play and are read too.

The scan stops the learner's code from calling the library's answer, however it is
imported; it cannot stop anyone from copying the library's source by hand.
"""
from __future__ import annotations

import ast
import functools
import importlib
import importlib.metadata
import pkgutil
import re
import symtable
import sys
import types
from dataclasses import dataclass

from autograder.exercise import ALWAYS_FORBIDDEN, FORBIDDEN_ATTRIBUTES, FORBIDDEN_IMPORTS, Exercise

# Magics that bring in no code from elsewhere. CODE_MAGICS run their argument (or cell) in
# the namespace, so that text is read as part of the cell.
SAFE_MAGICS = {"matplotlib", "time", "timeit", "prun", "capture", "precision", "pdb", "xmode",
               "who", "whos", "who_ls", "pinfo", "pinfo2", "pdef", "pdoc", "psource",
               "autoreload", "load_ext"}
CODE_MAGICS = {"time", "timeit", "prun", "capture"}
# IPython evaluates `{expr}` in the line of every other magic (`%matplotlib {f := g}`).
NO_EXPANSION = {"time", "timeit", "prun"}
SAFE_EXTENSIONS = {"autoreload"}  # what %load_ext may load
SHELL = "!command (shell)"
_PICKLE = re.compile(r"(^|_)pickle$")  # np.load(allow_pickle=True), np.lib.format.pickle


# --- reading a cell ---------------------------------------------------------------------------

def _magic_code(text: str) -> list[ast.stmt]:
    """The statements in a magic's argument, its leading options dropped (``-n 10 f(x)``)."""
    words = text.split(" ")
    for start in range(len(words)):
        try:
            return ast.parse(" ".join(words[start:]).strip()).body
        except SyntaxError:
            continue
    return []


class _Magics(ast.NodeTransformer):
    """Replace ``get_ipython().run_*_magic(...)`` by the code it runs; note what is refused."""

    def __init__(self):
        self.hits: set[str] = set()

    @staticmethod
    def _call(node):
        """(method, constant args) of a ``get_ipython().<method>(...)`` call, else None."""
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Call)
                and isinstance(node.func.value.func, ast.Name)
                and node.func.value.func.id == "get_ipython"):
            return node.func.attr, [a.value for a in node.args if isinstance(a, ast.Constant)]
        return None

    def _code(self, method, args) -> list[ast.stmt]:
        if method in ("system", "getoutput"):
            self.hits.add(SHELL)
            return []
        if method not in ("run_line_magic", "run_cell_magic") or not args:
            self.hits.add("get_ipython")
            return []
        name, text = args[0], [a for a in args[1:] if isinstance(a, str)]
        if name not in SAFE_MAGICS or (name == "load_ext" and set(" ".join(text).split()) - SAFE_EXTENSIONS):
            self.hits.add(f"%{name}")
            return []
        if name not in NO_EXPANSION and text and "{" in text[0]:
            self.hits.add(f"%{name} {{...}}")
            return []
        return [stmt for t in text for stmt in _magic_code(t)] if name in CODE_MAGICS else []

    def visit_Expr(self, node):
        call = self._call(node.value)
        if call is None:
            return self.generic_visit(node)
        return self._code(*call) or ast.Pass()

    def visit_Call(self, node):
        call = self._call(node)
        if call is None:
            return self.generic_visit(node)
        code = self._code(*call)  # `x = %time f(1)` is `x = f(1)`
        if len(code) == 1 and isinstance(code[0], ast.Expr):
            return code[0].value
        return ast.Constant(None)


@dataclass(frozen=True)
class Cell:
    """A code cell as the scan sees it; ``tree`` is None when it is not valid Python."""
    tree: ast.Module | None
    locked: bool = False
    errored: bool = False  # its outputs hold an error: some statements may not have run
    hits: frozenset = frozenset()  # refused magics and shell commands


def parse(source: str, locked: bool = False, errored: bool = False) -> Cell:
    """A cell, read the way IPython runs it."""
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        tree = ast.parse(TransformerManager().transform_cell(source))
    except (SyntaxError, ValueError):  # the kernel cannot run it either: it defines nothing
        return Cell(None, locked, errored)
    magics = _Magics()
    tree = ast.fix_missing_locations(magics.visit(tree))
    return Cell(tree, locked, errored, frozenset(magics.hits))


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id] + parts[::-1])
    return None


def _imports(node: ast.AST):
    """(module, name imported from it or None) for every absolute import inside ``node``."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Import):
            yield from ((alias.name, None) for alias in sub.names)
        elif isinstance(sub, ast.ImportFrom) and sub.module and not sub.level:
            yield from ((sub.module, alias.name) for alias in sub.names)


def names_used(node: ast.AST) -> set[str]:
    """Every dotted name read or imported inside ``node``, and every forbidden attribute."""
    found = {module if name is None else f"{module}.{name}" for module, name in _imports(node)}
    for sub in ast.walk(node):
        if isinstance(sub, (ast.Attribute, ast.Name)):
            dotted = _dotted(sub)
            if dotted:
                found.add(dotted)
            if isinstance(sub, ast.Attribute) and sub.attr in FORBIDDEN_ATTRIBUTES:
                found.add(sub.attr)  # `f.__globals__` reaches a module whatever `f` is
        elif isinstance(sub, ast.keyword) and sub.arg and _PICKLE.search(sub.arg):
            found.add(sub.arg)
    return found


@functools.lru_cache(maxsize=None)
def _installed_modules() -> frozenset[str]:
    """Top-level modules of the standard library and of installed distributions.

    A file the notebook wrote (next to it, or even into site-packages) belongs to no
    distribution, so importing it is refused rather than trusted.
    """
    return (frozenset(sys.stdlib_module_names) | frozenset(sys.builtin_module_names)
            | frozenset(importlib.metadata.packages_distributions()))


def _hits(used: set[str], banned) -> set[str]:
    return {b for b in banned for u in used if u == b or u.startswith(b + ".")}


def _always_hits(tree: ast.AST) -> set[str]:
    used, modules = names_used(tree), {module for module, _ in _imports(tree)}
    hits = _hits(used, ALWAYS_FORBIDDEN + FORBIDDEN_ATTRIBUTES)
    hits |= {part for u in used for part in u.split(".") if _PICKLE.search(part)}
    hits |= {m for m in modules if m.split(".")[0] in FORBIDDEN_IMPORTS}
    hits |= {f"{m} (not an installed module)" for m in modules
             if m.split(".")[0] not in _installed_modules() and not _hits({m}, ALWAYS_FORBIDDEN)}
    return hits


def _is_check_call(stmt: ast.stmt) -> bool:
    """``check("<id>", globals())``: the course's check cell."""
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    return (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "check"
            and len(call.args) == 2 and not call.keywords and isinstance(call.args[0], ast.Constant)
            and isinstance(call.args[1], ast.Call) and _dotted(call.args[1].func) == "globals"
            and not call.args[1].args and not call.args[1].keywords)


# --- scopes: which global names a statement binds, and which it reads ------------------------

@functools.lru_cache(maxsize=4096)
def _scopes(source: str) -> tuple[frozenset, frozenset]:
    top = symtable.symtable(source, "<cell>", "exec")
    binds = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
    reads = {s.get_name() for s in top.get_symbols() if s.is_referenced()}
    todo = list(top.get_children())
    while todo:  # nested functions, classes, comprehensions
        table = todo.pop()
        todo.extend(table.get_children())
        for s in table.get_symbols():
            if s.is_declared_global() and (s.is_assigned() or s.is_imported()):
                binds.add(s.get_name())
            if s.is_global() and s.is_referenced():
                reads.add(s.get_name())
    return frozenset(binds), frozenset(reads)


def binds_and_reads(stmt: ast.stmt) -> tuple[frozenset, frozenset]:
    """(global names ``stmt`` may bind, global names it reads)."""
    return _scopes(ast.unparse(stmt))


def _settles(stmt: ast.stmt, name: str) -> bool:
    """Whether ``stmt``, once it runs, certainly binds ``name`` (not in a branch or a loop)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return stmt.name == name
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return any((a.asname or a.name).split(".")[0] == name for a in stmt.names)
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return any(isinstance(t, ast.Name) and t.id == name for t in targets)
    return False


def live_bindings(cells: list[Cell]) -> dict[str, list[ast.stmt]]:
    """Name -> the binding statements that may be the live one after ``cells`` ran."""
    live: dict[str, list[ast.stmt]] = {}
    for cell in cells:
        for stmt in cell.tree.body if cell.tree else []:
            for name in binds_and_reads(stmt)[0]:
                if _settles(stmt, name) and not cell.errored:
                    live[name] = [stmt]
                else:
                    live.setdefault(name, []).append(stmt)
    return live


# --- what an exercise forbids -------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def widened(forbidden: tuple[str, ...]) -> tuple[str, ...]:
    """``forbidden`` plus every ``course_lib`` module through which its contents can be reached."""
    import course_lib

    out = set(forbidden)

    def reaches(value) -> bool:
        if value is course_lib:  # the package hands out every submodule
            return any(f.startswith("course_lib.") for f in out)
        origin = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None)
        return isinstance(origin, str) and any(origin == f or origin.startswith(f + ".") for f in out)

    modules = {f"course_lib.{m.name}": importlib.import_module(f"course_lib.{m.name}")
               for m in pkgutil.iter_modules(course_lib.__path__)}
    grew = True
    while grew:  # until no module is added: a module may reach another that reaches the reference
        grew = False
        for name, module in modules.items():
            if name not in out and any(reaches(v) for v in vars(module).values()):
                out.add(name)
                grew = True
    return tuple(sorted(out))


def _exercise_hits(used: set[str], banned: tuple[str, ...]) -> set[str]:
    hits = _hits(used, banned)
    if any(b.startswith("course_lib.") for b in banned):
        hits |= {u for u in used if u in ("course_lib", "course_lib.*")}
    return hits


def forbidden_uses(ex: Exercise, cells: list[tuple]) -> list[str]:
    """The forbidden names ``ex``'s learner code uses (empty when none).

    ``cells``: (source, locked) or (source, locked, errored) of the code cells before the
    graded cell, in notebook order. Locked cells are the course's own: not scanned
    themselves, but a name the learner's code takes from them is followed like any other.
    """
    parsed = [parse(*c) for c in cells]
    learner = [c for c in parsed if not c.locked and c.tree is not None]
    # `check("id", globals())` hands the namespace to the course's check, unless the learner
    # wrote a `check` of their own
    own_check = any("check" in binds_and_reads(s)[0] for c in learner for s in c.tree.body)
    hits = set()
    for cell in learner:
        hits |= cell.hits
        body = [s for s in cell.tree.body if own_check or not _is_check_call(s)]
        hits |= _always_hits(ast.Module(body=body, type_ignores=[]))

    banned, live = widened(tuple(ex.forbidden)), live_bindings(parsed)
    todo = [stmt for name in (ex.function, *ex.helpers) for stmt in live.get(name, [])]
    todo += [node for c in parsed if c.tree for node in ast.walk(c.tree)  # `from m import *` binds anything
             if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names)]
    seen: set[int] = set()
    while todo:
        stmt = todo.pop()
        if id(stmt) in seen:
            continue
        seen.add(id(stmt))
        hits |= _exercise_hits(names_used(stmt), banned)
        for name in binds_and_reads(stmt)[1]:  # builtins too: `sum = ready_made` shadows one
            todo.extend(live.get(name, []))
    return sorted(hits)
