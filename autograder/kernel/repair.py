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

Its budget is counted, not timed: it tries at most ``sites`` edits (the exercise's
``search_sites``, calibrated by ``benchmarks/repair_search.py`` to about 3 s on a 2-core machine),
so the same code is told the same thing on a busy machine as on an idle one. The CPU deadline
is a backstop for code far slower than the exercise's own, which is then told less.
"""
from __future__ import annotations

import ast
import copy
import re
import time
import types
from typing import NamedTuple

import numpy as np

from autograder.kernel.calls import run
from autograder.kernel.contained import CALL_SECONDS, Overtime, call_within, in_child
from autograder.kernel.edits import call_name
from autograder.kernel.hints import shorten
from autograder.kernel.operators import changes, compile_changed, parsed_def, replaced, slots_of
from autograder.kernel.transport import as_outputs, decode_array, encode_array


class Fix(NamedTuple):
    """An edit of the learner's line ``line`` (``words``: what to change) with the code's
    outputs on the graded cases after it (``results``, per case, None where it raised);
    ``then``: (line, words) of a second edit made with it; ``partial``: the edit sets part of
    the probes right, not all (the judge may find the rest a listed mistake); ``loose``: the
    cases match whatever value the edit puts in (``_loose``), a coincidence: the line is
    right, the edit teaches nothing."""
    line: str
    words: str
    results: list
    then: tuple | None = None
    partial: bool = False
    loose: bool = False

SEARCH_SITES = 6000   # edits tried at most, where the exercise sets no ``search_sites``
SEARCH_SECONDS = 8.0  # CPU seconds at most (a backstop: the count ends a search at about 3 s)
CHECK_SHARE = 0.3     # of the edits, in the check cell, which answers within 2 s,
CHECK_SECONDS = 1.5   # and its backstop
CALL_FACTOR = 20      # an edited call may take this many times the code's own slowest probe,
CALL_FLOOR = 0.02     # or this many CPU seconds, whichever is more (an edit that makes a loop
                      # run on is cut soon: ten such calls at ``CALL_SECONDS`` were most of a search)
MAX_FIXES = 3         # fixes kept (the judge names one only if they agree on the line)
PARTS = 3             # edits that fix part of the probes, from which a second edit is searched
FIRST_SHARE = 0.6     # of the edits, for single edits when some fix part of the probes but none all
PART = 0.25           # the share of a probe's elements an edit must set right to fix part,
HALF = 0.5            # or the share of the error it may leave
WEAK = 0.8            # an edit that leaves at most this share of the error, or sets more elements
                      # right, fixes part weakly: tried as a first edit only once every single edit was
MAX_TEXT = 300        # characters of a fix's words or line
SHORT = 12            # an expression shorter than this is shown with what holds it,
LONG = 60             # if that is not longer than this
last_search = {}      # how the last search in this process ended, for benchmarks/repair_search.py:
                      # edits tried ("sites"), and "stop": "count", "clock" or "done" (all tried)
SHAPE_ONLY = ("zeros_like", "ones_like", "empty_like", "full_like", "len", "shape", "ndim", "size", "dtype")


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


def _outputs(view: dict, function: str, call: str | None, case: dict, seconds: float = CALL_SECONDS):
    try:
        with np.errstate(all="ignore"):
            return call_within(lambda: as_outputs(run(view, function, call, copy.deepcopy(case))), seconds)
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
    ``1 - 1`` is ``0``, ``-0`` is ``0``; an identity dropped, as a learner writes it:
    ``d_model // 1``, ``x * 1``, ``1 * x``, ``x / 1``, ``x ** 1``, ``0 + x`` are ``d_model``, ``x``;
    ``x * np.zeros(x.shape)`` (or ``np.zeros_like(x)``, either side) is ``np.zeros_like(x)``."""

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Mult):
            for zeros, other in ((node.right, node.left), (node.left, node.right)):
                if _zeros_of(zeros, other):
                    return ast.Call(ast.Attribute(zeros.func.value, "zeros_like"), [other], [])
        if isinstance(node.op, (ast.Mult, ast.Div, ast.FloorDiv, ast.Pow)) and _one(node.right):
            return node.left
        if isinstance(node.op, ast.Mult) and _one(node.left) or isinstance(node.op, ast.Add) and _zero(node.left):
            return node.right
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


