"""Mutants of an exercise's reference: the single-point bugs a learner could plausibly write.

Trusted side only (the judge and the tests); never staged in the grading sandbox. From the
source of the exercise's reference and of the course functions it calls (``course_lib`` and
the registry, followed a few calls deep), ``mutants(ex)`` makes every single-point change of
the kinds below, each a working function with the reference's signature and a description in
plain words. They serve twice: the graded cases must tell every non-equivalent mutant from the
reference (``tests/test_mutation_adequacy.py``), and a learner whose outputs equal exactly one
mutant's on every graded case is told that mutant's description (``explain``).

Kinds (``Mutant.family``): axis, keepdims, transpose, operands (two sides of an operator or
two arguments swapped), variable (one name for another), bound (a loop or slice bound off by
one), term (a term or factor dropped), sign, constant, function (max/min, sum/mean, exp/exp2,
...), compare (< / <=), brackets (operator precedence), statement (a line dropped, moved into
or out of a loop), copy (an update in place: a ``.copy()`` dropped).

The mutant of a helper (``softmax`` inside the attention reference) is wired in by copying the
callers with their globals re-pointed at the mutated helper: nothing shared is patched, so
mutants can run side by side.
"""
from __future__ import annotations

import ast
import copy
import inspect
import textwrap
import types
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from autograder.exercise import Exercise

FOLLOW = ("course_lib.", "autograder.exercises.")  # whose functions are the reference's code
DEPTH = 2          # calls followed below the first function that does more than call another
MAX_PER_HOST = 1500  # a bound on the mutants of one function (a long reference)

_FLIPS = {"max": "min", "min": "max", "argmax": "argmin", "argmin": "argmax", "maximum": "minimum",
          "minimum": "maximum", "sum": "mean", "mean": "sum", "exp": "exp2", "exp2": "exp",
          "log": "log2", "log2": "log", "log10": "log", "tril": "triu", "triu": "tril",
          "amax": "amin", "amin": "amax", "nanmax": "nanmin", "cumsum": "sum"}
_DROPPABLE = ("sqrt", "exp", "log", "abs", "transpose", "swapaxes", "copy", "float", "int",
              "astype", "round", "floor", "ceil")
_TRANSPOSES = ("transpose", "swapaxes", "moveaxis")
_NOT_SWAPPED = ("where", "arange", "zeros", "ones", "full", "range", "maximum", "minimum", "add",
                "multiply", "logical_and", "logical_or", "hypot", "isclose", "allclose", "array_equal",
                "max", "min", "dict", "print", "isinstance", "getattr", "setdefault", "get", "swapaxes")
_NONCOMMUTATIVE = (ast.Sub, ast.Div, ast.MatMult, ast.Pow, ast.FloorDiv, ast.Mod)
_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.MatMult: "@", ast.Pow: "**",
        ast.FloorDiv: "//", ast.Mod: "%"}
_PREC = {ast.Add: 1, ast.Sub: 1, ast.Mult: 2, ast.Div: 2, ast.MatMult: 2, ast.FloorDiv: 2, ast.Mod: 2,
         ast.Pow: 3}
_CMP = {ast.Lt: (ast.LtE, "<", "<="), ast.LtE: (ast.Lt, "<=", "<"), ast.Gt: (ast.GtE, ">", ">="),
        ast.GtE: (ast.Gt, ">=", ">")}


@dataclass
class Mutant:
    id: str        # stable: "<function>: <before> -> <after>" (with "#k" for a repeat)
    host: str      # the function that holds the change
    site: int      # where in it (the changed node's index in ``ast.walk`` order)
    family: str    # the kind of change (see the module docstring)
    describe: Any  # what the change does, in plain words: a string, or a function making it
    fn: Callable   # the reference with this one change; same signature

    @property
    def words(self) -> str:
        """The description for the learner (made on first use: most mutants never need one)."""
        if callable(self.describe):
            self.describe = self.describe()
        return self.describe


