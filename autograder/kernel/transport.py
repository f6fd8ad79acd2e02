"""Plain data between the trusted grader and the learner's kernel, in both directions. [sandbox]

Inputs (the cases of an exercise) go to the kernel as a JSON file the grader writes; outputs
come back as one display output per graded cell with MIME type ``MIME``. Both hold only
numbers, strings, lists and dicts, with arrays as base64 bytes. Decoding accepts only plain
numeric dtypes and checks sizes, so nothing a learner makes (pickles, objects with a forged
``__eq__``, a header claiming a billion elements) can reach the judge.

This module runs in the grading sandbox: it imports nothing of the grader's.
"""
from __future__ import annotations

import base64
from dataclasses import dataclass

import numpy as np

from autograder.kernel.hints import shorten
from autograder.kernel.wire import UNREAD, Unreadable, check

MIME = "application/vnd.course.autograder+json"
NUMERIC_KINDS = "biuf"
MAX_ELEMENTS = 10_000_000  # per decoded array: far above any exercise's output
MAX_TEXT = 2000  # characters of a case's error text kept when it is decoded
MAX_OUTPUTS = 64  # arrays one case may return: far above any exercise's


# --- a case's outcome: its outputs, or one of two records ---------------------------------
#
# A case's outcome is a tuple of arrays (what the learner's function returned), a ``Raised``
# or an ``OverMemory``; each crosses the boundary in a tagged form (``encode_outcome``), so
# that no meaning rides on the wording of a text.

@dataclass(frozen=True)
class Raised:
    """The learner's call raised, or did not finish: ``text`` says what happened in words a
    learner reads (``hints.describe_error``); ``stub``: it raised the release's
    ``NotImplementedError``, so the exercise is not started yet."""
    text: str
    stub: bool = False


COUNTED, STOPPED, REFUSED = "counted", "stopped", "refused"  # how an ``OverMemory`` was found


@dataclass(frozen=True)
class OverMemory:
    """The call held more memory at once than its case allows, as found ``by`` COUNTED
    (``peak`` bytes in Python's count in the kernel), STOPPED (the learner's code stopped that
    count) or REFUSED (run alone, the operating system refused an allocation: ``fresh``)."""
    by: str
    peak: int = 0


NOT_IMPLEMENTED = Raised("not implemented yet", stub=True)  # the release's stub


def encode_array(a: np.ndarray) -> dict:
    a = np.asarray(a)
    return {"dtype": a.dtype.str, "shape": list(a.shape),
            "data": base64.b64encode(a.tobytes(order="C")).decode("ascii")}


def decode_array(d: dict) -> np.ndarray:
    dtype = np.dtype(str(d["dtype"]))
    if dtype.kind not in NUMERIC_KINDS or dtype.hasobject:
        raise ValueError(f"dtype {dtype} is not a plain numeric type")
    if not isinstance(d["shape"], list) or len(d["shape"]) > 32 or any(type(n) is not int for n in d["shape"]):
        raise ValueError("a shape that is not a short list of integers")
    shape = tuple(d["shape"])
    if any(not 0 <= n <= MAX_ELEMENTS for n in shape) or np.prod(shape, dtype=np.float64) > MAX_ELEMENTS:
        raise ValueError(f"shape {shape} is too large")
    raw = base64.b64decode(d["data"], validate=True)
    if len(raw) != int(np.prod(shape)) * dtype.itemsize:
        raise ValueError(f"{len(raw)} bytes do not make an array of shape {shape} and dtype {dtype}")
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


class Listed(np.ndarray):
    """An output the learner's code returned as a Python list (or tuple) of numbers, made an
    array: the judge tells it from the numpy array an exercise's text promises."""