def _zeros_of(call, of) -> bool:
    """Whether ``call`` is ``np.zeros(of.shape)`` or ``np.zeros_like(of)`` (any module name)."""
    if not isinstance(call, ast.Call) or call.keywords or len(call.args) != 1 or \
            not isinstance(call.func, ast.Attribute) or not isinstance(call.func.value, ast.Name):
        return False
    arg, same = call.args[0], lambda a, b: ast.dump(a) == ast.dump(b)  # noqa: E731
    return call.func.attr == "zeros_like" and same(arg, of) or call.func.attr == "zeros" and \
        isinstance(arg, ast.Attribute) and arg.attr == "shape" and same(arg.value, of)


def _int(node) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


def _one(node) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) in (int, float) and node.value == 1


def _zero(node) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) in (int, float) and node.value == 0


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
            cases: list, rtol: float, atol: float, deadline: float, sites: int) -> list[dict]:
    """The single edits that fix every probe; failing that, edits of two lines together that
    do, searched from the edits that fix part (``_better``; the first ``FIRST_SHARE`` of the
    ``sites`` edits tried go to single edits where one fixes part strongly; where those that
    fix part do so only weakly, every single edit is tried first); failing that, those partial edits
    (``partial``), for the judge to hold against the listed mistakes."""
    view = dict(namespace)  # the learner's functions see each other through this copy
    own = {}
    for fn in learner_functions(namespace, function):
        twin = types.FunctionType(fn.__code__, view, fn.__name__, fn.__defaults__, fn.__closure__)
        twin.__kwdefaults__ = fn.__kwdefaults__
        view[fn.__name__] = own[fn.__name__] = twin
    base, slowest = [], 0.0
    for p in probes:
        start = time.process_time()
        base.append(_outputs(view, function, call, p))
        slowest = max(slowest, time.process_time() - start)
    limit = min(CALL_SECONDS, max(CALL_FLOOR, CALL_FACTOR * slowest))
    failing = [i for i, (b, w) in enumerate(zip(base, wants)) if not _close(b, w, rtol, atol)]
    if not failing:
        return []
    order = failing + [i for i in range(len(probes)) if i not in failing]
    first = failing[0]
    before = _matching(base[first], wants[first], rtol, atol)
    keys = sorted(_keys(probes))
    found, partly = [], []  # partly: (score, name, site, said) of edits that fix part
    tried, first_end = 0, int(FIRST_SHARE * sites)
    last_search.clear()
    last_search.update(sites=0, stop="done")

    def fixed_by(name, fn, tree, slots, site) -> tuple[bool, tuple | None]:
        """(whether ``site`` fixes every probe, its score where it fixes part)."""
        view[name] = compile_changed(fn, tree, slots, site, globs=view)
        got = _outputs(view, function, call, probes[first], limit)
        if not _close(got, wants[first], rtol, atol):
            return False, _better(_matching(got, wants[first], rtol, atol), before)
        for n, i in enumerate(order[1:], start=1):
            if time.process_time() > deadline or \
                    not _close(_outputs(view, function, call, probes[i], limit), wants[i], rtol, atol):
                return False, ((3, n) if i in failing else None)
        return True, None

    for name, fn in own.items():
        parsed = parsed_def(fn)
        if parsed is None:
            continue
        tree, lines = parsed
        nodes, slots = list(ast.walk(tree)), slots_of(tree)
        parents = {id(c): p for p in nodes for c in ast.iter_child_nodes(p)}
        names = {n.id for n in nodes if isinstance(n, ast.Name)}
        for site in changes(tree, names, repair=True, keys=keys):
            strong = partly and partly[0][0][0] >= 0  # weak partial edits wait for every single edit
            if tried >= (first_end if strong and not found else sites) or time.process_time() > deadline:
                last_search["stop"] = "clock" if time.process_time() > deadline else \
                    "count" if tried >= sites else "done"  # or on to second edits
                break  # nothing fixes it all yet, but something fixes part: a second edit next
            tried += 1
            last_search["sites"] = tried
            try:
                ok, score = fixed_by(name, fn, tree, slots, site)
                if not ok and score is None:
                    continue
                said = _describe(site, nodes, parents, lines, name, function)
                if said is None:
                    continue
                if not ok:
                    if all(p[3] != said for p in partly):
                        partly = sorted(partly + [(score, name, site, said)], key=lambda p: p[0], reverse=True)[:PARTS]
                    continue
                if any(f["line"] == said[0] and f["words"] == said[1] for f in found):
                    continue
                loose = _loose(site, fn, tree, slots, parents, nodes,
                               lambda: all(_close(_outputs(view, function, call, probes[i], limit), wants[i], rtol, atol)
                                           for i in order), name, view)
                view[name] = compile_changed(fn, tree, slots, site, globs=view)
                found.append(_with_results(said, view, function, call, cases, loose=loose))
                if sum(not f.get("loose") for f in found) >= MAX_FIXES or len(found) >= 2 * MAX_FIXES:
                    return _kept(found)
            except Exception:  # a change that does not compile
                continue
            finally:
                view[name] = own[name]
    if found or not partly:
        return _kept(found)
    return _second_edits(partly, own, view, function, call, probes, wants, order, cases, keys,
                         rtol, atol, deadline, sites - tried, limit)