# ----------------------------------------------------------------------------- the call graph
def _source_tree(fn) -> ast.FunctionDef | None:
    """The ``def`` of ``fn`` as an AST (decorators dropped); None for lambdas, closures, C."""
    if not isinstance(fn, types.FunctionType) or fn.__code__.co_freevars or fn.__name__ == "<lambda>":
        return None
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return None
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.FunctionDef):
        return None
    node.decorator_list = []
    return node


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
    tree = _source_tree(fn)
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
        if _source_tree(fn) is not None:
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


# ----------------------------------------------------------------------------- the changes
class _Site:
    """Where a change applies (the index of a node in ``ast.walk`` order) and what it is."""
    __slots__ = ("index", "new", "family", "words")

    def __init__(self, index, new, family, words):
        self.index, self.new, self.family, self.words = index, new, family, words


def _call_name(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _shown(node, public) -> str:
    """``node`` as code when it is short and names only what the learner also names."""
    text = ast.unparse(node)
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} - {"np", "math"}
    return f"`{text}`" if len(text) <= 24 and names <= public else ""


def _in_context(node, new, parents, public) -> str | None:
    """"`after` where `before` belongs", for the largest short expression around ``node``
    that names only what the learner also names; None when there is none."""
    best, up = None, node
    while isinstance(up, ast.expr):
        text = ast.unparse(up)
        names = {n.id for n in ast.walk(up) if isinstance(n, ast.Name)} - {"np", "math"}
        if len(text) > 40:
            break
        if names <= public and up is not node:
            best = up
        up = parents.get(id(up))
    if best is None:
        return None
    twin = copy.deepcopy(best)
    spot = list(ast.walk(best)).index(node)
    target = list(ast.walk(twin))[spot]
    for parent in ast.walk(twin):
        for field, value in ast.iter_fields(parent):
            if value is target:
                setattr(parent, field, new)
            elif isinstance(value, list) and any(v is target for v in value):
                value[[v is target for v in value].index(True)] = new
    return f"`{ast.unparse(twin)}` where `{ast.unparse(best)}` belongs"


def _keyword(node: ast.Call, name):
    return next((k for k in node.keywords if k.arg == name), None)


