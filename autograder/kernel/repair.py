"""Naming a mistake by its fix: one edit of the learner's code after which the cases match. [sandbox]

The mutants of the reference (``autograder.judge.mutation``) name a learner's mistake when the
learner's code behaves like the reference with one change. A learner's code is often written
differently from the reference (a loop where the reference is vectorised, other names, a
helper of their own), and then no mutant of the reference fits. This module turns the search
round: it changes the learner's own function (and the learner's functions it calls) at one
point, with the changes of ``autograder.kernel.operators`` and the ones that undo them, and keeps
the changes after which the outputs equal the expected ones. The learner is then told which
of their lines looks wrong and what makes it right.

It runs where the learner's code runs, never in the judge: in the learner's kernel (the check
cell) and in the grading sandbox (the graded cell). It tries its edits on probe cases: the
public cases and hidden-kind cases drawn from a public seed (``Exercise.probes``), none
of them graded, whose expected outputs come with the cases (anyone can compute them).
A fix found there is run on the graded cases, and the judge names it only if its outputs
equal the reference's on every graded case: the sandbox cannot make a wrong claim pass, and
the grade never depends on this search. The search runs in a forked child with deadlines and
a memory limit (``autograder.kernel.contained``).
"""
from __future__ import annotations

import ast
import copy
import re
import time
import types

import numpy as np

from autograder.kernel.calls import run
from autograder.kernel.contained import Overtime, call_within, in_child
from autograder.kernel.operators import changes, compile_changed, parsed_def, replaced, slots_of
from autograder.kernel.transport import as_outputs, decode_array, encode_array

SEARCH_SECONDS = 3.0  # CPU seconds for the whole search in the graded cell
CHECK_SECONDS = 0.8   # in the check cell, which answers within 2 s
MAX_FIXES = 3         # fixes kept (the judge names one only if they agree on the line)
MAX_TEXT = 300        # characters of a fix's words or line
SHORT = 12            # an expression shorter than this is shown with what holds it,
LONG = 60             # if that is not longer than this


def learner_functions(namespace: dict, function: str) -> list:
    """The learner's ``function`` and the learner's own functions it reads by name."""
    main = namespace.get(function)
    if not isinstance(main, types.FunctionType):
        return []
    out = [main]
    for name in sorted(main.__code__.co_names):
        fn = namespace.get(name)
        if isinstance(fn, types.FunctionType) and fn.__globals__ is main.__globals__ and fn is not main:
            out.append(fn)
    return out


def _close(got, want, rtol: float, atol: float) -> bool:
    if got is None or len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if g.shape != w.shape:
            return False
        if w.dtype.kind == "f" or g.dtype.kind == "f":
            if not np.allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True):
                return False
        elif not np.array_equal(g, w):
            return False
    return True


def _outputs(view: dict, function: str, call: str | None, case: dict):
    try:
        with np.errstate(all="ignore"):
            return call_within(lambda: as_outputs(run(view, function, call, copy.deepcopy(case))))
    except (Exception, Overtime):
        return None


def _keys(value) -> set[str]:
    """The string keys of the dicts in ``value`` (a case's parameters), at any depth."""
    if isinstance(value, dict):
        return {k for k in value if isinstance(k, str)} | set().union(*map(_keys, value.values()))
    if isinstance(value, (list, tuple)):
        return set().union(*map(_keys, value)) if value else set()
    return set()


def _statement_of(node, parents):
    while node is not None and not isinstance(node, ast.stmt):
        node = parents.get(id(node))
    return node


def _where(stmt, new_owner) -> str:
    """Where the statement ``stmt`` ended up in ``new_owner`` (a line moved or dropped)."""
    text = ast.dump(stmt)
    for parent in ast.walk(new_owner):
        body = getattr(parent, "body", None)
        if not isinstance(body, list):
            continue
        for i, s in enumerate(body):
            if ast.dump(s) != text:
                continue
            if isinstance(parent, ast.For) and parent is not new_owner:
                return "inside the loop"
            if i + 1 < len(body) and isinstance(body[i + 1], ast.For):
                return "before the loop"
            if i > 0 and isinstance(body[i - 1], ast.For):
                return "after the loop"
            return "elsewhere"
    return ""


class _Tidy(ast.NodeTransformer):
    """Arithmetic of small integers folded, for the words only: ``n - 1 + 1`` is ``n``,
    ``1 - 1`` is ``0``, ``-0`` is ``0``."""

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if not isinstance(node.op, (ast.Add, ast.Sub)) or not _int(node.right):
            return node
        step = node.right.value if isinstance(node.op, ast.Add) else -node.right.value
        if _int(node.left):
            return ast.Constant(node.left.value + step)
        inner = node.left
        if isinstance(inner, ast.BinOp) and isinstance(inner.op, (ast.Add, ast.Sub)) and _int(inner.right):
            step += inner.right.value if isinstance(inner.op, ast.Add) else -inner.right.value
            inner = inner.left
        if step == 0:
            return inner
        return ast.BinOp(inner, ast.Add() if step > 0 else ast.Sub(), ast.Constant(abs(step)))

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.USub) and _int(node.operand) and node.operand.value == 0:
            return node.operand  # `k=-0` reads as a typo: `k=0`
        return node


_LONG_FLOAT = re.compile(r"(?<![\w.])(\d{7,})\.0(?![\w.])")


def _short_numbers(code: str) -> str:
    """Floats as a learner writes them: ``1000000000000000.0`` (how ``ast.unparse`` gives
    ``1e15``) as ``1e15``."""
    return _LONG_FLOAT.sub(lambda m: f"{float(m.group(1)):g}".replace("e+", "e"), code)