def _kept(found: list[dict]) -> list[dict]:
    """The fixes to report: those whose value matters first (``_loose``), at most ``MAX_FIXES``."""
    return sorted(found, key=lambda f: bool(f.get("loose")))[:MAX_FIXES]


def _perturbations(value: ast.expr) -> list[ast.expr]:
    """``value`` negated, with one added, doubled: three other values of the same kind."""
    return [ast.UnaryOp(ast.USub(), copy.deepcopy(value)),
            ast.BinOp(copy.deepcopy(value), ast.Add(), ast.Constant(1)),
            ast.BinOp(ast.Constant(2), ast.Mult(), copy.deepcopy(value))]


def _loose(site, fn, tree, slots, parents, nodes, fixes_all, name, view) -> bool:
    """Whether the cases match whatever value ``site`` (an edit that fixes every probe) puts
    in: with that value negated, one added or doubled (``_perturbations``), every probe still
    matches (``fixes_all()``, with ``view[name]`` the changed function), for the whole new
    expression or, for a term added, for the term. Such an edit works by coincidence, not by
    what it computes: ``m_new = m + block_k`` where the learner's ``m_new = m`` aliases an
    array that is then overwritten (a copy is what mattered), ``T + block(x)`` before a layer
    norm that ignores any shift. A value used for its shape only (``np.zeros_like(W)``,
    ``len(xs)``) is expected not to matter and is not tried."""
    new = site.new
    if site.line is not None or not isinstance(new, ast.expr):
        return False
    parent = parents.get(id(nodes[site.index]))
    spots = []  # (the value to vary, how to put a varied copy back into the edit)
    if not (isinstance(parent, ast.Call) and parent.args and parent.args[0] is nodes[site.index]
            and call_name(parent) in SHAPE_ONLY or isinstance(parent, ast.Attribute) and parent.attr in SHAPE_ONLY):
        spots.append((new, lambda v: v))
    if site.family == "term" and isinstance(new, ast.BinOp):
        side = "right" if isinstance(new.right, ast.Name) else "left"
        spots.append((getattr(new, side), lambda v, side=side: _with_side(new, side, v)))
    for value, put in spots:
        if all(_fixes_with(fn, tree, slots, site, put(v), fixes_all, name, view) for v in _perturbations(value)):
            return True
    return False


