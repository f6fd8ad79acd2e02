"""Find forbidden calls in the learner's code, by reading it (never running it).

Two scans over the learner's cells (code cells that nbgrader does not lock):
- ``ALWAYS_FORBIDDEN`` names (the grader itself, dynamic imports, exec) anywhere;
- an exercise's own ``forbidden`` names in the code its function can reach: its ``def``,
  and, followed name by name, whatever that code uses that the learner's cells define or
  import (so a helper in another cell, or ``from course_lib.attention import f as g``,
  is found; ``import numpy as np`` in a set-up cell is not dragged in with its neighbours).
"""
from __future__ import annotations

import ast
import re

from autograder.exercise import ALWAYS_FORBIDDEN, Exercise

_MAGIC = re.compile(r"^\s*[%!]")


def parse(source: str) -> ast.Module | None:
    """Parse a cell, IPython magics and shell lines blanked; None on a syntax error."""
    text = "\n".join("" if _MAGIC.match(line) else line for line in source.splitlines())
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id] + parts[::-1])
    return None


def names_used(node: ast.AST) -> set[str]:
    """Every dotted name read or imported anywhere inside ``node``."""
    found = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Import):
            found.update(alias.name for alias in sub.names)
        elif isinstance(sub, ast.ImportFrom) and sub.module:
            found.add(sub.module)
            found.update(f"{sub.module}.{alias.name}" for alias in sub.names)
        elif isinstance(sub, (ast.Attribute, ast.Name)):
            dotted = _dotted(sub)
            if dotted:
                found.add(dotted)
            if isinstance(sub, ast.Attribute) and sub.attr.startswith("__"):
                found.add(sub.attr)  # `f.__globals__` reaches a module whatever `f` is
    return found


def _hits(used: set[str], banned) -> list[str]:
    return sorted({b for b in banned for u in used if u == b or u.startswith(b + ".")})


def _bindings(trees: list[ast.Module]) -> dict[str, ast.AST]:
    """Top-level name -> the statement that binds it last (trees in notebook order)."""
    bound: dict[str, ast.AST] = {}
    stars: list[ast.AST] = []
    for tree in trees:
        for stmt in tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound[stmt.name] = stmt
            elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
                # one binding per alias, so `from m import a, b` used as `b` never reports `m.a`
                for alias in stmt.names:
                    single = (ast.Import(names=[alias]) if isinstance(stmt, ast.Import)
                              else ast.ImportFrom(module=stmt.module, names=[alias], level=stmt.level))
                    if alias.name == "*":
                        stars.append(single)
                    else:
                        bound[(alias.asname or alias.name).split(".")[0]] = single
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for t in targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            bound[n.id] = stmt
    bound.update({f"*{i}": star for i, star in enumerate(stars)})
    return bound


def _local_names(stmt: ast.AST) -> set[str]:
    """Parameters and names assigned inside a def/class: not followed to other cells."""
    if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return set()
    local = {a.arg for a in ast.walk(stmt) if isinstance(a, ast.arg)}
    local |= {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return local


def forbidden_uses(ex: Exercise, cells: list[tuple[str, bool]]) -> list[str]:
    """The forbidden names ``ex``'s learner code uses (empty when none).

    ``cells``: (source, locked) of the code cells before the graded cell, in notebook order.
    Locked cells are the course's own: not scanned themselves, but a name the learner's code
    takes from them is followed like any other. A name means what its last binding before
    the graded cell says, as it does when the graded cell runs.
    """
    trees = [(parse(src), locked) for src, locked in cells]
    hits = set()
    for tree, locked in trees:
        if tree is not None and not locked:
            hits.update(_hits(names_used(tree), ALWAYS_FORBIDDEN))
    bound = _bindings([tree for tree, _ in trees if tree is not None])
    todo = [bound[n] for n in bound if n == ex.function or n.startswith("*")]
    seen: set[int] = set()
    while todo:
        stmt = todo.pop()
        if id(stmt) in seen:
            continue
        seen.add(id(stmt))
        used = names_used(stmt)
        hits.update(_hits(used, ex.forbidden))
        for name in {u.split(".")[0] for u in used} - _local_names(stmt):
            if name in bound:
                todo.append(bound[name])
    return sorted(hits)
