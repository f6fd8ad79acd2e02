"""The single-point changes a learner could plausibly make to a function's code, as AST edits.

Trusted side only (used by ``autograder.mutation``). ``changes(tree, public)`` lists, for one
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
overwritten), copy (an update in place: a ``.copy()`` dropped).
"""
from __future__ import annotations

import ast
import copy

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



class Site:
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


def changes(tree: ast.FunctionDef, public: set[str]) -> list[Site]:
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
        sites.append(Site(index[id(node)], new, family, words))

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


def _statement_changes(owner, index, nodes) -> list[Site]:
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
            sites.append(Site(index[id(owner)], new, "statement", "a line that updates "
                               f"`{ast.unparse(stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target)}` is missing"))
        if isinstance(stmt, ast.For) and stmt.body:
            if len(stmt.body) > 1:  # the loop's last line moved after the loop
                new = copy.deepcopy(owner)
                moved = new.body[i].body.pop()
                new.body.insert(i + 1, moved)
                sites.append(Site(index[id(owner)], new, "statement", "a line that belongs inside a loop is after it"))
            if i > 0 and not isinstance(body[i - 1], (ast.Return, ast.For)):  # the line before, moved in
                new = copy.deepcopy(owner)
                moved = new.body.pop(i - 1)
                new.body[i - 1].body.insert(0, moved)
                sites.append(Site(index[id(owner)], new, "statement", "a line that belongs before a loop is inside it"))
    return sites