def as_outputs(value) -> tuple:
    """Normalise a return value to a tuple of numeric numpy arrays; an item that was a list or
    a tuple of numbers (not a number) comes as a ``Listed`` array.

    Raises TypeError for anything that is not plain numbers (object arrays, None, strings).
    """
    items = value if isinstance(value, tuple) else (value,)
    out = []
    for item in items:
        if hasattr(item, "detach") and hasattr(item, "cpu"):  # a torch tensor
            item = item.detach().cpu().numpy()
        arr = np.array(item, copy=True)
        if arr.dtype.kind not in NUMERIC_KINDS:
            raise TypeError(f"returned a value of type {type(item).__name__}, expected numbers")
        out.append(arr.view(Listed) if isinstance(item, (list, tuple)) and arr.ndim else arr)
    return tuple(out)


# --- cases: keyword arguments of one call -------------------------------------------------

def encode_value(v):
    """Arrays, numbers, strings, None, and lists, tuples and dicts of them, as JSON data."""
    if isinstance(v, np.ndarray):
        return {"array": encode_array(v)}
    if isinstance(v, np.generic):
        return {"array": encode_array(np.asarray(v)), "scalar": True}
    if v is None or isinstance(v, (bool, int, float, str)):
        return {"value": v}
    if isinstance(v, tuple):
        return {"tuple": [encode_value(x) for x in v]}
    if isinstance(v, list):
        return {"list": [encode_value(x) for x in v]}
    if isinstance(v, dict):
        return {"dict": {str(k): encode_value(x) for k, x in v.items()}}
    raise TypeError(f"cannot send a {type(v).__name__} to the kernel")


def decode_value(d):
    if "array" in d:
        a = decode_array(d["array"])
        return a[()] if d.get("scalar") else a
    if "value" in d:
        return d["value"]
    if "tuple" in d:
        return tuple(decode_value(x) for x in d["tuple"])
    if "list" in d:
        return [decode_value(x) for x in d["list"]]
    return {k: decode_value(x) for k, x in d["dict"].items()}


def encode_cases(exercise_id: str, function: str, call: str | None, cases: list,
                 signature: str | None = None, probes: dict | None = None,
                 memory: list | None = None) -> dict:
    """What the kernel needs to run one exercise: whom to call, how, and on what.

    ``probes``: the public cases with their expected outputs and the tolerance
    (``encode_probes``), for the search of a fix when the learner's code fails one of them
    (``autograder.kernel.repair``); they are the check cell's cases, which a learner can print.
    ``memory``: per case, the bytes the learner's call may allocate, or None (no limit)."""
    limits = {"memory": [None if m is None else int(m) for m in memory]} if memory and any(
        m is not None for m in memory) else {}
    return {"exercise": exercise_id, "function": function, "call": call, "signature": signature,
            "cases": [encode_value(c) for c in cases], **({"probes": probes} if probes else {}), **limits}


def decode_cases(payload: dict) -> list:
    return [decode_value(c) for c in payload["cases"]]


def encode_probes(cases: list, wants: list, rtol: float, atol: float, sites: int) -> dict:
    """``sites``: the edits the search may try (``Exercise.search_sites``)."""
    return {"cases": [encode_value(c) for c in cases], "rtol": rtol, "atol": atol, "sites": int(sites),
            "wants": [[encode_array(a) for a in w] for w in wants]}


def decode_probes(payload: dict | None) -> tuple[list, list, float, float, int]:
    """(cases, expected outputs, rtol, atol, edits to try); nothing when the grader sent no probes."""
    if not payload:
        return [], [], 0.0, 0.0, 0
    return ([decode_value(c) for c in payload["cases"]],
            [tuple(decode_array(a) for a in w) for w in payload["wants"]],
            float(payload["rtol"]), float(payload["atol"]), int(payload["sites"]))


# --- results: per case, its outcome ---------------------------------------------------------

def encode_results(exercise_id: str, results: list) -> dict:
    """``results``: per case, its outcome (a tuple of arrays, ``Listed`` ones noted by index,
    a ``Raised`` or an ``OverMemory``)."""
    return {"exercise": exercise_id, "cases": [encode_outcome(r) for r in results]}


