"""Numerical gradients in float64: the check every hand-derived backward in the course gets.

Central differences, (f(x + eps e_i) - f(x - eps e_i)) / (2 eps), are accurate to O(eps^2);
with eps = 1e-6 in float64 that leaves about 1e-9 of truncation and rounding error, far below
any real mistake in a derivation. For a layer with an array output y = layer(x), check the
scalar L = sum(y * dy) for a random dy: its gradient is exactly what ``*_backward(dy)``
returns.
"""
from __future__ import annotations

import numpy as np


def numerical_gradient(f, x, eps=1e-6):
    """dF/dx by central differences. f: x -> scalar; x: float64 array of any shape.

    x is perturbed in place one entry at a time and restored, so f may also read x from
    a closure. Returns an array shaped like x.
    """
    grad = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + eps
        f_plus = f(x)
        x[i] = old - eps
        f_minus = f(x)
        x[i] = old
        grad[i] = (f_plus - f_minus) / (2 * eps)
    return grad


def rel_error(a, b):
    """max |a - b| / max(|a| + |b|): scale-free; about 1e-8 or less means they agree."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(a) + np.abs(b)), 1e-300))


def grad_check(f, x, analytic, eps=1e-6, name="x", verbose=True):
    """Relative error between ``analytic`` and the central-difference gradient of f at x.

    f: x -> scalar loss (float64); x: the array the gradient is taken with respect to
    (changed in place during the check and restored); analytic: your dF/dx, shaped like x.
    Prints one line when ``verbose`` and returns the error.
    """
    error = rel_error(analytic, numerical_gradient(f, x, eps))
    if verbose:
        verdict = "ok" if error < 1e-7 else "MISMATCH"
        print(f"d{name}: relative error {error:.2e}  {verdict}")
    return error
