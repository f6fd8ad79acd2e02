"""Exercises of notebook 03 (positional encoding) [trusted; also the check cell]

Convention (course_lib.positional): pairs of adjacent dimensions (2i, 2i+1), pair i at
omega_i = 10000^(-2i/d_model), sin first then cos; A(tau) has the 2x2 blocks
[[cos, sin], [-sin, cos]] (Week 7, eq. (12): A(tau) P[t] = P[t + tau]); RoPE rotates row t
by R(positions[t]), the blocks [[cos, -sin], [sin, cos]] of Su et al., i.e. R(t) = A(-t).
"""
from __future__ import annotations

import numpy as np

from autograder.judge.exercise import Exercise, Mistake, any_of, switchable
from autograder.judge.features import shape_features
from course_lib.positional import apply_rope, frequencies, rotation_matrix, sinusoidal_encoding

NO_LIBRARY = ("course_lib.positional", "torch")


# -------------------------------------------------------------------------------- shared
def _positions_features(**more):
    return shape_features(**{
        "position 0": lambda c: (np.asarray(c["positions"]) == 0).any(),
        "a single position": lambda c: np.size(c["positions"]) == 1,
        "positions not in increasing order": lambda c: (np.diff(c["positions"]) <= 0).any(),
        "large positions (100 or more)": lambda c: (np.asarray(c["positions"]) >= 100).any(),
        **more})


# The reference raises ValueError for an odd d_model; these mutants differ only by not raising.
ODD_D_MODEL = {m: "they differ only for an odd d_model, where the reference raises; d_model is "
                  "even by the exercise's text (pairs of dimensions)" for m in (
    "frequencies: d_model -> base in `if d_model % 2`", "frequencies: 2 -> 0.5 in `if d_model % 2`", "frequencies: 2 -> 1 in `if d_model % 2`")}


# ------------------------------------------------------------------- sinusoidal encoding
def _encoding_cases(rng, hidden):
    if not hidden:
        return [dict(positions=np.arange(1, 7), d_model=4),  # Week 7 counts t = 1 .. n
                dict(positions=np.arange(1, 11), d_model=16),
                dict(positions=np.array([rng.integers(1, 20), 0, rng.integers(1, 20)]), d_model=2),
                dict(positions=rng.integers(1000, 5000, size=1), d_model=8)]
    return [dict(positions=np.arange(0, 5), d_model=2),
            dict(positions=np.array([3]), d_model=8),
            dict(positions=rng.integers(0, 400, size=12), d_model=32),
            dict(positions=np.arange(5000, 5008), d_model=64),  # far beyond training lengths
            dict(positions=np.arange(1, 401), d_model=512)]  # Week 7's picture


def _interleave(sin_part, cos_part):
    P = np.empty((sin_part.shape[0], 2 * sin_part.shape[1]))
    P[:, 0::2], P[:, 1::2] = sin_part, cos_part
    return P


def _per_dimension(positions, d_model, exponent):
    """Each dimension dim gets its own frequency base^(-exponent(dim) / d_model)."""
    dim = np.arange(d_model)
    angles = np.asarray(positions, float)[:, None] * 10000.0 ** (-exponent(dim) / d_model)
    return np.where(dim % 2 == 0, np.sin(angles), np.cos(angles))


