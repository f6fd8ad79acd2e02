"""Exercises of notebook 01 (language-model baselines) [trusted; also the check cell]

n-gram part: counting, add-k smoothing, rolling a weighted die, perplexity. Recurrent part:
Elman RNN forward, backpropagation through time, one LSTM cell. All numpy; the references
come from course_lib.ngram and course_lib.rnn, which the learner may not call, nor torch.
"""
from __future__ import annotations

import numpy as np

from autograder.judge.exercise import Exercise, Mistake, any_of, switched
from autograder.judge.features import shape_features
from course_lib.ngram import count_ngrams, ngram_probs, perplexity, roll_die
from course_lib.rnn import lstm_cell_forward, rnn_backward, rnn_forward, sigmoid

NO_LIBRARY = ("course_lib.ngram", "course_lib.rnn", "torch")
# the last two axes of the outputs, for the difference picture: an n-gram table has the next
# token last; the RNN's x (B, T, d_in), h (B, T, H), h0 (B, H), Wxh (d_in, H), Whh (H, H)
NEXT_TOKEN = ("previous token (a_{n-1})", "next token w")
RNN_AXES = {"x": ("T", "d_in"), "h": ("T", "H (hidden units)"), "h0": ("B", "H (hidden units)"),
            "Wxh": ("d_in", "H (hidden units)"), "Whh": ("H (of h_{t-1})", "H (of h_t)")}


# --------------------------------------------------------------------------- counting
def _count_cases(rng, hidden):
    shapes = [(12, 2, 4), (20, 3, 3), (6, 1, 3), (2, 2, 5)] if not hidden else \
        [(15, 1, 5), (2, 2, 3), (3, 3, 2), (40, 4, 3), (50, 2, 6)]
    return [dict(idx=rng.integers(0, V, size=T), n=n, vocab_size=V) for T, n, V in shapes]


def _count_loop(idx, n, vocab_size, first, last_drop=0, skip_prev=False):
    counts = np.zeros((vocab_size,) * n, dtype=np.int64)
    for t in range(first, len(idx) - last_drop):
        context = idx[t - n:t - 1] if skip_prev else idx[t - n + 1:t]
        counts[tuple(context) + (idx[t],)] += 1
    return counts


COUNT_MISTAKES = [
    Mistake(name="context off by one",
            hint="the context of idx[t] is the n-1 tokens right before it, idx[t-n+1:t]; "
                 "yours seems to skip the token just before idx[t].",
            wrong=lambda idx, n, vocab_size: _count_loop(idx, n, vocab_size, n, skip_prev=True)),
    Mistake(name="last n-gram not counted",
            hint="there are T - n + 1 n-grams; check the end of your loop (range stops one early).",
            wrong=lambda idx, n, vocab_size: _count_loop(idx, n, vocab_size, n - 1, last_drop=1)),
    Mistake(name="n-grams that wrap around the end",
            hint="the text does not continue from its end back to its start: do not use np.roll "
                 "or negative indices for the first tokens.",
            wrong=lambda idx, n, vocab_size: count_ngrams(
                np.concatenate([idx, idx[:n - 1]]), n, vocab_size)),
    Mistake(name="next token on the first axis",
            hint="counts[a_1, ..., a_{n-1}, w]: the context comes first, the next token w last.",
            wrong=lambda idx, n, vocab_size: np.moveaxis(count_ngrams(idx, n, vocab_size), -1, 0)),
    Mistake(name="each n-gram counted at most once",
            hint="a repeated n-gram must add 1 each time: `counts[index_arrays] += 1` adds 1 once per "
                 "distinct index (numpy buffers it), as `= 1` would; use np.add.at(counts, "
                 "index_arrays, 1) or a loop with += 1.",
            wrong=lambda idx, n, vocab_size: np.minimum(count_ngrams(idx, n, vocab_size), 1)),
]

