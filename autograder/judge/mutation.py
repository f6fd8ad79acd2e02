"""Mutants of a reference: the single-point bugs a learner might write. [trusted; also the check cell]

Trusted side only (the judge and the tests); never staged in the grading sandbox. From the
source of the exercise's reference and of the course functions it calls (``course_lib`` and
the registry, followed a few calls deep), ``mutants(ex)`` makes every single-point change of
the kinds listed in ``autograder.kernel.operators``, each a working function with the reference's
signature and a description in plain words. They serve twice: the graded cases must tell
every non-equivalent mutant from the reference (``autograder.exercises.adequacy``), and a learner whose
outputs equal exactly one mutant's on every graded case is told that mutant's description
(``autograder.judge.explain``).

The mutant of a helper (``softmax`` inside the attention reference) is wired in by copying the
callers with their globals re-pointed at the mutated helper: nothing shared is patched, so
mutants can run side by side.
"""
from __future__ import annotations

import ast
import copy
import math
import time
import types
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from autograder.judge.exercise import Exercise
from autograder.kernel.operators import Site, changes, compile_changed, slots_of, source_tree
from autograder.kernel.transport import as_outputs

FOLLOW = ("course_lib.", "autograder.exercises.")  # whose functions are the reference's code
DEPTH = 2          # calls followed below the first function that does more than call another
MAX_PER_HOST = 1500  # a bound on the mutants of one function (a long reference)


@dataclass
class Mutant:
    id: str        # stable: "<function>: <before> -> <after>" (see ``_ids``)
    host: str      # the function that holds the change
    site: int      # where in it (the changed node's index in ``ast.walk`` order)
    family: str    # the kind of change (see ``autograder.kernel.operators``)
    describe: Any  # what the change does, in plain words: a string, or a function making it
    fn: Callable   # the reference with this one change; same signature

    @property
    def words(self) -> str:
        """The description for the learner (made on first use: most mutants never need one)."""
        if callable(self.describe):
            self.describe = self.describe()
        return self.describe


# ----------------------------------------------------------------------------- the call graph
def _qualified(fn) -> str:
    """A host's full name: a registry wrapper and the course function it wraps may share one."""
    return f"{fn.__module__}.{fn.__qualname__}"


def _ours(obj) -> bool:
    return isinstance(obj, types.FunctionType) and (obj.__module__ or "").startswith(FOLLOW)


def _names(code) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def callees(fn) -> list[tuple[tuple, Callable]]:
    """The course functions ``fn`` calls: (("global", name) | ("attr", module, name) |
    ("cell", i), function)."""
    out, names = [], _names(fn.__code__)
    for name in sorted(names):
        value = fn.__globals__.get(name)
        if _ours(value):
            out.append((("global", name), value))
        elif isinstance(value, types.ModuleType) and value.__name__.startswith(FOLLOW):
            for attr in sorted(names):
                if _ours(getattr(value, attr, None)):
                    out.append((("attr", name, attr), getattr(value, attr)))
    for i, cell in enumerate(fn.__closure__ or ()):
        try:
            if _ours(cell.cell_contents):
                out.append((("cell", i), cell.cell_contents))
        except ValueError:  # an empty cell
            pass
    return out


def _thin(fn) -> bool:
    """A wrapper that only calls another course function (a lambda, a two-line adapter)."""
    tree = source_tree(fn)
    return tree is None or len(tree.body) <= 2 and sum(
        isinstance(n, ast.Call) for n in ast.walk(tree)) <= 3


def hosts(reference, skip=()) -> list[Callable]:
    """The functions whose code is mutated: the reference's, thin wrappers passed through,
    and the course functions called from there up to ``DEPTH`` calls deep, except those named
    in ``skip`` (the learner's own helpers, graded by their own exercise)."""
    found, seen = [], set()

    def visit(fn, depth):
        if id(fn) in seen or depth > DEPTH or fn.__name__ in skip:
            return
        seen.add(id(fn))
        thin = _thin(fn)
        if source_tree(fn) is not None:
            found.append(fn)
        for _, callee in callees(fn):
            visit(callee, depth if thin else depth + 1)
    visit(reference, 0)
    return found


