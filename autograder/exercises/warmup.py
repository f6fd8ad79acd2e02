"""Exercises of notebook 00 (start here) [trusted; also the check cell]

A stable softmax and its backward pass.
"""
from __future__ import annotations

import numpy as np

from autograder.judge.exercise import Exercise, Mistake
from autograder.judge.features import shape_features
from course_lib.softmax import softmax, softmax_jvp

FORBIDDEN = ("course_lib.softmax", "course_lib.attention", "scipy", "torch")


# ============================================================================ shared
AXIS_FEATURES = shape_features(**{
    "an axis other than the last": lambda c: c["axis"] % np.ndim(c.get("z", c.get("s"))) !=
    np.ndim(c.get("z", c.get("s"))) - 1,
    "a 3-D array": lambda c: np.ndim(c.get("z", c.get("s"))) == 3,
    "a single entry": lambda c: np.size(c.get("z", c.get("s"))) == 1})


# ============================================================================ softmax
def _with_neg_inf(z):
    """z (2, 3) with one -inf in each row; every column keeps a finite entry."""
    z[0, 1] = z[1, 0] = -np.inf
    return z


def _spread(z, rng):
    """z (B, n) with one entry of each row lowered by 1000: a row spread over about 1000, so
    exp(z - min) overflows where exp(z - max) does not."""
    z[np.arange(len(z)), rng.integers(0, z.shape[1], size=len(z))] -= 1000.0
    return z


def _softmax_cases(rng: np.random.Generator, hidden: bool) -> list[dict]:
    if not hidden:
        return [dict(z=rng.normal(size=5), axis=-1),
                dict(z=rng.normal(size=(3, 4)), axis=-1),
                # exp(1000) overflows, and a row far below the other: a global maximum underflows it
                dict(z=np.stack([rng.normal(size=3), rng.normal(size=3) * 3 + 1000.0]), axis=-1),
                dict(z=_with_neg_inf(rng.normal(size=(2, 3)).astype(np.float32)), axis=0),
                dict(z=rng.normal(size=(2, 2, 3)), axis=1),
                dict(z=rng.normal(size=1), axis=-1)]
    masked = rng.normal(size=(3, 5))
    masked[0, 1:] = -np.inf
    masked[2, ::2] = -np.inf
    return [dict(z=rng.normal(size=(4, 3)), axis=0),
            dict(z=rng.normal(size=(2, 3, 4)), axis=1),
            dict(z=np.array([7.5]), axis=-1),
            dict(z=masked, axis=-1),
            dict(z=-rng.uniform(800, 900, size=(3, 6)), axis=-1),  # exp(-800) underflows to 0
            dict(z=np.stack([rng.normal(size=4), rng.normal(size=4) + 1000.0]), axis=-1),
            dict(z=_spread(rng.normal(size=(2, 5)), rng), axis=-1),
            dict(z=rng.normal(size=(5, 2)).astype(np.float32), axis=-1)]


def _no_max(z, axis=-1):
    with np.errstate(all="ignore"):
        e = np.exp(z)
        return e / e.sum(axis=axis, keepdims=True)


def _global_max(z, axis=-1):
    with np.errstate(all="ignore"):
        e = np.exp(z - np.max(z))
        return e / e.sum(axis=axis, keepdims=True)


def _last_axis(z, axis=-1):
    return softmax(z, axis=-1)


# Mutants of course_lib.softmax.softmax that no legitimate input of this exercise tells apart.
SOFTMAX_EQUIVALENT = {
    "softmax: a line that updates `z` is missing":
        "z = np.asarray(z) is a no-op on an array; on a list, np.max(z, ...) and z - m convert "
        "it anyway, so every later line computes the same values",
    "softmax: a line that updates `m` is missing":
        "np.where(np.isfinite(m), m, 0.0) only changes a slice with no finite maximum (all "
        "-inf, or a +inf entry): softmax is undefined there and this exercise does not grade it "
        "(the notebook's own 3-line solution gives NaN too); attention.forward grades fully "
        "masked rows",
}