COUNT_NGRAMS = Exercise(
    id="lm.count_ngrams",
    function="count_ngrams",
    signature="count_ngrams(idx, n, vocab_size) -> counts",
    cases=_count_cases,
    reference=count_ngrams,
    points=1.0,
    output_names=("counts",),
    axes={"counts": NEXT_TOKEN},
    forbidden=NO_LIBRARY,
    features=shape_features(**{
        "unigrams (n = 1)": lambda c: c["n"] == 1,
        "n >= 3": lambda c: c["n"] >= 3,
        "a text holding a single n-gram": lambda c: len(c["idx"]) == c["n"]}),
    dims=lambda c: {"T": len(c["idx"]), "n": c["n"], "vocab_size": c["vocab_size"]},
    mistakes=COUNT_MISTAKES,
)


# --------------------------------------------------------------------------- add-k
def _table(rng, V, n, zero_rows):
    counts = rng.integers(0, 6, size=(V,) * n)
    if zero_rows and n > 1:
        counts.reshape(-1, V)[rng.choice(V ** (n - 1), size=zero_rows, replace=False)] = 0
    return counts


def _single_count(counts, rng):
    """``counts`` (V, V) with one context seen exactly once: a row of total 1, one-hot."""
    V = counts.shape[-1]
    row = counts.reshape(-1, V)[rng.integers(V ** (counts.ndim - 1))]
    row[:] = 0
    row[rng.integers(V)] = 1
    return counts


def _probs_cases(rng, hidden):
    spec = [(3, 2, 1, 0.0), (4, 2, 0, 1.0), (4, 1, 0, 0.5), (2, 3, 1, 0.0)] if not hidden else \
        [(5, 1, 0, 0.0), (3, 3, 2, 0.1), (4, 2, 0, 0.0), (3, 3, 3, 0.0), (2, 2, 1, 0.5)]
    cases = [dict(counts=_table(rng, V, n, z), k=k) for V, n, z, k in spec]
    if hidden:  # a context of total count 1 (k = 0): its row is one-hot, not uniform
        cases[2]["counts"] = _single_count(cases[2]["counts"], rng)
    return cases


def _addk(counts, k, axis=-1, kv=True, uniform_unseen=True):
    c = np.asarray(counts, dtype=np.float64)
    V = c.shape[-1]
    num = c + k
    total = num.sum(axis=axis, keepdims=True) if kv else c.sum(axis=-1, keepdims=True) + k
    out = np.divide(num, total, out=np.zeros_like(num), where=total > 0)
    if uniform_unseen:
        out = np.where(total > 0, out, 1.0 / V)
    return out


PROBS_MISTAKES = [
    Mistake(name="probabilities normalised over the whole table, not per context",
            hint="each context has its own die: divide by the count of that context, "
                 "counts.sum(axis=-1, keepdims=True).",
            wrong=lambda counts, k: _addk(counts, k, axis=None)),
    Mistake(name="probabilities normalised over the context axis",
            hint="p(w | context) sums to 1 over the next token w, the last axis.",
            wrong=lambda counts, k: _addk(counts, k, axis=0)),
    Mistake(name="k added to the total once instead of k * vocab_size times",
            hint="every one of the vocab_size faces gets k extra counts, so the total grows by "
                 "k * vocab_size.",
            wrong=lambda counts, k: _addk(counts, k, kv=False)),
    Mistake(name="unseen contexts left at zero",
            hint="a context with no counts (and k = 0) has no evidence: give it the uniform "
                 "distribution 1 / vocab_size so every row is a distribution.",
            wrong=lambda counts, k: _addk(counts, k, uniform_unseen=False)),
]

