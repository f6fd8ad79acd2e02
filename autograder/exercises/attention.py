"""Exercises of notebook 02 (attention) [trusted; also the check cell]

Every case is float64. The ``wrong`` functions below are the trusted models of one
plausible bug each; the judge names a mistake when a submission matches its model on
every case that the submission gets wrong.
"""
from __future__ import annotations

import numpy as np

from autograder.kernel.calls import gradient_target
from autograder.judge.exercise import Exercise, Mistake
from autograder.judge.features import shape_features
from autograder.judge.held import holding
from course_lib import attention as ref
from course_lib.attention import causal_mask, masked_scores, merge_heads, split_heads
from course_lib.softmax import softmax, softmax_jvp

FORBIDDEN = ("course_lib.attention", "torch")  # torch would also bring autograd


# ----------------------------------------------------------------------------- shared
def _randn(rng, *shape, scale=1.0):
    return rng.standard_normal(shape) * scale


def _random_mask(rng, *shape):
    """Random boolean mask in which every query keeps at least one key."""
    mask = rng.random(shape) < 0.6
    mask[~mask.any(axis=-1), 0] = True
    return mask


def _attention_case(rng, lead, T_q, T_k, d_k, d_v, mask=None, scale=1.0):
    return {"Q": _randn(rng, *lead, T_q, d_k, scale=scale),
            "K": _randn(rng, *lead, T_k, d_k, scale=scale),
            "V": _randn(rng, *lead, T_k, d_v), "mask": mask}


def _swapT(x):
    return np.swapaxes(x, -1, -2)


def _qkv_dims(c):
    return {"d_k": c["Q"].shape[-1], "T_q": c["Q"].shape[-2], "T_k": c["K"].shape[-2],
            "d_v": c["V"].shape[-1]}


QKV_FEATURES = shape_features(**{
    "T_q ≠ T_k": lambda c: c["Q"].shape[-2] != c["K"].shape[-2],
    "d_k ≠ d_v": lambda c: c["Q"].shape[-1] != c["V"].shape[-1],
    "batch axes": lambda c: c["Q"].ndim > 2,
    "two batch axes": lambda c: c["Q"].ndim > 3,
    "a single query and key (T = 1)": lambda c: c["Q"].shape[-2] == c["K"].shape[-2] == 1,
    "large scores (|Q K^T| / sqrt(d_k) above 30)": lambda c: np.abs(
        c["Q"] @ _swapT(c["K"])).max() / np.sqrt(c["Q"].shape[-1]) > 30,
    "masked (zero) attention weights": lambda c: "A" in c and not c["A"].all(),
})


# ----------------------------------------------------------------------------- forward
def _forward_cases(rng, hidden):
    if not hidden:
        return [
            _attention_case(rng, (), 4, 4, 3, 2),
            _attention_case(rng, (), 3, 5, 4, 4, mask=_random_mask(rng, 3, 5)),
            _attention_case(rng, (2,), 3, 3, 4, 2, mask=ref.padding_mask([3, 0], 3)),
            _attention_case(rng, (2, 2), 4, 4, 8, 8, mask=causal_mask(4), scale=10.0),
            _attention_case(rng, (), 1, 1, 1, 1),
            # the hidden case's twin: a softmax without a row's own maximum fails here too
            _rows_far_apart(_attention_case(rng, (), 3, 4, 4, 2)),
        ]
    return [
        _attention_case(rng, (2, 3), 5, 5, 8, 8, mask=causal_mask(5)),
        _attention_case(rng, (), 6, 6, 16, 3, scale=30.0),  # logits in the hundreds
        _attention_case(rng, (), 1, 1, 1, 1),
        _attention_case(rng, (3,), 4, 7, 1, 5, mask=ref.padding_mask([7, 2, 0], 7)),
        _attention_case(rng, (2, 2), 4, 6, 3, 5, mask=_random_mask(rng, 2, 2, 4, 6)),
        _attention_case(rng, (2,), 5, 5, 4, 4, mask=causal_mask(5), scale=4.0),
        _zero_query(_attention_case(rng, (), 3, 4, 2, 2)),
        _rows_far_apart(_attention_case(rng, (), 3, 5, 4, 3)),
    ]


def _rows_far_apart(case):
    """Keys with entries in [5, 10]; query 0 is 90 everywhere and query 2 is 0: the scores of
    row 0 are 900 .. 1800 and those of row 2 are 0, so a maximum taken over more than one row
    underflows row 2 to 0 / 0 (row 2 alone stays harmless, so a softmax without any
    max-subtraction fails here only by its overflow in row 0). Every input stays below 100."""
    case["K"] = 5.0 + 5.0 * np.abs(np.sin(case["K"]))
    case["Q"][0], case["Q"][2] = 90.0, 0.0
    return case


def _zero_query(case):
    """Query 1 all zeros: its scores are all exactly 0 (its row maximum is 0), uniform weights."""
    case["Q"][..., 1, :] = 0.0
    return case