def _log_softmax(z, axis=-1):
    shifted = z - np.max(z, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


SOFTMAX = Exercise(
    id="warmup.softmax",
    function="softmax",
    signature="softmax(z, axis=-1) -> s",
    cases=_softmax_cases,
    reference=softmax,
    features=AXIS_FEATURES,
    points=2,
    output_names=("s",),
    axes={"s": ("axis -2 of z", "axis -1 of z")},  # s has z's shape; the case's axis is either
    forbidden=FORBIDDEN,
    equivalent=SOFTMAX_EQUIVALENT,
    mistakes=[
        Mistake(name="no max-subtraction (or the maximum added)",
                hint="exp() of large logits overflows to inf and the result becomes NaN; "
                     "subtract the maximum along the axis before exp() (z - max: adding "
                     "it overflows the same way).", wrong=_no_max),
        Mistake(name="normalised over the wrong axis",
                hint="the sums must run along `axis` (use axis=axis, keepdims=True).",
                wrong=_last_axis),
        Mistake(name="maximum taken over the whole array",
                hint="subtract the maximum of each slice along `axis` (keepdims=True), not the "
                     "global maximum: a row far below the global maximum underflows to 0/0.",
                wrong=_global_max),
        Mistake(name="the log of the softmax returned",
                hint="z - max - log(sum(exp(z - max))) is log s, the log-softmax: return its "
                     "exp, or exp(z - max) / sum(exp(z - max)) directly.",
                wrong=_log_softmax),
        Mistake(name="not normalised",
                hint="divide exp(z - max) by its sum along the axis so each slice sums to 1.",
                detect=lambda case, got, want: np.allclose(
                    got[0] / np.sum(got[0], axis=case["axis"], keepdims=True), want[0])),
    ],
)


# ============================================================================ softmax backward
def _jvp_cases(rng: np.random.Generator, hidden: bool) -> list[dict]:
    out = []
    shapes = [((6,), -1), ((3, 4), -1), ((2, 3, 2), 1), ((1,), -1)] if not hidden else [((4, 3), 0), ((2, 3, 5), 1), ((1,), -1), ((5, 5), -1)]
    for shape, axis in shapes:
        s = softmax(rng.normal(size=shape) * 2, axis=axis)
        out.append(dict(s=s, g=rng.normal(size=shape), axis=axis))
    return out


SOFTMAX_JVP = Exercise(
    id="warmup.softmax_jvp",
    function="softmax_jvp",
    signature="softmax_jvp(s, g, axis=-1) -> dz",
    cases=_jvp_cases,
    reference=softmax_jvp,
    features=AXIS_FEATURES,
    points=2,
    output_names=("dz",),
    axes={"dz": ("axis -2 of z", "axis -1 of z")},
    forbidden=FORBIDDEN,
    mistakes=[
        Mistake(name="softmax backward missing the sum term",
                hint="the Jacobian is diag(s) - s s^T: besides s * g there is the term "
                     "-s * sum(g * s) along the axis.", wrong=lambda s, g, axis=-1: s * g),
        Mistake(name="only the diagonal of the Jacobian (the sigmoid's derivative s(1 - s))",
                hint="every output of a softmax depends on every input: the Jacobian is "
                     "diag(s) - s s^T, not diag(s(1 - s)), so dz = s * (g - sum(g * s)) along the axis.",
                wrong=lambda s, g, axis=-1: s * (1 - s) * g),
        Mistake(name="sum term with the wrong sign",
                hint="dz = s * (g - sum(g * s)): the sum is subtracted.",
                wrong=lambda s, g, axis=-1: s * (g + np.sum(g * s, axis=axis, keepdims=True))),
        Mistake(name="sum over the wrong axis",
                hint="the inner product <g, s> runs along `axis` (keepdims=True).",
                wrong=lambda s, g, axis=-1: s * (g - np.sum(g * s, axis=-1, keepdims=True))),
        Mistake(name="sum without keepdims",
                hint="sum(g * s, axis=axis) drops the axis, so it broadcasts against the wrong "
                     "dimension; pass keepdims=True.",
                wrong=lambda s, g, axis=-1: s * (g - np.sum(g * s, axis=axis))),
    ],
)


EXERCISES = [SOFTMAX, SOFTMAX_JVP]
