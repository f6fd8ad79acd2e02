"""Exercises of notebook 04 (layer norm, FFN, residual blocks) [trusted; also the check cell]

All cases are float64 and the tolerance is tight (rtol 1e-7), because some mistakes (eps
outside the square root) change the result by little when the variance is large; the
hidden cases include vectors with a variance well below eps to make them visible.
"""
from __future__ import annotations

import numpy as np

from autograder.judge.exercise import Exercise, Mistake
from autograder.judge.features import shape_features
from autograder.judge.held import holding
from course_lib.layernorm import (EPS, ffn_forward, layernorm_backward, layernorm_forward,
                                  post_ln_block, pre_ln_block)

NO_LIBRARY = ("course_lib.layernorm", "torch")
BLOCK_HELPERS = ("layernorm_forward", "ffn_forward")  # the blocks are built from the learner's own
RTOL, ATOL = 1e-7, 1e-9


# --------------------------------------------------------------------------- shared
LN_FEATURES = shape_features(**{
    "a variance below eps": lambda c: c["x"].var(axis=-1).min() < c.get("eps", EPS),
    "an eps other than the default": lambda c: c.get("eps", EPS) != EPS,
    "batch axes": lambda c: c["x"].ndim > 2})


def _ln_dims(c):
    return {"d_model": c["x"].shape[-1], "vectors": c["x"].size // c["x"].shape[-1]}


# --------------------------------------------------------------------------- forward
def _params(rng, d):
    return rng.normal(1.0, 0.5, size=d), rng.normal(0.0, 0.5, size=d)


def _x(rng, *shape, scale=1.0, shift=0.0):
    return rng.normal(size=shape) * scale + shift


def _ln_cases(rng, hidden):
    if not hidden:
        return [dict(x=_x(rng, 3, 5), **dict(zip(("gamma", "beta"), _params(rng, 5)))),
                dict(x=_x(rng, 2, 4, 6, scale=2.0, shift=1.0),
                     **dict(zip(("gamma", "beta"), _params(rng, 6)))),
                dict(x=_x(rng, 2, 3, scale=1e-3, shift=-0.5),  # variance 1e-6, below eps
                     **dict(zip(("gamma", "beta"), _params(rng, 3))))]
    cases = []
    for shape, scale, shift in [((4, 8), 1e-3, 0.5),  # variance 1e-6, below eps
                                ((2, 3, 4), 3.0, -2.0), ((1, 2), 1.0, 0.0),
                                ((5, 1, 16), 0.01, 0.0), ((2, 7, 32), 1.0, 5.0)]:
        gamma, beta = _params(rng, shape[-1])
        cases.append(dict(x=_x(rng, *shape, scale=scale, shift=shift), gamma=gamma, beta=beta))
    return cases


def _forward_cases(rng, hidden):
    """The layer norm cases, and one with an eps of its own (variance 1e-2, eps 0.1: the text's
    every parameter is graded, and code with 1e-5 written in fails it)."""
    d = 6 if hidden else 4
    gamma, beta = _params(rng, d)
    return _ln_cases(rng, hidden) + [dict(x=_x(rng, 3, d, scale=0.1), gamma=gamma, beta=beta, eps=0.1)]


def _normalise(x, gamma, beta, axes, ddof=0, eps_inside=True, eps=EPS):
    mu = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True, ddof=ddof)
    scale = np.sqrt(var + eps) if eps_inside else np.sqrt(var) + eps
    return gamma * (x - mu) / scale + beta


def _forward_out(x, gamma, beta, eps=EPS):
    return layernorm_forward(x, gamma, beta, eps)[0]


