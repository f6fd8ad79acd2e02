"""What a learner reads when their function raises: the error, their line, what to look at. [sandbox]

``describe_error(err, function)`` turns "ValueError: operands could not be broadcast together
with shapes (2,3,4) (2,3)" into one short line that names the learner's line ("line 3 of your
`layernorm_forward`: `xhat = (x - mu) / np.sqrt(var + eps)`") and, for the errors whose fix
is known (a reduction without ``keepdims``, ``.T`` on a batched array, a ``(out, cache)``
tuple used as an array, ...), says what to change. The shapes it quotes come from the error
message and from the arrays the failing line names, read off the learner's frame.

This module runs in the grading sandbox next to ``kernel.run_cases``: it imports only the
standard library and numpy, and it never raises (a failure here falls back to the plain
"Type: message").
"""
from __future__ import annotations

import io
import itertools
import linecache
import re
import tokenize
from dataclasses import dataclass, field

import numpy as np

MAX_CHARS = 300
# Where IPython keeps a cell's code: ipykernel writes /tmp/ipykernel_<pid>/<hash>.py (under
# $TMPDIR), older IPython <ipython-input-<n>-<hash>>. Only these frames are the learner's:
# numpy, the standard library, course_lib and the grader's own frames are not.
CELL_FILE = re.compile(r"ipykernel_\d+[/\\]\d+\.py$|^<ipython-input-[\w-]+>$")

# PyTorch habits that numpy does not share.
TORCH_METHODS = {"view": "x.reshape(...)", "unsqueeze": "x[..., None] or np.expand_dims(x, ...)",
                 "masked_fill": "np.where(mask, value, x)", "permute": "x.transpose(...)",
                 "size": "x.shape", "dim": "x.ndim", "clone": "x.copy()",
                 "exp": "np.exp(x)", "softmax": "your own softmax", "matmul": "x @ y",
                 "float": "x.astype(np.float64)", "numpy": "x itself (it is already an array)"}
TORCH_KEYWORDS = {"dim": "axis", "keepdim": "keepdims"}
# numpy's reductions by name, one list for the kernel: the edits (``slips``, ``undoing``) change their
# axis and keepdims (and those of argmax, argmin, cumsum, all and any: ``edits.AXIS_REDUCTIONS``)
REDUCTIONS = ("sum", "mean", "max", "min", "amax", "amin", "std", "var", "prod", "logsumexp", "nansum",
              "nanmax")
# a line that reduces without keepdims, for the hint: those, and here also nanmean, average, norm
REDUCTION = re.compile(r"\b(" + "|".join(REDUCTIONS + ("nanmean", "average", "norm")) + r")\s*\(")


@dataclass
class Site:
    """The learner's line that raised, and the arrays (or tuples, or None) it names."""
    where: str                 # "line 7 of your `attention_forward`"
    source: str                # that line, stripped
    expr: str                  # the failing part of the line where Python says, else the line
    values: dict = field(default_factory=dict)  # name -> value, for names in ``expr``
    above: list = field(default_factory=list)   # the lines of the learner's def before this one

    def made_by_reduction(self, name: str | None) -> bool:
        """Whether the array ``name`` (None: a part of this line) was made by a sum, mean,
        max, ... without ``keepdims``: its last assignment above, or this line."""
        text = self.expr
        if name is not None:
            made = [m.group(1) for line in self.above
                    for m in [re.match(rf"\s*{re.escape(name)}\s*=(?!=)(.*)", line)] if m]
            text = made[-1] if made else ""
        return bool(REDUCTION.search(text)) and "keepdims" not in text

    def narrower(self) -> bool:
        """Whether ``expr`` is a strict part of the line, not just its right-hand side."""
        rest = re.sub(r"^(return\s+|[\w\s,.\[\]]+=(?!=)\s*)", "", self.source)
        return self.expr not in (self.source, rest) and not re.fullmatch(r"[\w.]+", self.expr)

    def arrays(self) -> dict:
        return {k: v for k, v in self.values.items() if isinstance(v, np.ndarray)}

    def tuples(self) -> list[str]:
        return [k for k, v in self.values.items() if isinstance(v, tuple)]

    def nones(self) -> list[str]:
        return [k for k, v in self.values.items() if v is None]

    def shapes(self) -> str:
        arrays = list(self.arrays().items())[:4]
        return ", ".join(f"`{k}` {fmt(v.shape)}" for k, v in arrays)