def _changes(tree: ast.FunctionDef, public: set[str]) -> list[_Site]:
    nodes = list(ast.walk(tree))
    index = {id(n): i for i, n in enumerate(nodes)}
    in_signature = {id(n) for n in ast.walk(tree.args)}  # defaults: the caller passes them
    params = [a.arg for a in tree.args.args + tree.args.kwonlyargs]
    local = {t.id for n in nodes if isinstance(n, (ast.Assign, ast.AugAssign, ast.For, ast.AnnAssign))
             for t in ast.walk(n.target if not isinstance(n, ast.Assign) else ast.Tuple(n.targets))
             if isinstance(t, ast.Name)}
    variables = sorted(set(params) | local)
    parents = {id(child): parent for parent in nodes for child in ast.iter_child_nodes(parent)}
    sites = []

    def add(node, new, family, words):
        sites.append(_Site(index[id(node)], new, family, words))

    def clone(node, **fields):
        new = copy.deepcopy(node)
        for k, v in fields.items():
            setattr(new, k, v)
        return new

    for node in nodes:
        if id(node) in in_signature:
            continue
        if isinstance(node, ast.Call):
            name = _call_name(node)
            what = f"`{name}`" if name else "a call"
            axis = _keyword(node, "axis")
            if axis is not None and isinstance(axis.value, (ast.Constant, ast.UnaryOp, ast.Tuple, ast.Name)):
                old = ast.unparse(axis.value)
                for new_axis in ("-1", "-2", "0", "1", "(-2, -1)", None):
                    if new_axis == old:
                        continue
                    keywords = [k for k in node.keywords if k is not axis]
                    if new_axis is not None:
                        keywords.append(ast.keyword("axis", ast.parse(new_axis, mode="eval").body))
                    over = "over every entry" if new_axis is None else f"over axis {new_axis}"
                    right = f"`{old}`" if isinstance(axis.value, ast.Name) else f"axis {old}"
                    add(node, clone(node, keywords=keywords), "axis", f"{what} is taken {over} instead of over {right}")
            keep = _keyword(node, "keepdims")
            if keep is not None:
                add(node, clone(node, keywords=[k for k in node.keywords if k is not keep]), "keepdims",
                    f"{what} is taken without `keepdims=True`, so the reduced axis is gone and the result "
                    "broadcasts against the wrong axis")
            if name in _FLIPS:
                f = copy.deepcopy(node.func)
                if isinstance(f, ast.Attribute):
                    f.attr = _FLIPS[name]
                else:
                    f.id = _FLIPS[name]
                add(node, clone(node, func=f), "function", f"`{_FLIPS[name]}` is used where `{name}` belongs")
            base = node.args[0] if node.args else node.func.value if isinstance(node.func, ast.Attribute) \
                and not (isinstance(node.func.value, ast.Name) and node.func.value.id in ("np", "math")) else None
            if name in _DROPPABLE and base is not None:
                family = "transpose" if name in _TRANSPOSES else "copy" if name == "copy" else "function"
                words = ("a transpose is missing" if family == "transpose" else
                         "the input is changed in place (a `.copy()` is missing)" if family == "copy" else
                         f"the `{name}` is left out")
                add(node, copy.deepcopy(base), family, words + (f" (of {_shown(base, public)})" if _shown(base, public) else ""))
            if len(node.args) >= 2 and name not in _NOT_SWAPPED:
                for i in range(len(node.args) - 1):
                    j = i + 1
                    if ast.dump(node.args[i]) == ast.dump(node.args[j]) or any(
                            isinstance(a, ast.Starred) for a in node.args[i:j + 1]):
                        continue
                    args = list(copy.deepcopy(node.args))
                    args[i], args[j] = args[j], args[i]
                    add(node, clone(node, args=args), "operands",
                        f"the arguments {i + 1} and {j + 1} of {what} are swapped")
            if name == "where" and len(node.args) == 3:
                args = copy.deepcopy(node.args)
                args[1], args[2] = args[2], args[1]
                add(node, clone(node, args=args), "operands",
                    "the two branches of `np.where` are swapped (the condition picks the other value)")
            if name == "arange" and len(node.args) == 1 and not node.keywords:  # counted from 1
                args = [ast.Constant(1), ast.BinOp(copy.deepcopy(node.args[0]), ast.Add(), ast.Constant(1))]
                add(node, clone(node, args=args), "bound", f"{what} counts from 1 instead of from 0")
            if name == "range":
                for i, arg in enumerate(node.args[:2]):
                    for step in (1, -1):
                        args = list(copy.deepcopy(node.args))
                        args[i] = ast.BinOp(copy.deepcopy(arg), ast.Add() if step > 0 else ast.Sub(), ast.Constant(1))
                        end = "end" if (i == 1 or len(node.args) == 1) else "start"
                        add(node, clone(node, args=args), "bound",
                            f"a loop's {end} is off by one ({'one step too far' if step > 0 else 'one step short'})"
                            if end == "end" else f"a loop starts one step {'late' if step > 0 else 'early'}")
            if len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.BinOp) \
                    and name not in ("range", "len", "float", "int"):
                inner = node.args[0]
                moved = ast.BinOp(clone(node, args=[copy.deepcopy(inner.left)]), inner.op, copy.deepcopy(inner.right))
                shown = _in_context(node, moved, parents, public)
                add(node, moved, "brackets", f"a closing bracket is misplaced: {what} applies to part of its "
                    "argument only" + (f" ({shown})" if shown else ""))
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, (ast.Add, ast.Sub)):
            target = ast.unparse(node.target)
            add(node, ast.Assign([copy.deepcopy(node.target)], copy.deepcopy(node.value)), "statement",
                f"a value is overwritten where it should be accumulated (`=` in place of `{_OPS[type(node.op)]}=`"
                + (f" for `{target}`)" if len(target) <= 24 else ")"))
        elif isinstance(node, ast.Attribute) and node.attr == "T" and isinstance(node.ctx, ast.Load):
            add(node, copy.deepcopy(node.value), "transpose", "a transpose (`.T`) is missing")
        elif isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            op = _OPS[type(node.op)]
            if isinstance(node.op, _NONCOMMUTATIVE):
                add(node, clone(node, left=copy.deepcopy(node.right), right=copy.deepcopy(node.left)), "operands",
                    f"the two sides of a `{op}` are swapped")
            if isinstance(node.op, (ast.Add, ast.Sub)):
                add(node, copy.deepcopy(node.left), "term",
                    f"a term is missing ({_shown(node.right, public) or 'the right-hand side of a ' + repr(op)[1:-1]} is not {'added' if op == '+' else 'subtracted'})")
                flipped = ast.Sub() if isinstance(node.op, ast.Add) else ast.Add()
                add(node, clone(node, op=flipped), "sign",
                    f"a sign is flipped: a term is {'subtracted' if op == '+' else 'added'} where it should be {'added' if op == '+' else 'subtracted'}")
            if isinstance(node.op, (ast.Mult, ast.Div)):
                side = node.right
                add(node, copy.deepcopy(node.left), "term",
                    f"a factor is missing: {'no multiplication' if op == '*' else 'no division'} by "
                    f"{_shown(side, public) or 'one of the factors'}")
                other = ast.Div() if isinstance(node.op, ast.Mult) else ast.Mult()
                add(node, clone(node, op=other), "operands",
                    f"{'a division where a multiplication' if op == '*' else 'a multiplication where a division'} "
                    f"belongs{' (by ' + _shown(side, public) + ')' if _shown(side, public) else ''}")
            for child, right in ((node.left, False), (node.right, True)):
                if not isinstance(child, ast.BinOp) or type(child.op) not in _PREC:
                    continue
                outer, inner = _PREC[type(node.op)], _PREC[type(child.op)]
                if right and outer >= inner and not isinstance(node.op, (ast.Add, ast.Mult)):  # a+(b-c) = a+b-c
                    new = ast.BinOp(ast.BinOp(copy.deepcopy(node.left), node.op, copy.deepcopy(child.left)),
                                    child.op, copy.deepcopy(child.right))
                elif not right and outer > inner:
                    new = ast.BinOp(copy.deepcopy(child.left), child.op,
                                    ast.BinOp(copy.deepcopy(child.right), node.op, copy.deepcopy(node.right)))
                else:
                    continue
                add(node, new, "brackets", "brackets are missing or misplaced, so the operators apply in another order")
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            if isinstance(node.operand, ast.Constant):  # an index or an axis counted from the other end
                add(node, copy.deepcopy(node.operand), "constant",
                    _in_context(node, copy.deepcopy(node.operand), parents, public) or
                    f"{ast.unparse(node.operand)} is used where {ast.unparse(node)} belongs")
            else:
                add(node, copy.deepcopy(node.operand), "sign", f"a minus sign is missing"
                    + (f" (before {_shown(node.operand, public)})" if _shown(node.operand, public) else ""))
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMP:
            new_op, a, b = _CMP[type(node.ops[0])]
            add(node, clone(node, ops=[new_op()]), "compare", f"`{b}` is used where `{a}` belongs (a boundary case)")
        elif isinstance(node, ast.Constant) and type(node.value) in (int, float) and not isinstance(node.value, bool):
            v = node.value
            options = {v * 2, v / 2 if isinstance(v, float) else v // 2 if v % 2 == 0 else v * 3, v + 1, v - 1}
            if v in (1, 0.5, 2):
                options |= {2 if v != 2 else 1, 0.5 if v != 0.5 else 2}
            for new_v in sorted(o for o in options if o != v):
                add(node, ast.Constant(new_v), "constant", lambda node=node, new_v=new_v, v=v: _in_context(
                    node, ast.Constant(new_v), parents, public) or f"the constant {v:g} is {new_v:g} in your code")
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
            for part in ("lower", "upper"):
                bound = getattr(node.slice, part)
                for step in (1, -1):
                    if bound is None:
                        if (part, step) not in (("lower", 1), ("upper", -1)):
                            continue
                        new_bound = ast.Constant(step)
                    else:
                        new_bound = ast.BinOp(copy.deepcopy(bound), ast.Add() if step > 0 else ast.Sub(), ast.Constant(1))
                    new = copy.deepcopy(node)
                    setattr(new.slice, part, new_bound)
                    add(node, new, "bound", f"a slice {'starts' if part == 'lower' else 'ends'} one place "
                        f"{'too late' if step > 0 else 'too early'}")
            if node.slice.upper is not None and node.slice.step is None:  # the whole window moved
                for step in (1, -1):
                    new = copy.deepcopy(node)
                    lower = node.slice.lower if node.slice.lower is not None else ast.Constant(0)
                    op = ast.Add() if step > 0 else ast.Sub()
                    new.slice.lower = ast.BinOp(copy.deepcopy(lower), op, ast.Constant(1))
                    new.slice.upper = ast.BinOp(copy.deepcopy(node.slice.upper), op, ast.Constant(1))
                    add(node, new, "bound", f"a slice is shifted one place {'later' if step > 0 else 'earlier'} "
                        "(it starts and ends one place off)")
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in variables:
            for other in variables:
                if other != node.id:
                    add(node, ast.Name(other, ast.Load()), "variable", lambda node=node, other=other: _in_context(
                        node, ast.Name(other, ast.Load()), parents, public | {other}) or (
                        f"`{other}` is used where `{node.id}` belongs" if node.id in public and other in public
                        else "one variable is used where another belongs"))
        if isinstance(node, (ast.FunctionDef, ast.For, ast.If, ast.With)):
            sites += _statement_changes(node, index, nodes)
    return sites


def _statement_changes(owner, index, nodes) -> list[_Site]:
    """A line dropped (one that updates a name or an array), moved into or out of a loop."""
    sites = []
    body = owner.body
    for i, stmt in enumerate(body):
        updates = isinstance(stmt, ast.AugAssign) or (
            isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and
            isinstance(stmt.targets[0], (ast.Name, ast.Subscript)) and i > 0 and
            any(isinstance(n, ast.Name) and n.id == getattr(stmt.targets[0], "id", getattr(getattr(stmt.targets[0], "value", None), "id", None))
                for n in ast.walk(stmt.value)))
        if updates and len(body) > 1:
            new = copy.deepcopy(owner)
            del new.body[i]
            sites.append(_Site(index[id(owner)], new, "statement", "a line that updates "
                               f"`{ast.unparse(stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target)}` is missing"))
        if isinstance(stmt, ast.For) and stmt.body:
            if len(stmt.body) > 1:  # the loop's last line moved after the loop
                new = copy.deepcopy(owner)
                moved = new.body[i].body.pop()
                new.body.insert(i + 1, moved)
                sites.append(_Site(index[id(owner)], new, "statement", "a line that belongs inside a loop is after it"))
            if i > 0 and not isinstance(body[i - 1], (ast.Return, ast.For)):  # the line before, moved in
                new = copy.deepcopy(owner)
                moved = new.body.pop(i - 1)
                new.body[i - 1].body.insert(0, moved)
                sites.append(_Site(index[id(owner)], new, "statement", "a line that belongs before a loop is inside it"))
    return sites


def _slots(tree: ast.FunctionDef) -> list:
    """Per node (``ast.walk`` order): (parent, field, position in a list field or None)."""
    where = {}
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if isinstance(value, ast.AST):
                where[id(value)] = (parent, field, None)
            elif isinstance(value, list):
                for k, v in enumerate(value):
                    if isinstance(v, ast.AST):
                        where[id(v)] = (parent, field, k)
    return [where.get(id(n)) for n in ast.walk(tree)]


def _put(slot, node):
    parent, field, k = slot
    if k is None:
        setattr(parent, field, node)
    else:
        getattr(parent, field)[k] = node


def _compile_changed(fn, tree: ast.FunctionDef, slots: list, site: _Site, **extra):
    """``fn`` compiled with node ``site.index`` of ``tree`` replaced by ``site.new``: the node
    is swapped in place for the compilation and back after it (no copy of the whole tree)."""
    new = copy.deepcopy(site.new)
    if site.index == 0:
        return _compile(fn, ast.fix_missing_locations(new), **extra)
    slot = slots[site.index]
    old = getattr(slot[0], slot[1]) if slot[2] is None else getattr(slot[0], slot[1])[slot[2]]
    ast.fix_missing_locations(ast.copy_location(new, old))
    _put(slot, new)
    try:
        return _compile(fn, tree, **extra)
    finally:
        _put(slot, old)


def _compile(fn, tree: ast.FunctionDef, **extra):
    module = ast.Module([tree], [])
    scope = dict(fn.__globals__, **extra)
    exec(compile(module, f"<mutant of {fn.__qualname__}>", "exec"), scope)
    new = scope[tree.name]
    new.__defaults__, new.__kwdefaults__ = fn.__defaults__, fn.__kwdefaults__
    return new


GLOSSARY = {"B", "T", "T_q", "T_k", "d_model", "n_heads", "d_k", "d_v", "d_ff", "vocab_size", "X",
            "Q", "K", "V", "S", "A", "mask", "out", "P", "dout", "dQ", "dK", "dV", "dA", "dS",
            "block_q", "block_k", "m", "l", "lse"}  # course_lib/README.md's glossary


def _public_names(ex: Exercise) -> set[str]:
    """Names the learner's code shares with the reference: the signature's, the outputs' and
    the course glossary's."""
    head, _, tail = ex.signature.partition("->")
    inside = head[head.find("(") + 1:head.rfind(")")]
    words = {part.split("=")[0].strip(" *") for part in inside.split(",")}
    returned = tail.split("(")[1].split(")")[0] if tail.strip().startswith("(") else tail.split("(")[0]
    words |= {w.strip() for w in returned.split(",")}
    return {w for w in words if w.isidentifier()} | set(ex.output_names) | GLOSSARY


_MADE: dict[str, tuple] = {}


def mutants(ex: Exercise) -> tuple[Mutant, ...]:
    """Every single-point mutant of ``ex``'s reference (made once per exercise and process)."""
    if ex.id not in _MADE:
        _MADE[ex.id] = _make(ex)
    return _MADE[ex.id]


def _make(ex: Exercise) -> tuple[Mutant, ...]:
    out, seen = [], {}
    public = _public_names(ex)
    for host in hosts(ex.reference, ex.helpers):
        tree = _source_tree(host)
        slots, nodes = _slots(tree), list(ast.walk(tree))
        for site in _changes(tree, public)[:MAX_PER_HOST]:
            try:
                fn = _rebuild(ex.reference, host, _compile_changed(host, tree, slots, site), {})
            except Exception:  # a change that does not compile (a constant in a slice step, ...)
                continue
            if site.family == "statement":
                key = f"{host.__name__}: {site.words}"
            else:
                before = ast.unparse(nodes[site.index]).splitlines()[0][:60]
                key = f"{host.__name__}: {before} -> {ast.unparse(site.new).splitlines()[0][:60]}"
            seen[key] = seen.get(key, 0) + 1
            if seen[key] > 1:
                key += f" #{seen[key]}"
            where = "" if host.__name__ == ex.function else f" (in {host.__name__.strip('_').replace('_', ' ')})"
            words = (lambda w=site.words, where=where: (w() if callable(w) else w) + where) \
                if callable(site.words) else site.words + where
            out.append(Mutant(key, _qualified(host), site.index, site.family, words, fn))
    return tuple(out)


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


def live_sites(ex: Exercise, cases: list) -> set[tuple[str, int]]:
    """(host, site) pairs whose value reaches the outputs on some of ``cases``: the node is
    replaced by a changed value (``_poison``) and the outputs compared. A site never reached,
    or whose value never matters (a cache the exercise does not return), cannot be told from
    the reference by any case; its mutants are left out of the adequacy count."""
    from autograder.transport import as_outputs
    wants = [as_outputs(ex.reference(**c)) for c in cases]
    live = set()
    for host in hosts(ex.reference, ex.helpers):
        tree = _source_tree(host)
        indexes = {site.index for site in _changes(tree, _public_names(ex))}
        nodes, slots = list(ast.walk(tree)), _slots(tree)
        for index in sorted(indexes):
            node = nodes[index]
            if not isinstance(node, ast.expr) or getattr(node, "ctx", None) is not None and not isinstance(node.ctx, ast.Load):
                live.add((_qualified(host), index))
                continue
            poisoned = ast.Call(ast.Name("__poison__", ast.Load()), [copy.deepcopy(node)], [])
            try:
                fn = _rebuild(ex.reference, host, _compile_changed(host, tree, slots, _Site(index, poisoned, "", ""),
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