FORWARD_MISTAKES = [
    Mistake(name="unbiased variance",
            hint="layer norm divides by d_model, not d_model - 1 (np.var's default ddof=0; "
                 "torch.var's default is the unbiased one).",
            wrong=lambda x, gamma, beta, eps=EPS: _normalise(x, gamma, beta, -1, ddof=1, eps=eps)),
    Mistake(name="eps outside the square root",
            hint="divide by sqrt(var + eps), not sqrt(var) + eps: it matters when the variance is "
                 "small compared with eps.",
            wrong=lambda x, gamma, beta, eps=EPS: _normalise(x, gamma, beta, -1, eps_inside=False, eps=eps)),
    Mistake(name="normalising over the batch axis",
            hint="that is batch norm: layer norm takes the mean and variance of each vector over its "
                 "own d_model features (axis=-1, keepdims=True).",
            wrong=lambda x, gamma, beta, eps=EPS: _normalise(x, gamma, beta, 0, eps=eps)),
    Mistake(name="statistics over the whole array",
            hint="each vector x[..., :] gets its own mean and variance (axis=-1), not one for the "
                 "whole batch.",
            wrong=lambda x, gamma, beta, eps=EPS: _normalise(x, gamma, beta, None, eps=eps)),
    Mistake(name="gamma and beta swapped",
            hint="gamma scales x_hat and beta shifts it: out = gamma * x_hat + beta.",
            wrong=lambda x, gamma, beta, eps=EPS: _forward_out(x, beta, gamma, eps)),
    Mistake(name="eps left out",
            hint="divide by sqrt(var + eps) with the given eps, which keeps a constant vector finite.",
            wrong=lambda x, gamma, beta, eps=EPS: _normalise(x, gamma, beta, -1, eps=0.0)),
    Mistake(name="gamma and beta not applied",
            hint="return gamma * x_hat + beta, not x_hat.",
            wrong=lambda x, gamma, beta, eps=EPS: _forward_out(x, np.ones_like(gamma), np.zeros_like(beta), eps)),
]

# every output here is laid out as x (..., d_model): one vector per row
VECTORS = ("vector (a row of x)", "d_model")

FORWARD = Exercise(id="layernorm.forward", function="layernorm_forward",
                   signature="layernorm_forward(x, gamma, beta, eps=1e-5) -> (out, cache)",
                   cases=_forward_cases, reference=_forward_out, points=2, output_names=("out",),
                   axes={"out": VECTORS}, call="first_output",
                   forbidden=NO_LIBRARY, mistakes=FORWARD_MISTAKES, features=LN_FEATURES,
                   dims=_ln_dims, rtol=RTOL, atol=ATOL)


# --------------------------------------------------------------------------- backward
def _backward_cases(rng, hidden):
    return [dict(case, dout=rng.normal(size=case["x"].shape)) for case in _ln_cases(rng, hidden)]


def _backward_reference(x, gamma, beta, dout):
    return layernorm_backward(dout, layernorm_forward(x, gamma, beta)[1])


def _backward_parts(x, gamma, beta, dout, mean_term=True, var_term=True, use_gamma=True,
                    reduce=np.mean):
    """dx with chosen terms of the derivation left out, or their means taken by ``reduce``
    (np.sum: the 1/d_model forgotten); dgamma, dbeta as the reference."""
    _, dgamma, dbeta = _backward_reference(x, gamma, beta, dout)
    x_hat, inv_std, _ = layernorm_forward(x, gamma, beta)[1]
    g = dout * gamma if use_gamma else dout
    dx = g.copy()
    if mean_term:
        dx -= reduce(g, axis=-1, keepdims=True)
    if var_term:
        dx -= x_hat * reduce(g * x_hat, axis=-1, keepdims=True)
    return dx * inv_std, dgamma, dbeta


def _dgamma_from_x(x, gamma, beta, dout):
    dx, _, dbeta = _backward_reference(x, gamma, beta, dout)
    return dx, (dout * x).reshape(-1, x.shape[-1]).sum(0), dbeta


def _swap_param_grads(x, gamma, beta, dout):
    dx, dgamma, dbeta = _backward_reference(x, gamma, beta, dout)
    return dx, dbeta, dgamma


def _not_summed(x, gamma, beta, dout):
    dx, _, _ = _backward_reference(x, gamma, beta, dout)
    return dx, dout * layernorm_forward(x, gamma, beta)[1][0], dout