# Mutants of course_lib.softmax.softmax (called by the attention references) that no input
# tells apart.
SOFTMAX_EQUIVALENT = {
    "softmax: a line that updates `z` is missing":
        "z = np.asarray(z) is a no-op: the scores S are always an array",
    "softmax: total -> e in `return …` #2":
        "np.where(e == 0, 1.0, total): where e == 0 the numerator is 0, so 0 / 1.0 = 0 / total "
        "(and total == 0 only when all of its row's e are 0); elsewhere the denominator is total",
    **{m: "attention_forward calls softmax with its default axis=-1, so axis=axis is axis=-1"
       for m in ("softmax: np.max(z, axis=axis, keepdims=True) -> np.max(z, keepdims=True, axis=-1)",
                 "softmax: np.sum(e, axis=axis, keepdims=True) -> np.sum(e, keepdims=True, axis=-1)")},
}


def _forward_reference(Q, K, V, mask=None):
    out, cache = ref.attention_forward(Q, K, V, mask)
    return out, cache.A


def _attend(S, V, mask=None, axis=-1):
    A = softmax(masked_scores(S, mask), axis)
    return A @ V, A


def _scores(Q, K, divide_by):
    return Q @ _swapT(K) / divide_by


def _over_queries(Q, K, V, mask=None):
    return _attend(_scores(Q, K, np.sqrt(Q.shape[-1])), V, mask, axis=-2)


def _scaled_by_d_k(Q, K, V, mask=None):
    return _attend(_scores(Q, K, Q.shape[-1]), V, mask)


def _unscaled(Q, K, V, mask=None):
    return _attend(_scores(Q, K, 1.0), V, mask)


def _mask_ignored(Q, K, V, mask=None):
    return _forward_reference(Q, K, V)


def _mask_inverted(Q, K, V, mask=None):
    return _forward_reference(Q, K, V, None if mask is None else ~mask)


def _mask_after_softmax(Q, K, V, mask=None):
    A = softmax(_scores(Q, K, np.sqrt(Q.shape[-1])))
    if mask is not None:
        A = A * mask
    return A @ V, A


def _mask_multiplied(Q, K, V, mask=None):
    S = _scores(Q, K, np.sqrt(Q.shape[-1]))
    return _attend(S if mask is None else S * mask, V)


def _nan_when_fully_masked(Q, K, V, mask=None):
    out, A = _forward_reference(Q, K, V, mask)
    if mask is not None:
        empty = ~np.broadcast_to(mask, A.shape).any(axis=-1, keepdims=True)
        A = np.where(empty, np.nan, A)
        out = A @ V
    return out, A


def _uniform_when_fully_masked(Q, K, V, mask=None):
    S = _scores(Q, K, np.sqrt(Q.shape[-1]))
    return _attend(S if mask is None else np.where(mask, S, -1e9), V)


def _boolean_mask_added(Q, K, V, mask=None):
    S = _scores(Q, K, np.sqrt(Q.shape[-1]))
    return _attend(S if mask is None else S + mask, V)


def _no_max_subtraction(Q, K, V, mask=None):
    S = _scores(Q, K, np.sqrt(Q.shape[-1]))
    e = np.exp(masked_scores(S, mask))
    A = e / e.sum(axis=-1, keepdims=True)
    return A @ V, A


FORWARD = Exercise(
    id="attention.forward",
    function="attention_forward",
    signature="attention_forward(Q, K, V, mask=None) -> (out, A)",
    cases=_forward_cases,
    reference=_forward_reference,
    points=3,
    output_names=("out", "A"),
    axes={"out": ("T_q (queries)", "d_v")},
    forbidden=FORBIDDEN,
    features=QKV_FEATURES,
    dims=_qkv_dims,
    equivalent=SOFTMAX_EQUIVALENT,
    mistakes=(
        Mistake(name="softmax over the wrong axis",
                hint="the weights sum to 1 over the queries instead of over the keys; "
                     "take the softmax along the last axis (axis=-1).", wrong=_over_queries),
        Mistake(name="scaling by d_k instead of sqrt(d_k)",
                hint="divide the scores by np.sqrt(d_k), the square root of the key size.",
                wrong=_scaled_by_d_k),
        Mistake(name="no scaling",
                hint="divide the scores Q K^T by sqrt(d_k) before the softmax.", wrong=_unscaled),
        Mistake(name="mask ignored",
                hint="where the mask is False, set the score to -inf before the softmax.",
                wrong=_mask_ignored),
        Mistake(name="mask polarity inverted",
                hint="True in the mask means 'may attend': keep those scores and set the "
                     "others to -inf.", wrong=_mask_inverted),
        Mistake(name="mask applied by multiplying the scores",
                hint="S * mask turns a masked score into 0, and exp(0) = 1 still gives that key "
                     "weight; set masked scores to -inf (np.where(mask, S, -np.inf)) instead.",
                wrong=_mask_multiplied),
        Mistake(name="the boolean mask added to the scores",
                hint="S + mask adds 1 where a key is visible and 0 where it is masked, which hides "
                     "nothing; set the masked scores to -inf (np.where(mask, S, -np.inf)).",
                wrong=_boolean_mask_added),
        Mistake(name="mask applied after softmax",
                hint="zeroing weights after the softmax leaves rows that no longer sum to 1; "
                     "set masked scores to -inf before the softmax instead.", wrong=_mask_after_softmax),
        Mistake(name="a fully masked query gives NaN",
                hint="when every key of a query is masked, the max is -inf and -inf - (-inf) is "
                     "NaN; give such rows weights 0 (and so output 0).", wrong=_nan_when_fully_masked),
        Mistake(name="a fully masked query gets uniform weights",
                hint="filling with a large negative number spreads a fully masked query evenly "
                     "over its keys; such a query should get weights 0.",
                wrong=_uniform_when_fully_masked),
        Mistake(name="no max-subtraction in the softmax (or the maximum added)",
                hint="exp() overflows for large scores; subtract each row's maximum before "
                     "exponentiating (S - max: adding it overflows the same way).",
                wrong=_no_max_subtraction),
    ),
)


