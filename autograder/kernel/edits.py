"""What an edit of a function's code is, the code it reads, and how it is applied. [sandbox]

The shared core of the edit families (``operators``: every change, in order; ``slips``: the
learner's slips; ``undoing`` and ``repeated``: what repair adds to undo them). A change is a
``Site``: the index of the node it replaces (in ``ast.walk`` order), the replacement node, its
kind (``family``) and what it does in plain words. A family is a small function of one node and
the ``Code`` around it (its nodes, parents, names) that yields its Sites; ``per_node`` runs a
table of families over a function. The rest reads code (``call_name``, ``positional_axis``),
shows a change in context (``in_context``, ``replaced``), and applies one: ``parsed_def`` and
``source_tree`` read a function's ``def``, ``compile_changed`` compiles it with one Site made.
"""
from __future__ import annotations

import ast
import copy
import inspect
import textwrap
import types

from autograder.kernel.hints import REDUCTIONS


# ----------------------------------------------------------------------------- a change
class Site:
    """Where a change applies (the index of a node in ``ast.walk`` order) and what it is;
    ``line``: for a line dropped or moved, that statement (in the original tree)."""
    __slots__ = ("index", "new", "family", "words", "line")

    def __init__(self, index, new, family, words, line=None):
        self.index, self.new, self.family, self.words, self.line = index, new, family, words, line


# ----------------------------------------------------------------------------- reading code
def call_name(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def names_in(node) -> set[str]:
    """The variable names read or written in ``node``."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def keyword_arg(node: ast.Call, name):
    return next((k for k in node.keywords if k.arg == name), None)


def clone(node, **fields):
    """A deep copy of ``node`` with ``fields`` set to new values."""
    new = copy.deepcopy(node)
    for k, v in fields.items():
        setattr(new, k, v)
    return new


# the kernel's reductions (``hints``), and here also argmax, argmin, cumsum, all and any
AXIS_REDUCTIONS = REDUCTIONS + ("argmax", "argmin", "cumsum", "all", "any")
JOINS = ("split", "array_split", "concatenate", "stack")


def np_style(node: ast.Call) -> bool:
    """Whether ``node`` calls a function of numpy by name (``np.sum(a)``), not a method (``a.sum()``)."""
    return isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
        and node.func.value.id in ("np", "numpy")


def positional_axis(node) -> ast.Constant | None:
    """The axis given by position to a reduction (``np.sum(a, 0)``, ``a.mean(1)``), an int
    constant; None for any other node."""
    if not isinstance(node, ast.Call) or call_name(node) not in AXIS_REDUCTIONS or keyword_arg(node, "axis"):
        return None
    last = node.args[-1] if len(node.args) == (2 if np_style(node) else 1) else None
    return last if isinstance(last, ast.Constant) and type(last.value) is int else None


# ----------------------------------------------------------------------------- a function as the families read it
class Code:
    """One parsed ``def`` as the edit families read it: its nodes in ``ast.walk`` order, each
    node's ``index`` there and its parent, and the names and keys an edit may bring in.
    ``public``: the names that may be shown as code (see ``operators.changes``); ``keys``: strings the
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
        # for the changes that undo them (``undoing``)
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


def _defaults(tree: ast.FunctionDef) -> dict:
    """Parameter -> its default (a constant, a negated constant or None) from the signature."""
    args = tree.args
    pairs = list(zip(args.args[len(args.args) - len(args.defaults):], args.defaults))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
    return {a.arg: d for a, d in pairs if isinstance(d, ast.Constant) or isinstance(d, ast.UnaryOp)
            and isinstance(d.operand, ast.Constant)}


def per_node(code: Code, families):
    """The sites of ``families`` (each ``family(node, code)``) at every node outside the
    signature: node by node in walk order, and per node in the order of ``families``."""
    for node in code.nodes:
        if id(node) not in code.in_signature:
            for family in families:
                yield from family(node, code)


# ----------------------------------------------------------------------------- a change shown in context
def in_context(node, new, parents, public, longest: int = 40) -> tuple[str, str] | None:
    """(before, after) as code: the largest expression of at most ``longest`` characters
    around ``node`` that names only ``public`` names (None: any), without and with the change
    of ``node`` into ``new``; None when there is none."""
    best, up = None, node
    while isinstance(up, ast.expr):
        text = ast.unparse(up)
        names = names_in(up) - {"np", "math"}
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
