"""Single-point changes a learner could plausibly make to a function's code, as AST edits. [sandbox]

Used on both sides: by ``autograder.judge.mutation`` (mutants of the reference) and by ``repair``
(edits of the learner's code, in the kernel). ``changes(tree, public)`` lists, for one
parsed ``def``, every change of the kinds below as a ``Site``: the index of the node it
replaces (in ``ast.walk`` order), the replacement node, its kind (``family``) and what it does
in plain words (a string, or a function making it on first use). ``public``: the names the
learner's code shares with the reference (its arguments, its outputs, the course glossary);
only those are shown as code in the words, so the reference's own lines are never pasted.

Kinds: axis, keepdims, transpose, operands (two sides of an operator or two arguments
swapped), variable (one name for another), bound (a loop or slice bound off by one, a slice
shifted, a range counted from 1), term (a term or factor dropped), sign, constant, function
(max/min, sum/mean, exp/exp2, ...), compare (< / <=), brackets (operator precedence, a
misplaced closing bracket), statement (a line dropped, moved into or out of a loop, an update
overwritten), copy (an update in place: a ``.copy()`` dropped); and the contract the exercise's
text states: parameter (one ignored, its default used), dtype (a ``dtype=`` left out), tuple
(an item of the returned tuple dropped).

Each edit is a small function of one node and the ``_Code`` around it (its nodes, parents,
names) that yields its Sites; the tables list them in the order they are made: ``SLIPS`` (the
kinds above), ``CONTRACT`` (the text's promises, the reference's mutants only), ``_lines``;
and for ``repair``, ``UNDOING`` (per node) and ``WHOLE`` (the whole function at once): the
changes that undo them. Adding a kind means adding one function to a table.
"""
from __future__ import annotations

import ast
import copy
import inspect
import io
import itertools
import textwrap
import tokenize
import types

from autograder.kernel.hints import REDUCTIONS

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



ANONYMOUS_SWAP = "one variable is used where another belongs"  # the names are the reference's own


class Site:
    """Where a change applies (the index of a node in ``ast.walk`` order) and what it is;
    ``line``: for a line dropped or moved, that statement (in the original tree)."""
    __slots__ = ("index", "new", "family", "words", "line")

    def __init__(self, index, new, family, words, line=None):
        self.index, self.new, self.family, self.words, self.line = index, new, family, words, line


