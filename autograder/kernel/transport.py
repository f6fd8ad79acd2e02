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

import numpy as np

MIME = "application/vnd.course.autograder+json"
NUMERIC_KINDS = "biuf"
MAX_ELEMENTS = 10_000_000  # per decoded array: far above any exercise's output
NOT_IMPLEMENTED = "not implemented yet"  # the result of a case that raised NotImplementedError
OVER_MEMORY = "over the memory limit: "  # + the peak in bytes (-1: the code stopped the count)
REFUSED = -2  # the peak of a case whose allocation the operating system refused (``fresh``)
AGAIN = "run again alone in a fresh process, on a case of the same kind the grader drew for it"


def over_memory(result) -> int | None:
    """The peak bytes of a case that allocated more than its limit (``OVER_MEMORY``), -1 when
    the learner's code stopped the count, None for any other result."""
    if isinstance(result, str) and result.startswith(OVER_MEMORY):
        try:
            return int(result[len(OVER_MEMORY):])
        except ValueError:
            return None
    return None


def encode_array(a: np.ndarray) -> dict:
    a = np.asarray(a)
    return {"dtype": a.dtype.str, "shape": list(a.shape),
            "data": base64.b64encode(a.tobytes(order="C")).decode("ascii")}


def decode_array(d: dict) -> np.ndarray:
    dtype = np.dtype(str(d["dtype"]))
    if dtype.kind not in NUMERIC_KINDS or dtype.hasobject:
        raise ValueError(f"dtype {dtype} is not a plain numeric type")
    shape = tuple(int(n) for n in d["shape"])
    if any(n < 0 for n in shape) or int(np.prod(shape, dtype=np.float64)) > MAX_ELEMENTS:
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


def encode_probes(cases: list, wants: list, rtol: float, atol: float) -> dict:
    return {"cases": [encode_value(c) for c in cases], "rtol": rtol, "atol": atol,
            "wants": [[encode_array(a) for a in w] for w in wants]}


def decode_probes(payload: dict | None) -> tuple[list, list, float, float]:
    """(cases, expected outputs, rtol, atol); nothing when the grader sent no probes."""
    if not payload:
        return [], [], 0.0, 0.0
    return ([decode_value(c) for c in payload["cases"]],
            [tuple(decode_array(a) for a in w) for w in payload["wants"]],
            float(payload["rtol"]), float(payload["atol"]))


# --- results: per case, the outputs or the error text ------------------------------------

def encode_results(exercise_id: str, results: list) -> dict:
    """``results``: per case, a tuple of arrays (``Listed`` ones noted by index) or an error string."""
    return {"exercise": exercise_id, "cases": [{"error": r} if isinstance(r, str) else _encode_outputs(r)
                                               for r in results]}


def _encode_outputs(outputs: tuple) -> dict:
    encoded = {"outputs": [encode_array(a) for a in outputs]}
    listed = [k for k, a in enumerate(outputs) if isinstance(a, Listed)]
    if listed:
        encoded["listed"] = listed
    return encoded


def decode_results(payload: dict) -> list:
    """The inverse of ``encode_results``: per case, a tuple of arrays or an error string."""
    out = []
    for case in payload["cases"]:
        if "error" in case:
            out.append(str(case["error"])[:2000])
        else:
            listed = {int(k) for k in case.get("listed", ())}
            out.append(tuple(decode_array(a).view(Listed) if k in listed else decode_array(a)
                             for k, a in enumerate(case["outputs"])))
    return out