def _rebuild(fn, target, replacement, memo):
    """``fn`` with every call path to ``target`` re-pointed at ``replacement`` (copies only)."""
    if fn is target:
        return replacement
    if id(fn) in memo:
        return memo[id(fn)]
    memo[id(fn)] = fn  # a cycle (recursion) keeps the original
    globs, cells, changed = None, list(fn.__closure__ or ()), False
    for (kind, *where), callee in callees(fn):
        new = _rebuild(callee, target, replacement, memo)
        if new is callee:
            continue
        changed = True
        if kind == "cell":
            cells[where[0]] = types.CellType(new)
            continue
        globs = globs if globs is not None else dict(fn.__globals__)
        if kind == "global":
            globs[where[0]] = new
        else:
            module, attr = where
            space = globs[module]
            space = space if isinstance(space, types.SimpleNamespace) else types.SimpleNamespace(**vars(space))
            setattr(space, attr, new)
            globs[module] = space
    if not changed:
        return fn
    out = types.FunctionType(fn.__code__, globs if globs is not None else fn.__globals__, fn.__name__,
                             fn.__defaults__, tuple(cells) if cells else None)
    out.__kwdefaults__ = fn.__kwdefaults__
    memo[id(fn)] = out
    return out


GLOSSARY = {"B", "T", "T_q", "T_k", "d_model", "n_heads", "d_k", "d_v", "d_ff", "vocab_size", "X",
            "Q", "K", "V", "S", "A", "mask", "out", "P", "dout", "dQ", "dK", "dV", "dA", "dS",
            "block_q", "block_k", "m", "l", "lse"}  # course_lib/README.md's glossary


def _parameters(ex: Exercise) -> set[str]:
    """The names of the exercise's parameters, from its signature."""
    head = ex.signature.partition("->")[0]
    inside = head[head.find("(") + 1:head.rfind(")")]
    return {part.split("=")[0].strip(" *") for part in inside.split(",")} - {""}


def _public_names(ex: Exercise) -> set[str]:
    """Names the learner's code shares with the reference: the signature's, the outputs' and
    the course glossary's."""
    tail = ex.signature.partition("->")[2]
    words = _parameters(ex)
    returned = tail.split("(")[1].split(")")[0] if tail.strip().startswith("(") else tail.split("(")[0]
    words |= {w.strip() for w in returned.split(",")}
    return {w for w in words if w.isidentifier()} | set(ex.output_names) | GLOSSARY


_MADE: dict[str, tuple] = {}
_MAKING: dict[str, tuple] = {}  # exercise id -> (the mutants made so far, the rest to make)


def mutants(ex: Exercise) -> tuple[Mutant, ...]:
    """Every single-point mutant of ``ex``'s reference (made once per exercise and process)."""
    return mutants_by(ex, math.inf)


def mutants_by(ex: Exercise, deadline: float) -> tuple[Mutant, ...] | None:
    """``mutants(ex)`` if they can be made by ``deadline`` (``time.monotonic``), else None; what
    was made is kept, so a later call goes on from there (the check cell, which answers fast)."""
    if ex.id not in _MADE:
        made, rest = _MAKING.get(ex.id, ((), None))
        made, rest = list(made), _made_stream(ex) if rest is None else rest
        for mutant in rest:
            made.append(mutant)
            if time.monotonic() > deadline:
                _MAKING[ex.id] = (tuple(made), rest)
                return None
        _MAKING.pop(ex.id, None)
        _MADE[ex.id] = tuple(made)
    return _MADE[ex.id]


def _statements(tree) -> dict[int, ast.stmt]:
    """Each node's innermost enclosing statement, by the node's ``id``."""
    out = {}
    def visit(node, stmt):
        stmt = node if isinstance(node, ast.stmt) else stmt
        out[id(node)] = stmt
        for child in ast.iter_child_nodes(node):
            visit(child, stmt)
    visit(tree, None)
    return out


def _short(stmt) -> str:
    """A statement by its head: ``q = …``, ``return …``, ``for k0 in …``, ``if d_model % 2``."""
    if isinstance(stmt, ast.Assign):
        return " = ".join(ast.unparse(t) for t in stmt.targets) + " = …"
    if isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        return ast.unparse(stmt).split("=", 1)[0] + "= …"
    if isinstance(stmt, ast.Return):
        return "return …"
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return f"for {ast.unparse(stmt.target)} in …"
    return ast.unparse(stmt).splitlines()[0][:40].rstrip(":")


def _labels(tree) -> dict[int, str]:
    """Each statement's name in a mutant id, by ``id``: its head (``_short``), or its whole first
    line where two statements of the function share a head (two ``return`` lines)."""
    statements = [node for node in ast.walk(tree) if isinstance(node, ast.stmt) and node is not tree]
    heads = [_short(stmt) for stmt in statements]
    return {id(stmt): head if heads.count(head) == 1 else ast.unparse(stmt).splitlines()[0][:60].rstrip(":")
            for stmt, head in zip(statements, heads)}