def _call_name(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _names(node) -> set[str]:
    """The variable names read or written in ``node``."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _shown(node, public) -> str:
    """``node`` as code when it is short and names only what the learner also names."""
    text = ast.unparse(node)
    names = _names(node) - {"np", "math"}
    return f"`{text}`" if len(text) <= 24 and names <= public else ""


def _in_context(node, new, parents, public) -> str | None:
    """"`after` where `before` belongs", for the largest short expression around ``node``
    that names only what the learner also names; None when there is none."""
    pair = in_context(node, new, parents, public)
    return None if pair is None else f"`{pair[1]}` where `{pair[0]}` belongs"


def in_context(node, new, parents, public, longest: int = 40) -> tuple[str, str] | None:
    """(before, after) as code: the largest expression of at most ``longest`` characters
    around ``node`` that names only ``public`` names (None: any), without and with the change
    of ``node`` into ``new``; None when there is none."""
    best, up = None, node
    while isinstance(up, ast.expr):
        text = ast.unparse(up)
        names = _names(up) - {"np", "math"}
        if len(text) > longest:
            break
        if (public is None or names <= public) and up is not node:
            best = up
        up = parents.get(id(up))
    if best is None:
        return None
    return ast.unparse(best), replaced(best, node, new)


def replaced(context, node, new) -> str:
    """``context`` (an expression holding ``node``) as code, with ``node`` replaced by ``new``."""
    twin = copy.deepcopy(context)
    spot = next(i for i, n in enumerate(ast.walk(context)) if n is node)
    target = list(ast.walk(twin))[spot]
    if target is twin:
        return ast.unparse(new)
    for parent in ast.walk(twin):
        for field, value in ast.iter_fields(parent):
            if value is target:
                setattr(parent, field, new)
            elif isinstance(value, list) and any(v is target for v in value):
                value[[v is target for v in value].index(True)] = new
    return ast.unparse(twin)


def _duplicates_a_target(node, new, parents) -> bool:
    """Whether ``new`` in place of ``node`` makes one target of a tuple assignment the same as
    another (``A[o, o], A[o, o] = -s, c``): the first value is then never kept, which no one
    writes; the learner who left out that value did not swap a name, and hearing so misleads."""
    up = node
    while id(up) in parents:
        parent = parents[id(up)]
        if isinstance(parent, ast.Tuple) and isinstance(parent.ctx, ast.Store):
            changed = replaced(up, node, new)
            return any(ast.unparse(other) == changed for other in parent.elts if other is not up)
        if isinstance(parent, ast.stmt):
            return False
        up = parent
    return False


def _keyword(node: ast.Call, name):
    return next((k for k in node.keywords if k.arg == name), None)


def _clone(node, **fields):
    """A deep copy of ``node`` with ``fields`` set to new values."""
    new = copy.deepcopy(node)
    for k, v in fields.items():
        setattr(new, k, v)
    return new


def _what(node: ast.Call) -> str:
    """A call named in words: "`max`", or "a call" when it has no plain name."""
    name = _call_name(node)
    return f"`{name}`" if name else "a call"


class _Code:
    """One parsed ``def`` as the edit families read it: its nodes in ``ast.walk`` order, each
    node's ``index`` there and its parent, and the names and keys an edit may bring in.
    ``public``: the names that may be shown as code (see ``changes``); ``keys``: strings the
    code may look up besides those it names."""

    def __init__(self, tree: ast.FunctionDef, public: set[str], keys=()):
        self.tree, self.public = tree, public
        self.nodes = nodes = list(ast.walk(tree))
        self.index = {id(n): i for i, n in enumerate(nodes)}
        self.parents = {id(child): parent for parent in nodes for child in ast.iter_child_nodes(parent)}
        self.in_signature = {id(n) for n in ast.walk(tree.args)}  # defaults: the caller passes them
        self.params = [a.arg for a in tree.args.args + tree.args.kwonlyargs]
        local = {t.id for n in nodes if isinstance(n, (ast.Assign, ast.AugAssign, ast.For, ast.AnnAssign))
                 for t in ast.walk(n.target if not isinstance(n, ast.Assign) else ast.Tuple(n.targets))
                 if isinstance(t, ast.Name)}
        self.variables = sorted(set(self.params) | local)
        self.defaults = _defaults(tree)
        # for the changes that undo them (``_undoing``)
        self.axis_names = [p for p in self.params if "axis" in p or p == "dim"]
        self.keys = sorted({n.slice.value for n in nodes if isinstance(n, ast.Subscript)
                            and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str)} | set(keys))
        self.loop_names = sorted({n.target.id for n in nodes if isinstance(n, ast.For) and isinstance(n.target, ast.Name)})
        self.held, self.looped, self.own_values = {}, {}, set()  # expression -> the names that hold it, the loop name
        for n in nodes:
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) \
                    and isinstance(n.value, (ast.Subscript, ast.Attribute, ast.Call)):
                self.held.setdefault(ast.dump(n.value), set()).add(n.targets[0].id)
                self.own_values.add(id(n.value))
            if isinstance(n, ast.For) and isinstance(n.target, ast.Name):
                self.looped[ast.dump(n.iter)] = n.target.id

    def site(self, node, new, family: str, words="", line=None) -> Site:
        """The change of ``node`` into ``new``."""
        return Site(self.index[id(node)], new, family, words, line)


def changes(tree: ast.FunctionDef, public: set[str], repair: bool = False, keys=()) -> list[Site]:
    """Every change of the kinds above in ``tree``: the families of ``SLIPS``, then (not for
    ``repair``) of ``CONTRACT``, then ``_lines``, node by node. ``repair``: also the changes
    that undo them (``autograder.kernel.repair`` looks for the one edit that fixes a learner's
    code), with no words (the caller describes them), as an iterator; ``keys``: strings the
    code may look up (the keys of the dicts it is given), besides those it names."""
    code = _Code(tree, public, keys)
    # the learner's own code is not held to the reference's signature
    sites = list(_each(code, SLIPS + (() if repair else CONTRACT) + (_lines,)))
    if repair:  # ordered by how many there are, so the search meets the few kinds soon: a name
        # swapped for another is one site per name and variable (thousands in a tile loop), and a
        # term added, the least likely and the most numerous, is made while tried, last
        swaps = [s for s in sites if s.family == "variable"]
        return itertools.chain([s for s in sites if s.family != "variable"], _undoing(code), swaps,
                               _added_terms(code))
    return sites


def _each(code: _Code, families):
    """The sites of ``families`` (each ``family(node, code)``) at every node outside the
    signature: node by node in walk order, and per node in the order of ``families``."""
    for node in code.nodes:
        if id(node) not in code.in_signature:
            for family in families:
                yield from family(node, code)


def _undoing(code: _Code) -> list[Site]:
    """The changes that undo the kinds of ``changes`` not undone by one of their own kind, and
    slips of a learner's own code: the families of ``UNDOING``, node by node, then those of
    the whole function (``WHOLE``)."""
    return list(_each(code, UNDOING)) + [site for family in WHOLE for site in family(code)]


# ----------------------------------------------------------------------------- slips: a call
def _axis(node, code):
    """A reduction's ``axis=`` another one (-1, -2, 0, 1, the last two) or none (every entry)."""
    axis = _keyword(node, "axis") if isinstance(node, ast.Call) else None
    if axis is None or not isinstance(axis.value, (ast.Constant, ast.UnaryOp, ast.Tuple, ast.Name)):
        return
    old = ast.unparse(axis.value)
    for new_axis in ("-1", "-2", "0", "1", "(-2, -1)", None):
        if new_axis == old:
            continue
        keywords = [k for k in node.keywords if k is not axis]
        if new_axis is not None:
            keywords.append(ast.keyword("axis", ast.parse(new_axis, mode="eval").body))
        over = "over every entry" if new_axis is None else f"over axis {new_axis}"
        right = f"`{old}`" if isinstance(axis.value, ast.Name) else f"axis {old}"
        yield code.site(node, _clone(node, keywords=keywords), "axis",
                        f"{_what(node)} is taken {over} instead of over {right}")


def _keepdims(node, code):
    """A reduction's ``keepdims=True`` left out."""
    keep = _keyword(node, "keepdims") if isinstance(node, ast.Call) else None
    if keep is not None:
        yield code.site(node, _clone(node, keywords=[k for k in node.keywords if k is not keep]), "keepdims",
                        f"{_what(node)} is taken without `keepdims=True`, so the reduced axis is gone and "
                        "the result broadcasts against the wrong axis")


def _flipped_function(node, code):
    """One function for its twin (``_FLIPS``: max/min, sum/mean, exp/exp2, tril/triu, ...)."""
    name = _call_name(node) if isinstance(node, ast.Call) else ""
    if name not in _FLIPS:
        return
    f = copy.deepcopy(node.func)
    if isinstance(f, ast.Attribute):
        f.attr = _FLIPS[name]
    else:
        f.id = _FLIPS[name]
    yield code.site(node, _clone(node, func=f), "function", f"`{_FLIPS[name]}` is used where `{name}` belongs")


def _dropped_call(node, code):
    """A call of ``_DROPPABLE`` left out, its input kept: a transpose, a ``.copy()``, an exp."""
    name = _call_name(node) if isinstance(node, ast.Call) else ""
    if name not in _DROPPABLE:
        return
    base = node.args[0] if node.args else node.func.value if isinstance(node.func, ast.Attribute) \
        and not (isinstance(node.func.value, ast.Name) and node.func.value.id in ("np", "math")) else None
    if base is None:
        return
    family = "transpose" if name in _TRANSPOSES else "copy" if name == "copy" else "function"
    words = ("a transpose is missing" if family == "transpose" else
             "the input is changed in place (a `.copy()` is missing)" if family == "copy" else
             f"the `{name}` is left out")
    shown = _shown(base, code.public)
    yield code.site(node, copy.deepcopy(base), family, words + (f" (of {shown})" if shown else ""))


def _swapped_arguments(node, code):
    """Two neighbouring arguments of a call swapped (not of ``_NOT_SWAPPED``, whose order is
    free or too plain to get wrong)."""
    if not isinstance(node, ast.Call) or len(node.args) < 2 or _call_name(node) in _NOT_SWAPPED:
        return
    for i in range(len(node.args) - 1):
        j = i + 1
        if ast.dump(node.args[i]) == ast.dump(node.args[j]) or any(
                isinstance(a, ast.Starred) for a in node.args[i:j + 1]):
            continue
        args = list(copy.deepcopy(node.args))
        args[i], args[j] = args[j], args[i]
        yield code.site(node, _clone(node, args=args), "operands",
                        f"the arguments {i + 1} and {j + 1} of {_what(node)} are swapped")


def _where_branches(node, code):
    """The two branches of ``np.where(cond, a, b)`` swapped."""
    if isinstance(node, ast.Call) and _call_name(node) == "where" and len(node.args) == 3:
        args = copy.deepcopy(node.args)
        args[1], args[2] = args[2], args[1]
        yield code.site(node, _clone(node, args=args), "operands",
                        "the two branches of `np.where` are swapped (the condition picks the other value)")


def _arange_from_one(node, code):
    """``np.arange(n)`` counted from 1: ``np.arange(1, n + 1)``."""
    if isinstance(node, ast.Call) and _call_name(node) == "arange" and len(node.args) == 1 and not node.keywords:
        args = [ast.Constant(1), ast.BinOp(copy.deepcopy(node.args[0]), ast.Add(), ast.Constant(1))]
        yield code.site(node, _clone(node, args=args), "bound", f"{_what(node)} counts from 1 instead of from 0")


def _range_bounds(node, code):
    """A ``range``'s start or end one step off, either way."""
    if not isinstance(node, ast.Call) or _call_name(node) != "range":
        return
    for i, arg in enumerate(node.args[:2]):
        for step in (1, -1):
            args = list(copy.deepcopy(node.args))
            args[i] = ast.BinOp(copy.deepcopy(arg), ast.Add() if step > 0 else ast.Sub(), ast.Constant(1))
            end = "end" if (i == 1 or len(node.args) == 1) else "start"
            yield code.site(node, _clone(node, args=args), "bound",
                            f"a loop's {end} is off by one ({'one step too far' if step > 0 else 'one step short'})"
                            if end == "end" else f"a loop starts one step {'late' if step > 0 else 'early'}")


def _closed_early(node, code):
    """A call's closing bracket misplaced: ``f(a o b)`` -> ``f(a) o b``."""
    if not isinstance(node, ast.Call) or len(node.args) != 1 or node.keywords \
            or not isinstance(node.args[0], ast.BinOp) or _call_name(node) in ("range", "len", "float", "int"):
        return
    inner = node.args[0]
    moved = ast.BinOp(_clone(node, args=[copy.deepcopy(inner.left)]), inner.op, copy.deepcopy(inner.right))
    shown = _in_context(node, moved, code.parents, code.public)
    yield code.site(node, moved, "brackets", f"a closing bracket is misplaced: {_what(node)} applies to part "
                    "of its argument only" + (f" ({shown})" if shown else ""))


# ----------------------------------------------------------------------------- slips: an operator, a name
def _overwritten(node, code):
    """``+=`` or ``-=`` made ``=``: a value overwritten where it should be accumulated."""
    if isinstance(node, ast.AugAssign) and isinstance(node.op, (ast.Add, ast.Sub)):
        target = ast.unparse(node.target)
        yield code.site(node, ast.Assign([copy.deepcopy(node.target)], copy.deepcopy(node.value)), "statement",
                        f"a value is overwritten where it should be accumulated (`=` in place of "
                        f"`{_OPS[type(node.op)]}=`" + (f" for `{target}`)" if len(target) <= 24 else ")"))


def _dropped_T(node, code):
    """A ``.T`` left out."""
    if isinstance(node, ast.Attribute) and node.attr == "T" and isinstance(node.ctx, ast.Load):
        yield code.site(node, copy.deepcopy(node.value), "transpose", "a transpose (`.T`) is missing")


def _swapped_sides(node, code):
    """The two sides of ``-``, ``/``, ``@``, ``**``, ``//`` or ``%`` swapped."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, _NONCOMMUTATIVE):
        yield code.site(node, _clone(node, left=copy.deepcopy(node.right), right=copy.deepcopy(node.left)),
                        "operands", f"the two sides of a `{_OPS[type(node.op)]}` are swapped")


def _term(node, code):
    """``a + b`` or ``a - b``: the term ``b`` dropped, or its sign flipped."""
    if not isinstance(node, ast.BinOp) or not isinstance(node.op, (ast.Add, ast.Sub)):
        return
    op = _OPS[type(node.op)]
    yield code.site(node, copy.deepcopy(node.left), "term",
                    f"a term is missing ({_shown(node.right, code.public) or 'the right-hand side of a ' + repr(op)[1:-1]}"
                    f" is not {'added' if op == '+' else 'subtracted'})")
    flipped = ast.Sub() if isinstance(node.op, ast.Add) else ast.Add()
    yield code.site(node, _clone(node, op=flipped), "sign", f"a sign is flipped: a term is "
                    f"{'subtracted' if op == '+' else 'added'} where it should be {'added' if op == '+' else 'subtracted'}")


def _factor(node, code):
    """``a * b`` or ``a / b``: the factor ``b`` dropped, or divided where it multiplies (and
    the other way)."""
    if not isinstance(node, ast.BinOp) or not isinstance(node.op, (ast.Mult, ast.Div)):
        return
    op, shown = _OPS[type(node.op)], _shown(node.right, code.public)
    yield code.site(node, copy.deepcopy(node.left), "term",
                    f"a factor is missing: {'no multiplication' if op == '*' else 'no division'} by "
                    f"{shown or 'one of the factors'}")
    other = ast.Div() if isinstance(node.op, ast.Mult) else ast.Mult()
    yield code.site(node, _clone(node, op=other), "operands",
                    f"{'a division where a multiplication' if op == '*' else 'a multiplication where a division'} "
                    f"belongs{' (by ' + shown + ')' if shown else ''}")


def _precedence(node, code):
    """Brackets missing or misplaced around an operand that is itself an operation:
    ``a - (b + c)`` -> ``a - b + c``, ``(a + b) * c`` -> ``a + b * c``."""
    if not isinstance(node, ast.BinOp) or type(node.op) not in _OPS:
        return
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
        yield code.site(node, new, "brackets", "brackets are missing or misplaced, so the operators apply in another order")


def _minus(node, code):
    """A minus sign dropped: an index or an axis counted from the other end (``-1`` -> ``1``),
    or a value negated no more."""
    if not isinstance(node, ast.UnaryOp) or not isinstance(node.op, ast.USub):
        return
    if isinstance(node.operand, ast.Constant):
        yield code.site(node, copy.deepcopy(node.operand), "constant",
                        _in_context(node, copy.deepcopy(node.operand), code.parents, code.public) or
                        f"{ast.unparse(node.operand)} is used where {ast.unparse(node)} belongs")
    else:
        shown = _shown(node.operand, code.public)
        yield code.site(node, copy.deepcopy(node.operand), "sign",
                        "a minus sign is missing" + (f" (before {shown})" if shown else ""))


def _boundary(node, code):
    """``<`` for ``<=`` (and the other way; ``>`` too): a boundary case."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMP:
        new_op, a, b = _CMP[type(node.ops[0])]
        yield code.site(node, _clone(node, ops=[new_op()]), "compare", f"`{b}` is used where `{a}` belongs (a boundary case)")


def _constant(node, code):
    """A number doubled, halved (or tripled, when odd), one more or one less; 0.5, 1 and 2
    for each other."""
    if not isinstance(node, ast.Constant) or type(node.value) not in (int, float) or isinstance(node.value, bool):
        return
    v = node.value
    options = {v * 2, v / 2 if isinstance(v, float) else v // 2 if v % 2 == 0 else v * 3, v + 1, v - 1}
    if v in (1, 0.5, 2):
        options |= {2 if v != 2 else 1, 0.5 if v != 0.5 else 2}
    for new_v in sorted(o for o in options if o != v):
        yield code.site(node, ast.Constant(new_v), "constant", lambda node=node, new_v=new_v, v=v: _in_context(
            node, ast.Constant(new_v), code.parents, code.public) or f"the constant {v:g} is {new_v:g} in your code")


def _slice_bounds(node, code):
    """A slice's start or end one place off, either way (a start given where there is none)."""
    if not isinstance(node, ast.Subscript) or not isinstance(node.slice, ast.Slice):
        return
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
            yield code.site(node, new, "bound", f"a slice {'starts' if part == 'lower' else 'ends'} one place "
                            f"{'too late' if step > 0 else 'too early'}")


def _shifted_window(node, code):
    """A slice with an end moved whole, one place either way."""
    if not isinstance(node, ast.Subscript) or not isinstance(node.slice, ast.Slice) \
            or node.slice.upper is None or node.slice.step is not None:
        return
    for step in (1, -1):
        new = copy.deepcopy(node)
        lower = node.slice.lower if node.slice.lower is not None else ast.Constant(0)
        op = ast.Add() if step > 0 else ast.Sub()
        new.slice.lower = ast.BinOp(copy.deepcopy(lower), op, ast.Constant(1))
        new.slice.upper = ast.BinOp(copy.deepcopy(node.slice.upper), op, ast.Constant(1))
        yield code.site(node, new, "bound", f"a slice is shifted one place {'later' if step > 0 else 'earlier'} "
                        "(it starts and ends one place off)")


def _name_swap(node, code):
    """One variable read where another belongs (never one that makes two targets of a tuple
    assignment the same)."""
    if not isinstance(node, ast.Name) or not isinstance(node.ctx, ast.Load) or node.id not in code.variables:
        return
    for other in code.variables:
        if other != node.id and not _duplicates_a_target(node, ast.Name(other, ast.Load()), code.parents):
            yield code.site(node, ast.Name(other, ast.Load()), "variable", lambda node=node, other=other: _in_context(
                node, ast.Name(other, ast.Load()), code.parents, code.public | {other}) or (
                f"`{other}` is used where `{node.id}` belongs" if node.id in code.public and other in code.public
                else ANONYMOUS_SWAP))


def _lines(owner, code):
    """A line dropped (one that updates a name or an array), moved into or out of a loop, in
    the body of ``owner`` (a ``def``, a loop, an ``if`` or a ``with``)."""
    if not isinstance(owner, (ast.FunctionDef, ast.For, ast.If, ast.With)):
        return
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
            yield code.site(owner, new, "statement", "a line that updates "
                            f"`{ast.unparse(stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target)}` is missing",
                            stmt)
        if isinstance(stmt, ast.For) and stmt.body:
            if len(stmt.body) > 1:  # the loop's last line moved after the loop
                new = copy.deepcopy(owner)
                moved = new.body[i].body.pop()
                new.body.insert(i + 1, moved)
                yield code.site(owner, new, "statement", "a line that belongs inside a loop is after it", stmt.body[-1])
            if i > 0 and not isinstance(body[i - 1], (ast.Return, ast.For)):  # the line before, moved in
                new = copy.deepcopy(owner)
                moved = new.body.pop(i - 1)
                new.body[i - 1].body.insert(0, moved)
                yield code.site(owner, new, "statement", "a line that belongs before a loop is inside it", body[i - 1])


# The slips a learner makes, per node, in this order (each ``family(node, code)`` yields Sites).
SLIPS = (_axis, _keepdims, _flipped_function, _dropped_call, _swapped_arguments, _where_branches,
         _arange_from_one, _range_bounds, _closed_early, _overwritten, _dropped_T, _swapped_sides, _term,
         _factor, _precedence, _minus, _boundary, _constant, _slice_bounds, _shifted_window, _name_swap)


# ----------------------------------------------------------------------------- the contract
def _defaults(tree: ast.FunctionDef) -> dict:
    """Parameter -> its default (a constant, a negated constant or None) from the signature."""
    args = tree.args
    pairs = list(zip(args.args[len(args.args) - len(args.defaults):], args.defaults))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
    return {a.arg: d for a, d in pairs if isinstance(d, ast.Constant) or isinstance(d, ast.UnaryOp)
            and isinstance(d.operand, ast.Constant)}


_PROMISED_KINDS = ("bool", "int", "int8", "int16", "int32", "int64", "intp", "uint8")  # not float:
# numpy's default already, as every float of the course is float64


def _ignored_parameter(node, code):
    """A parameter ignored: its default used whatever the caller passes."""
    if not isinstance(node, ast.Name) or not isinstance(node.ctx, ast.Load) or node.id not in code.defaults:
        return
    default = code.defaults[node.id]
    words = (f"the parameter `{node.id}` is ignored (the code acts as if none were passed)"
             if isinstance(default, ast.Constant) and default.value is None else
             f"the parameter `{node.id}` is ignored (the code uses its default, "
             f"{ast.unparse(default)}, whatever is passed)")
    yield code.site(node, copy.deepcopy(default), "parameter", words)


def _dropped_dtype(node, code):
    """A ``dtype=`` of an integer or boolean kind (``_PROMISED_KINDS``) left out."""
    dtype = _keyword(node, "dtype") if isinstance(node, ast.Call) else None
    if dtype is None or ast.unparse(dtype.value).split(".")[-1].rstrip("_") not in _PROMISED_KINDS:
        return
    new = copy.deepcopy(node)
    new.keywords = [k for k in new.keywords if k.arg != "dtype"]
    yield code.site(node, new, "dtype", f"`dtype={ast.unparse(dtype.value)}` is left out, so numpy picks the type")


def _dropped_item(node, code):
    """An item of the returned tuple left out."""
    if not isinstance(node, ast.Return) or not isinstance(node.value, ast.Tuple) or len(node.value.elts) < 2 \
            or any(isinstance(e, ast.Starred) for e in node.value.elts):
        return
    elts = node.value.elts
    for i, elt in enumerate(elts):
        rest = [copy.deepcopy(e) for j, e in enumerate(elts) if j != i]
        new = rest[0] if len(rest) == 1 else ast.Tuple(rest, ast.Load())
        words = (f"only `{ast.unparse(rest[0])}` is returned, not the tuple "
                 f"({', '.join(ast.unparse(e) for e in elts)})" if len(rest) == 1 else
                 f"the returned tuple leaves out its item {i + 1}, `{ast.unparse(elt)}`")
        yield code.site(node.value, new, "tuple", words)


# What an exercise's text promises, broken once (the reference's mutants only).
CONTRACT = (_ignored_parameter, _dropped_dtype, _dropped_item)


# ----------------------------------------------------------------------------- undoing them (repair)
# the kernel's reductions (``hints``), and here also argmax, argmin, cumsum, all and any
_REDUCTIONS = REDUCTIONS + ("argmax", "argmin", "cumsum", "all", "any")
_NO_KEEPDIMS = ("cumsum", "argmax", "argmin")
_MORE_FLIPS = {"sin": "cos", "cos": "sin", "max": "maximum", "maximum": "max", "min": "minimum",
               "minimum": "min", "std": "var", "var": "std", "exp": "log", "log": "exp"}
_OP_SWAPS = {ast.Mult: ast.Add, ast.Add: ast.Mult, ast.Div: ast.Sub, ast.Sub: ast.Div,
             ast.BitOr: ast.BitAnd, ast.BitAnd: ast.BitOr}
_CMP_MORE = {ast.Gt: (ast.NotEq,), ast.Lt: (ast.NotEq,), ast.GtE: (ast.NotEq,), ast.LtE: (ast.NotEq,),
             ast.Eq: (ast.NotEq,), ast.NotEq: (ast.Eq, ast.Gt)}
_ELEMENTWISE = ("tanh", "sin", "cos", "square", "negative", "reciprocal", "log1p", "expm1")
_JOINS = ("split", "array_split", "concatenate", "stack")
_NOT_DROPPED = ("range", "len", "enumerate", "zip", "list", "tuple", "dict", "set", "sorted", "reversed",
                "print", "isinstance", "int", "float", "bool", "str", "min", "max", "sum", "abs", "round",
                "super", "type", "iter", "next", "map", "filter")


def _loaded(node) -> bool:
    """Whether ``node`` is read (a load, or a call), not written."""
    return isinstance(getattr(node, "ctx", None), ast.Load) or isinstance(node, ast.Call)


def _np_style(node: ast.Call) -> bool:
    """Whether ``node`` calls a function of numpy by name (``np.sum(a)``), not a method (``a.sum()``)."""
    return isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
        and node.func.value.id in ("np", "numpy")


def _call_with(node: ast.Call, **keywords) -> ast.Call:
    """A copy of ``node`` with ``keywords`` (name -> code) given, added or replaced."""
    new = copy.deepcopy(node)
    for k, v in keywords.items():
        value = ast.parse(v, mode="eval").body
        there = _keyword(new, k)
        if there is None:
            new.keywords.append(ast.keyword(k, value))
        else:
            there.value = value
    return new


def _swapped_items(node, code):
    """Two neighbouring items of a tuple or a list swapped."""
    if not _loaded(node) or not isinstance(node, (ast.Tuple, ast.List)):
        return
    for i in range(len(node.elts) - 1):
        if not any(isinstance(e, ast.Starred) for e in node.elts[i:i + 2]) \
                and ast.dump(node.elts[i]) != ast.dump(node.elts[i + 1]):
            new = copy.deepcopy(node)
            new.elts[i], new.elts[i + 1] = new.elts[i + 1], new.elts[i]
            yield code.site(node, new, "operands")


def _held_name(node, code):
    """An expression replaced by the variable assigned it elsewhere (``code.held``)."""
    if _loaded(node) and id(node) not in code.own_values:
        for name in sorted(code.held.get(ast.dump(node), ())):
            yield code.site(node, ast.Name(name, ast.Load()), "variable")


def _loop_item(node, code):
    """``xs[0]`` replaced by the name of a loop over ``xs``."""
    if _loaded(node) and isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
            and ast.dump(node.value) in code.looped:
        yield code.site(node, ast.Name(code.looped[ast.dump(node.value)], ast.Load()), "variable")


def _dropped_slice(node, code):
    """A slice dropped: ``a[i:j]`` -> ``a``."""
    if _loaded(node) and isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        yield code.site(node, copy.deepcopy(node.value), "bound")


def _own_item_dropped(node, code):
    """``own(a, ...)[0]`` -> ``a``: a call of one's own function and its item dropped."""
    if _loaded(node) and isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call) \
            and isinstance(node.value.func, ast.Name) and node.value.args \
            and node.value.func.id not in _NOT_DROPPED:
        yield code.site(node, copy.deepcopy(node.value.args[0]), "function")


def _bracketed(node, code):
    """The value of an assignment or a return with brackets added (``_bracketings``)."""
    if isinstance(node, (ast.Assign, ast.Return)) and isinstance(node.value, ast.BinOp):
        for new in _bracketings(node.value):
            yield code.site(node.value, new, "brackets")


def _axes_added_dropped(node, code):
    """A subscript that only adds axes dropped: ``mask[:, None]`` -> ``mask``."""
    if _loaded(node) and isinstance(node, ast.Subscript) and _adds_axes(node.slice):
        yield code.site(node, copy.deepcopy(node.value), "bound")


def _negated(node, code):
    """A condition the wrong way round: negated, or its ``not`` dropped."""
    if isinstance(node, (ast.If, ast.IfExp, ast.While)):
        test = node.test
        negated = copy.deepcopy(test.operand) if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) \
            else ast.UnaryOp(ast.Not(), copy.deepcopy(test))
        yield code.site(test, negated, "compare")