def describe_error(err: BaseException, function: str, signature: str | None = None) -> str:
    """One short learner-facing line for ``err`` raised while the grader ran ``function``.

    ``signature``: the exercise's, e.g. "attention_forward(Q, K, V, mask=None) -> (out, A)",
    quoted when ``function`` was called with arguments it does not take.
    """
    try:
        return _describe(err, function, signature)
    except Exception:  # describing must never cost the learner the case's result
        return _clip(f"{_type_name(err)}: {_first_line(err)}")


def returned_tuple_hint(n_returned: int, n_expected: int) -> str | None:
    """A hint when a function returned a different number of values than the exercise wants."""
    if n_returned == n_expected or n_returned < 1 or n_expected < 1:
        return None
    if n_expected == 1:
        return (f"Your function returned {n_returned} values, e.g. `(out, cache)`, where one "
                "array is expected: return only the output (`return out`).")
    if n_returned == 1:
        return (f"Your function returned one value where {n_expected} are expected: return "
                "them all as a tuple, e.g. `return out, cache`.")
    return (f"Your function returned {n_returned} values where {n_expected} are expected: "
            "compare your `return` line with the signature.")


# --- composing the line ---------------------------------------------------------------------

def _describe(err: BaseException, function: str, signature: str | None) -> str:
    site = learner_site(err)
    short, hint = _first_line(err), None
    for pattern in PATTERNS:
        found = pattern(err, short, site, function, signature)
        if found is not None:
            short, hint = found
            break
    if hint and re.match(r"[a-z]+[ ,:]", hint):  # a sentence, not code such as np.stack
        hint = hint[0].upper() + hint[1:]
    hint = f" {hint}" if hint else ""
    # Longest first; drop the failing part, then shorten the line and the message, to fit.
    for short_n, source_n, with_part in ((110, 80, True), (110, 80, False), (90, 50, False)):
        text = f"{_type_name(err)}: {shorten(short.rstrip('.'), short_n)}"
        if site is not None:
            part = f" at `{shorten(site.expr, 40)}`" if with_part and site.narrower() else ""
            code = f": `{shorten(site.source, source_n)}`" if site.source else ""
            text += f" ({site.where}{code}{part})"
        text += "." + hint if hint else ""
        if len(text) <= MAX_CHARS:
            break
    return _clip(text)


def learner_site(err: BaseException) -> Site | None:
    """The last frame of ``err``'s traceback that runs code from a notebook cell, if any."""
    frames = []
    tb = err.__traceback__
    while tb is not None:
        frames.append((tb.tb_frame, tb.tb_lineno, tb.tb_lasti))
        tb = tb.tb_next
    mine = [f for f in frames if CELL_FILE.search(f[0].f_code.co_filename)]
    if not mine:
        return None
    frame, lineno, lasti = mine[-1]
    code = frame.f_code
    # A comprehension or lambda has its own frame; number its line within the enclosing def.
    named = next((f[0].f_code for f in reversed(mine)
                  if not f[0].f_code.co_name.startswith("<")
                  and f[0].f_code.co_filename == code.co_filename), None)
    above = []
    if named is not None and named.co_firstlineno <= lineno:
        where = f"line {lineno - named.co_firstlineno + 1} of your `{named.co_name}`"
        above = [linecache.getline(code.co_filename, n) for n in range(named.co_firstlineno, lineno)]
    else:
        where = f"line {lineno} of your cell"
    line = linecache.getline(code.co_filename, lineno)
    expr = _failing_part(code, lasti, lineno, line) or line.strip()
    values = {}
    for name in re.findall(r"(?<![\w.])[A-Za-z_]\w*", expr):
        for scope in (frame.f_locals, frame.f_globals):
            if name in scope:
                value = scope[name]
                if value is None or type(value) in (np.ndarray, tuple):  # no learner subclass:
                    values[name] = value                                # its code is not run here
                break
    return Site(where, _without_comment(line), expr, values, above)


def _without_comment(line: str) -> str:
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line).readline))
    except (tokenize.TokenError, SyntaxError):  # a line of a longer statement
        return line.strip()
    comment = next((t for t in tokens if t.type == tokenize.COMMENT), None)
    return (line[:comment.start[1]] if comment else line).strip()


