"""The changes that undo a learner's slip, for repair only: one node at a time. [sandbox]

``autograder.kernel.repair`` looks for the one edit that fixes a learner's code. Most slips
are undone by one of their own kind (a sign flipped back), made by ``slips``; the families of
``UNDOING`` undo the others (an expression where its variable belongs, a condition the wrong way
round, an axis given where there is none) and slips of a learner's own code (a call of their
own helper too many). Each is a function of one node and the ``Code`` around it (``edits``)
that yields Sites without words: repair describes its fixes itself. ``added_terms``: a
variable added as a term, a factor or a power, the most numerous and least likely, made last.
Changes of the whole function at once live in ``repeated``.
"""
from __future__ import annotations

import ast
import copy
import io
import tokenize

from autograder.kernel.edits import (AXIS_REDUCTIONS, JOINS, Code, call_name, keyword_arg, names_in, np_style,
                                     positional_axis)


_NO_KEEPDIMS = ("cumsum", "argmax", "argmin")
_MORE_FLIPS = {"sin": "cos", "cos": "sin", "max": "maximum", "maximum": "max", "min": "minimum",
               "minimum": "min", "std": "var", "var": "std", "exp": "log", "log": "exp"}
_OP_SWAPS = {ast.Mult: ast.Add, ast.Add: ast.Mult, ast.Div: ast.Sub, ast.Sub: ast.Div,
             ast.BitOr: ast.BitAnd, ast.BitAnd: ast.BitOr}
_CMP_MORE = {ast.Gt: (ast.NotEq,), ast.Lt: (ast.NotEq,), ast.GtE: (ast.NotEq,), ast.LtE: (ast.NotEq,),
             ast.Eq: (ast.NotEq,), ast.NotEq: (ast.Eq, ast.Gt)}
_ELEMENTWISE = ("tanh", "sin", "cos", "square", "negative", "reciprocal", "log1p", "expm1")
_NOT_DROPPED = ("range", "len", "enumerate", "zip", "list", "tuple", "dict", "set", "sorted", "reversed",
                "print", "isinstance", "int", "float", "bool", "str", "min", "max", "sum", "abs", "round",
                "super", "type", "iter", "next", "map", "filter")


def _loaded(node) -> bool:
    """Whether ``node`` is read (a load, or a call), not written."""
    return isinstance(getattr(node, "ctx", None), ast.Load) or isinstance(node, ast.Call)


def _call_with(node: ast.Call, **keywords) -> ast.Call:
    """A copy of ``node`` with ``keywords`` (name -> code) given, added or replaced."""
    new = copy.deepcopy(node)
    for k, v in keywords.items():
        value = ast.parse(v, mode="eval").body
        there = keyword_arg(new, k)
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
    name, axis = call_name(node), keyword_arg(node, "axis")
    if name in AXIS_REDUCTIONS and axis is None and len(node.args) == (1 if np_style(node) else 0):
        yield code.site(node, _call_with(node, axis="-1"), "axis")
        if name not in _NO_KEEPDIMS:
            yield code.site(node, _call_with(node, axis="-1", keepdims="True"), "axis")
    elif positional_axis(node) is not None:
        for other in ("-1", *code.axis_names):
            if ast.unparse(node.args[-1]) != other:
                new = copy.deepcopy(node)
                new.args[-1] = ast.parse(other, mode="eval").body
                yield code.site(node, new, "axis")
    elif name in AXIS_REDUCTIONS and axis is not None:
        if keyword_arg(node, "keepdims") is None and name not in _NO_KEEPDIMS:
            yield code.site(node, _call_with(node, keepdims="True"), "keepdims")
        for other in code.axis_names:
            if ast.unparse(axis.value) != other:
                yield code.site(node, _call_with(node, axis=other), "axis")


def _more_flips(node, code):
    """One function for a kin of ``_MORE_FLIPS`` (sin/cos, max/maximum, std/var, exp/log)."""
    name = call_name(node) if isinstance(node, ast.Call) else ""
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
            or call_name(node) in _NOT_DROPPED:
        return
    yield code.site(node, copy.deepcopy(node.args[0]), "function")
    if not isinstance(code.parents.get(id(node)), ast.Subscript):
        yield code.site(node, ast.Subscript(copy.deepcopy(node), ast.Constant(0), ast.Load()), "tuple")