def _no_leak(node, code):
    """A small float constant made 0: a leak, ``np.where(a > 0, a, 0.01 * a)``."""
    if isinstance(node, ast.Constant) and type(node.value) is float and 0 < abs(node.value) < 0.5:
        yield code.site(node, ast.Constant(0.0), "constant")


def _reduction_axis(node, code):
    """A reduction's axis given or changed: ``axis=-1`` (and ``keepdims=True``) where there is
    none; another axis given by position (``g.mean(0)``); ``keepdims=True`` added, or an axis
    parameter of the function's own given, where there is an axis."""
    if not isinstance(node, ast.Call):
        return
    name, axis = _call_name(node), _keyword(node, "axis")
    if name in _REDUCTIONS and axis is None and len(node.args) == (1 if _np_style(node) else 0):
        yield code.site(node, _call_with(node, axis="-1"), "axis")
        if name not in _NO_KEEPDIMS:
            yield code.site(node, _call_with(node, axis="-1", keepdims="True"), "axis")
    elif _positional_axis(node) is not None:
        for other in ("-1", *code.axis_names):
            if ast.unparse(node.args[-1]) != other:
                new = copy.deepcopy(node)
                new.args[-1] = ast.parse(other, mode="eval").body
                yield code.site(node, new, "axis")
    elif name in _REDUCTIONS and axis is not None:
        if _keyword(node, "keepdims") is None and name not in _NO_KEEPDIMS:
            yield code.site(node, _call_with(node, keepdims="True"), "keepdims")
        for other in code.axis_names:
            if ast.unparse(axis.value) != other:
                yield code.site(node, _call_with(node, axis=other), "axis")


