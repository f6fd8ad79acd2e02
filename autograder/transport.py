"""Outputs as plain data: how the learner's kernel hands its results to the judge.

The kernel prints one display output per graded cell with MIME type ``MIME``; its JSON holds
the exercise id and, per case, either the outputs (numeric arrays as base64 bytes) or the
error text. Decoding accepts only booleans, integers and floats, so no learner-made object
(pickles, objects with a forged ``__eq__``) can reach the judge.
"""
from __future__ import annotations

import base64

import numpy as np

MIME = "application/vnd.course.autograder+json"
NUMERIC_KINDS = "biuf"


def encode_array(a: np.ndarray) -> dict:
    a = np.asarray(a)
    return {"dtype": a.dtype.str, "shape": list(a.shape),
            "data": base64.b64encode(a.tobytes(order="C")).decode("ascii")}


def decode_array(d: dict) -> np.ndarray:
    dtype = np.dtype(str(d["dtype"]))
    if dtype.kind not in NUMERIC_KINDS or dtype.hasobject:
        raise ValueError(f"dtype {dtype} is not a plain numeric type")
    shape = tuple(int(n) for n in d["shape"])
    raw = base64.b64decode(d["data"], validate=True)
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def encode_results(exercise_id: str, results: list) -> dict:
    """``results``: per case, a tuple of arrays or an error string."""
    cases = [{"error": r} if isinstance(r, str) else {"outputs": [encode_array(a) for a in r]}
             for r in results]
    return {"exercise": exercise_id, "cases": cases}


def decode_results(payload: dict) -> list:
    """The inverse of ``encode_results``: per case, a tuple of arrays or an error string."""
    out = []
    for case in payload["cases"]:
        if "error" in case:
            out.append(str(case["error"]))
        else:
            out.append(tuple(decode_array(a) for a in case["outputs"]))
    return out