# ----------------------------------------------------------------------------- masks
def _causal_cases(rng, hidden):
    return [{"T": T} for T in ((1, 2, 8, 13) if hidden else (3, 5, 1))]


def _tril(k):
    return lambda T: np.tril(np.ones((T, T), dtype=bool), k=k)


def _additive_causal(case, got, want):
    return got[0].shape == want[0].shape and np.array_equal(
        got[0], np.where(want[0], 0.0, -np.inf))


CAUSAL_MASK = Exercise(
    id="attention.causal_mask",
    function="causal_mask",
    signature="causal_mask(T) -> mask (T, T) of bool",
    cases=_causal_cases,
    features=shape_features(**{"T = 1": lambda c: c["T"] == 1}),
    reference=lambda T: causal_mask(T),
    equivalent={m: "causal_mask(T) has one argument: the reference's T_k is T_q = T, so "
                   "exchanging T_q and T_k changes nothing" for m in (
        "causal_mask: T_k - T_q -> T_q - T_k", "causal_mask: T_q -> T_k in `return …`",
        "causal_mask: T_k -> T_q in `return …`", "causal_mask: T_k -> T_q in `return …` #2",
        "causal_mask: T_q -> T_k in `return …` #2")},
    points=1,
    output_names=("mask",),
    forbidden=FORBIDDEN,
    mistakes=(
        Mistake(name="causal diagonal off by one: a query cannot see itself",
                hint="query i may attend to keys 0..i, its own position included; "
                     "keep the diagonal.", wrong=_tril(-1)),
        Mistake(name="causal diagonal off by one: a query sees the next key",
                hint="query i may attend to keys 0..i and not to i+1; check the k of np.tril.",
                wrong=_tril(1)),
        Mistake(name="mask polarity inverted",
                hint="True must mark the keys a query may see (the past and itself), "
                     "not the ones it must not.", wrong=lambda T: ~causal_mask(T)),
        Mistake(name="upper triangle instead of lower",
                hint="row i is query i: it may see columns j <= i, the lower triangle.",
                wrong=lambda T: np.triu(np.ones((T, T), dtype=bool))),
        Mistake(name="additive -inf mask instead of a boolean one",
                hint="this exercise wants booleans (True = may attend); the additive form "
                     "M = np.where(mask, 0, -inf) is built from it.", detect=_additive_causal),
    ),
)


def _padding_cases(rng, hidden):
    if not hidden:
        return [{"lengths": np.array([3, 1]), "T": 4},
                {"lengths": np.array([2, 5, 0]), "T": 5},
                {"lengths": np.array([1]), "T": 2}]
    return [{"lengths": np.array([1]), "T": 1},
            {"lengths": np.array([0, 0]), "T": 3},
            {"lengths": rng.integers(0, 7, size=4), "T": 6},
            {"lengths": np.array([2]), "T": 7}]


def _padding_reshaped(shape_of):
    """Recognises the right pattern of True values with the wrong shape."""
    def detect(case, got, want):
        flat = want[0][:, 0, :]
        return got[0].shape == shape_of(flat) and np.array_equal(got[0].reshape(flat.shape), flat)
    return detect


PADDING_MASK = Exercise(
    id="attention.padding_mask",
    function="padding_mask",
    signature="padding_mask(lengths, T) -> mask (B, 1, T) of bool",
    cases=_padding_cases,
    features=shape_features(**{
        "a sequence of length 0": lambda c: (np.asarray(c["lengths"]) == 0).any(),
        "a sequence of full length T": lambda c: (np.asarray(c["lengths"]) >= c["T"]).any(),
        "a single sequence (B = 1)": lambda c: len(c["lengths"]) == 1}),
    reference=lambda lengths, T: ref.padding_mask(lengths, T),
    equivalent={"padding_mask: a line that updates `lengths` is missing":
                "lengths is an integer array (B,) by the exercise's text, so np.asarray(lengths) "
                "is a no-op"},
    points=1,
    output_names=("mask",),
    forbidden=FORBIDDEN,
    mistakes=(
        Mistake(name="padding mask polarity inverted",
                hint="True must mark the real tokens (positions < length), not the padding.",
                wrong=lambda lengths, T: ~ref.padding_mask(lengths, T)),
        Mistake(name="padding mask off by one",
                hint="a sequence of length L has keys 0..L-1; position L is already padding.",
                wrong=lambda lengths, T: ref.padding_mask(np.asarray(lengths) + 1, T)),
        Mistake(name="query axis missing",
                hint="return shape (B, 1, T) so the mask broadcasts over the queries of "
                     "scores (B, T_q, T).", detect=_padding_reshaped(lambda f: f.shape)),
        Mistake(name="mask built along the query axis",
                hint="shape (B, T, 1) masks queries; padding hides *keys*, the last axis: "
                     "(B, 1, T).", detect=_padding_reshaped(lambda f: f.shape + (1,))),
    ),
)