def _more_flips(node, code):
    """One function for a kin of ``_MORE_FLIPS`` (sin/cos, max/maximum, std/var, exp/log)."""
    name = _call_name(node) if isinstance(node, ast.Call) else ""
    if name in _MORE_FLIPS:
        f = copy.deepcopy(node.func)
        setattr(f, "attr" if isinstance(f, ast.Attribute) else "id", _MORE_FLIPS[name])
        new = copy.deepcopy(node)
        new.func = f
        yield code.site(node, new, "function")


def _own_call_dropped(node, code):
    """A call of one's own function dropped (its first argument kept), or its first output
    taken (``[0]``: the first of the tuple it returns)."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or not node.args \
            or _call_name(node) in _NOT_DROPPED:
        return
    yield code.site(node, copy.deepcopy(node.args[0]), "function")
    if not isinstance(code.parents.get(id(node)), ast.Subscript):
        yield code.site(node, ast.Subscript(copy.deepcopy(node), ast.Constant(0), ast.Load()), "tuple")


def _elementwise_dropped(node, code):
    """An elementwise numpy call dropped: ``np.tanh(h)`` where h is tanh already."""
    if isinstance(node, ast.Call) and _np_style(node) and _call_name(node) in _ELEMENTWISE \
            and len(node.args) == 1 and not node.keywords:
        yield code.site(node, copy.deepcopy(node.args[0]), "function")


def _join_axis(node, code):
    """An axis given to ``np.split`` and kin, or another one: ``np.split(z, 4)`` cuts the batch axis."""
    if not isinstance(node, ast.Call) or _call_name(node) not in _JOINS:
        return
    axis = _keyword(node, "axis")
    for other in ("-1", "1", "0", "-2", "2"):
        if axis is None or ast.unparse(axis.value) != other:
            yield code.site(node, _call_with(node, axis=other), "axis")


def _short_block(node, code):
    """A ``range`` stop ``T - step + 1`` (or ``T - step``) made ``T``: the last, shorter block
    is not skipped (``range(0, T - b + 1, b)``)."""
    if not isinstance(node, ast.Call) or _call_name(node) != "range" or len(node.args) != 3:
        return
    stop, step = node.args[1], ast.dump(node.args[2])
    inner = stop.left if isinstance(stop, ast.BinOp) and isinstance(stop.op, ast.Add) \
        and isinstance(stop.right, ast.Constant) and stop.right.value == 1 else stop
    if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Sub) and ast.dump(inner.right) == step:
        new = copy.deepcopy(node)
        new.args[1] = copy.deepcopy(inner.left)
        yield code.site(node, new, "bound")


def _accumulated(node, code):
    """``=`` made ``+=``; a parameter assigned made its ``.copy()`` (the input kept)."""
    if not isinstance(node, ast.Assign) or len(node.targets) != 1 \
            or not isinstance(node.targets[0], (ast.Subscript, ast.Name)):
        return
    yield code.site(node, ast.AugAssign(copy.deepcopy(node.targets[0]), ast.Add(), copy.deepcopy(node.value)),
                    "statement")
    if isinstance(node.value, ast.Name) and node.value.id in code.params:
        new = copy.deepcopy(node)
        new.value = ast.Call(ast.Attribute(copy.deepcopy(node.value), "copy", ast.Load()), [], [])
        yield code.site(node, new, "copy")


def _last_two_axes(node, code):
    """``a.T`` made ``np.swapaxes(a, -1, -2)`` (on a batch, ``.T`` reverses every axis)."""
    if isinstance(node, ast.Attribute) and node.attr == "T" and isinstance(node.ctx, ast.Load):
        yield code.site(node, ast.parse(f"np.swapaxes({ast.unparse(node.value)}, -1, -2)", mode="eval").body,
                        "transpose")


def _size_as_length(node, code):
    """``a.size`` made ``a.shape[-1]`` or ``a.shape[0]``: every entry counted where one axis's
    length was meant."""
    if isinstance(node, ast.Attribute) and node.attr == "size" and isinstance(node.ctx, ast.Load):
        for axis in ("-1", "0"):
            yield code.site(node, ast.parse(f"{ast.unparse(node.value)}.shape[{axis}]", mode="eval").body, "bound")


def _other_operator(node, code):
    """An operator changed for its kin in ``_OP_SWAPS`` (``*``/``+``, ``/``/``-``, ``|``/``&``)."""
    if isinstance(node, ast.BinOp) and type(node.op) in _OP_SWAPS:
        new = copy.deepcopy(node)
        new.op = _OP_SWAPS[type(node.op)]()
        yield code.site(node, new, "operands")


def _regrouped(node, code):
    """Brackets moved: ``(a o b) p c`` -> ``a o (b p c)``, ``a p (b o c)`` -> ``(a p b) o c``,
    ``f(a) o b`` -> ``f(a o b)``."""
    if not isinstance(node, ast.BinOp):
        return
    if isinstance(node.left, ast.BinOp):
        a, b, c = node.left.left, node.left.right, node.right
        yield code.site(node, ast.BinOp(copy.deepcopy(a), node.left.op,
                                        ast.BinOp(copy.deepcopy(b), node.op, copy.deepcopy(c))), "brackets")
    if isinstance(node.right, ast.BinOp):
        a, b, c = node.left, node.right.left, node.right.right
        yield code.site(node, ast.BinOp(ast.BinOp(copy.deepcopy(a), node.op, copy.deepcopy(b)),
                                        node.right.op, copy.deepcopy(c)), "brackets")
    if isinstance(node.left, ast.Call) and len(node.left.args) == 1 and not node.left.keywords \
            and _call_name(node.left) not in ("range", "len", "int", "float"):
        new = copy.deepcopy(node.left)
        new.args = [ast.BinOp(copy.deepcopy(node.left.args[0]), node.op, copy.deepcopy(node.right))]
        yield code.site(node, new, "brackets")


def _other_compare(node, code):
    """A comparison changed beyond a boundary (``_CMP_MORE``: ``>`` -> ``!=``, ``!=`` -> ``==``)."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMP_MORE:
        for op in _CMP_MORE[type(node.ops[0])]:
            new = copy.deepcopy(node)
            new.ops = [op()]
            yield code.site(node, new, "compare")