NGRAM_PROBS = Exercise(
    id="lm.ngram_probs",
    function="ngram_probs",
    signature="ngram_probs(counts, k=0.0) -> probs",
    cases=_probs_cases,
    reference=ngram_probs,
    points=1.0,
    output_names=("probs",),
    axes={"probs": NEXT_TOKEN},
    forbidden=NO_LIBRARY,
    features=shape_features(**{
        "k > 0 (smoothing)": lambda c: c["k"] > 0,
        "contexts never seen (all-zero rows)": lambda c: np.ndim(c["counts"]) > 1 and (
            np.asarray(c["counts"]).reshape(-1, np.shape(c["counts"])[-1]).sum(1) == 0).any(),
        "a unigram table (1-D)": lambda c: np.ndim(c["counts"]) == 1,
        "a table of n >= 3 (3-D)": lambda c: np.ndim(c["counts"]) >= 3}),
    dims=lambda c: {"vocab_size": np.shape(c["counts"])[-1]},
    equivalent={
        **{m: "`safe` only guards the division of counts / safe for rows with total 0, "
              "and the return's np.where(total > 0, ...) gives those rows 1 / vocab_size "
              "whatever the division gave (counts and k are non-negative)" for m in (
            "ngram_probs: total > 0 -> total >= 0 in `safe = …`", "ngram_probs: 0 -> -1 in `safe = …`",
            "ngram_probs: safe -> total")},
        "ngram_probs: 1 -> 0 in `vocab_size = …`": "counts has shape (vocab_size,) * n by the exercise's "
                               "text: every axis has length vocab_size, so shape[0] is "
                               "shape[-1]"},
    mistakes=PROBS_MISTAKES,
)


# --------------------------------------------------------------------------- weighted die
_U_LAST = np.nextafter(1.0, 0.0)  # the largest u below 1


def _near_one(rng, rows):
    """Ten faces of weight 0.1 (their cumulative sum ends at 0.9999999999999999, below 1) and u
    just below 1: a cdf compared with u gives face 10 unless the face is kept below vocab_size."""
    return dict(weights=np.full((rows, 10), 0.1), u=np.r_[_U_LAST, rng.random(rows - 1)])


def _die_cases(rng, hidden):
    if not hidden:
        return [dict(weights=rng.integers(0, 5, size=(6, 4)).astype(float) + 0.5,
                     u=rng.random(6)),
                dict(weights=np.array([[0.0, 0, 2, 1], [1, 0, 1, 2], [3, 1, 0, 0]]),
                     u=np.array([0.0, 0.25, 0.5])),
                dict(weights=rng.random((2, 1)) + 0.5, u=rng.random(2)), _near_one(rng, 1)]
    probs = rng.random((10, 8)) ** 3
    return [_near_one(rng, 3), dict(weights=probs / probs.sum(1, keepdims=True), u=rng.random(10)),
            dict(weights=np.array([[1.0]]), u=np.array([0.7])),
            dict(weights=np.array([[0.0, 0, 0, 4], [2, 0, 0, 2], [0, 1, 0, 1]]),
                 u=np.array([0.0, 0.5, 0.5])),
            dict(weights=rng.random((50, 5)) * 7, u=rng.random(50))]


def _cdf_faces(weights, u, normalise=True, strict=False):
    cum = np.cumsum(weights, axis=-1)
    threshold = u[:, None] * (cum[:, -1:] if normalise else 1.0)
    hits = cum < threshold if strict else cum <= threshold
    return np.minimum(hits.sum(axis=-1), weights.shape[-1] - 1)


DIE_MISTAKES = [
    Mistake(name="argmax instead of sampling",
            hint="the die must use the random number u: the face is where u falls in the "
                 "cumulative distribution, not always the likeliest face.",
            wrong=lambda weights, u: np.argmax(weights, axis=-1)),
    Mistake(name="weights not normalised",
            hint="divide the cumulative sum by the total weight (or multiply u by it) before "
                 "comparing with u in [0, 1).",
            wrong=lambda weights, u: _cdf_faces(weights, u, normalise=False),
            detect=any_of(lambda weights, u: _cdf_faces(weights, u, normalise=False),
                          # the first face whose sum passes u, or face 0 where none does
                          lambda weights, u: np.argmax(np.cumsum(weights, axis=-1) > u[:, None], axis=-1))),
    Mistake(name="a face of weight zero can come up",
            hint="take the first face whose cumulative probability is strictly greater than u "
                 "(count cdf <= u); with cdf < u a zero-weight face wins when u lands on a boundary.",
            wrong=lambda weights, u: _cdf_faces(weights, u, strict=True)),
    Mistake(name="faces numbered from 1",
            hint="faces are token ids 0 .. vocab_size-1, the column index of weights.",
            wrong=lambda weights, u: roll_die(weights, u) + 1),
]