# ----------------------------------------------------------------------------- gradient check
def _gradcheck_cases(rng, hidden):
    shapes = [(1,), (4, 5), (2, 2, 3), (3, 2)] if hidden else [(3,), (2, 3), (1, 2, 2), (1,), (2, 2)]
    cs = [10.0, 3.0, 7.0, 4.0] if hidden else [10.0, 5.0, 2.0, 4.0, 3.0]
    steps = [None, 3e-3, None, None] if hidden else [None, 1e-2, None, None, None]  # None: 1e-6
    outside = [False, False, False, True] if hidden else [False, False, False, False, True]
    return [{"x": _randn(rng, *s), "w": _randn(rng, *s), "c": c, **({"eps": e} if e else {}),
             **({"outside": True} if o else {})}
            for s, c, e, o in zip(shapes, cs, steps, outside)]


def _gradcheck_reference(x, w, c, eps=1e-6, outside=False):
    """The central difference of ``calls.test_function`` with step ``eps``, in closed form: the
    cosine's (f(x + eps) - f(x - eps)) / (2 eps) is -w sin(c x) sin(c eps) / eps, the square's
    is exact. At eps = 1e-6 it is the gradient; a larger step shows whether ``eps`` is used.
    ``outside``: f reads x itself (``calls.gradient_target``), the same gradient."""
    return -w * np.sin(c * x) * np.sin(c * eps) / eps + np.sum(x), x


def _difference_quotient(step):
    """The numerical gradient the mistaken code computes; ``step`` gives (f+ - f-) / h."""
    def wrong(x, w, c, eps=1e-6, outside=False):
        x = x.copy()
        f = gradient_target(w, c, x, outside)
        grad = np.zeros_like(x)
        for i in np.ndindex(x.shape):
            grad[i] = step(f, x, i, eps)
        return grad, x
    return wrong


def _on_copies(f, x, i, eps):
    plus, minus = x.copy(), x.copy()
    plus[i] += eps
    minus[i] -= eps
    return (f(plus) - f(minus)) / (2 * eps)


def _one_sided(f, x, i, eps):
    base = f(x)
    x[i] += eps
    g = (f(x) - base) / eps
    x[i] -= eps
    return g


def _over_eps(f, x, i, eps):
    old = x[i]
    x[i] = old + eps
    plus = f(x)
    x[i] = old - eps
    minus = f(x)
    x[i] = old
    return (plus - minus) / eps


def _not_restored(f, x, i, eps):
    x[i] += eps
    plus = f(x)
    x[i] -= 2 * eps
    return (plus - f(x)) / (2 * eps)


NUMERICAL_GRADIENT = Exercise(
    id="attention.numerical_gradient",
    function="numerical_gradient",
    signature="numerical_gradient(f, x, eps=1e-6) -> grad (shape of x)",
    cases=_gradcheck_cases,
    reference=_gradcheck_reference,
    features=shape_features(**{"a single entry": lambda c: c["x"].size == 1,
                               "a 3-D x": lambda c: c["x"].ndim == 3,
                               "a step eps other than the default": lambda c: "eps" in c,
                               "an f that reads x itself (lambda _: ...)": lambda c: c.get("outside", False)}),
    call="numerical_gradient",  # f is calls.gradient_target; x must be left as it was
    points=2,
    rtol=1e-6,
    atol=1e-7,
    output_names=("grad", "x after the call"),
    axes={"grad": ("axis -2 of x", "axis -1 of x"), "x after the call": ("axis -2 of x", "axis -1 of x")},
    forbidden=("course_lib.gradcheck", "torch"),
    mistakes=(
        Mistake(name="one-sided difference",
                hint="(f(x + eps) - f(x)) / eps has an error of order eps; use the central "
                     "difference (f(x + eps) - f(x - eps)) / (2 eps).",
                wrong=_difference_quotient(_one_sided)),
        Mistake(name="divided by eps instead of 2 eps",
                hint="the two evaluations are 2 eps apart.", wrong=_difference_quotient(_over_eps)),
        Mistake(name="x not restored",
                hint="put each entry back to its old value after the two evaluations.",
                wrong=_difference_quotient(_not_restored)),
        Mistake(name="copies of x changed, not x itself",
                hint="the notebooks' losses ignore their argument and read the arrays themselves "
                     "(`loss = lambda _: ...`, as in §5 and §6): f sees a change only when you make it "
                     "in x. Change x[i] in place, evaluate f(x) at +eps and -eps, then put it back.",
                wrong=_difference_quotient(_on_copies)),
    ),
)


# ----------------------------------------------------------------------------- backward, row form
def _backward_case(rng, lead, T_q, T_k, d_k, d_v, mask=None, scale=1.0):
    case = _attention_case(rng, lead, T_q, T_k, d_k, d_v, mask, scale)
    out, A = _forward_reference(**case)
    return {"dout": _randn(rng, *out.shape), "Q": case["Q"], "K": case["K"], "V": case["V"],
            "A": A}