def encode_outcome(outcome) -> dict:
    """One case's outcome in its tagged form: exactly one of ``raised``, ``over_memory``,
    ``outputs``."""
    if isinstance(outcome, Raised):
        return {"raised": outcome.text, **({"stub": True} if outcome.stub else {})}
    if isinstance(outcome, OverMemory):
        return {"over_memory": {"by": outcome.by, "peak": int(outcome.peak)}}
    encoded = {"outputs": [encode_array(a) for a in outcome]}
    listed = [k for k, a in enumerate(outcome) if isinstance(a, Listed)]
    if listed:
        encoded["listed"] = listed
    return encoded


def decode_results(payload: dict) -> list:
    """The inverse of ``encode_results``: per case, its outcome. A case whose entry cannot be
    read is that case's ``Raised`` (its answer is lost, not the others'); a payload that is
    not plain data within ``wire``'s limits, or holds no list of cases, raises ``Unreadable``
    (a ValueError)."""
    check(payload)
    cases = payload.get("cases") if isinstance(payload, dict) else None
    if not isinstance(cases, list):
        raise Unreadable("no list of cases")
    out = []
    for case in cases:
        try:
            out.append(decode_outcome(case))
        except (KeyError, ValueError, TypeError, AttributeError, OverflowError) as err:
            out.append(unread(err))
    return out


def unread(why) -> Raised:
    """The outcome of a case whose answer could not be read, and ``why``."""
    return Raised(shorten(f"{UNREAD} ({why})", MAX_TEXT))


def decode_outcome(d: dict):
    """One case's outcome from its tagged form; ValueError (or KeyError, TypeError) when the
    form is not exactly one of ``encode_outcome``'s."""
    if not isinstance(d, dict):
        raise ValueError("not a tagged outcome")
    tags = {"raised", "over_memory", "outputs"} & d.keys()
    if len(tags) != 1:
        raise ValueError("not exactly one kind of outcome")
    if "raised" in d:
        if not isinstance(d["raised"], str) or d.get("stub", False) not in (True, False):
            raise ValueError("an error that is not text")
        return NOT_IMPLEMENTED if d.get("stub") else Raised(shorten(d["raised"], MAX_TEXT))
    if "over_memory" in d:
        memory = d["over_memory"]
        by, peak = memory["by"], memory["peak"]
        if by not in (COUNTED, STOPPED, REFUSED) or type(peak) is not int or not 0 <= peak < 1 << 62:
            raise ValueError("a memory outcome out of its range")
        return OverMemory(by, peak)
    arrays, listed = d["outputs"], d.get("listed", [])
    if not isinstance(arrays, list) or len(arrays) > MAX_OUTPUTS or not isinstance(listed, list) \
            or any(type(k) is not int for k in listed):
        raise ValueError("outputs that are not a short list of arrays")
    return tuple(decode_array(a).view(Listed) if k in listed else decode_array(a)
                 for k, a in enumerate(arrays))


# --- a decoder's model served from outside its process (``fresh``, ``pipeline.rerun``) -------

def encode_ask(case: int, prefixes) -> dict:
    """A fresh process's request of case ``case``'s model on ``prefixes`` (any numbers)."""
    return {"ask": case, "prefixes": encode_array(np.asarray(prefixes))}


def decode_ask(message) -> tuple[int, np.ndarray]:
    """(case index, prefixes) of a request; ``Unreadable`` when it is not ``encode_ask``'s form
    (the prefixes may have any numeric dtype and shape: the model says what it takes)."""
    if not isinstance(message, dict) or message.keys() != {"ask", "prefixes"} or type(message["ask"]) is not int:
        raise Unreadable("not a request of the model")
    try:
        return message["ask"], decode_array(message["prefixes"])
    except (KeyError, ValueError, TypeError, AttributeError, OverflowError) as err:
        raise Unreadable(shorten(f"prefixes that are not an array of numbers ({err})", MAX_TEXT)) from None