ROLL_DIE = Exercise(
    id="lm.roll_die",
    function="roll_die",
    signature="roll_die(weights, u) -> faces",
    cases=_die_cases,
    reference=roll_die,
    points=1.0,
    output_names=("faces",),
    forbidden=NO_LIBRARY,
    features=shape_features(**{
        "faces of weight zero": lambda c: (c["weights"] == 0).any(),
        "a die with one face": lambda c: c["weights"].shape[-1] == 1,
        "u just below 1, where a cumulative probability can round below 1 (the face "
        "must stay below vocab_size)": lambda c: (np.asarray(c["u"]) == _U_LAST).any()}),
    equivalent={
        **{m: "weights is (B, vocab_size) by the exercise's text (and cum[:, -1:] in the "
              "reference needs 2-D), so axis 1 is axis -1" for m in (
            "roll_die: np.cumsum(weights, axis=-1) -> np.cumsum(weights, axis=1)",
            "roll_die: -1 -> 1 in `cum = …`",
            "roll_die: (cum <= threshold).sum(axis=-1) -> (cum <= threshold).sum(axis=1)",
            "roll_die: -1 -> 1 in `return …`")},
        "roll_die: a line that updates `weights` is missing":
            "np.asarray(weights, float64) changes nothing for float64 weights, a list "
            "(np.cumsum converts it) or integer weights (exact sums, compared with a "
            "float64 threshold); only float32 rounding of the cdf at a face boundary "
            "could differ, which the text does not specify (a float32 learner cdf "
            "would differ there too)"},
    mistakes=DIE_MISTAKES,
)


# --------------------------------------------------------------------------- perplexity
def _softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _ppl_cases(rng, hidden):
    # a long text: the product of its probabilities underflows to 0 (log of a product fails);
    # sharp rows (scale 4) give some targets a probability far below 1e-3, as hidden ones do
    spec = [(5, 4, 1.0), (12, 6, 4.0), (1, 3, 0.0), (600, 6, 1.0)] if not hidden else \
        [(1, 5, 1.0), (50, 10, 4.0), (9, 7, 0.0), (30, 3, 1.5), (1500, 12, 1.0)]
    return [dict(probs=_softmax(rng.normal(size=(T, V)) * s), targets=rng.integers(0, V, size=T))
            for T, V, s in spec]


def _target_p(probs, targets):
    return probs[np.arange(len(targets)), targets]


PPL_MISTAKES = [
    Mistake(name="perplexity not averaged per token",
            hint="use the mean negative log-probability over the T tokens, not the sum; "
                 "otherwise longer texts look worse just for being longer.",
            wrong=lambda probs, targets: (np.exp(-np.log(_target_p(probs, targets)).sum()),
                                          -np.log2(_target_p(probs, targets)).sum())),
    Mistake(name="bits per character left in nats",
            hint="bits are base-2 logs: divide the mean natural-log loss by ln 2 (or use np.log2).",
            wrong=lambda probs, targets: (perplexity(probs, targets)[0],
                                          -np.log(_target_p(probs, targets)).mean())),
    Mistake(name="log bases mixed up in the perplexity",
            hint="perplexity = exp(mean nats) = 2 ** (mean bits); 2 ** (mean nats) mixes the bases.",
            wrong=lambda probs, targets: (2.0 ** -np.log(_target_p(probs, targets)).mean(),
                                          perplexity(probs, targets)[1])),
    Mistake(name="average probability instead of average log-probability",
            hint="perplexity is the exponential of the mean negative log-probability "
                 "(a geometric mean), not 1 / mean(p).",
            wrong=lambda probs, targets: (1.0 / _target_p(probs, targets).mean(),
                                          -np.log2(_target_p(probs, targets).mean()))),
    Mistake(name="probs[:, targets] instead of one entry per row",
            hint="probs[:, targets] is a (T, T) table: every row at every target. Pick one entry per "
                 "row with probs[np.arange(T), targets].",
            wrong=lambda probs, targets: (np.exp(-np.log(probs[:, targets]).mean()),
                                          -np.log2(probs[:, targets]).mean())),
    Mistake(name="probability of the likeliest token instead of the target",
            hint="score the probability the model gave to the token that actually came next, "
                 "probs[t, targets[t]].",
            wrong=lambda probs, targets: perplexity(probs, probs.argmax(axis=1))),
    Mistake(name="targets shifted by one",
            hint="row t of probs is already the model's prediction for targets[t] (the shift was "
                 "made when the predictions were): score probs[t, targets[t]] for every t, not "
                 "probs[t, targets[t + 1]].",
            wrong=lambda probs, targets: perplexity(probs[:-1], targets[1:])),
]