def _backward_cases(rng, hidden):
    if not hidden:
        return [_backward_case(rng, (), 4, 4, 3, 3),
                _backward_case(rng, (), 3, 5, 4, 2),
                _backward_case(rng, (2, 2), 3, 3, 2, 2, mask=causal_mask(3)),
                _backward_case(rng, (), 1, 1, 1, 1)]
    return [_backward_case(rng, (2, 2), 5, 5, 4, 4, mask=causal_mask(5)),
            _backward_case(rng, (3,), 4, 6, 2, 3, mask=ref.padding_mask([6, 3, 0], 6)),
            _backward_case(rng, (), 1, 1, 1, 1),
            _backward_case(rng, (), 6, 2, 5, 7),
            _backward_case(rng, (2,), 4, 4, 8, 2, scale=2.0),
            # every size equal: code that tells dA from its transpose by their shapes, or d_k
            # from T_k, cannot on this one
            _backward_case(rng, (), 3, 3, 3, 3)]


def _backward_reference(dout, Q, K, V, A):
    return ref.attention_backward(dout, ref.AttentionCache(Q, K, V, A))


def _backward_with(jvp, dQ_dK=None):
    """A backward whose softmax JVP is ``jvp(A, dA)`` and whose dQ, dK come from
    ``dQ_dK(dS, Q, K, scale)``."""
    def wrong(dout, Q, K, V, A):
        scale = 1.0 / np.sqrt(Q.shape[-1])
        dS = jvp(A, dout @ _swapT(V))
        dQ, dK = (dQ_dK or _dq_dk)(dS, Q, K, scale)
        return dQ, dK, _swapT(A) @ dout
    return wrong


def _dq_dk(dS, Q, K, scale):
    return dS @ K * scale, _swapT(dS) @ Q * scale


def _dv_without_transpose(dout, Q, K, V, A):
    dQ, dK, _ = _backward_reference(dout, Q, K, V, A)
    return dQ, dK, A @ dout


BACKWARD = Exercise(
    id="attention.backward",
    function="attention_backward",
    signature="attention_backward(dout, Q, K, V, A) -> (dQ, dK, dV)",
    cases=_backward_cases,
    reference=_backward_reference,
    points=3,
    output_names=("dQ", "dK", "dV"),
    axes={"dQ": ("T_q (queries)", "d_k"), "dK": ("T_k (keys)", "d_k"), "dV": ("T_k (keys)", "d_v")},
    forbidden=FORBIDDEN,
    features=QKV_FEATURES,
    dims=_qkv_dims,
    equivalent={"softmax_jvp: np.sum(g * s, axis=axis, keepdims=True) -> "
                "np.sum(g * s, keepdims=True, axis=-1)":
                "attention_backward calls softmax_jvp(A, dA) with its default axis=-1, so "
                "axis=axis is axis=-1"},
    mistakes=(
        Mistake(name="softmax backward missing the sum term",
                hint="the softmax Jacobian is diag(a) - a a^T: dS = A * (dA - sum(dA * A)), "
                     "the sum taken over each row.", wrong=_backward_with(lambda A, dA: A * dA)),
        Mistake(name="only the diagonal of the softmax Jacobian (the sigmoid's derivative A(1 - A))",
                hint="every weight of a row depends on every score of that row: the Jacobian is "
                     "diag(a) - a a^T, so dS = A * (dA - sum(dA * A)) over each row, not A * (1 - A) * dA.",
                wrong=_backward_with(lambda A, dA: A * (1 - A) * dA)),
        Mistake(name="softmax backward summed over the wrong axis",
                hint="each row of A is one softmax: sum dA * A over the keys (axis=-1).",
                wrong=_backward_with(lambda A, dA: softmax_jvp(A, dA, axis=-2))),
        Mistake(name="dQ and dK swapped",
                hint="dQ = dS K / sqrt(d_k) (a row per query), dK = dS^T Q / sqrt(d_k) (a row per key).",
                wrong=_backward_with(softmax_jvp, lambda dS, Q, K, s: _dq_dk(dS, Q, K, s)[::-1])),
        Mistake(name="dQ and dK unscaled",
                hint="the scores are divided by sqrt(d_k), so dQ and dK are too.",
                wrong=_backward_with(softmax_jvp, lambda dS, Q, K, s: _dq_dk(dS, Q, K, 1.0))),
        Mistake(name="dK computed without transposing dS",
                hint="S = Q K^T / sqrt(d_k), so dK = dS^T Q / sqrt(d_k): a row per key. dS @ Q only has "
                     "the right shape when T_q = T_k.",
                wrong=_backward_with(softmax_jvp, lambda dS, Q, K, s: (dS @ K * s, dS @ Q * s))),
        Mistake(name="dV computed with A instead of A^T",
                hint="out = A V, so dV = A^T dout (a row per key).", wrong=_dv_without_transpose),
    ),
)


# ----------------------------------------------------------------------------- backward, column form
def _col_case(rng, d, d_k, T, causal, scale=1.0):
    X = _randn(rng, d, T)
    A, B, C = (_randn(rng, d_k, d, scale=scale / np.sqrt(d)) for _ in range(3))
    Z, cache = ref.self_attention_col_forward(X, A, B, C, causal)
    return {"E": _randn(rng, *Z.shape), "X": X, "A": A, "B": B, "C": C, "Att": cache[-1]}


