"""One slip repeated across a function, undone everywhere at once, for repair only. [sandbox]

A learner who holds one misconception writes it at every place it applies (the same wrong axis
in each ``np.concatenate``, ``.T`` on every batched array), and no single-point edit
(``undoing``) fixes it. The families of ``WHOLE`` each take the whole ``Code`` (``edits``) and
replace the whole function (a Site at index 0), the change said in words at the first place's
line.
"""
from __future__ import annotations

import ast
import copy

from autograder.kernel.edits import AXIS_REDUCTIONS, JOINS, Code, Site, call_name, keyword_arg, positional_axis


def _same_axis_everywhere(code: Code) -> list[Site]:
    """One misconception repeated: the same axis given to several calls of one function
    (``np.concatenate(..., axis=1)`` for K and again for V, ``g.mean(0)`` twice), all changed
    at once: the whole function replaced, the change said in words, at the first call's line."""
    groups = {}
    for node in code.nodes:
        if not isinstance(node, ast.Call):
            continue
        keyword = keyword_arg(node, "axis")
        if keyword is not None and call_name(node) in AXIS_REDUCTIONS + JOINS \
                and isinstance(keyword.value, (ast.Constant, ast.UnaryOp)):
            value = ast.unparse(keyword.value)
        elif positional_axis(node) is not None:
            value = ast.unparse(node.args[-1])
        else:
            continue
        groups.setdefault((call_name(node), value), []).append(node)
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
                if keyword_arg(twin, "axis") is not None:
                    keyword_arg(twin, "axis").value = axis
                else:
                    twin.args[-1] = axis
            each = "both" if len(calls) == 2 else f"all {len(calls)}"
            sites.append(Site(0, new, "axes", f"with axis `{other}` in place of `{value}` in {each} "
                                              f"calls of `{name}`", line))
    return sites


def _every_transpose(code: Code) -> list[Site]:
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


# Changes of the whole function at once (``operators.changes`` makes them after ``undoing.UNDOING``).
WHOLE = (_same_axis_everywhere, _every_transpose)


def _statement(node, parents) -> ast.stmt:
    """The statement that holds ``node``."""
    while not isinstance(node, ast.stmt):
        node = parents[id(node)]
    return node