BACKWARD_MISTAKES = [
    Mistake(name="backward that treats mean and variance as constants",
            hint="mu and sigma depend on every x_j of the vector, so dx has two more terms: "
                 "dx = (g - mean(g) - x_hat * mean(g * x_hat)) / sigma with g = dout * gamma.",
            wrong=lambda **c: _backward_parts(**c, mean_term=False, var_term=False)),
    Mistake(name="sums where the derivation has means (the 1/d_model left out)",
            hint="mu and sigma^2 are means over the d_model entries, so both terms carry 1/d_model: "
                 "dx = (g - mean(g) - x_hat * mean(g * x_hat)) / sigma, with np.mean, not np.sum.",
            wrong=lambda **c: _backward_parts(**c, reduce=np.sum)),
    Mistake(name="gamma left out of dx",
            hint="the gradient reaching x_hat is dout * gamma.",
            wrong=lambda **c: _backward_parts(**c, use_gamma=False)),
    Mistake(name="dgamma and dbeta swapped",
            hint="dgamma = sum(dout * x_hat), dbeta = sum(dout), summed over all leading axes.",
            wrong=_swap_param_grads),
    Mistake(name="dgamma computed from x instead of x_hat",
            hint="gamma multiplies the normalised x_hat, so dgamma = sum(dout * x_hat).",
            wrong=_dgamma_from_x),
    Mistake(name="dgamma and dbeta not summed over positions",
            hint="gamma and beta are shared by every vector: sum their gradients over all leading "
                 "axes so they have shape (d_model,).", wrong=_not_summed),
]


def _forward_holding(x, gamma, beta, frozen):
    """The forward with the named quantities ("mu", "var") taken from ``frozen`` when there."""
    mu = frozen["mu"] if "mu" in frozen else x.mean(axis=-1, keepdims=True)
    var = frozen["var"] if "var" in frozen else ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return gamma * (x - mu) / np.sqrt(var + EPS) + beta, {"mu": mu, "var": var}


def _held(*quantities):
    return holding(_forward_holding, quantities, ("x", "gamma", "beta"),
                   inputs=lambda c: {k: c[k] for k in ("x", "gamma", "beta")})


HELD_CONSTANT = {"the mean mu": _held("mu"), "the variance sigma^2": _held("var")}

BACKWARD = Exercise(id="layernorm.backward", function="layernorm_backward",
                    signature="layernorm_backward(dout, cache) -> (dx, dgamma, dbeta)",
                    cases=_backward_cases, reference=_backward_reference, points=3,
                    output_names=("dx", "dgamma", "dbeta"), axes={"dx": VECTORS}, call="layernorm_backward",
                    helpers=("layernorm_forward",),
                    forbidden=NO_LIBRARY + ("torch.autograd",), mistakes=BACKWARD_MISTAKES,
                    held_constant=HELD_CONSTANT,
                    features=LN_FEATURES, dims=_ln_dims, rtol=RTOL, atol=ATOL)


# ------------------------------------------------------------------ FFN and the blocks
def _block_cases(rng, hidden):
    shapes = [((3, 4), 8), ((2, 3, 6), 12), ((1, 2, 1, 6), 4)] if not hidden else \
        [((1, 2), 3), ((2, 5, 8), 32), ((4, 16), 8), ((2, 2, 3, 4), 16)]
    cases = []
    for shape, d_ff in shapes:
        d = shape[-1]
        gamma, beta = _params(rng, d)
        cases.append(dict(x=_x(rng, *shape, scale=2.0, shift=0.5),
                          W1=rng.normal(size=(d, d_ff)) / np.sqrt(d), b1=rng.normal(size=d_ff) * 0.5,
                          W2=rng.normal(size=(d_ff, d)) / np.sqrt(d_ff), b2=rng.normal(size=d) * 0.5,
                          gamma=gamma, beta=beta))
    return cases


def _ffn_cases(rng, hidden):
    return [{k: v for k, v in c.items() if k not in ("gamma", "beta")} for c in _block_cases(rng, hidden)]


def _ffn(x, W1, b1, W2, b2):
    return ffn_forward(x, W1, b1, W2, b2)[0]


def _ln(x, gamma, beta):
    return layernorm_forward(x, gamma, beta)[0]


FFN_MISTAKES = [
    Mistake(name="ReLU left out",
            hint="the hidden layer is ReLU(x W1 + b1); without it the two layers collapse into one "
                 "linear map.", wrong=lambda x, W1, b1, W2, b2: (x @ W1 + b1) @ W2 + b2),
    Mistake(name="ReLU after the output layer too",
            hint="only the hidden layer has a ReLU; the output x W2 + b2 stays linear.",
            wrong=lambda x, W1, b1, W2, b2: np.maximum(_ffn(x, W1, b1, W2, b2), 0.0)),
    Mistake(name="b1 added after the ReLU",
            hint="the bias goes inside: ReLU(x W1 + b1).",
            wrong=lambda x, W1, b1, W2, b2: (np.maximum(x @ W1, 0.0) + b1) @ W2 + b2),
]