def _pairs(positions, d_model, base=10000.0, k_scale=2.0):
    angles = np.asarray(positions, float)[:, None] * base ** (-k_scale * np.arange(d_model // 2) / d_model)
    return np.sin(angles), np.cos(angles)


def _swapped(positions, d_model):
    s, c = _pairs(positions, d_model)
    return _interleave(c, s)


def _halves(positions, d_model):
    s, c = _pairs(positions, d_model)
    return np.concatenate([s, c], axis=1)


SINUSOIDAL_MISTAKES = [
    Mistake(name="exponent 2 dim per dimension instead of 2i per pair",
            hint="in omega_i = 10000^(-2i/d_model), i counts pairs: dimensions 2i and 2i+1 share one "
                 "i (i = dim // 2), so do not put the dimension index dim itself into 2i.",
            wrong=lambda positions, d_model: _per_dimension(positions, d_model, lambda dim: 2 * dim)),
    Mistake(name="sin and cos of a pair at different frequencies",
            hint="the exponent dim/d_model with the dimension index dim gives the cosine of a pair a "
                 "slightly lower frequency than its sine; both use omega_i with i = dim // 2.",
            wrong=lambda positions, d_model: _per_dimension(positions, d_model, lambda dim: dim)),
    Mistake(name="exponent i/d_model instead of 2i/d_model",
            hint="the exponent is 2i / d_model (eq. 10), so the slowest pair reaches almost 1/10000.",
            wrong=lambda positions, d_model: _interleave(*_pairs(positions, d_model, k_scale=1.0))),
    Mistake(name="omega_i = 10000^(2i/d_model) without the minus sign",
            hint="the frequencies fall from 1 to about 1/10000: omega_i = 1 / 10000^(2i/d_model), "
                 "a negative exponent.",
            wrong=lambda positions, d_model: _interleave(*_pairs(positions, d_model, k_scale=-2.0))),
    Mistake(name="base 1000 instead of 10000",
            hint="the wavelengths grow geometrically up to 10000 * 2 pi: the base is 10000.",
            wrong=lambda positions, d_model: _interleave(*_pairs(positions, d_model, base=1000.0))),
    Mistake(name="sin/cos order swapped",
            hint="Week 7's eq. (11) puts the sine first: P[t, 2i] = sin(omega_i t), "
                 "P[t, 2i+1] = cos(omega_i t).",
            wrong=_swapped),
    Mistake(name="sines and cosines in separate halves",
            hint="the sines and cosines alternate dimension by dimension (Week 7, eq. (11)), they are "
                 "not concatenated as [all sines, all cosines].", wrong=_halves),
    Mistake(name="positions ignored",
            hint="use the values in `positions` (Week 7 counts from t = 1), not 0 .. T-1.",
            wrong=lambda positions, d_model: sinusoidal_encoding(np.arange(len(positions)), d_model)),
    Mistake(name="positions ignored (counted 1 .. T)",
            hint="use the values in `positions`: Week 7 counts from t = 1, but the positions given "
                 "may start anywhere, so 1 .. T is right only when they are 1 .. T.",
            wrong=lambda positions, d_model: sinusoidal_encoding(np.arange(1, len(positions) + 1), d_model)),
]

SINUSOIDAL = Exercise(
    id="positional.sinusoidal",
    function="sinusoidal_encoding",
    signature="sinusoidal_encoding(positions, d_model) -> P",
    cases=_encoding_cases,
    reference=sinusoidal_encoding,
    features=_positions_features(**{"d_model = 2 (one pair)": lambda c: c["d_model"] == 2}),
    dims=lambda c: {"d_model": c["d_model"], "T": np.size(c["positions"])},
    points=2,
    output_names=("P",),
    forbidden=NO_LIBRARY,
    equivalent=ODD_D_MODEL,
    mistakes=SINUSOIDAL_MISTAKES,
)


# ----------------------------------------------------------------------- rotation A(tau)
def _rotation_cases(rng, hidden):
    if not hidden:
        return [dict(tau=int(rng.integers(1, 5)), d_model=4), dict(tau=int(rng.integers(2, 9)), d_model=8),
                dict(tau=-int(rng.integers(1, 6)), d_model=2), dict(tau=0, d_model=4),
                dict(tau=int(rng.integers(100, 300)), d_model=6)]
    return [dict(tau=0, d_model=6), dict(tau=5, d_model=2), dict(tau=17, d_model=16),
            dict(tau=-4, d_model=8), dict(tau=250, d_model=32)]


def _blocks(c, s, pairs_of, d_model):
    """Block-diagonal matrix with blocks [[c, s], [-s, c]] on index pairs ``pairs_of``."""
    first, second = pairs_of(d_model)
    A = np.zeros((d_model, d_model))
    A[first, first], A[first, second], A[second, first], A[second, second] = c, s, -s, c
    return A


def _adjacent(d):
    return np.arange(0, d, 2), np.arange(1, d, 2)


def _split_halves(d):
    return np.arange(d // 2), np.arange(d // 2, d)


def _overlapping(tau, d_model):
    """The blocks written at A[i:i+2, i:i+2], one after the other: each overwrites a corner of
    the one before."""
    A, theta = np.zeros((d_model, d_model)), _theta(tau, d_model)
    for i, t in enumerate(theta):
        A[i:i + 2, i:i + 2] = [[np.cos(t), np.sin(t)], [-np.sin(t), np.cos(t)]]
    return A


def _theta(tau, d_model, k_scale=2.0):
    return tau * 10000.0 ** (-k_scale * np.arange(d_model // 2) / d_model)


ROTATION_MISTAKES = [
    Mistake(name="rotation sign flipped",
            hint="with the blocks [[cos, -sin], [sin, cos]] you get A(tau) P[t] = P[t - tau]; Week 7 "
                 "uses the blocks [[cos, sin], [-sin, cos]] so that A(tau) P[t] = P[t + tau].",
            wrong=lambda tau, d_model: rotation_matrix(-tau, d_model)),
    Mistake(name="same angle tau in every block",
            hint="block i rotates by omega_i * tau, not by tau: each pair turns at its own frequency.",
            wrong=lambda tau, d_model: _blocks(np.cos(tau), np.sin(tau), _adjacent, d_model)),
    Mistake(name="blocks on the wrong pairs of dimensions",
            hint="the sinusoidal encoding pairs adjacent dimensions (2i, 2i+1); a block that mixes "
                 "i and i + d_model/2 rotates a sine of one frequency into a sine of another.",
            wrong=lambda tau, d_model: _blocks(np.cos(_theta(tau, d_model)), np.sin(_theta(tau, d_model)),
                                             _split_halves, d_model)),
    Mistake(name="blocks that overlap (block i at rows i, i + 1)",
            hint="block i sits on rows and columns 2i and 2i + 1: A[2*i:2*i + 2, 2*i:2*i + 2]. "
                 "With A[i:i + 2, i:i + 2] each block overwrites half of the one before.",
            wrong=lambda tau, d_model: _overlapping(tau, d_model)),
    Mistake(name="exponent i/d_model instead of 2i/d_model",
            hint="use the same omega_i as the encoding: 10000^(-2i/d_model).",
            wrong=lambda tau, d_model: _blocks(np.cos(_theta(tau, d_model, 1.0)),
                                               np.sin(_theta(tau, d_model, 1.0)), _adjacent, d_model)),
]

ROTATION = Exercise(
    id="positional.rotation",
    function="rotation_matrix",
    signature="rotation_matrix(tau, d_model) -> A",
    cases=_rotation_cases,
    reference=rotation_matrix,
    features=shape_features(**{
        "tau = 0": lambda c: c["tau"] == 0, "negative tau": lambda c: c["tau"] < 0,
        "large tau (100 or more)": lambda c: c["tau"] >= 100,
        "d_model = 2 (one pair)": lambda c: c["d_model"] == 2}),
    dims=lambda c: {"d_model": c["d_model"]},
    points=2,
    output_names=("A",),
    axes={"A": ("axis -2 (rows)", "axis -1 (columns)")},  # A(m) rotates a vector: no attention weights
    forbidden=NO_LIBRARY,
    equivalent=ODD_D_MODEL,
    mistakes=ROTATION_MISTAKES,
)


# ------------------------------------------------------------------------------- RoPE
def _rope_cases(rng, hidden):
    if not hidden:
        return [dict(x=rng.normal(size=(4, 4)), positions=np.arange(4)),
                dict(x=rng.normal(size=(2, 5, 8)), positions=np.arange(3, 8)),
                dict(x=rng.normal(size=(2, 2, 3, 2)),
                     positions=np.array([rng.integers(100, 400), 0, rng.integers(1, 20)])),
                dict(x=rng.normal(size=(1, 4)), positions=rng.integers(1, 20, size=1))]
    return [dict(x=rng.normal(size=(3, 2)), positions=np.array([0, 1, 2])),
            dict(x=rng.normal(size=(2, 3, 6, 16)), positions=np.arange(6)),  # (B, n_heads, T, d_k)
            dict(x=rng.normal(size=(1, 6)), positions=np.array([9])),
            dict(x=rng.normal(size=(5, 32)), positions=rng.integers(0, 1000, size=5)),
            dict(x=rng.normal(size=(2, 4, 8)), positions=np.array([7, 3, 0, 12]))]


def _rope_halves(x, positions, sign=1.0):
    d = x.shape[-1]
    theta = np.asarray(positions, float)[:, None] * frequencies(d)
    c, s = np.cos(theta), sign * np.sin(theta)  # sign -1: turned the wrong way
    a, b = x[..., : d // 2], x[..., d // 2:]
    return np.concatenate([c * a - s * b, s * a + c * b], axis=-1)


def _rope_overwritten(x, positions, first=0):
    """RoPE written into one array in two steps, the second reading the first's new values:
    ``first`` 0 rotates the even entries first, 1 the odd ones."""
    d = x.shape[-1]
    theta = np.asarray(positions, float)[:, None] * frequencies(d)
    c, s = np.cos(theta), np.sin(theta)
    out = np.array(np.broadcast_to(x, np.broadcast_shapes(np.shape(x), (theta.shape[0], d))), float)
    steps = [(0, lambda: c * out[..., 0::2] - s * out[..., 1::2]),
             (1, lambda: s * out[..., 0::2] + c * out[..., 1::2])]
    for parity, value in steps[first:] + steps[:first]:
        out[..., parity::2] = value()
    return out


@switchable
def _rope_with(sign=1.0, halves=False, row_index=False):
    """RoPE turned the other way (``sign`` -1), on the pairs (x[i], x[i + d/2]) (``halves``), or
    by the angles of the row indices 0 .. T-1 instead of the positions (``row_index``)."""
    def wrong(x, positions):
        angles = np.arange(len(positions)) if row_index else np.asarray(positions)
        return _rope_halves(x, angles, sign) if halves else apply_rope(x, sign * angles)
    return wrong


ROPE_MISTAKES = [
    Mistake(name="RoPE pairing convention mixed",
            hint="this course rotates adjacent pairs (x[2i], x[2i+1]), the same pairs as A(tau); you "
                 "paired x[i] with x[i + d/2] (the 'rotate half' convention of some libraries).",
            wrong=_rope_with(halves=True)),
    Mistake(name="rotation sign flipped",
            hint="RoPE turns each pair by +omega_i t (Su et al.): out[2i] = cos * x[2i] - sin * x[2i+1], "
                 "out[2i+1] = sin * x[2i] + cos * x[2i+1]. The blocks of A(t) from the previous "
                 "exercise turn the other way (R(t) = A(t)^T = A(-t)).",
            wrong=_rope_with(sign=-1.0)),
    Mistake(name="RoPE pairing convention mixed and rotation sign flipped",
            hint="pair adjacent dimensions (2i, 2i+1), and use RoPE's blocks [[cos, -sin], [sin, cos]].",
            wrong=_rope_with(halves=True, sign=-1.0)),
    Mistake(name="one half of each pair rotated from the other's new value",
            hint="out[2i] and out[2i+1] both come from the old x[2i] and x[2i+1]: writing the even "
                 "entries into x first, then the odd ones from them, uses a rotated x[2i]. Compute "
                 "both into a new array (or keep copies of the old halves).",
            wrong=_rope_overwritten,
            detect=any_of(_rope_overwritten, lambda x, positions: _rope_overwritten(x, positions, first=1))),
    Mistake(name="encoding added instead of rotating",
            hint="RoPE does not add P[t]: it rotates each pair of x by the angle omega_i * t.",
            wrong=lambda x, positions: x + sinusoidal_encoding(positions, x.shape[-1])),
    Mistake(name="positions ignored",
            hint="rotate row t by the angle of positions[t], not of its row index.",
            wrong=_rope_with(row_index=True)),
]

ROPE = Exercise(
    id="positional.rope",
    function="apply_rope",
    signature="apply_rope(x, positions) -> x_rotated",
    cases=_rope_cases,
    reference=apply_rope,
    features=_positions_features(**{
        "batch axes": lambda c: c["x"].ndim > 2, "two batch axes": lambda c: c["x"].ndim > 3,
        "d = 2 (one pair)": lambda c: c["x"].shape[-1] == 2}),
    dims=lambda c: {"d": c["x"].shape[-1], "T": c["x"].shape[-2]},
    points=2,
    output_names=("x_rotated",),
    axes={"x_rotated": ("T", "d_model")},
    forbidden=NO_LIBRARY,
    equivalent={"apply_rope: a line that updates `x` is missing":
                "x is an array (..., T, d) by the exercise's text, so np.asarray(x) is a no-op",
                **{m: "they differ only for an odd d, where the reference raises; d is even by "
                      "the exercise's text (adjacent pairs (2i, 2i+1), angles (T, d/2))"
                   for m in ODD_D_MODEL}},
    mistakes=ROPE_MISTAKES,
)


EXERCISES = [SINUSOIDAL, ROTATION, ROPE]
