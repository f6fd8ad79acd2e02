"""Softmax and its backward pass: the one building block every later notebook reuses.

For z in R^n, s = softmax(z) has s_i = exp(z_i - max z) / sum_j exp(z_j - max z).
Subtracting the max changes nothing mathematically (it cancels) and keeps exp() finite.

The Jacobian is J = diag(s) - s s^T. It is symmetric, so the Jacobian-vector product and
the vector-Jacobian product are the same: given the upstream gradient g = dL/ds,
dL/dz = J g = s * (g - <g, s>). With -inf entries (masked positions) s is 0 there, and so
is the gradient.
"""
from __future__ import annotations

import numpy as np


def softmax(z: np.ndarray, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax of ``z`` along ``axis`` (any shape, float dtype kept).

    A slice that is -inf everywhere (a fully masked row) gives zeros rather than NaN.
    """
    z = np.asarray(z)
    m = np.max(z, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)  # fully masked slice: exp(-inf) = 0, no NaN
    e = np.exp(z - m)
    total = np.sum(e, axis=axis, keepdims=True)
    return e / np.where(total == 0, 1.0, total)


def log_softmax(z: np.ndarray, axis: int = -1) -> np.ndarray:
    """log softmax(z) along ``axis``, computed as z - max - log(sum(exp(z - max))).

    Accurate where softmax underflows to 0 (its log would be -inf); any shape.
    """
    z = np.asarray(z)
    m = np.max(z, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    return z - m - np.log(np.sum(np.exp(z - m), axis=axis, keepdims=True))


def softmax_jvp(s: np.ndarray, g: np.ndarray, axis: int = -1) -> np.ndarray:
    """dL/dz = s * (g - sum(g * s)) along ``axis``; ``s`` = softmax(z), ``g`` = dL/ds.

    Shapes: ``s`` and ``g`` the same, any shape; returns that shape.
    """
    return s * (g - np.sum(g * s, axis=axis, keepdims=True))


def softmax_forward(z: np.ndarray, axis: int = -1):
    """Layer form: ``(s, cache)``; see ``softmax``."""
    s = softmax(z, axis)
    return s, (s, axis)


def softmax_backward(ds: np.ndarray, cache) -> np.ndarray:
    """Layer form: dL/dz from dL/ds and the forward's cache; see ``softmax_jvp``."""
    s, axis = cache
    return softmax_jvp(s, ds, axis)