PERPLEXITY = Exercise(
    id="lm.perplexity",
    function="perplexity",
    signature="perplexity(probs, targets) -> (ppl, bpc)",
    cases=_ppl_cases,
    reference=perplexity,
    points=1.0,
    output_names=("ppl", "bpc"),
    forbidden=NO_LIBRARY,
    features=shape_features(**{"a single token (T = 1)": lambda c: len(c["targets"]) == 1,
                               "a long text (T in the hundreds)": lambda c: len(c["targets"]) >= 500}),
    dims=lambda c: {"T": len(c["targets"]), "vocab_size": c["probs"].shape[-1]},
    mistakes=PPL_MISTAKES,
)


# --------------------------------------------------------------------------- RNN forward
def _rnn_case(rng, B, T, D, H, scale=1.0):
    return dict(x=rng.normal(size=(B, T, D)), h0=rng.normal(size=(B, H)) * 0.5,
                Wxh=rng.normal(size=(D, H)) * scale / np.sqrt(D),
                Whh=rng.normal(size=(H, H)) * scale / np.sqrt(H), b=rng.normal(size=H) * 0.1)


def _rnn_cases(rng, hidden):
    spec = [(2, 3, 4, 5, 1.0), (1, 5, 3, 3, 1.0), (2, 1, 2, 3, 3.0)] if not hidden else \
        [(2, 1, 3, 4, 1.0), (3, 6, 2, 4, 1.0), (2, 4, 5, 2, 1.0), (2, 7, 3, 6, 3.0)]
    return [_rnn_case(rng, *s) for s in spec]


def _rnn_variant(x, h0, Wxh, Whh, b, f=np.tanh, carry=True, transpose=False, shifted=False,
                 pre_stored=False):
    """The hidden states with a mistake: ``shifted`` stores h_{t-1} at slot t (h0 at slot 0, or
    zeros there with "zeros"), ``pre_stored`` stores the pre-activation a_t while the
    recurrence carries f(a_t)."""
    h_prev, hs = h0, []
    W = Whh.T if transpose else Whh
    for t in range(x.shape[1]):
        a = x[:, t] @ Wxh + (h_prev if carry else h0) @ W + b
        new = f(a)
        if shifted:
            hs.append(np.zeros_like(h0) if t == 0 and shifted == "zeros" else h_prev)
        else:
            hs.append(a if pre_stored else new)
        h_prev = new
    return np.stack(hs, axis=1)


def _with_cache(hidden):
    """The outputs graded for ``rnn_forward``: the hidden states ``hidden(**case)`` and the cache
    the text prescribes, ``(x, h0, Wxh, Whh, h)``, holding the inputs and those states."""
    def outputs(**c):
        h = hidden(**c)
        return h, c["x"], c["h0"], c["Wxh"], c["Whh"], h
    return outputs


def _rnn_outputs(**c):
    h, cache = rnn_forward(**c)
    return (h, *cache)


