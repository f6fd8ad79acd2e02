"""Every change of a function's code that names or fixes a mistake, in one order. [sandbox]

Used on both sides: by ``autograder.judge.mutation`` (mutants of the reference) and by ``repair``
(edits of the learner's code, in the kernel). ``changes(tree, public)`` lists, for one
parsed ``def``, every change of the kinds below as a ``Site`` (``edits``). ``public``: the
names the learner's code shares with the reference (its arguments, its outputs, the course
glossary); only those are shown as code in the words, so the reference's own lines are never
pasted.

Kinds (``slips``): axis, keepdims, transpose, operands (two sides of an operator or two
arguments swapped), variable (one name for another), bound (a loop or slice bound off by one, a
slice shifted, a range counted from 1), term (a term or factor dropped), sign, constant, function
(max/min, sum/mean, exp/exp2, ...), compare (< / <=), brackets (operator precedence, a
misplaced closing bracket), statement (a line dropped, moved into or out of a loop, an update
overwritten), copy (an update in place: a ``.copy()`` dropped); and here, the contract the
exercise's text states (``CONTRACT``, the reference's mutants only): parameter (one ignored,
its default used), dtype (a ``dtype=`` left out), tuple (an item of the returned tuple dropped).
For repair, the changes that undo them: ``undoing`` (one node at a time) and ``repeated`` (the
whole function at once).

Where an edit family goes: a slip a learner makes, in ``slips.SLIPS``; a promise of the text
broken, in ``CONTRACT`` below; a change only repair makes, in ``undoing.UNDOING`` (or
``repeated.WHOLE`` when it changes every place at once). Adding a kind means adding one
function to a table. Callers take ``Site`` and the helpers that apply a change from here too.
"""
from __future__ import annotations

import ast
import copy
import itertools

from autograder.kernel.edits import (Code, Site, compile_changed, in_context, keyword_arg, parsed_def,
                                     per_node, replaced, slots_of, source_tree)
from autograder.kernel.repeated import WHOLE
from autograder.kernel.slips import ANONYMOUS_SWAP, LINES, SLIPS
from autograder.kernel.undoing import UNDOING, added_terms

# the names callers take from here (``repair``, ``autograder.judge``), whichever module holds them
__all__ = ["ANONYMOUS_SWAP", "Site", "changes", "compile_changed", "in_context", "parsed_def", "replaced",
           "slots_of", "source_tree"]


def changes(tree: ast.FunctionDef, public: set[str], repair: bool = False, keys=()) -> list[Site]:
    """Every change of the kinds above in ``tree``: the families of ``SLIPS``, then (not for
    ``repair``) of ``CONTRACT``, then of ``LINES``, node by node. ``repair``: also the changes
    that undo them (``autograder.kernel.repair`` looks for the one edit that fixes a learner's
    code), with no words (the caller describes them), as an iterator; ``keys``: strings the
    code may look up (the keys of the dicts it is given), besides those it names."""
    code = Code(tree, public, keys)
    # the learner's own code is not held to the reference's signature
    sites = list(per_node(code, SLIPS + (() if repair else CONTRACT) + LINES))
    if repair:  # ordered by how many there are, so the search meets the few kinds soon: a name
        # swapped for another is one site per name and variable (thousands in a tile loop), and a
        # term added, the least likely and the most numerous, is made while tried, last
        swaps = [s for s in sites if s.family == "variable"]
        return itertools.chain([s for s in sites if s.family != "variable"], _undoing(code), swaps,
                               added_terms(code))
    return sites


def _undoing(code: Code) -> list[Site]:
    """The changes that undo the kinds of ``changes`` not undone by one of their own kind, and
    slips of a learner's own code: the families of ``UNDOING``, node by node, then those of
    the whole function (``WHOLE``)."""
    return list(per_node(code, UNDOING)) + [site for family in WHOLE for site in family(code)]


# ----------------------------------------------------------------------------- the contract
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
    dtype = keyword_arg(node, "dtype") if isinstance(node, ast.Call) else None
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