def _elementwise_dropped(node, code):
    """An elementwise numpy call dropped: ``np.tanh(h)`` where h is tanh already."""
    if isinstance(node, ast.Call) and np_style(node) and call_name(node) in _ELEMENTWISE \
            and len(node.args) == 1 and not node.keywords:
        yield code.site(node, copy.deepcopy(node.args[0]), "function")


def _join_axis(node, code):
    """An axis given to ``np.split`` and kin, or another one: ``np.split(z, 4)`` cuts the batch axis."""
    if not isinstance(node, ast.Call) or call_name(node) not in JOINS:
        return
    axis = keyword_arg(node, "axis")
    for other in ("-1", "1", "0", "-2", "2"):
        if axis is None or ast.unparse(axis.value) != other:
            yield code.site(node, _call_with(node, axis=other), "axis")


def _short_block(node, code):
    """A ``range`` stop ``T - step + 1`` (or ``T - step``) made ``T``: the last, shorter block
    is not skipped (``range(0, T - b + 1, b)``)."""
    if not isinstance(node, ast.Call) or call_name(node) != "range" or len(node.args) != 3:
        return
    stop, step = node.args[1], ast.dump(node.args[2])
    inner = stop.left if isinstance(stop, ast.BinOp) and isinstance(stop.op, ast.Add) \
        and isinstance(stop.right, ast.Constant) and stop.right.value == 1 else stop
    if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Sub) and ast.dump(inner.right) == step:
        new = copy.deepcopy(node)
        new.args[1] = copy.deepcopy(inner.left)
        yield code.site(node, new, "bound")


def _accumulated(node, code):
    """``=`` made ``+=``; a variable assigned made its ``.copy()``: a parameter's (the input
    kept) or another's (``m_new = m``, then ``m_new[...] = ...`` changes ``m`` too)."""
    if not isinstance(node, ast.Assign) or len(node.targets) != 1 \
            or not isinstance(node.targets[0], (ast.Subscript, ast.Name)):
        return
    yield code.site(node, ast.AugAssign(copy.deepcopy(node.targets[0]), ast.Add(), copy.deepcopy(node.value)),
                    "statement")
    if isinstance(node.value, ast.Name) and node.value.id in code.variables:
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


def _left_dropped(node, code):
    """``a + b`` or ``a * b`` -> ``b``: a term or a factor put before the right one, dropped
    (an extra residual: ``x = x + block(x)`` where the block adds ``x`` itself)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
        yield code.site(node, copy.deepcopy(node.right), "term")


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
            and call_name(node.left) not in ("range", "len", "int", "float"):
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
           _left_dropped, _other_operator, _regrouped, _other_compare, _other_key, _extra_lines)


def added_terms(code: Code):
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
            held = names_in(node) | _in_product(node, parents)
            for other in variables:
                if getattr(node, "id", None) == other:
                    continue
                for op in (ast.Add(), ast.Mult()) if other not in held else (ast.Add(),):
                    yield code.site(node, ast.BinOp(node, op, ast.Name(other, ast.Load())), "term")
                if other in params:
                    yield code.site(node, ast.BinOp(node, ast.Pow(), ast.Name(other, ast.Load())), "term")
        if isinstance(node, (ast.Assign, ast.Return)) and node.value is not None:
            held = names_in(node.value)
            for other in variables:
                if other not in held:
                    yield code.site(node.value, ast.BinOp(ast.Name(other, ast.Load()), ast.Mult(), node.value), "term")


def _in_product(node, parents) -> set[str]:
    """The names of the product that ``node`` is a factor of (``t[:, None] * freq``: freq)."""
    names, up = set(), parents.get(id(node))
    while isinstance(up, ast.BinOp) and isinstance(up.op, (ast.Mult, ast.Div, ast.MatMult)):
        names |= names_in(up)
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