def _other_key(node, code):
    """A string key changed for another of ``code.keys``; a constant index for a loop's name."""
    if not isinstance(node, ast.Subscript) or not isinstance(node.slice, ast.Constant):
        return
    value = node.slice.value
    others = [k for k in code.keys if k != value] if isinstance(value, str) else \
        code.loop_names if isinstance(value, int) and not isinstance(value, bool) else []
    for other in others:
        new = copy.deepcopy(node)
        new.slice = ast.Constant(other) if isinstance(value, str) else ast.Name(other, ast.Load())
        yield code.site(node, new, "variable")


def _extra_lines(owner, code):
    """In the body of ``owner`` (a ``def``, a loop, an ``if``, a ``with``): an assignment
    dropped (a line too many), the line after a loop moved into it, a loop's first line
    moved before it."""
    if not isinstance(owner, (ast.FunctionDef, ast.For, ast.If, ast.With)):
        return
    body = owner.body
    for i, stmt in enumerate(body):
        if isinstance(stmt, (ast.Assign, ast.AugAssign)) and len(body) > 1:
            new = copy.deepcopy(owner)
            del new.body[i]
            yield code.site(owner, new, "statement", line=stmt)
        if not isinstance(stmt, ast.For):
            continue
        if i + 1 < len(body) and not isinstance(body[i + 1], ast.Return):  # the line after, moved in
            new = copy.deepcopy(owner)
            new.body[i].body.append(new.body.pop(i + 1))
            yield code.site(owner, new, "statement", line=body[i + 1])
        if len(stmt.body) > 1:  # the loop's first line, moved before it
            new = copy.deepcopy(owner)
            new.body.insert(i, new.body[i].body.pop(0))
            yield code.site(owner, new, "statement", line=stmt.body[0])