def _ids(host, tree, nodes, sites) -> list[str]:
    """Each site's mutant id: ``"<host>: <before> -> <after>"``. A change that the host has in
    more than one place is named by its statement too (``... in `mask = ...` ``), never by a
    position in the function, so that an id stays put when another line of the host moves;
    ``#k`` counts only repeats inside that one statement."""
    within, labels = _statements(tree), _labels(tree)
    plain = []
    for site in sites:
        if site.family == "statement":
            plain.append((f"{host.__name__}: {site.words}", None))
        else:
            node = nodes[site.index]
            before = ast.unparse(node).splitlines()[0][:60]
            plain.append((f"{host.__name__}: {before} -> {ast.unparse(site.new).splitlines()[0][:60]}",
                          within.get(id(node))))
    counts = {}
    for key, _ in plain:
        counts[key] = counts.get(key, 0) + 1
    ids, seen = [], {}
    for key, stmt in plain:
        if counts[key] > 1 and stmt is not None and stmt is not tree:
            key += f" in `{labels[id(stmt)]}`"
        seen[key] = seen.get(key, 0) + 1
        ids.append(key if seen[key] == 1 else f"{key} #{seen[key]}")
    return ids


def _made_stream(ex: Exercise):
    """The mutants of ``ex`` one by one, in a fixed order."""
    public, parameters = _public_names(ex), _parameters(ex)
    for host in hosts(ex.reference, ex.helpers):
        tree = source_tree(host)
        slots, nodes = slots_of(tree), list(ast.walk(tree))
        sites = [site for site in changes(tree, public)[:MAX_PER_HOST]
                 # a helper's switch the exercise never passes: not the text's promise
                 if not (site.family == "parameter" and nodes[site.index].id not in parameters)]
        for site, key in zip(sites, _ids(host, tree, nodes, sites)):
            try:
                fn = _rebuild(ex.reference, host, compile_changed(host, tree, slots, site), {})
            except Exception:  # a change that does not compile (a constant in a slice step, ...)
                continue
            # a course function named in words; a private one of the registry's is no name a learner knows
            where = "" if host.__name__ == ex.function or host.__name__.startswith("_") else \
                f" (in {host.__name__.replace('_', ' ')})"
            words = (lambda w=site.words, where=where: (w() if callable(w) else w) + where) \
                if callable(site.words) else site.words + where
            yield Mutant(key, _qualified(host), site.index, site.family, words, fn)


# ----------------------------------------------------------------------------- what matters
def _poison(value):
    """``value`` changed so that anything computed from it changes too."""
    if isinstance(value, np.ndarray):
        if value.dtype == bool:
            return ~value
        if value.dtype.kind in "iu":
            return value + 1
        if value.dtype.kind in "fc":
            return value * 1.37 + 0.11
        return value
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, np.integer)):
        return value + 1
    if isinstance(value, (float, np.floating)):
        return value * 1.37 + 0.11
    return value


def live_sites(ex: Exercise, cases: list, wants: list) -> set[tuple[str, int]]:
    """(host, site) pairs whose value reaches the outputs on some of ``cases``: the node is
    replaced by a changed value (``_poison``) and the outputs compared. A site never reached,
    or whose value never matters (a cache the exercise does not return), cannot be told from
    the reference by any case; its mutants are left out of the adequacy count. ``wants``: the
    reference's outputs on ``cases``."""
    live = set()
    for host in hosts(ex.reference, ex.helpers):
        tree = source_tree(host)
        indexes = {site.index for site in changes(tree, _public_names(ex))}
        nodes, slots = list(ast.walk(tree)), slots_of(tree)
        for index in sorted(indexes):
            node = nodes[index]
            if not isinstance(node, ast.expr) or getattr(node, "ctx", None) is not None and not isinstance(node.ctx, ast.Load):
                live.add((_qualified(host), index))
                continue
            poisoned = ast.Call(ast.Name("__poison__", ast.Load()), [copy.deepcopy(node)], [])
            try:
                fn = _rebuild(ex.reference, host, compile_changed(host, tree, slots, Site(index, poisoned, "", ""),
                                                                   __poison__=_poison), {})
            except Exception:
                live.add((_qualified(host), index))
                continue
            for case, want in zip(cases, wants):
                try:
                    with np.errstate(all="ignore"):
                        got = as_outputs(fn(**copy.deepcopy(case)))
                except Exception:
                    live.add((_qualified(host), index))
                    break
                if len(got) != len(want) or any(g.shape != w.shape or not np.array_equal(g, w, equal_nan=True)
                                                 for g, w in zip(got, want)):
                    live.add((_qualified(host), index))
                    break
    return live