RNN_MISTAKES = [
    Mistake(name="hidden state not carried across time",
            hint="at step t use the state you just computed, h[:, t-1], not h0 every time.",
            wrong=_with_cache(lambda **c: _rnn_variant(**c, carry=False))),
    Mistake(name="initial state h0 ignored",
            hint="the recurrence starts from the given h0, not from zeros.",
            wrong=_with_cache(lambda x, h0, Wxh, Whh, b: rnn_forward(x, np.zeros_like(h0), Wxh, Whh, b)[0])),
    Mistake(name="W_hh transposed",
            hint="rows are examples here, so the recurrent term is h_prev @ Whh.",
            wrong=_with_cache(lambda **c: _rnn_variant(**c, transpose=True))),
    Mistake(name="tanh left out",
            hint="h_t = tanh(x_t Wxh + h_{t-1} Whh + b); without it the RNN is linear.",
            wrong=_with_cache(lambda **c: _rnn_variant(**c, f=lambda a: a))),
    Mistake(name="sigmoid instead of tanh",
            hint="the Elman RNN here uses tanh, whose outputs lie in (-1, 1).",
            wrong=_with_cache(lambda **c: _rnn_variant(**c, f=sigmoid))),
    Mistake(name="hidden states shifted by one step",
            hint="h[:, t] is the state after reading x[:, t]; store it after the update, not before.",
            wrong=_with_cache(lambda **c: _rnn_variant(**c, shifted=True)),
            detect=any_of(*(_with_cache(lambda how=how, **c: _rnn_variant(**c, shifted=how))
                            for how in (True, "zeros")))),  # slot 0: h0, or left at zero
    Mistake(name="pre-activation stored in h",
            hint="h[:, t] holds the state itself, h_t = tanh(a_t), not a_t = x_t Wxh + h_{t-1} Whh + b "
                 "(the backward reads 1 - h_t**2 from it).",
            wrong=_with_cache(lambda **c: _rnn_variant(**c, pre_stored=True))),
]


def _rnn_x(c):
    return c["x"] if "x" in c else c["cache"][0]


RNN_FEATURES = shape_features(**{
    "a single time step (T = 1)": lambda c: _rnn_x(c).shape[1] == 1,
    "large weights (tanh saturates)": lambda c: _large(c["Whh"] if "Whh" in c else c["cache"][3])})


def _large(W):
    return np.sqrt(np.mean(W ** 2) * W.shape[0]) > 2.0  # entries well above 1/sqrt(H)


def _rnn_dims(c):
    x = _rnn_x(c)
    return {"T": x.shape[1], "B": x.shape[0], "d_in": x.shape[2]}


RNN_FORWARD = Exercise(
    id="lm.rnn_forward",
    function="rnn_forward",
    signature="rnn_forward(x, h0, Wxh, Whh, b) -> (h, cache)",
    cases=_rnn_cases,
    reference=_rnn_outputs,
    call="output_and_cache",  # the cache the text prescribes too
    points=1.0,
    output_names=("h", "cache[0] (x)", "cache[1] (h0)", "cache[2] (Wxh)", "cache[3] (Whh)",
                  "cache[4] (h)"),
    axes={"h": RNN_AXES["h"], "cache[0] (x)": RNN_AXES["x"], "cache[1] (h0)": RNN_AXES["h0"],
          "cache[2] (Wxh)": RNN_AXES["Wxh"], "cache[3] (Whh)": RNN_AXES["Whh"], "cache[4] (h)": RNN_AXES["h"]},
    forbidden=NO_LIBRARY,
    features=RNN_FEATURES,
    dims=_rnn_dims,
    mistakes=RNN_MISTAKES,
)


# --------------------------------------------------------------------------- BPTT
def _bptt_cases(rng, hidden):
    cases = []
    for c in _rnn_cases(rng, hidden):
        h, cache = rnn_forward(**c)
        cases.append(dict(dh=rng.normal(size=h.shape), cache=cache))
    return cases


def _bptt(dh, cache, accumulate=True, through_time=True, tanh_grad=True, whh_from_prev=True,
          transpose=True, backwards=True, tanh_of_prev=False, wraps=False, late_dnext=False,
          skip_first=False):
    x, h0, Wxh, Whh, h = cache
    dx, dWxh, dWhh = np.zeros_like(x), np.zeros_like(Wxh), np.zeros_like(Whh)
    db, dnext = np.zeros(Whh.shape[0]), np.zeros_like(h0)
    steps_run = range(1 if skip_first else 0, x.shape[1])  # skip_first: range(T - 1, 0, -1)
    for t in reversed(steps_run) if backwards else steps_run:
        h_prev = h[:, t - 1] if t > 0 or wraps else h0  # wraps: h[:, -1] at t = 0, the last state
        g = dh[:, t] + (dnext if through_time and not late_dnext else 0.0)
        da = g * (1.0 - (h_prev if tanh_of_prev else h[:, t]) ** 2) if tanh_grad else g
        da = da + dnext if late_dnext else da  # late_dnext: the gradient from t+1 added past the tanh
        dx[:, t] = da @ Wxh.T
        steps = (x[:, t].T @ da, (h_prev if whh_from_prev else h[:, t]).T @ da, da.sum(0))
        if accumulate:
            dWxh, dWhh, db = dWxh + steps[0], dWhh + steps[1], db + steps[2]
        else:
            dWxh, dWhh, db = steps
        dnext = da @ (Whh.T if transpose else Whh)
    return dx, dnext, dWxh, dWhh, db