# The changes that undo the slips not undone by one of their own kind, and slips of a
# learner's own code, per node, in this order (each ``family(node, code)`` yields Sites).
UNDOING = (_swapped_items, _held_name, _loop_item, _dropped_slice, _own_item_dropped, _bracketed,
           _axes_added_dropped, _negated, _no_leak, _reduction_axis, _more_flips, _own_call_dropped,
           _elementwise_dropped, _join_axis, _short_block, _accumulated, _last_two_axes, _size_as_length,
           _other_operator, _regrouped, _other_compare, _other_key, _extra_lines)


def _same_axis_everywhere(code: _Code) -> list[Site]:
    """One misconception repeated: the same axis given to several calls of one function
    (``np.concatenate(..., axis=1)`` for K and again for V, ``g.mean(0)`` twice), all changed
    at once: the whole function replaced, the change said in words, at the first call's line."""
    groups = {}
    for node in code.nodes:
        if not isinstance(node, ast.Call):
            continue
        keyword = _keyword(node, "axis")
        if keyword is not None and _call_name(node) in _REDUCTIONS + _JOINS \
                and isinstance(keyword.value, (ast.Constant, ast.UnaryOp)):
            value = ast.unparse(keyword.value)
        elif _positional_axis(node) is not None:
            value = ast.unparse(node.args[-1])
        else:
            continue
        groups.setdefault((_call_name(node), value), []).append(node)
    sites = []
    for (name, value), calls in groups.items():
        if len(calls) < 2:
            continue
        line = _statement(calls[0], code.parents)
        for other in ("-1", "-2", "0", "1", "2"):
            if other == value:
                continue
            new = copy.deepcopy(code.tree)
            twins = list(ast.walk(new))  # the same walk order as the original's
            for call in calls:
                twin = twins[code.index[id(call)]]
                axis = ast.parse(other, mode="eval").body
                if _keyword(twin, "axis") is not None:
                    _keyword(twin, "axis").value = axis
                else:
                    twin.args[-1] = axis
            each = "both" if len(calls) == 2 else f"all {len(calls)}"
            sites.append(Site(0, new, "axes", f"with axis `{other}` in place of `{value}` in {each} "
                                              f"calls of `{name}`", line))
    return sites


