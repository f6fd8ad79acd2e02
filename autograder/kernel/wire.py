"""The one reader of every message that crosses from the sandbox, with strict limits. [sandbox]

What the learner's code can write reaches the grader three ways: every message of the grading
kernel (``autograder.pipeline.messages``: the client's session reads each part with ``loads``,
bounded by the client's data limit; a graded cell's payload in it is then checked again by
``check`` and read by ``transport.decode_results``), the lines of a case run again alone
(``autograder.pipeline.rerun``: the results, and the requests of a decoder's served model), and
the answer of a search kept in a forked child (``contained``).
Python's ``json`` reads ``NaN`` and ``Infinity``, nesting as deep as the stack and integers of
any length, and values that pass it then meet ``int()``, ``len()`` and dict look-ups in code
that expects a few plain types. So every message is read by ``loads`` (text) or ``check``
(data already parsed), which let through only

* at most ``MAX_BYTES`` of text (or the reader's ``max_bytes``), JSON's own syntax, without the ``NaN``/``Infinity`` tokens;
* nesting at most ``MAX_DEPTH`` deep (checked without recursion), at most ``MAX_NODES`` values;
* integers of magnitude below 2**63, finite floats, strings, lists, dicts with string keys;

and raise ``Unreadable`` (a ``ValueError``) for anything else. What each message must hold is
then checked by its reader (``transport.decode_outcome``, ``transport.decode_ask``); a reader
turns ``Unreadable`` into that case's error, never the grading's.

This module runs in the grading sandbox: it imports nothing of the grader's.
"""
from __future__ import annotations

import json
import math

MAX_BYTES = 16 << 20   # of one message's text: a line of a case run alone (``rerun.LINE``)
MAX_DEPTH = 32         # the deepest message the course sends is 7 levels deep
MAX_NODES = 1_000_000  # values in one message (arrays travel as one base64 string each)
MAX_DIGITS = 19        # of an integer: every int64 has at most 19
UNREAD = "the graded cell's answer for this case could not be read"  # told to the learner, with why


class Unreadable(ValueError):
    """A message that is not plain data within the limits, or not what its reader expects."""


def _refuse(token: str):
    raise Unreadable(f"{token} is not a number JSON allows")


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise Unreadable(f"an integer of {len(text)} digits")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise Unreadable("a number too large for a float")
    return value


def loads(text: str | bytes, max_bytes: int = MAX_BYTES):
    """The plain data in ``text`` (JSON), checked by ``check``; ``Unreadable`` otherwise.

    >>> loads('{"ask": 0}')
    {'ask': 0}
    >>> loads('[NaN]')
    Traceback (most recent call last):
    ...
    autograder.kernel.wire.Unreadable: NaN is not a number JSON allows
    """
    if len(text) > max_bytes:
        raise Unreadable(f"a message of {len(text):,} bytes, more than {max_bytes:,}")
    try:
        if isinstance(text, (bytes, bytearray)):
            text = bytes(text).decode("utf-8")
        data = json.loads(text, parse_constant=_refuse, parse_int=_integer, parse_float=_float)
    except Unreadable:
        raise
    except RecursionError:  # the parser's own limit, far deeper than ours
        raise Unreadable(f"nested more than {MAX_DEPTH} deep") from None
    except (ValueError, TypeError) as err:  # not JSON, not UTF-8
        raise Unreadable(f"not JSON ({str(err)[:100]})") from None
    return check(data)


def check(data):
    """``data`` itself, if it is plain data within the limits (see the module's text); else
    ``Unreadable``. Walks with a stack of its own: no depth reaches Python's."""
    stack, nodes = [(data, 1)], 0
    while stack:
        value, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise Unreadable(f"more than {MAX_NODES:,} values")
        if value is None or type(value) in (bool, str):
            continue
        if type(value) is int:
            if not -(1 << 63) <= value < 1 << 63:
                raise Unreadable("an integer out of the range of int64")
            continue
        if type(value) is float:
            if not math.isfinite(value):
                raise Unreadable("a number that is not finite")
            continue
        if depth >= MAX_DEPTH:
            raise Unreadable(f"nested more than {MAX_DEPTH} deep")
        if isinstance(value, list):
            stack.extend((item, depth + 1) for item in value)
        elif isinstance(value, dict):  # nbformat's NotebookNode is one
            if any(type(k) is not str for k in value):
                raise Unreadable("a key that is not text")
            stack.extend((item, depth + 1) for item in value.values())
        else:
            raise Unreadable(f"a {type(value).__name__}, which is not plain data")
    return data


def dumps(data) -> str:
    """``data`` as one line of JSON that ``loads`` reads back (no NaN or Infinity tokens)."""
    return json.dumps(data, allow_nan=False)