def _with_side(node: ast.BinOp, side: str, value) -> ast.BinOp:
    twin = copy.copy(node)
    setattr(twin, side, value)
    return twin


def _fixes_with(fn, tree, slots, site, new, fixes_all, name, view) -> bool:
    try:
        view[name] = compile_changed(fn, tree, slots, type(site)(site.index, new, site.family, ""), globs=view)
    except Exception:  # a variant that does not compile
        return False
    return fixes_all()


def _matching(got, want, rtol: float, atol: float) -> tuple[int, float, float] | None:
    """(outputs equal to the expected ones, the share of all expected elements matched, the
    mean error relative to the expected values' mean size) of one probe's outputs; None where
    they do not compare (raised, another number or shape)."""
    if got is None or len(got) != len(want) or any(g.shape != w.shape or g.dtype.kind not in "biuf"
                                                   for g, w in zip(got, want)):
        return None
    g64, w64 = [g.astype(np.float64) for g in got], [w.astype(np.float64) for w in want]
    with np.errstate(all="ignore"):
        same = [np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True) for g, w in zip(g64, w64)]
        error = sum(float(np.sum(np.abs(g - w))) if np.isfinite(g).all() or not np.isfinite(w).all()
                    else np.inf for g, w in zip(g64, w64))  # NaN where a number belongs: no nearer
        size = sum(float(np.nansum(np.abs(w))) for w in w64)
    total = sum(s.size for s in same)
    if not total:
        return None
    return sum(bool(s.all()) for s in same), sum(int(s.sum()) for s in same) / total, error / (size or 1.0)


def _better(now, before) -> tuple | None:
    """How an edit's outputs on the first failing probe improve on the code's own (``_matching``),
    as a score to rank the edits that may fix one of two mistakes: more outputs right (2),
    a larger share of elements right (1), or half the error or less (0); weakly (-1): a few more
    elements right, or ``WEAK`` of the error or less; None: no better."""
    if now is None or before is None or now[0] < before[0] or now[1] < before[1]:
        return None
    if now[0] > before[0]:
        return 2, now[0] - before[0]
    if now[1] >= before[1] + PART:
        return 1, now[1] - before[1]
    finite = 0 < before[2] < np.inf
    if finite and now[2] <= HALF * before[2]:
        return 0, -now[2] / before[2]
    if now[1] > before[1] and now[2] <= before[2] or finite and now[2] <= WEAK * before[2]:
        return -1, now[1] - before[1] - now[2] / before[2] if finite else now[1] - before[1]
    return None


def _with_results(said, view, function, call, cases, then=None, partial=False, loose=False) -> dict:
    """A fix as the graded cell reports it: the line, the change, its outputs on ``cases``."""
    results = [_outputs(view, function, call, c) for c in cases]
    fix = {"line": _said(said[0]), "words": _said(said[1]),
           "results": [None if r is None else [encode_array(a) for a in r] for r in results]}
    if then is not None:
        fix["then"] = {"line": _said(then[0]), "words": _said(then[1])}
    if partial:
        fix["partial"] = True
    if loose:
        fix["loose"] = True
    return fix


