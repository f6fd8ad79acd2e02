"""The single-point slips a learner makes in a function's code, as AST edits. [sandbox]

Used on both sides (through ``operators.changes``): for the mutants of the reference
(``autograder.judge.mutation``) and for repair (edits of the learner's code, in the kernel).
Each family is a function of one node and the ``Code`` around it (``edits``) that yields its
Sites, with what the change does in plain words (a string, or a function making it on first
use); only the names in ``code.public`` are shown as code in the words, so the reference's own
lines are never pasted. ``SLIPS``: the slips of one node, in the order they are made;
``LINES``: a line dropped or moved (made after ``operators.CONTRACT``). Adding a kind of slip
means adding one function to a table.
"""
from __future__ import annotations

import ast
import copy

from autograder.kernel.edits import call_name, clone, in_context, keyword_arg, names_in, replaced


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


def _shown(node, public) -> str:
    """``node`` as code when it is short and names only what the learner also names."""
    text = ast.unparse(node)
    names = names_in(node) - {"np", "math"}
    return f"`{text}`" if len(text) <= 24 and names <= public else ""


def _in_context(node, new, parents, public) -> str | None:
    """"`after` where `before` belongs", for the largest short expression around ``node``
    that names only what the learner also names; None when there is none."""
    pair = in_context(node, new, parents, public)
    return None if pair is None else f"`{pair[1]}` where `{pair[0]}` belongs"


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


def _what(node: ast.Call) -> str:
    """A call named in words: "`max`", or "a call" when it has no plain name."""
    name = call_name(node)
    return f"`{name}`" if name else "a call"


# ----------------------------------------------------------------------------- slips: a call
def _axis(node, code):
    """A reduction's ``axis=`` another one (-1, -2, 0, 1, the last two) or none (every entry)."""
    axis = keyword_arg(node, "axis") if isinstance(node, ast.Call) else None
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
        yield code.site(node, clone(node, keywords=keywords), "axis",
                        f"{_what(node)} is taken {over} instead of over {right}")


def _keepdims(node, code):
    """A reduction's ``keepdims=True`` left out."""
    keep = keyword_arg(node, "keepdims") if isinstance(node, ast.Call) else None
    if keep is not None:
        yield code.site(node, clone(node, keywords=[k for k in node.keywords if k is not keep]), "keepdims",
                        f"{_what(node)} is taken without `keepdims=True`, so the reduced axis is gone and "
                        "the result broadcasts against the wrong axis")


def _flipped_function(node, code):
    """One function for its twin (``_FLIPS``: max/min, sum/mean, exp/exp2, tril/triu, ...)."""
    name = call_name(node) if isinstance(node, ast.Call) else ""
    if name not in _FLIPS:
        return
    f = copy.deepcopy(node.func)
    if isinstance(f, ast.Attribute):
        f.attr = _FLIPS[name]
    else:
        f.id = _FLIPS[name]
    yield code.site(node, clone(node, func=f), "function", f"`{_FLIPS[name]}` is used where `{name}` belongs")


def _dropped_call(node, code):
    """A call of ``_DROPPABLE`` left out, its input kept: a transpose, a ``.copy()``, an exp."""
    name = call_name(node) if isinstance(node, ast.Call) else ""
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
    if not isinstance(node, ast.Call) or len(node.args) < 2 or call_name(node) in _NOT_SWAPPED:
        return
    for i in range(len(node.args) - 1):
        j = i + 1
        if ast.dump(node.args[i]) == ast.dump(node.args[j]) or any(
                isinstance(a, ast.Starred) for a in node.args[i:j + 1]):
            continue
        args = list(copy.deepcopy(node.args))
        args[i], args[j] = args[j], args[i]
        yield code.site(node, clone(node, args=args), "operands",
                        f"the arguments {i + 1} and {j + 1} of {_what(node)} are swapped")


def _where_branches(node, code):
    """The two branches of ``np.where(cond, a, b)`` swapped."""
    if isinstance(node, ast.Call) and call_name(node) == "where" and len(node.args) == 3:
        args = copy.deepcopy(node.args)
        args[1], args[2] = args[2], args[1]
        yield code.site(node, clone(node, args=args), "operands",
                        "the two branches of `np.where` are swapped (the condition picks the other value)")


def _arange_from_one(node, code):
    """``np.arange(n)`` counted from 1: ``np.arange(1, n + 1)``."""
    if isinstance(node, ast.Call) and call_name(node) == "arange" and len(node.args) == 1 and not node.keywords:
        args = [ast.Constant(1), ast.BinOp(copy.deepcopy(node.args[0]), ast.Add(), ast.Constant(1))]
        yield code.site(node, clone(node, args=args), "bound", f"{_what(node)} counts from 1 instead of from 0")


def _range_bounds(node, code):
    """A ``range``'s start or end one step off, either way."""
    if not isinstance(node, ast.Call) or call_name(node) != "range":
        return
    for i, arg in enumerate(node.args[:2]):
        for step in (1, -1):
            args = list(copy.deepcopy(node.args))
            args[i] = ast.BinOp(copy.deepcopy(arg), ast.Add() if step > 0 else ast.Sub(), ast.Constant(1))
            end = "end" if (i == 1 or len(node.args) == 1) else "start"
            yield code.site(node, clone(node, args=args), "bound",
                            f"a loop's {end} is off by one ({'one step too far' if step > 0 else 'one step short'})"
                            if end == "end" else f"a loop starts one step {'late' if step > 0 else 'early'}")


def _closed_early(node, code):
    """A call's closing bracket misplaced: ``f(a o b)`` -> ``f(a) o b``."""
    if not isinstance(node, ast.Call) or len(node.args) != 1 or node.keywords \
            or not isinstance(node.args[0], ast.BinOp) or call_name(node) in ("range", "len", "float", "int"):
        return
    inner = node.args[0]
    moved = ast.BinOp(clone(node, args=[copy.deepcopy(inner.left)]), inner.op, copy.deepcopy(inner.right))
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
        yield code.site(node, clone(node, left=copy.deepcopy(node.right), right=copy.deepcopy(node.left)),
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
    yield code.site(node, clone(node, op=flipped), "sign", f"a sign is flipped: a term is "
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
    yield code.site(node, clone(node, op=other), "operands",
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
        yield code.site(node, clone(node, ops=[new_op()]), "compare", f"`{b}` is used where `{a}` belongs (a boundary case)")


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

# A line dropped, or moved into or out of a loop (per node, after the contract's families).
LINES = (_lines,)