def _col_cases(rng, hidden):
    if not hidden:
        return [_col_case(rng, 4, 3, 5, False), _col_case(rng, 3, 2, 4, True),
                _col_case(rng, 2, 3, 1, False)]
    return [_col_case(rng, 2, 2, 1, False), _col_case(rng, 6, 4, 7, True),
            _col_case(rng, 2, 5, 3, False), _col_case(rng, 5, 3, 6, False, scale=3.0)]


def _col_reference(E, X, A, B, C, Att):
    return ref.self_attention_col_backward(E, (X, A, B, C, A @ X, B @ X, C @ X, Att))


def _col_backward_with(jvp=softmax_jvp, scale_qk=True, blocks=(0, 1, 2), dx_paths=(0, 1, 2),
                       values=lambda E, Att: E @ Att.T):
    """The blog post's P-matrix backward with one step changed (see the mistakes below)."""
    def wrong(E, X, A, B, C, Att):
        Q, K, V = A @ X, B @ X, C @ X
        s = 1.0 / np.sqrt(A.shape[0]) if scale_qk else 1.0
        G = jvp(Att, V.T @ E, axis=0)
        rows = [K @ G.T * s, Q @ G * s, values(E, Att)]
        P = np.vstack([rows[b] for b in blocks])
        dA, dB, dC = np.split(P @ X.T, 3)
        W = [A, B, C]
        dX = sum(W[j].T @ P[j * len(A):(j + 1) * len(A)] for j in dx_paths)
        return dA, dB, dC, dX
    return wrong


def _col_forward_holding(X, A, B, C, frozen, causal):
    """The blog post's forward with Q = A X, K = B X or V = C X taken from ``frozen`` when there."""
    Q = frozen["Q"] if "Q" in frozen else A @ X
    K = frozen["K"] if "K" in frozen else B @ X
    V = frozen["V"] if "V" in frozen else C @ X
    mask = causal_mask(X.shape[1]).T if causal else None
    Att = softmax(masked_scores(Q.T @ K / np.sqrt(A.shape[0]), mask), axis=0)
    return V @ Att, {"Q": Q, "K": K, "V": V}


def _col_held(quantity):
    def forward(X, A, B, C, causal, frozen):
        return _col_forward_holding(X, A, B, C, frozen, causal)
    return holding(forward, (quantity,), ("A", "B", "C", "X"), upstream="E",
                   inputs=lambda c: {**{k: c[k] for k in "XABC"},
                                     "causal": not c["Att"].all()})


def _jvp_no_sum(Att, G, axis):
    return Att * G


BACKWARD_COL = Exercise(
    id="attention.backward_col",
    function="attention_backward_col",
    signature="attention_backward_col(E, X, A, B, C, Att) -> (dA, dB, dC, dX)",
    cases=_col_cases,
    reference=_col_reference,
    features=shape_features(**{
        "a single position (T = 1)": lambda c: c["X"].shape[1] == 1,
        "causal (zeros in Att)": lambda c: not c["Att"].all()}),
    dims=lambda c: {"d_k": c["A"].shape[0], "d": c["X"].shape[0], "T": c["X"].shape[1]},
    held_constant={"the queries Q = A X": _col_held("Q"), "the keys K = B X": _col_held("K"),
                   "the values V = C X": _col_held("V")},
    equivalent={
        "self_attention_col_backward: softmax_jvp(Att, V.T @ E, axis=0) -> "
        "softmax_jvp(Att, V.T @ E, axis=-2)":
            "Att is (T, T) by the signature (X is (d, T)), so axis -2 is axis 0",
        "softmax_jvp: np.sum(g * s, axis=axis, keepdims=True) -> np.sum(g * s, axis=axis)":
            "here softmax_jvp only runs with axis=0 on the 2-D Att: the (T,) column sums "
            "broadcast as a (1, T) row, exactly as with keepdims=True",
        **{m: "here softmax_jvp only runs with axis=0 on the 2-D Att (T, T), so axis=axis is "
              "axis=0, which is axis=-2" for m in (
            "softmax_jvp: np.sum(g * s, axis=axis, keepdims=True) -> np.sum(g * s, keepdims=True, axis=-2)",
            "softmax_jvp: np.sum(g * s, axis=axis, keepdims=True) -> np.sum(g * s, keepdims=True, axis=0)")}},
    points=3,
    output_names=("dA", "dB", "dC", "dX"),
    axes={"dA": ("d_k", "d"), "dB": ("d_k", "d"), "dC": ("d_k", "d"), "dX": ("d", "T")},
    forbidden=FORBIDDEN,
    mistakes=(
        Mistake(name="dA and dB swapped",
                hint="c_it = q_i . k_t: dF/dq_i sums over t with k_t, so the first block of P "
                     "is K G^T / sqrt(d_k) and the second Q G / sqrt(d_k) (d_k = A.shape[0], the "
                     "blog's h).",
                wrong=_col_backward_with(blocks=(1, 0, 2))),
        Mistake(name="missing 1/sqrt(d_k) in dA and dB",
                hint="c_it is divided by sqrt(d_k) (the blog's sqrt(h)), so are the first two blocks "
                     "of P.",
                wrong=_col_backward_with(scale_qk=False)),
        Mistake(name="softmax backward taken row-wise instead of column-wise",
                hint="in the column form each *column* of Att is one softmax: sum over axis 0.",
                wrong=_col_backward_with(jvp=lambda Att, G, axis: softmax_jvp(Att, G, axis=1))),
        Mistake(name="softmax backward missing the sum term",
                hint="G = Att * (V^T E) - Att * (column sums of Att * V^T E).",
                wrong=_col_backward_with(jvp=_jvp_no_sum)),
        Mistake(name="row-form habits in the column form",
                hint="here Att[:, t] (a column) is one softmax and Z = V Att: the JVP sums over axis 0 "
                     "and dC = E Att^T X^T. Keep the blog's letters for this exercise (the mapping is "
                     "printed above it).",
                wrong=_col_backward_with(jvp=lambda Att, G, axis: softmax_jvp(Att, G, axis=1),
                                   values=lambda E, Att: E @ Att)),
        Mistake(name="dX only through the values",
                hint="X reaches the output through Q, K and V: dX = [A; B; C]^T P, all three blocks.",
                wrong=_col_backward_with(dx_paths=(2,))),
    ),
)