def _second_edits(partly, own, view, function, call, probes, wants, order, cases, keys,
                  rtol, atol, deadline, sites: int, limit: float) -> list[dict]:
    """Edits of the learner's code made after one of the partial edits ``partly`` that,
    together with it, fix every probe (two mistakes, two edits; ``sites`` tried at most, each
    call within ``limit`` CPU seconds);
    else the partial edits themselves, with their outputs on ``cases``."""
    found, tried = [], 0
    for _, name, site, said in partly:
        fn = own[name]
        tree, lines = parsed_def(fn)
        once = _applied(tree, site)
        nodes, slots = list(ast.walk(once)), slots_of(once)
        parents = {id(c): p for p in nodes for c in ast.iter_child_nodes(p)}
        names = {n.id for n in nodes if isinstance(n, ast.Name)}
        for second in changes(once, names, repair=True, keys=keys):
            if tried >= sites or time.process_time() > deadline:
                last_search["stop"] = "clock" if time.process_time() > deadline else "count"
                break
            tried += 1
            last_search["sites"] = last_search.get("sites", 0) + 1
            try:
                view[name] = compile_changed(fn, once, slots, second, globs=view)
                if not all(time.process_time() < deadline and
                           _close(_outputs(view, function, call, probes[i], limit), wants[i], rtol, atol) for i in order):
                    continue
                then = _describe(second, nodes, parents, lines, name, function)
                if then is None or then == said:
                    continue
                if _loose(second, fn, once, slots, parents, nodes, lambda: all(
                        _close(_outputs(view, function, call, probes[i], limit), wants[i], rtol, atol) for i in order),
                          name, view):
                    continue  # a second edit that matches by coincidence: look further
                view[name] = compile_changed(fn, once, slots, second, globs=view)
                found.append(_with_results(said, view, function, call, cases, then=then))
                break  # one second edit per first: the judge names a pair only where it is the only one
            except Exception:  # a change that does not compile
                continue
            finally:
                view[name] = own[name]
    if found:
        return found[:MAX_FIXES]
    out = []
    for _, name, site, said in partly:  # what one edit explains: the judge looks at the rest
        fn = own[name]
        tree, _ = parsed_def(fn)
        try:
            view[name] = compile_changed(fn, tree, slots_of(tree), site, globs=view)
            out.append(_with_results(said, view, function, call, cases, partial=True))
        except Exception:
            continue
        finally:
            view[name] = own[name]
    return out


def _applied(tree: ast.FunctionDef, site) -> ast.FunctionDef:
    """A copy of ``tree`` with ``site`` applied (its line numbers kept, for the words)."""
    if site.index == 0:
        return ast.fix_missing_locations(copy.deepcopy(site.new))
    once = copy.deepcopy(tree)
    slot = slots_of(once)[site.index]
    old = getattr(slot[0], slot[1]) if slot[2] is None else getattr(slot[0], slot[1])[slot[2]]
    new = ast.fix_missing_locations(ast.copy_location(copy.deepcopy(site.new), old))
    if slot[2] is None:
        setattr(slot[0], slot[1], new)
    else:
        getattr(slot[0], slot[1])[slot[2]] = new
    return once


def fixes(namespace: dict, function: str, call: str | None, probes: list, wants: list, cases: list,
          rtol: float, atol: float, budget: float = SEARCH_SECONDS, wall: float | None = None,
          sites: int = SEARCH_SITES) -> list[dict]:
    """Single edits of the learner's code after which its outputs equal ``wants`` on every one
    of ``probes`` (at least one of which fails as written), each with its outputs on ``cases``:
    ``{"line": the learner's line, "words": the change, "results": per case, the outputs as
    encoded arrays or None where the changed code raised}``. Empty when the learner's code
    passes every probe or no edit of the ``sites`` tried fixes it, and also when the search
    ran past ``budget`` CPU seconds (``wall`` on the clock: a backstop)."""
    if not probes:
        return []
    found = in_child(lambda deadline: _search(namespace, function, call, probes, wants, cases,
                                              rtol, atol, deadline, sites), budget, wall)
    return found or []


def _said(text) -> str:
    """A fix's line or words, as text, at most ``MAX_TEXT`` characters."""
    return shorten(str(text), MAX_TEXT)


def decode_fixes(payload, n_cases: int) -> list[Fix]:
    """The fixes of a graded cell's payload; fixes that are malformed are left out (the
    sandbox's data is not trusted)."""
    out = []
    for fix in payload if isinstance(payload, list) else []:
        try:
            results = [None if r is None else tuple(decode_array(a) for a in r) for r in fix["results"]]
            then = fix.get("then")
            then = None if then is None else (_said(then["line"]), _said(then["words"]))
            if len(results) == n_cases:
                out.append(Fix(_said(fix["line"]), _said(fix["words"]), results, then,
                               fix.get("partial") is True, fix.get("loose") is True))
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError):
            continue
    return out[:MAX_FIXES]