_bptt_with = switched(_bptt)  # two of its mistakes at once: ``verdict.identify_pair``
BPTT_MISTAKES = [
    Mistake(name="gradients not accumulated over time steps",
            hint="the weights are shared by every step, so dWxh, dWhh and db are sums over t "
                 "(+=), not the last step's value.",
            wrong=_bptt_with(accumulate=False)),
    Mistake(name="no gradient flowing back through time",
            hint="h_t also feeds h_{t+1}: add the gradient coming back from step t+1 "
                 "(dnext = da_{t+1} @ Whh.T) to dh[:, t].",
            wrong=_bptt_with(through_time=False)),
    Mistake(name="tanh derivative left out",
            hint="multiply the incoming gradient by tanh'(a_t) = 1 - h_t**2 before the weights.",
            wrong=_bptt_with(tanh_grad=False)),
    Mistake(name="h[:, t - 1] at t = 0 (the last state, not h0)",
            hint="at t = 0 the previous state is h0: h[:, -1] is Python's last entry, the final "
                 "state. Use h_prev = h[:, t - 1] if t > 0 else h0.", wrong=_bptt_with(wraps=True)),
    Mistake(name="the gradient from step t+1 added after the tanh derivative",
            hint="h_t feeds both the loss at step t and step t+1, so both gradients reach h_t: add "
                 "dnext to dh[:, t] first, then multiply the sum by 1 - h_t**2 "
                 "(da_t = (dh[:, t] + dnext) * (1 - h_t**2)).", wrong=_bptt_with(late_dnext=True)),
    Mistake(name="the loop stops before t = 0",
            hint="range(T - 1, 0, -1) ends at t = 1: step 0's share of dx and of the weight "
                 "gradients is missing, and dh0 is what step 0 passes back. Loop over "
                 "reversed(range(T)).", wrong=_bptt_with(skip_first=True)),
    Mistake(name="tanh derivative taken at h_{t-1}",
            hint="h_t = tanh(a_t), so dh_t/da_t = 1 - h_t**2, with the step's own output h_t, not "
                 "the previous one.", wrong=_bptt_with(tanh_of_prev=True)),
    Mistake(name="dW_hh computed with h_t instead of h_{t-1}",
            hint="a_t = ... + h_{t-1} Whh, so dWhh += h_{t-1}.T @ da_t (h0 at t = 0).",
            wrong=_bptt_with(whh_from_prev=False)),
    Mistake(name="the loop runs forward in time",
            hint="the gradient reaching h_t comes from step t+1, so it exists only once that step is "
                 "done: loop t = T-1 down to 0 (reversed(range(T))).",
            wrong=_bptt_with(backwards=False)),
    Mistake(name="W_hh not transposed when passing the gradient back",
            hint="the gradient reaching h_{t-1} is da_t @ Whh.T.",
            wrong=_bptt_with(transpose=False)),
]

RNN_BACKWARD = Exercise(
    id="lm.rnn_backward",
    function="rnn_backward",
    signature="rnn_backward(dh, cache) -> (dx, dh0, dWxh, dWhh, db)",
    cases=_bptt_cases,
    reference=rnn_backward,
    points=2.0,
    output_names=("dx", "dh0", "dWxh", "dWhh", "db"),
    axes={"dx": RNN_AXES["x"], "dh0": RNN_AXES["h0"], "dWxh": RNN_AXES["Wxh"], "dWhh": RNN_AXES["Whh"]},
    forbidden=NO_LIBRARY,
    features=RNN_FEATURES,
    dims=_rnn_dims,
    equivalent={"rnn_backward: da.sum(axis=0) -> da.sum(axis=-2)":
                "da is (B, H) (dh[:, t] of dh (B, T, H) by the text), so axis -2 is axis 0"},
    mistakes=BPTT_MISTAKES,
)