def _int(node) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


def _tidy(code: str) -> str:
    try:
        return ast.unparse(_Tidy().visit(ast.parse(code, mode="eval").body))
    except SyntaxError:  # a statement (`x += 1`)
        return code


def _bare(node, parent) -> bool:
    """Whether ``node`` is the index of a subscript, which reads as code only with its brackets
    (``(:, None)`` is not Python; ``x[:, None]`` is)."""
    return isinstance(parent, ast.Subscript) and parent.slice is node


def _describe(site, nodes, parents, lines, host: str, main: str) -> tuple[str, str] | None:
    """(the learner's line, what to change in it) for ``site``; None when it cannot be said
    shortly."""
    stmt = site.line if site.line is not None else _statement_of(nodes[site.index], parents)
    if stmt is None or not 0 < stmt.lineno <= len(lines):
        return None
    line = lines[stmt.lineno - 1].strip()
    where = "" if host == main else f" (in your `{host}`)"
    if site.family == "axes":  # one change made in several places of the line, said in words
        return line, site.words + where
    if site.line is not None:
        place = _where(site.line, site.new)
        what = "without this line" if not place else f"with this line {place}" if place != "elsewhere" else None
        return (line, what + where) if what else None
    node = context = nodes[site.index]
    while isinstance(parents.get(id(context)), ast.expr) and (
            _bare(context, parents[id(context)]) or len(ast.unparse(context)) < SHORT
            and len(ast.unparse(parents[id(context)])) <= LONG):
        context = parents[id(context)]  # `x` alone says too little: `x + attn` says where
    before, after = _short_numbers(ast.unparse(context)), _short_numbers(_tidy(replaced(context, node, site.new)))
    if len(before) > LONG or len(after) > LONG:  # a wrapper dropped or added: the rest as `…`
        if after in before:
            before, after = before.replace(after, "…", 1), "…"
        elif before in after:
            before, after = "…", after.replace(before, "…", 1)
    if len(before) > LONG or len(after) > LONG or "\n" in before + after:
        return None
    return line, f"with `{after}` in place of `{before}`{where}"


def _search(namespace: dict, function: str, call: str | None, probes: list, wants: list,
            cases: list, rtol: float, atol: float, deadline: float) -> list[dict]:
    view = dict(namespace)  # the learner's functions see each other through this copy
    own = {}
    for fn in learner_functions(namespace, function):
        twin = types.FunctionType(fn.__code__, view, fn.__name__, fn.__defaults__, fn.__closure__)
        twin.__kwdefaults__ = fn.__kwdefaults__
        view[fn.__name__] = own[fn.__name__] = twin
    base = [_outputs(view, function, call, p) for p in probes]
    failing = [i for i, (b, w) in enumerate(zip(base, wants)) if not _close(b, w, rtol, atol)]
    if not failing:
        return []
    order = failing + [i for i in range(len(probes)) if i not in failing]
    keys = sorted(_keys(probes))
    found = []
    for name, fn in own.items():
        parsed = parsed_def(fn)
        if parsed is None:
            continue
        tree, lines = parsed
        nodes, slots = list(ast.walk(tree)), slots_of(tree)
        parents = {id(c): p for p in nodes for c in ast.iter_child_nodes(p)}
        names = {n.id for n in nodes if isinstance(n, ast.Name)}
        for site in changes(tree, names, repair=True, keys=keys):
            if time.process_time() > deadline:
                return found
            try:
                view[name] = compile_changed(fn, tree, slots, site, globs=view)
                if not all(time.process_time() < deadline and
                           _close(_outputs(view, function, call, probes[i]), wants[i], rtol, atol) for i in order):
                    continue
                said = _describe(site, nodes, parents, lines, name, function)
                if said is None or any(f["line"] == said[0] and f["words"] == said[1] for f in found):
                    continue
                results = [_outputs(view, function, call, c) for c in cases]
                found.append({"line": said[0][:MAX_TEXT], "words": said[1][:MAX_TEXT],
                              "results": [None if r is None else [encode_array(a) for a in r] for r in results]})
                if len(found) >= MAX_FIXES:
                    return found
            except Exception:  # a change that does not compile
                continue
            finally:
                view[name] = own[name]
    return found


def fixes(namespace: dict, function: str, call: str | None, probes: list, wants: list, cases: list,
          rtol: float, atol: float, budget: float = SEARCH_SECONDS, wall: float | None = None) -> list[dict]:
    """Single edits of the learner's code after which its outputs equal ``wants`` on every one
    of ``probes`` (at least one of which fails as written), each with its outputs on ``cases``:
    ``{"line": the learner's line, "words": the change, "results": per case, the outputs as
    encoded arrays or None where the changed code raised}``. Empty when the learner's code
    passes every probe, no edit fixes it, or the search found no answer within ``budget``
    CPU seconds (``wall`` on the clock)."""
    if not probes:
        return []
    found = in_child(lambda deadline: _search(namespace, function, call, probes, wants, cases,
                                              rtol, atol, deadline), budget, wall)
    return found or []


def decode_fixes(payload, n_cases: int) -> list[tuple[str, str, list]]:
    """The fixes of a graded cell's payload as (line, words, per case: tuple of arrays or
    None); fixes that are malformed are left out (the sandbox's data is not trusted)."""
    out = []
    for fix in payload if isinstance(payload, list) else []:
        try:
            results = [None if r is None else tuple(decode_array(a) for a in r) for r in fix["results"]]
            if len(results) == n_cases:
                out.append((str(fix["line"])[:MAX_TEXT], str(fix["words"])[:MAX_TEXT], results))
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
    return out[:MAX_FIXES]