BLOCK_FEATURES = shape_features(**{
    "batch axes": lambda c: c["x"].ndim > 2, "two batch axes": lambda c: c["x"].ndim > 3,
    "d_ff < d_model": lambda c: c["W1"].shape[1] < c["W1"].shape[0]})

FFN = Exercise(id="layernorm.ffn", function="ffn_forward",
               signature="ffn_forward(x, W1, b1, W2, b2) -> (out, cache)",
               cases=_ffn_cases, reference=_ffn, points=1, output_names=("out",),
               axes={"out": VECTORS}, call="first_output",
               forbidden=NO_LIBRARY, mistakes=FFN_MISTAKES,
               features=BLOCK_FEATURES, dims=_ln_dims, rtol=RTOL, atol=ATOL)


def _post_no_residual(x, W1, b1, W2, b2, gamma, beta):
    return _ln(_ffn(x, W1, b1, W2, b2), gamma, beta)


def _norm_of_sublayer_only(x, W1, b1, W2, b2, gamma, beta):
    return x + _ln(_ffn(x, W1, b1, W2, b2), gamma, beta)


def _residual_after_norm(x, W1, b1, W2, b2, gamma, beta):
    h = _ln(x, gamma, beta)
    return h + _ffn(h, W1, b1, W2, b2)


POST_LN_MISTAKES = [
    Mistake(name="Pre-LN order in the Post-LN block",
            hint="Post-LN normalises after the addition: out = LN(x + FFN(x)).", wrong=pre_ln_block),
    Mistake(name="residual connection missing",
            hint="add the block's input before normalising: LN(x + FFN(x)).", wrong=_post_no_residual),
    Mistake(name="norm applied to the sublayer output only",
            hint="the norm comes after the residual addition, so it sees x + FFN(x).",
            wrong=_norm_of_sublayer_only),
]

POST_LN = Exercise(id="layernorm.post_ln", function="post_ln_block",
                   signature="post_ln_block(x, W1, b1, W2, b2, gamma, beta) -> out",
                   cases=_block_cases, reference=post_ln_block, points=1, output_names=("out",),
                   axes={"out": VECTORS},
                   helpers=BLOCK_HELPERS, forbidden=NO_LIBRARY, mistakes=POST_LN_MISTAKES,
                   features=BLOCK_FEATURES, dims=_ln_dims, rtol=RTOL, atol=ATOL)

PRE_LN_MISTAKES = [
    Mistake(name="residual added after the norm in a Pre-LN block",
            hint="the residual path must carry the un-normalised x: out = x + FFN(LN(x)), "
                 "not LN(x) + FFN(LN(x)).", wrong=_residual_after_norm),
    Mistake(name="Post-LN order in the Pre-LN block",
            hint="Pre-LN normalises the sublayer's input: out = x + FFN(LN(x)).", wrong=post_ln_block),
    Mistake(name="residual connection missing",
            hint="add x to the sublayer's output: x + FFN(LN(x)).",
            wrong=lambda x, W1, b1, W2, b2, gamma, beta: _ffn(_ln(x, gamma, beta), W1, b1, W2, b2)),
    Mistake(name="norm applied to the sublayer output instead of its input",
            hint="Pre-LN normalises what goes into the sublayer: out = x + FFN(LN(x)), not x + LN(FFN(x)).",
            wrong=_norm_of_sublayer_only),
    Mistake(name="norm skipped",
            hint="the sublayer sees LN(x), not x.",
            wrong=lambda x, W1, b1, W2, b2, gamma, beta: x + _ffn(x, W1, b1, W2, b2)),
]

PRE_LN = Exercise(id="layernorm.pre_ln", function="pre_ln_block",
                  signature="pre_ln_block(x, W1, b1, W2, b2, gamma, beta) -> out",
                  cases=_block_cases, reference=pre_ln_block, points=1, output_names=("out",),
                  axes={"out": VECTORS},
                  helpers=BLOCK_HELPERS, forbidden=NO_LIBRARY, mistakes=PRE_LN_MISTAKES,
                  features=BLOCK_FEATURES, dims=_ln_dims, rtol=RTOL, atol=ATOL)


EXERCISES = [FORWARD, BACKWARD, FFN, POST_LN, PRE_LN]