def _every_transpose(code: _Code) -> list[Site]:
    """The same slip repeated: ``.T`` on several batched arrays, where it reverses every axis,
    not the last two (``A.T @ dout`` and ``dS.T @ Q`` in one loop), all made ``np.swapaxes(...,
    -1, -2)`` at once; said in words at the first one's line (as ``_same_axis_everywhere``)."""
    flips = [n for n in code.nodes if isinstance(n, ast.Attribute) and n.attr == "T" and isinstance(n.ctx, ast.Load)]
    if len(flips) < 2:
        return []
    new = copy.deepcopy(code.tree)
    twins = list(ast.walk(new))  # the same walk order as the original's
    chosen = {id(twins[code.index[id(n)]]) for n in flips}

    class Swap(ast.NodeTransformer):
        def visit_Attribute(self, node):
            self.generic_visit(node)
            if id(node) not in chosen:
                return node
            return ast.Call(ast.Attribute(ast.Name("np", ast.Load()), "swapaxes", ast.Load()),
                            [node.value, ast.Constant(-1), ast.Constant(-2)], [])
    new = ast.fix_missing_locations(Swap().visit(new))
    each = "both places" if len(flips) == 2 else f"all {len(flips)} places"
    return [Site(0, new, "axes", f"with `np.swapaxes(…, -1, -2)` in place of `.T` in {each}",
                 _statement(flips[0], code.parents))]


# Changes of the whole function at once (``_undoing``, after the families of ``UNDOING``).
WHOLE = (_same_axis_everywhere, _every_transpose)