# ----------------------------------------------------------------------------- multi-head
def _split_cases(rng, hidden):
    shapes = ([(3, 1, 8, 4), (2, 4, 6, 1), (2, 6, 12, 6), (1, 2, 2, 2)] if hidden
              else [(2, 3, 4, 2), (1, 5, 6, 3), (2, 1, 3, 1), (1, 2, 4, 4)])
    return [{"x": _randn(rng, B, T, d), "n_heads": h} for B, T, d, h in shapes]


def _split_without_transpose(x, n_heads):
    B, T, d_model = x.shape
    return x.reshape(B, n_heads, T, d_model // n_heads)


def _split_interleaved(x, n_heads):
    B, T, d_model = x.shape
    return x.reshape(B, T, d_model // n_heads, n_heads).transpose(0, 3, 1, 2)


SPLIT_HEADS = Exercise(
    id="attention.split_heads",
    function="split_heads",
    signature="split_heads(x, n_heads) -> (B, n_heads, T, d_k)",
    cases=_split_cases,
    reference=lambda x, n_heads: split_heads(x, n_heads),
    features=shape_features(**{
        "one head": lambda c: c["n_heads"] == 1,
        "d_k = 1 (as many heads as features)": lambda c: c["x"].shape[-1] == c["n_heads"],
        "T = 1": lambda c: c["x"].shape[1] == 1}),
    equivalent={"split_heads: -2 -> 2": "x is (B, T, d_model) by the exercise's text, so the "
                "reshaped x is 4-D and axis 2 is axis -2"},
    points=1,
    output_names=("heads",),
    axes={"heads": ("T", "d_k")},
    forbidden=FORBIDDEN,
    mistakes=(
        Mistake(name="heads split without transpose",
                hint="reshape to (B, T, n_heads, d_k) first, then swap the T and n_heads axes; "
                     "reshaping straight to (B, n_heads, T, d_k) mixes tokens.",
                wrong=_split_without_transpose),
        Mistake(name="heads interleaved",
                hint="head j owns the contiguous features j*d_k .. (j+1)*d_k - 1: reshape to "
                     "(B, T, n_heads, d_k), not (B, T, d_k, n_heads).", wrong=_split_interleaved),
    ),
)


def _mha_case(rng, B, T_q, T_k, d_model, n_heads, mask=None, self_attention=False,
              d_k=None, d_v=None):
    """Per-head sizes d_k = d_v = d_model / n_heads unless given."""
    d_k = d_k or d_model // n_heads
    d_v = d_v or d_k
    x_q = _randn(rng, B, T_q, d_model)
    x_kv = x_q if self_attention else _randn(rng, B, T_k, d_model)
    shapes = {"W_q": (d_model, n_heads * d_k), "W_k": (d_model, n_heads * d_k),
              "W_v": (d_model, n_heads * d_v), "W_o": (n_heads * d_v, d_model)}
    W = {name: _randn(rng, *shape, scale=1 / np.sqrt(shape[0])) for name, shape in shapes.items()}
    return {"x_q": x_q, "x_kv": x_kv, **W, "n_heads": n_heads, "mask": mask}


def _mha_cases(rng, hidden):
    if not hidden:
        return [_mha_case(rng, 1, 4, 4, 4, 2, self_attention=True),
                _mha_case(rng, 2, 3, 5, 6, 3),
                _mha_case(rng, 2, 4, 4, 6, 2, mask=causal_mask(4), self_attention=True, d_k=4, d_v=5),
                _mha_case(rng, 3, 1, 5, 4, 1, mask=ref.padding_mask([5, 2, 0], 5)[:, None])]
    return [_mha_case(rng, 2, 5, 5, 8, 2, mask=causal_mask(5), self_attention=True),
            _mha_case(rng, 3, 4, 6, 8, 4, mask=ref.padding_mask([6, 2, 0], 6)[:, None]),
            _mha_case(rng, 1, 3, 3, 4, 1),
            _mha_case(rng, 2, 1, 7, 6, 2),
            _mha_case(rng, 2, 4, 4, 6, 3),
            _mha_case(rng, 2, 3, 5, 6, 2, d_k=4, d_v=5),
            _mha_large_scores(rng)]


def _mha_large_scores(rng):
    """Self-attention, 2 heads of d_k = 2, whose scores reach +-1273 (exp overflows without the
    max-subtraction; the spread of a row is 2546) and whose token 2 is all zeros (its row of
    scores is exactly 0, so its maximum is 0). W_q = W_k = 10 I keeps every input below 100."""
    case = _mha_case(rng, 1, 3, 3, 4, 2, self_attention=True)
    x = 3.0 * rng.choice([-1.0, 1.0], size=(1, 3, 4))
    x[0, 1], x[0, 2] = -x[0, 0], 0.0  # token 1 opposite to token 0: scores +1273 and -1273
    case["x_q"] = case["x_kv"] = x
    case["W_q"], case["W_k"] = 10.0 * np.eye(4), 10.0 * np.eye(4)
    return case


def _mha_reference(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    out, cache = ref.mha_forward(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask)
    return out, cache.attention.A


def _mha_with(split=split_heads, merge=merge_heads, divide_by=None, keys_from_q=False,
              values_from_q=False, output_projection=True):
    """Multi-head attention with one step changed (see the mistakes below)."""
    def wrong(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
        q = split(x_q @ W_q, n_heads)
        k = split((x_q if keys_from_q else x_kv) @ W_k, n_heads)
        v = split((x_q if values_from_q else x_kv) @ W_v, n_heads)
        S = q @ _swapT(k) / (divide_by(x_q) if divide_by else np.sqrt(q.shape[-1]))
        heads, A = _attend(S, v, mask)
        concat = merge(heads)
        return (concat @ W_o if output_projection else concat), A
    return wrong


def _merge_without_transpose(heads):
    B, n_heads, T, d_k = heads.shape
    return heads.reshape(B, T, n_heads * d_k)


MULTI_HEAD = Exercise(
    id="attention.multi_head",
    function="multi_head_attention",
    signature="multi_head_attention(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None) -> (out, A)",
    cases=_mha_cases,
    reference=_mha_reference,
    features=shape_features(**{
        "T_q ≠ T_k (cross-attention)": lambda c: c["x_q"].shape[1] != c["x_kv"].shape[1],
        "d_k ≠ d_v": lambda c: c["W_k"].shape[1] != c["W_v"].shape[1],
        "one head": lambda c: c["n_heads"] == 1,
        "a single query (T_q = 1)": lambda c: c["x_q"].shape[1] == 1}),
    dims=lambda c: {"d_k": c["W_q"].shape[1] // c["n_heads"], "d_model": c["x_q"].shape[-1],
                    "n_heads": c["n_heads"], "T_q": c["x_q"].shape[1], "T_k": c["x_kv"].shape[1]},
    points=3,
    output_names=("out", "A"),
    axes={"out": ("T_q (queries)", "d_model")},
    forbidden=FORBIDDEN,
    equivalent={
        **SOFTMAX_EQUIVALENT,
        **{m: "x_q and x_kv are (B, T, d_model) by the exercise's text, so the heads are 4-D "
              "(B, n_heads, T, d) and axis 2 is axis -2" for m in (
            "attention_forward: -2 -> 2", "merge_heads: -2 -> 2 in `x = …`", "split_heads: -2 -> 2")},
        "merge_heads: -2 -> 2 in `return …`": "the heads are 4-D (x_q is (B, T_q, d_model) by the "
                                   "exercise's text), so x.shape[:2] is x.shape[:-2]"},
    mistakes=(
        Mistake(name="heads split without transpose",
                hint="use your split_heads: (B, T, d_model) -> (B, T, n_heads, d_k) -> "
                     "(B, n_heads, T, d_k).", wrong=_mha_with(split=_split_without_transpose)),
        Mistake(name="heads concatenated without transposing back",
                hint="before the reshape to (B, T, d_model), swap the head and time axes back "
                     "to (B, T, n_heads, d_k).", wrong=_mha_with(merge=_merge_without_transpose)),
        Mistake(name="scaling by sqrt(d_model) instead of sqrt(d_k)",
                hint="each head works in d_k = d_model / n_heads dimensions; scale by sqrt(d_k).",
                wrong=_mha_with(divide_by=lambda x: np.sqrt(x.shape[-1]))),
        Mistake(name="cross-attention keys taken from the decoder",
                hint="keys and values come from x_kv (the encoder), only the queries from x_q.",
                wrong=_mha_with(keys_from_q=True)),
        Mistake(name="cross-attention keys and values taken from the decoder",
                hint="keys and values come from x_kv (the encoder), only the queries from x_q.",
                wrong=_mha_with(keys_from_q=True, values_from_q=True)),
        Mistake(name="W_o missing",
                hint="after concatenating the heads, project with W_o (Week 7, eq. (5)).",
                wrong=_mha_with(output_projection=False)),
    ),
)


EXERCISES = [FORWARD, CAUSAL_MASK, PADDING_MASK, NUMERICAL_GRADIENT, BACKWARD, BACKWARD_COL,
             SPLIT_HEADS, MULTI_HEAD]
