"""What a case exercises, in words: "a causal mask", "T_q ≠ T_k", ... [trusted; also the check cell]

Feedback on a hidden case names what the case exercises, never its numbers; a course-wide
test (``tests/autograder/judge/test_features.py``) checks that every feature a hidden case exercises also
appears in at least one public case, so that the check cell can fail on it first.

``generic(case)`` finds what any case shows by its values (masks and their kinds, float32,
-inf, very large values); an exercise adds its own with ``Exercise.features``, usually built
from the small helpers below (``shape_features``).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

LARGE = 100.0  # |value| from which exp() and squares stop being harmless


def _arrays(case: dict):
    for name, value in case.items():
        if isinstance(value, np.ndarray):
            yield name, value
        elif isinstance(value, (tuple, list)):  # a cache: a tuple of arrays
            yield from ((f"{name}[{i}]", v) for i, v in enumerate(value) if isinstance(v, np.ndarray))


def mask_kind(mask: np.ndarray) -> str:
    """'a causal mask', 'a padding mask' or 'a mask' (True = may attend; last axis = keys)."""
    T_q, T_k = mask.shape[-2:] if mask.ndim >= 2 else (1, mask.shape[-1])
    grid = np.broadcast_to(mask, mask.shape[:-2] + (T_q, T_k)) if mask.ndim >= 2 else mask[None]
    if T_q == T_k and np.array_equal(grid, np.broadcast_to(np.tril(np.ones((T_q, T_k), bool)), grid.shape)):
        return "a causal mask"
    keep = grid.sum(axis=-1, keepdims=True)
    prefix = np.arange(T_k) < keep  # each row keeps a prefix of the keys
    if np.array_equal(grid, prefix) and (grid == grid[..., :1, :]).all():
        return "a padding mask"
    return "a mask"


def generic(case: dict) -> list[str]:
    """Features any case shows by its values, whatever the exercise."""
    found = []
    mask = case.get("mask")
    if isinstance(mask, np.ndarray) and mask.dtype == bool:
        found.append(mask_kind(mask))
        if not mask.any(axis=-1).all():
            found.append("a query whose keys are all masked")
    floats = [v for _, v in _arrays(case) if v.dtype.kind == "f"]
    if any(v.dtype == np.float32 for v in floats):
        found.append("float32 inputs")
    if any(np.isneginf(v).any() for v in floats):
        found.append("-inf entries")
    finite = [np.abs(v[np.isfinite(v)]) for v in floats]
    if any(f.size and f.max() >= LARGE for f in finite):
        found.append("very large values")
    return found


def shape_features(**tests: Callable[[dict], bool]) -> Callable[[dict], list[str]]:
    """``features=shape_features(**{"T_q ≠ T_k": lambda c: ...})``: the names whose test holds."""
    def features(case: dict) -> list[str]:
        return [name for name, test in tests.items() if test(case)]
    return features


def in_words(features: list[str], most: int | None = None) -> str:
    """``features`` as a list in words; past ``most`` of them, the rest counted."""
    if not features:
        return "plain inputs"
    if most is not None and len(features) > most:
        return ", ".join(features[:most]) + f" and {len(features) - most} more"
    return ", ".join(features)