def _added_terms(code: _Code):
    """A variable added as a term or a factor (``g`` -> ``g * i``, ``var`` -> ``var + eps``), or
    as a power (``n`` -> ``n ** alpha``, parameters only), to a name, a call or an item; a
    variable multiplied into the value of an assignment or a return. Never a factor that the
    expression or the product around it already holds: ``omega * np.outer(t, omega)`` or
    ``t[:, None] * omega`` -> ``t[:, None] * omega * omega`` squares omega, a fix that hides the
    line where omega went wrong. The new nodes share the old ones (``compile_changed`` copies
    them)."""
    variables, params, parents = code.variables, code.params, code.parents
    for node in code.nodes:
        if id(node) in code.in_signature:
            continue
        if (isinstance(node, ast.Name) and node.id in variables and isinstance(node.ctx, ast.Load)
                or isinstance(node, ast.Call) or isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)) \
                and not _is_callee(node, parents):
            held = _names(node) | _in_product(node, parents)
            for other in variables:
                if getattr(node, "id", None) == other:
                    continue
                for op in (ast.Add(), ast.Mult()) if other not in held else (ast.Add(),):
                    yield code.site(node, ast.BinOp(node, op, ast.Name(other, ast.Load())), "term")
                if other in params:
                    yield code.site(node, ast.BinOp(node, ast.Pow(), ast.Name(other, ast.Load())), "term")
        if isinstance(node, (ast.Assign, ast.Return)) and node.value is not None:
            held = _names(node.value)
            for other in variables:
                if other not in held:
                    yield code.site(node.value, ast.BinOp(ast.Name(other, ast.Load()), ast.Mult(), node.value), "term")


def _statement(node, parents) -> ast.stmt:
    """The statement that holds ``node``."""
    while not isinstance(node, ast.stmt):
        node = parents[id(node)]
    return node


def _positional_axis(node) -> ast.Constant | None:
    """The axis given by position to a reduction (``np.sum(a, 0)``, ``a.mean(1)``), an int
    constant; None for any other node."""
    if not isinstance(node, ast.Call) or _call_name(node) not in _REDUCTIONS or _keyword(node, "axis"):
        return None
    np_style = isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
        and node.func.value.id in ("np", "numpy")
    last = node.args[-1] if len(node.args) == (2 if np_style else 1) else None
    return last if isinstance(last, ast.Constant) and type(last.value) is int else None


def _in_product(node, parents) -> set[str]:
    """The names of the product that ``node`` is a factor of (``t[:, None] * freq``: freq)."""
    names, up = set(), parents.get(id(node))
    while isinstance(up, ast.BinOp) and isinstance(up.op, (ast.Mult, ast.Div, ast.MatMult)):
        names |= _names(up)
        up = parents.get(id(up))
    return names


def _adds_axes(index) -> bool:
    """Whether a subscript's index only adds axes (``[:, None]``, ``[None]``, ``[..., None, :]``)."""
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    empty = lambda p: isinstance(p, ast.Slice) and p.lower is None and p.upper is None and p.step is None
    added = [isinstance(p, ast.Constant) and p.value is None for p in parts]
    return any(added) and all(a or empty(p) or isinstance(p, ast.Constant) and p.value is Ellipsis
                              for a, p in zip(added, parts))


def _is_callee(node, parents) -> bool:
    parent = parents.get(id(node))
    return isinstance(parent, (ast.Call, ast.Attribute)) and getattr(parent, "func", getattr(parent, "value", None)) is node


_BINARY = {"+", "-", "*", "/", "//", "%", "@", "**"}


def _bracketings(expr: ast.BinOp) -> list:
    """``expr`` with one pair of brackets added around two or more of its operands in a row
    (operator precedence: ``a / b * c`` -> ``a / (b * c)``), each as a new expression."""
    text = ast.unparse(expr)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return []
    depth, cuts, previous = 0, [], None  # cuts: (start, end) of each top-level binary operator
    for tok in tokens:
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
        elif depth == 0 and tok.type == tokenize.OP and tok.string in _BINARY and previous is not None \
                and (previous.type in (tokenize.NAME, tokenize.NUMBER, tokenize.STRING) or previous.string in ")]}"):
            cuts.append((tok.start[1], tok.end[1]))
        if tok.type not in (tokenize.NEWLINE, tokenize.ENDMARKER):
            previous = tok
    starts = [0] + [end for _, end in cuts]
    ends = [start for start, _ in cuts] + [len(text)]
    out, seen = [], {ast.dump(expr)}
    for i in range(len(starts)):
        for j in range(i + 1, len(ends)):
            if i == 0 and j == len(ends) - 1:
                continue
            candidate = text[:starts[i]] + " (" + text[starts[i]:ends[j]].strip() + ") " + text[ends[j]:]
            try:
                new = ast.parse(candidate.strip(), mode="eval").body
            except SyntaxError:
                continue
            if ast.dump(new) not in seen:
                seen.add(ast.dump(new))
                out.append(new)
    return out


# ----------------------------------------------------------------------------- applying a change
def parsed_def(fn) -> tuple[ast.FunctionDef, list[str]] | None:
    """The ``def`` of ``fn`` as an AST (decorators dropped) and its source lines (dedented, so
    line numbers count from the ``def``); None for lambdas, closures, C and code without
    source."""
    if not isinstance(fn, types.FunctionType) or fn.__code__.co_freevars or fn.__name__ == "<lambda>":
        return None
    try:
        source = textwrap.dedent(inspect.getsource(fn))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        return None
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.FunctionDef) or node.name != fn.__name__:
        return None
    node.decorator_list = []
    return node, source.splitlines()


def source_tree(fn) -> ast.FunctionDef | None:
    """The ``def`` of ``fn`` as an AST (``parsed_def`` without the lines)."""
    parsed = parsed_def(fn)
    return None if parsed is None else parsed[0]


def slots_of(tree: ast.FunctionDef) -> list:
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


def compile_changed(fn, tree: ast.FunctionDef, slots: list, site: Site, globs: dict | None = None, **extra):
    """``fn`` compiled with node ``site.index`` of ``tree`` replaced by ``site.new``: the node
    is swapped in place for the compilation and back after it (no copy of the whole tree).
    ``globs``: the new function's globals (default: a copy of ``fn``'s, with ``extra``)."""
    new = copy.deepcopy(site.new)
    if site.index == 0:
        return _compile(fn, ast.fix_missing_locations(new), globs, **extra)
    slot = slots[site.index]
    old = getattr(slot[0], slot[1]) if slot[2] is None else getattr(slot[0], slot[1])[slot[2]]
    ast.fix_missing_locations(ast.copy_location(new, old))
    _put(slot, new)
    try:
        return _compile(fn, tree, globs, **extra)
    finally:
        _put(slot, old)


def _compile(fn, tree: ast.FunctionDef, globs: dict | None, **extra):
    module = ast.Module([tree], [])
    made: dict = {}
    exec(compile(module, f"<changed {fn.__qualname__}>", "exec"),
         dict(fn.__globals__, **extra) if globs is None else globs, made)
    new = made[tree.name]
    new.__defaults__, new.__kwdefaults__ = fn.__defaults__, fn.__kwdefaults__
    return new