def _failing_part(code, lasti: int, lineno: int, line: str) -> str | None:
    """The sub-expression Python's traceback would underline (3.11+), on one line only."""
    try:
        start, end, col, end_col = next(itertools.islice(code.co_positions(), lasti // 2, None))
    except (AttributeError, StopIteration, ValueError):
        return None
    if start != lineno or end != lineno or col is None or end_col is None:
        return None
    raw = line.encode("utf-8")  # columns count UTF-8 bytes
    return raw[col:end_col].decode("utf-8", errors="replace").strip() or None


# --- the known patterns: each returns (short message, hint) or None ---------------------------

def _broadcast(err, msg, site, function, signature):
    if not isinstance(err, ValueError) or "could not be broadcast" not in msg:
        return None
    listed = msg.split("requested")[0]
    shapes = [parse_shape(s) for s in re.findall(r"\(([\d,\s]*)\)(?!->)", listed)]
    if "remapped" in msg and "requested shape" not in msg:  # einsum's (it requests no shape)
        originals = [parse_shape(s) for s in re.findall(r"\(([\d,]*)\)->", msg)]
        return ("an einsum's subscripts pair axes of different lengths"
                + (" (shapes " + " and ".join(fmt(s) for s in originals) + ")" if originals else ""),
                "check that each letter of the subscripts names axes of the same length in every "
                "operand, in the order of that operand's shape")
    if "remapped" in msg:  # matmul's batch axes: (2,3,3)->(2,newaxis,newaxis)
        batch = [parse_shape(s) for s in re.findall(r"->\(([\d,]*)", msg.replace("newaxis", ""))]
        short = "the batch axes of a matmul do not broadcast"
        if len(batch) == 2:
            short = f"the batch axes {fmt(batch[0])} and {fmt(batch[1])} of a matmul differ"
        return short, _transpose_hint(site) or _shapes_hint(site)
    short = "shapes " + " and ".join(fmt(s) for s in shapes) + " do not broadcast"
    for big, small in itertools.permutations(shapes, 2):
        axis = _removed_axis(big, small)
        if axis is not None:
            kept = big[:axis] + (1,) + big[axis + 1:]
            named = next((k for k, v in (site.arrays() if site else {}).items() if v.shape == small), None)
            name = f"`{named}` {fmt(small)}" if named else fmt(small)
            if site is not None and site.made_by_reduction(named):
                return short, (f"{name} looks like {fmt(big)} reduced over axis {axis - len(big)}: "
                               f"pass `keepdims=True` to that sum/mean/max to keep shape {fmt(kept)}")
            return short, (f"{name} lacks axis {axis - len(big)} of {fmt(big)}, or has another axis "
                           "in its place: check which axis each slice, index or reduction that "
                           "made it takes")
    for a, b in itertools.combinations(shapes, 2):
        if len(a) == len(b) >= 2 and a != b and a[:-2] == b[:-2] and a[-2:] == b[-2:][::-1]:
            return short, (_transpose_hint(site)
                           or "one operand looks transposed (its last two axes swapped)")
    return short, _transpose_hint(site) or ("NumPy matches shapes from the right: each axis must "
                                            "be equal or 1. " + _shapes_hint(site)).strip()


def _matmul(err, msg, site, function, signature):
    if not isinstance(err, ValueError):
        return None
    m = re.search(r"matmul: .*core dimension.*\(size (\d+) is different from (\d+)\)", msg)
    if m:
        right, left = m.groups()
        short = f"in `A @ B`, A's last axis ({left}) differs from B's second-to-last ({right})"
    else:
        if "does not have enough dimensions (has 0" in msg:
            return msg.split(" (has")[0], "`@` needs arrays; multiply by a number with `*`"
        m = re.search(r"shapes (\([\d,]*\)) and (\([\d,]*\)) not aligned: (\d+) .*!= (\d+)", msg)
        if not m:
            return None
        short = f"np.dot: shapes {m[1]} and {m[2]} not aligned ({m[3]} != {m[4]})"
    return short, _transpose_hint(site) or _shapes_hint(site)


def _transpose_hint(site: Site | None) -> str | None:
    if site is None:
        return None
    for name in re.findall(r"([A-Za-z_]\w*)\.T\b", site.expr + " " + site.source):
        value = site.values.get(name)
        if isinstance(value, np.ndarray) and value.ndim >= 3:
            return (f"`{name}.T` reverses all {value.ndim} axes of {fmt(value.shape)}: use "
                    f"`np.swapaxes({name}, -1, -2)` to swap only the last two")
    return None


def _shapes_hint(site: Site | None) -> str:
    return f"Shapes in that line: {site.shapes()}" if site is not None and site.arrays() else ""


def _tuple_or_none(err, msg, site, function, signature):
    tuples = site.tuples() if site else []
    nones = site.nones() if site else []
    obj = getattr(err, "obj", object()) if isinstance(err, AttributeError) else object()
    if isinstance(err, TypeError) and "'tuple' object is not callable" in msg \
            and ".shape(" in (site.source if site else ""):
        return msg, "`x.shape` is a tuple: index it with `x.shape[0]`"
    is_tuple = isinstance(obj, tuple) or (isinstance(err, (AttributeError, TypeError))
                                          and "'tuple'" in msg)
    is_tuple = is_tuple or (bool(tuples) and (isinstance(err, TypeError)
                                              or "inhomogeneous" in msg
                                              or "with a sequence" in msg))  # not "empty sequence"
    if is_tuple:
        what = f"`{tuples[0]}` is a tuple" if tuples else "a tuple was used"
        return msg.split(". ")[0], (f"{what} where an array was expected: a function returning "
                                    "`(out, cache)` must be unpacked, `out, cache = ...`")
    is_none = obj is None or (isinstance(err, (AttributeError, TypeError)) and "NoneType" in msg)
    if is_none or (nones and "does not have enough dimensions (has 0" in msg):
        what = f"`{nones[0]}` is None" if nones else "a value is None"
        return msg, f"{what}: does every function of yours end with `return`?"
    return None


def _reshape(err, msg, site, function, signature):
    m = re.search(r"cannot reshape array of size (\d+) into shape \(([^)]*)\)", msg)
    if not isinstance(err, ValueError) or not m:
        return None
    size, dims = int(m[1]), [d.strip() for d in m[2].split(",") if d.strip()]
    known = [int(d) for d in dims if d.isdigit()]
    holds = int(np.prod(known)) if known else 1
    new = "(" + ",".join("-1" if not d.isdigit() else d for d in dims) + ")"
    what = (f"shape {new} holds {holds}" if len(known) == len(dims)
            else f"{size} is not a multiple of {holds}")
    return (f"cannot reshape {size} elements into {new}",
            f"{what}: the product of the new shape must equal the old size "
            "(e.g. d_model = n_heads * d_k)")


def _name_error(err, msg, site, function, signature):
    if not isinstance(err, NameError):
        return None
    m = re.search(r"(?:name|variable) '(\w+)'", msg)
    name = getattr(err, "name", None) or (m[1] if m else None)
    if not name:
        return None  # the grader's own NameError (calls.learner_function) already says it all
    if isinstance(err, UnboundLocalError):
        return msg, f"`{name}` is used in your function before it is assigned there"
    return (f"`{name}` is not defined",
            f"the grader runs only the set-up cell, your solution cells and cells you added: "
            f"define (or import) `{name}` in your solution cell")


def _arguments(err, msg, site, function, signature):
    m = re.match(r"([\w.<>]+)\(\) (missing \d+ required|got an unexpected keyword argument '(\w+)'"
                 r"|takes|got multiple values|got some positional-only)", msg)
    if not isinstance(err, TypeError) or not m:
        return None
    called = m[1].split(".")[-1]
    if m[3] in TORCH_KEYWORDS:
        return msg, f"NumPy spells it `{TORCH_KEYWORDS[m[3]]}=`, not `{m[3]}=` (PyTorch)"
    if called == function:
        if signature:
            return msg, f"the grader calls `{signature}`: keep these parameter names"
        return msg, "keep the parameter names and order given in the exercise"
    called = re.sub(r"^_+|_dispatcher$", "", called)
    return msg, f"check the arguments you pass to `{called}`"


def _torch_method(err, msg, site, function, signature):
    m = re.search(r"'numpy.ndarray' object has no attribute '(\w+)'", msg)
    if isinstance(err, AttributeError) and m and m[1] in TORCH_METHODS:
        return msg, f"`.{m[1]}` is PyTorch; in numpy use {TORCH_METHODS[m[1]]}"
    m = re.search(r"module 'numpy' has no attribute '(\w+)'", msg)
    if isinstance(err, AttributeError) and m:
        return msg, f"NumPy has no `np.{m[1]}`: write it from np.exp, np.max, np.sum, ..."
    return None


def _axis(err, msg, site, function, signature):
    suggestion = ("negative axes (-1 for the last, -2 before it) work for batched and "
                  "unbatched inputs alike")
    m = re.search(r"axis (-?\d+) is out of bounds for array of dimension (\d+)", msg)
    if m and isinstance(err, (IndexError, ValueError)):  # numpy's AxisError is both
        return f"axis {m[1]} does not exist in a {m[2]}-D array", suggestion
    m = re.search(r"too many indices for array: array is (\d+)-dimensional, but (\d+)", msg)
    if m and isinstance(err, IndexError):
        return (f"{m[2]} indices for a {m[1]}-D array",
                "`x[..., i]` indexes the last axis whatever the batch axes; " + suggestion)
    m = re.search(r"index (-?\d+) is out of bounds for axis (\d+) with size (\d+)", msg)
    if m and isinstance(err, IndexError):
        return msg, f"axis {m[2]} has size {m[3]}: valid indices are 0 to {int(m[3]) - 1}"
    if isinstance(err, ValueError) and msg.startswith("axes don't match array"):
        return msg, ("`x.transpose` needs one entry per axis; `np.swapaxes(x, -1, -2)` swaps "
                     "the last two")
    return None


def _concatenate(err, msg, site, function, signature):
    if not isinstance(err, ValueError):
        return None
    m = re.search(r"along dimension (\d+), the array at index (\d+) has size (\d+) and the "
                  r"array at index (\d+) has size (\d+)", msg)
    if m:
        return (f"arrays {m[2]} and {m[4]} differ along axis {m[1]} ({m[3]} vs {m[5]})",
                "only the axis that `np.concatenate` joins along may differ; check `axis=`")
    m = re.search(r"array at index (\d+) has (\d+) dimension.*array at index (\d+) has (\d+)", msg)
    if m:
        return (f"array {m[1]} is {m[2]}-D and array {m[3]} is {m[4]}-D",
                "`np.concatenate` needs arrays with the same number of axes: add the missing one "
                "(`x[..., None]` or `keepdims=True`)")
    if msg.startswith("all input arrays must have the same shape"):
        return msg, ("`np.stack` needs arrays of one shape; `np.concatenate` joins along an "
                     "existing axis. " + _shapes_hint(site)).strip()
    return None


def _arithmetic(err, msg, site, function, signature):
    if isinstance(err, ZeroDivisionError):
        return msg, "a Python number divided by zero: is a length or count 0 here?"
    if isinstance(err, FloatingPointError):
        if "overflow" in msg and "exp" in msg:
            return msg, "`np.exp` overflows for large inputs: subtract the max along the axis first"
        return msg, ("a division by zero, log(0) or 0/0: check the denominators; add `eps` "
                     "where the text does")
    return None


PATTERNS = (_name_error, _arguments, _torch_method, _tuple_or_none, _matmul, _broadcast,
            _reshape, _concatenate, _axis, _arithmetic)


# --- small helpers -------------------------------------------------------------------------

def parse_shape(text: str) -> tuple[int, ...]:
    return tuple(int(d) for d in text.replace(" ", "").split(",") if d)


def fmt(shape) -> str:
    """A shape as numpy prints it in errors: (2,3,4), (3,), ()."""
    shape = tuple(shape)
    return f"({shape[0]},)" if len(shape) == 1 else "(" + ",".join(map(str, shape)) + ")"


def _removed_axis(big: tuple, small: tuple) -> int | None:
    """The last axis i with big minus axis i == small (a reduction that dropped it), else None."""
    if len(big) != len(small) + 1:
        return None
    return next((i for i in reversed(range(len(big))) if big[:i] + big[i + 1:] == small), None)


def _type_name(err) -> str:
    return type(err).__name__


def _first_line(err) -> str:
    try:
        text = str(err)
    except Exception:
        return "(the error's message could not be shown)"
    lines = text.strip().splitlines()
    return lines[0].strip() if lines else ""


# the end of a sentence: ". " after two characters that are not dots ("e.g. " is not one)
_SENTENCE_END = re.compile(r"(?<=[^\s.]{2}[.!?])\s")


def shorten(text: str, limit: int) -> str:
    """``text`` if it has at most ``limit`` characters; else its longest start that ends a
    sentence (kept as it is) or a word (then "…"), within ``limit``. Only a start of over
    half the limit counts; a text with no such break is cut where the limit falls.
    Every learner-facing message the grader shortens goes through here.

    >>> shorten("One short sentence. Another, much too long to fit.", 30)
    'One short sentence.'
    >>> shorten("a tuple whose first element is the output, e.g. `return out, cache`", 52)
    'a tuple whose first element is the output, e.g…'
    """
    if len(text) <= limit:
        return text
    head = text[:limit]
    ends = [m.start() for m in _SENTENCE_END.finditer(head)]
    if ends and ends[-1] > limit // 2:
        return head[:ends[-1]]
    head = head[:-1]  # room for the "…"
    space = head.rfind(" ") if text[limit - 1] != " " else len(head)
    if space > limit // 2:
        head = head[:space].rstrip(" ,;:.")
    return head.rstrip() + "\u2026"


def _clip(text: str) -> str:
    return shorten(" ".join(text.split()), MAX_CHARS)