# --------------------------------------------------------------------------- LSTM cell
def _lstm_cases(rng, hidden):
    spec = [(2, 3, 4), (3, 5, 2), (1, 1, 3)] if not hidden else [(1, 2, 3), (4, 3, 3), (2, 6, 5), (3, 1, 4)]
    return [dict(x=rng.normal(size=(B, D)), h_prev=rng.normal(size=(B, H)) * 0.5,
                 c_prev=rng.normal(size=(B, H)),
                 W=rng.normal(size=(H + D, 4 * H)) / np.sqrt(H + D), b=rng.normal(size=4 * H) * 0.5)
            for B, D, H in spec]


def _lstm(x, h_prev, c_prev, W, b, gate=sigmoid, cand=np.tanh, swap_if=False, out_tanh=True,
          x_first=False, order="ifoc"):
    z = np.concatenate([x, h_prev] if x_first else [h_prev, x], axis=1) @ W + b
    parts = dict(zip(order, np.split(z, 4, axis=1)))  # c: the candidate c_tilde
    i, f, o, c_tilde = gate(parts["i"]), gate(parts["f"]), gate(parts["o"]), cand(parts["c"])
    c = i * c_prev + f * c_tilde if swap_if else f * c_prev + i * c_tilde
    return (o * np.tanh(c) if out_tanh else o * c), c


_lstm_with = switched(_lstm)
LSTM_MISTAKES = [
    Mistake(name="gate nonlinearity swapped",
            hint="the gates i, f, o use the sigmoid (values in (0, 1), how much to let through); "
                 "the candidate c_tilde uses tanh.",
            wrong=_lstm_with(gate=np.tanh, cand=sigmoid)),
    Mistake(name="candidate squashed by a sigmoid like the gates",
            hint="only the gates i, f, o use the sigmoid; the candidate c_tilde uses tanh, so it "
                 "can be negative (values in (-1, 1)).",
            wrong=_lstm_with(cand=sigmoid)),
    Mistake(name="forget gate applied to the input instead of the cell",
            hint="c = f * c_prev + i * c_tilde: f decides how much history to keep, i how much new.",
            wrong=_lstm_with(swap_if=True)),
    Mistake(name="output without tanh of the cell",
            hint="h = o * tanh(c): the cell is squashed into (-1, 1) before the output gate.",
            wrong=_lstm_with(out_tanh=False)),
    Mistake(name="input concatenated as [x, h_prev]",
            hint="W acts on [h_prev, x] (h_prev first), as in the CS182 slides' W [h_{t-1}, x_t].",
            wrong=_lstm_with(x_first=True)),
    Mistake(name="gate blocks in the wrong order",
            hint="the 4H columns of z are i, f, o, c_tilde in that order (torch.nn.LSTM puts the "
                 "candidate third: i, f, c_tilde, o).",
            wrong=_lstm_with(order="ifco")),
]

LSTM_CELL = Exercise(
    id="lm.lstm_cell",
    function="lstm_cell_forward",
    signature="lstm_cell_forward(x, h_prev, c_prev, W, b) -> (h, c)",
    cases=_lstm_cases,
    reference=lambda **c: lstm_cell_forward(**c)[:2],
    points=1.0,
    output_names=("h", "c"),
    axes={"h": RNN_AXES["h0"], "c": RNN_AXES["h0"]},
    forbidden=NO_LIBRARY,
    features=shape_features(**{"a single example (B = 1)": lambda c: len(c["x"]) == 1}),
    equivalent={"lstm_cell_forward: np.concatenate([h_prev, x], axis=1) -> "
                "np.concatenate([h_prev, x], axis=-1)":
                "x (B, D) and h_prev (B, H) are 2-D by the exercise's text, so axis -1 "
                "is axis 1"},
    mistakes=LSTM_MISTAKES,
)


EXERCISES = [COUNT_NGRAMS, NGRAM_PROBS, ROLL_DIE, PERPLEXITY, RNN_FORWARD, RNN_BACKWARD, LSTM_CELL]
