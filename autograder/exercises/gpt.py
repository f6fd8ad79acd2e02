"""Exercises of notebook 06 (GPT) [trusted; also the check cell]

The block, the forward with tied embeddings, the die of the next token (temperature, top-k,
top-p) and one step of generation with a KV cache.

Every float is float64, ids int64. The model's weights travel as a dict like
``course_lib.transformer.gpt_params`` returns: "W_E" (vocab_size, d_model), "W_P"
(block_size, d_model), "norm_f" (gamma, beta), "blocks": a list of {"attn": (W_q, W_k, W_v,
W_o), "norm1", "norm2": (gamma, beta), "ffn": (W1, b1, W2, b2)}.
"""
from __future__ import annotations

import numpy as np

from autograder.judge.exercise import Exercise, Mistake, any_of, switchable
from autograder.judge.features import shape_features
from course_lib.attention import attention_forward, causal_mask, merge_heads, mha_forward, split_heads
from course_lib.layernorm import ffn_forward, layernorm_forward
from course_lib.decoding import next_token_probs
from course_lib.softmax import softmax
from course_lib.transformer import gpt_block, gpt_forward

FORBIDDEN = ("course_lib.transformer", "course_lib.generate", "course_lib.decoding",
             "course_lib.train", "course_lib.scaling", "course_lib.scaling_runs")


# ============================================================================ weights
def _block_params(rng, d, d_ff):
    return {"attn": tuple(rng.normal(size=(d, d)) / np.sqrt(d) for _ in range(4)),
            "norm1": (rng.normal(1.0, 0.3, size=d), rng.normal(0.0, 0.3, size=d)),
            "norm2": (rng.normal(1.0, 0.3, size=d), rng.normal(0.0, 0.3, size=d)),
            "ffn": (rng.normal(size=(d, d_ff)) / np.sqrt(d), rng.normal(size=d_ff) * 0.5,
                    rng.normal(size=(d_ff, d)) / np.sqrt(d_ff), rng.normal(size=d) * 0.5)}


def _gpt_params(rng, vocab_size, block_size, d, n_layers):
    return {"W_E": rng.normal(size=(vocab_size, d)), "W_P": rng.normal(size=(block_size, d)),
            "norm_f": (rng.normal(1.0, 0.3, size=d), rng.normal(0.0, 0.3, size=d)),
            "blocks": [_block_params(rng, d, 2 * d) for _ in range(n_layers)]}


def _ln(x, norm):
    return layernorm_forward(x, *norm)[0]


# ============================================================================ the block
def _block_case(rng, B, T, d, n_heads):
    return {"x": rng.normal(size=(B, T, d)), "p": _block_params(rng, d, 2 * d), "n_heads": n_heads}


def _block_cases(rng, hidden):
    if not hidden:
        return [_block_case(rng, 2, 5, 4, 2), _block_case(rng, 1, 4, 6, 1),
                _block_case(rng, 2, 1, 4, 2), _block_case(rng, 3, 3, 8, 4)]
    return [_block_case(rng, 2, 6, 8, 2), _block_case(rng, 1, 3, 4, 1),
            _block_case(rng, 4, 4, 6, 3), _block_case(rng, 2, 1, 4, 4),
            _block_case(rng, 2, 7, 4, 2)]


@switchable
def _wired_block(mask="causal", order="pre", residual=True, norm1="norm1", norm2="norm2", scale=None,
                 transposed=True, ffn_from="h"):
    """A GPT block with its mask, norm order, residual paths or norms changed, its scores
    divided by ``scale(d_model, d_k)`` instead of sqrt(d_k) (W_q scaled to undo the right one),
    its heads split and merged by reshapes alone (not ``transposed``), or its FFN fed the norm
    of the block's input (``ffn_from`` "x": attention and FFN side by side)."""
    def wrong(x, p, n_heads):
        T, d = x.shape[-2], x.shape[-1]
        m = {"causal": causal_mask(T), "none": None, "future": ~causal_mask(T)}[mask]
        W_q, W_k, W_v, W_o = p["attn"]
        if scale is not None:
            W_q = W_q * np.sqrt(d // n_heads) / scale(d, d // n_heads)

        def attn(h):
            if transposed:
                return mha_forward(h, h, W_q, W_k, W_v, W_o, n_heads, m)[0]
            # (..., T, d_model) read as (..., n_heads, T, d_k), and the heads read back the same way
            q, k, v = ((h @ W).reshape(*h.shape[:-2], n_heads, T, d // n_heads) for W in (W_q, W_k, W_v))
            return attention_forward(q, k, v, m)[0].reshape(h.shape) @ W_o

        def ffn(h):
            return ffn_forward(h, *p["ffn"])[0]
        if order == "post":
            h = _ln(x + attn(x), p["norm1"])
            return _ln(h + ffn(h), p[norm2])
        h = (x if residual else 0.0) + attn(_ln(x, p[norm1]))
        return (h if residual else 0.0) + ffn(_ln(h if ffn_from == "h" else x, p[norm2]))
    return wrong


BLOCK_MISTAKES = (
    Mistake(name="causal mask missing", hint="position t must not see tokens after it: pass "
            "causal_mask(T) (True where key j <= query i) to the attention.",
            wrong=_wired_block(mask="none")),
    Mistake(name="causal mask inverted (each position sees only later tokens)",
            hint="True in the mask means 'may attend': query i sees keys 0..i, a lower triangle. (An "
                 "additive mask of 0 and -inf reads the other way round here: 0 is False, -inf is "
                 "True; pass the boolean causal_mask(T).)",
            wrong=_wired_block(mask="future")),
    Mistake(name="block in Post-LN order", hint="a GPT block is Pre-LN: h = x + MHA(LN_1(x)), "
            "out = h + FFN(LN_2(h)); the norm comes before each sublayer.",
            wrong=_wired_block(order="post")),
    Mistake(name="residual connection missing", hint="each sublayer's output is added to its input: "
            "h = x + MHA(LN_1(x)), out = h + FFN(LN_2(h)).", wrong=_wired_block(residual=False)),
    Mistake(name="the first layer norm used twice", hint="the FFN has its own norm: LN_2 = p['norm2'].",
            wrong=_wired_block(norm2="norm1")),
    Mistake(name="the FFN fed the norm of the block's input, not of h",
            hint="the FFN comes after the attention and reads its result: out = h + FFN(LN_2(h)) with "
                 "h = x + MHA(LN_1(x)), not h + FFN(LN_2(x)) (attention and FFN side by side).",
            wrong=_wired_block(ffn_from="x")),
    Mistake(name="the two layer norms swapped", hint="LN_1 = p['norm1'] comes before the attention, "
            "LN_2 = p['norm2'] before the FFN.", wrong=_wired_block(norm1="norm2", norm2="norm1")),
    Mistake(name="attention scores not scaled", hint="divide Q K^T by sqrt(d_k) before the softmax, "
            "d_k = d_model / n_heads.", wrong=_wired_block(scale=lambda d, d_k: 1.0)),
    Mistake(name="scores scaled by sqrt(d_model) instead of sqrt(d_k)", hint="each head's scores are "
            "divided by the square root of its own width, d_k = d_model / n_heads.",
            wrong=_wired_block(scale=lambda d, d_k: np.sqrt(d))),
    Mistake(name="heads split by a reshape alone", hint="(B, T, d_model) reshaped straight to (B, n_heads, "
            "T, d_k) mixes positions into heads: reshape to (B, T, n_heads, d_k), then swap axes 1 "
            "and 2 (split_heads), and undo both before W_o (merge_heads).",
            wrong=_wired_block(transposed=False)),
)

BLOCK_FEATURES = shape_features(**{
    "one head": lambda c: c["n_heads"] == 1,
    "a single sequence (B = 1)": lambda c: len(c["x"]) == 1,
    "a single position (T = 1)": lambda c: c["x"].shape[1] == 1})


def _block_dims(c):
    d = c["x"].shape[-1]
    return {"d_model": d, "n_heads": c["n_heads"], "d_k": d // c["n_heads"]}


# Mutants of the course functions the references call that no legitimate input tells from them
# (autograder.exercises.adequacy); the symmetric swaps of np.swapaxes's two axes are left out on purpose
# (a mutant the engine should not make).
_SQUARE = "the block's mask is causal_mask(T) with one argument: T_q and T_k are the same number"
_SELF = "self-attention: mha_forward gets the same h as x_q and as x_kv"
_FOUR_D = "the heads are 4-D here, (B, n_heads, T, d_k): axis 2 is axis -2, x.shape[:2] is x.shape[:-2]"
CAUSAL_EQUIVALENT = {**{f"causal_mask: {m}": _SQUARE for m in (
    "T_k - T_q -> T_q - T_k", "T_q -> T_k in `return …`", "T_k -> T_q in `return …`",
    "T_k -> T_q in `return …` #2", "T_q -> T_k in `return …` #2")},
    "causal_mask: np.ones((T_q, T_k), dtype=bool) -> np.ones((T_q, T_k))":
        "the block uses the mask only as np.where's condition, where 1.0 and True choose alike"}
SELF_EQUIVALENT = {f"mha_forward: {m}": _SELF for m in ("x_q -> x_kv in `q = …`", "x_kv -> x_q in `k = …`",
                                                        "x_kv -> x_q in `v = …`")}
HEADS_EQUIVALENT = {m: _FOUR_D for m in ("attention_forward: -2 -> 2", "merge_heads: -2 -> 2 in `x = …`",
                                          "merge_heads: -2 -> 2 in `return …`", "split_heads: -2 -> 2")}
BLOCK_EQUIVALENT = {**CAUSAL_EQUIVALENT, **SELF_EQUIVALENT, **HEADS_EQUIVALENT}

BLOCK = Exercise(
    id="gpt.block",
    function="gpt_block",
    signature="gpt_block(x, p, n_heads) -> out (B, T, d_model)",
    cases=_block_cases,
    reference=gpt_block,
    points=2,
    output_names=("out",),
    axes={"out": ("T", "d_model")},
    forbidden=FORBIDDEN,
    features=BLOCK_FEATURES,
    dims=_block_dims,
    equivalent=BLOCK_EQUIVALENT,
    mistakes=BLOCK_MISTAKES,
)


# ============================================================================ the forward
def _forward_case(rng, B, T, vocab_size, d, n_heads, n_layers, block_size=None):
    block_size = block_size or T + 2
    return {"idx": rng.integers(0, vocab_size, size=(B, T)),
            "params": _gpt_params(rng, vocab_size, block_size, d, n_layers), "n_heads": n_heads}


def _forward_cases(rng, hidden):
    if not hidden:
        return [_forward_case(rng, 2, 4, 7, 4, 2, 1), _forward_case(rng, 1, 5, 9, 6, 3, 2),
                _forward_case(rng, 2, 3, 5, 4, 1, 1, block_size=3),
                _forward_case(rng, 2, 1, 6, 4, 2, 1)]
    return [_forward_case(rng, 3, 5, 8, 4, 2, 2), _forward_case(rng, 2, 1, 6, 6, 2, 1),
            _forward_case(rng, 1, 6, 11, 8, 4, 1), _forward_case(rng, 2, 4, 5, 4, 1, 2, block_size=4)]


@switchable
def _forward_with(positions=True, scale=False, final_norm=True, probs=False, offset=0, by_token=False):
    def wrong(idx, params, n_heads):
        T, (_, d) = idx.shape[-1], params["W_E"].shape
        x = params["W_E"][idx] * (np.sqrt(d) if scale else 1.0)
        if positions:
            x = x + (params["W_P"][idx] if by_token else params["W_P"][offset:offset + T])
        for p in params["blocks"]:
            x = gpt_block(x, p, n_heads)
        logits = (_ln(x, params["norm_f"]) if final_norm else x) @ params["W_E"].T
        return softmax(logits, axis=-1) if probs else logits
    return wrong


FORWARD_MISTAKES = (
    Mistake(name="position embeddings forgotten", hint="add the learned position embedding of each "
            "position: x = W_E[idx] + W_P[:T].", wrong=_forward_with(positions=False)),
    Mistake(name="embedding scaled by sqrt(d_model)", hint="GPT adds W_E[idx] and W_P[:T] as they are; the "
            "sqrt(d_model) factor belonged to notebook 05's sinusoidal model.",
            wrong=_forward_with(scale=True)),
    Mistake(name="final layer norm missing", hint="after the last block comes LN_f = params['norm_f'], "
            "then the output layer.", wrong=_forward_with(final_norm=False)),
    Mistake(name="probabilities returned instead of logits", hint="return the logits x W_E^T; softmax "
            "belongs to the loss and to sampling.", wrong=_forward_with(probs=True)),
    Mistake(name="position embeddings picked by token id", hint="W_P has one row per position, "
            "0 to T - 1: add W_P[:T] (or W_P[np.arange(T)]), not W_P[idx].",
            wrong=_forward_with(by_token=True)),
    Mistake(name="positions counted from 1", hint="the first token has position 0: W_P[:T], not "
            "W_P[1:T + 1].", wrong=_forward_with(offset=1)),
)

FORWARD_FEATURES = shape_features(**{
    "one head": lambda c: c["n_heads"] == 1,
    "two blocks": lambda c: len(c["params"]["blocks"]) == 2,
    "a single position (T = 1)": lambda c: c["idx"].shape[1] == 1,
    "T = block_size (every position)": lambda c: c["idx"].shape[1] == len(c["params"]["W_P"])})


# gpt.forward runs the learner's own gpt_block (graded on its own), so its mutants stop there
FORWARD_EQUIVALENT = {"gpt_forward: -1 -> 1": "idx is (B, T): idx.shape[1] is idx.shape[-1]"}
STEP_EQUIVALENT = {**CAUSAL_EQUIVALENT, **SELF_EQUIVALENT, **FORWARD_EQUIVALENT}

FORWARD = Exercise(
    id="gpt.forward",
    function="gpt_forward",
    signature="gpt_forward(idx, params, n_heads) -> logits (B, T, vocab_size)",
    cases=_forward_cases,
    reference=gpt_forward,
    points=2,
    output_names=("logits",),
    axes={"logits": ("T", "vocab_size")},
    helpers=("gpt_block",),
    forbidden=FORBIDDEN,
    features=FORWARD_FEATURES,
    equivalent=FORWARD_EQUIVALENT,
    mistakes=FORWARD_MISTAKES,
)


# ============================================================================ the die
def die_with(logits, temperature=1.0, top_k=None, top_p=None, *, tempered=True,
             k_shift=0, keep_crossing=True, keep_first=True, p_before_k=False,
             renormalise=True, ascending=False, after_softmax=False):
    """``next_token_probs`` with the mistakes the keyword-only switches model (the
    reference is kept free of them, so that its mutants are the learner's); ``keep_crossing``
    False keeps the tokens whose cumulative probability is at most top_p, "strict" those below it."""
    with np.errstate(invalid="ignore"):  # a mistake may keep nothing: 0 / 0
        return _die_with(logits, temperature, top_k, top_p, tempered, k_shift,
                         keep_crossing, keep_first, p_before_k, renormalise, ascending,
                         after_softmax)


def _die_with(logits, temperature, top_k, top_p, tempered, k_shift, keep_crossing,
              keep_first, p_before_k, renormalise, ascending, after_softmax):
    if after_softmax:  # softmax(logits) / temperature: not a distribution unless T = 1
        probs = softmax(logits, axis=-1) / temperature
    else:
        probs = softmax(logits / temperature if tempered else logits, axis=-1)
    nucleus_of = probs
    if top_k is not None:
        k = min(top_k + k_shift, probs.shape[-1])
        kth = -np.sort(-probs, axis=-1)[:, [k - 1]]  # (B, 1): the k-th largest
        probs = np.where(probs >= kth, probs, 0.0)
        if renormalise:
            probs = probs / probs.sum(axis=-1, keepdims=True)
    if top_p is not None:
        source = nucleus_of if p_before_k else probs
        order = np.argsort(source if ascending else -source, axis=-1, kind="stable")
        sorted_p = np.take_along_axis(source, order, axis=-1)
        cum = np.cumsum(sorted_p, axis=-1)
        keep_sorted = (cum - sorted_p < top_p) if keep_crossing is True else \
            (cum < top_p) if keep_crossing == "strict" else (cum <= top_p)  # the crossing token dropped
        keep_sorted[:, 0] |= keep_first  # the likeliest token always stays
        keep = np.zeros_like(keep_sorted)
        np.put_along_axis(keep, order, keep_sorted, axis=-1)
        probs = np.where(keep, probs, 0.0)
        if renormalise:
            probs = probs / probs.sum(axis=-1, keepdims=True)
    return probs


def _probs_case(rng, B, V, temperature=1.0, top_k=None, top_p=None):
    return {"logits": rng.normal(size=(B, V)) * 1.5, "temperature": temperature,
            "top_k": top_k, "top_p": top_p}


# Logits whose softmax is exactly 1/2, 1/4, 1/8, 3/32, 1/32 in float64 (exp of each is the
# dyadic 1, 1/2, 1/4, 3/16, 1/16 exactly in numpy, math and torch; the maximum is 0, so every
# usual softmax gives the same bits): every cumulative sum is exact, whatever the order.
_DYADIC_LOGITS = np.array([0.0, -0.6931471805599453, -1.3862943611198906,
                           -1.6739764335716716, -2.772588722239781])


def _peaked_case(rng, B, V):
    """Row 1's logits go from above 720 down by steps of about 100 (from the largest to the
    smallest more than 710): exp overflows unless the row's maximum is subtracted first. The
    probabilities stay distinct and above 0 (the smallest is about exp(-720))."""
    case = _probs_case(rng, B, V)
    steps = rng.dirichlet(np.full(V - 1, 20.0)) * rng.uniform(712.0, 735.0)  # they add up to that
    top = rng.uniform(720.0, 760.0)
    case["logits"][1] = rng.permutation(top - np.concatenate([[0.0], np.cumsum(steps)]))
    return case


def _boundary_case(rng, B):
    """Top-p whose threshold the cumulative probability of row 0 hits exactly (0.5, 0.75 or
    0.875): the token after the boundary must go (its mass before is >= top_p, not > top_p).
    The other rows are random; V = 5, temperature 1."""
    case = _probs_case(rng, B, 5, top_p=float(rng.choice([0.5, 0.75, 0.875])))
    case["logits"][0] = rng.permutation(_DYADIC_LOGITS)
    return case


def _hits_top_p(case):
    """Some row's sorted cumulative probability equals top_p exactly."""
    if case["top_p"] is None:
        return False
    probs = softmax(case["logits"] / case["temperature"], axis=-1)
    return bool((np.cumsum(-np.sort(-probs, axis=-1), axis=-1) == case["top_p"]).any())


def _probs_cases(rng, hidden):
    if not hidden:
        return [_probs_case(rng, 2, 6), _probs_case(rng, 2, 8, temperature=0.5),
                _probs_case(rng, 3, 8, top_k=3), _probs_case(rng, 2, 10, top_p=0.7),
                _probs_case(rng, 2, 10, temperature=1.5, top_k=5, top_p=0.6),
                _probs_case(rng, 3, 12, top_k=8, top_p=0.5),
                _probs_case(rng, 1, 5, temperature=2.0, top_k=1), _boundary_case(rng, 2),
                _peaked_case(rng, 2, 8)]
    return [_boundary_case(rng, 3), _peaked_case(rng, 3, 9),
            _probs_case(rng, 3, 7, temperature=0.8), _probs_case(rng, 2, 9, top_k=4),
            _probs_case(rng, 4, 12, top_p=0.8), _probs_case(rng, 2, 6, top_p=0.5),
            _probs_case(rng, 3, 10, temperature=0.7, top_k=6, top_p=0.75),
            _probs_case(rng, 2, 12, temperature=1.2, top_k=7, top_p=0.55),
            _probs_case(rng, 1, 8, temperature=1.3, top_k=2), _probs_case(rng, 2, 5, top_k=1)]


@switchable
def _probs_with(**mistake):
    return lambda logits, temperature=1.0, top_k=None, top_p=None: die_with(
        logits, temperature, top_k, top_p, **mistake)


def _after_softmax(logits, temperature=1.0, top_k=None, top_p=None):
    """The die without temperature, divided by it at the end."""
    return die_with(logits, 1.0, top_k, top_p) / temperature


PROBS_MISTAKES = (
    Mistake(name="temperature applied after softmax", hint="divide the logits by the temperature, "
            "then take the softmax: softmax(logits / T).", wrong=_probs_with(after_softmax=True),
            detect=any_of(_probs_with(after_softmax=True), _after_softmax)),  # before or after the cuts
    Mistake(name="temperature ignored", hint="the die is softmax(logits / temperature). (Dividing the "
            "probabilities by it and renormalising cancels it: divide the logits.)",
            wrong=_probs_with(tempered=False)),
    Mistake(name="top-p measured before the top-k cut", hint="apply top-k first and renormalise; top-p "
            "then adds up the renormalised probabilities.", wrong=_probs_with(p_before_k=True)),
    Mistake(name="top-k keeping k-1 tokens", hint="keep the k likeliest tokens: those at least as "
            "likely as the k-th largest.", wrong=_probs_with(k_shift=-1)),
    Mistake(name="top-k keeping k+1 tokens", hint="keep exactly the k likeliest tokens.",
            wrong=_probs_with(k_shift=1)),
    Mistake(name="top-p that drops the token crossing the threshold",
            hint="keep the fewest likeliest tokens whose probabilities add up to at least top_p: "
                 "the token whose probability takes the sum past top_p is kept.",
            wrong=_probs_with(keep_crossing=False, keep_first=False),
            detect=any_of(*(_probs_with(keep_crossing=below, keep_first=first)
                            for below in (False, "strict") for first in (True, False)))),
    Mistake(name="top-p on the least likely tokens", hint="sort from the likeliest token down before "
            "adding up probabilities.", wrong=_probs_with(ascending=True)),
    Mistake(name="kept probabilities not renormalised", hint="after dropping tokens, divide what is "
            "kept by its sum, so the die's faces add up to 1.", wrong=_probs_with(renormalise=False)),
)

PROBS_FEATURES = shape_features(**{
    "temperature below 1": lambda c: c["temperature"] < 1,
    "temperature above 1": lambda c: c["temperature"] > 1,
    "top-k": lambda c: c["top_k"] is not None,
    "top-k = 1": lambda c: c["top_k"] == 1,
    "top-p": lambda c: c["top_p"] is not None,
    "top-k and top-p together": lambda c: c["top_k"] is not None and c["top_p"] is not None,
    "a cumulative probability equal to top_p": _hits_top_p,
    "a single row": lambda c: len(c["logits"]) == 1})


# Mutants that no legitimate input tells from the reference (autograder.exercises.adequacy).
_AXIS_1 = "logits are (B, vocab_size): on a 2-D array axis 1 is axis -1"
_DEFAULT_AXIS = "the call's default axis is -1 already (softmax, np.sort, np.argsort, take_along_axis)"
_P = "next_token_probs: "
PROBS_EQUIVALENT = {
    _P + "softmax(logits / temperature, axis=-1) -> softmax(logits / temperature, axis=1)": _AXIS_1,
    _P + "np.argsort(-probs, axis=-1, kind='stable') -> "
         "np.argsort(-probs, kind='stable', axis=1)": _AXIS_1,
    _P + "np.take_along_axis(probs, order, axis=-1) -> "
         "np.take_along_axis(probs, order, axis=1)": _AXIS_1,
    **{_P + "probs.sum(axis=-1, keepdims=True) -> probs.sum(keepdims=True, axis=1) "
       f"in `probs = probs / probs.sum(axis=-1, keepdims=True)`{k}": _AXIS_1 for k in ("", " #2")},
    _P + "np.cumsum(sorted_p, axis=-1) -> np.cumsum(sorted_p, axis=1)": _AXIS_1,
    _P + "np.sort(probs, axis=-1) -> np.sort(probs, axis=1)": _AXIS_1,
    **{_P + f"-1 -> 1 in `{where}`" + (f" #{k}" if k > 1 else ""): _AXIS_1  # axis=-1 -> 1
       for where, times in (("probs = softmax(logits / temperature, axis=-1)", 1), ("order = …", 1),
                            ("sorted_p = …", 1), ("before = …", 1), ("kth = …", 1),
                            ("np.put_along_axis(keep, order, before < ", 1),
                            ("probs = probs / probs.sum(axis=-1, keepdims=True)", 2))
       for k in range(1, times + 1)},
    _P + "softmax(logits / temperature, axis=-1) -> softmax(logits / temperature)": _DEFAULT_AXIS,
    _P + "np.argsort(-probs, axis=-1, kind='stable') -> np.argsort(-probs, kind='stable')":
        _DEFAULT_AXIS,
    _P + "np.take_along_axis(probs, order, axis=-1) -> np.take_along_axis(probs, order)":
        _DEFAULT_AXIS,
    _P + "np.sort(probs, axis=-1) -> np.sort(probs)": _DEFAULT_AXIS,
    # softmax's own reductions: next_token_probs calls it once, with axis=-1 on
    # (B, vocab_size) logits
    **{f"softmax: np.{f}({v}, axis=axis, keepdims=True) -> np.{f}({v}, keepdims=True, "
       f"axis={a})": "softmax is only called with axis=-1, on 2-D (B, vocab_size) logits: "
       "axis -1 and axis 1 are `axis` there"
       for f, v in (("max", "z"), ("sum", "e")) for a in ("-1", "1")},
    "softmax: a line that updates `z` is missing": "z = np.asarray(z) on logits / temperature, "
        "already an array",
    "softmax: a line that updates `m` is missing": "np.where(np.isfinite(m), m, 0.0) changes m "
        "only for a row of all -inf logits, which has no distribution to return",
}

NEXT_TOKEN_PROBS = Exercise(
    id="gpt.next_token_probs",
    function="next_token_probs",
    signature="next_token_probs(logits, temperature=1.0, top_k=None, top_p=None) "
              "-> probs (B, vocab_size)",
    cases=_probs_cases,
    reference=next_token_probs,
    points=3,
    output_names=("probs",),
    axes={"probs": ("B", "vocab_size")},
    forbidden=FORBIDDEN,
    features=PROBS_FEATURES,
    equivalent=PROBS_EQUIVALENT,
    mistakes=PROBS_MISTAKES,
)


# ============================================================================ the KV cache
def stepped(idx, params, n_heads, *, whole_prefix=False, fixed_position=False,
            mask_first_key=False, attend_before_append=False, shared_cache=False, final_norm=True,
            no_cache=False, kv_from_x=False, last_only=False):
    """What a KV-cached step returns for every position of idx (B, T): logits (B, T, vocab_size).

    The right step equals ``gpt_forward``: for the new token at position t, its keys and
    values join the cache, and its one query attends to the cached keys 0..t (no mask is
    needed: none of them is in its future). The keyword-only switches model mistakes.
    """
    B, T = idx.shape
    caches = [([], []) for _ in params["blocks"]]
    shared = ([], [])
    out = []
    for t in range(T):
        x = params["W_E"][idx[:, t]][:, None, :] + params["W_P"][0 if fixed_position else t]
        for layer, p in enumerate(params["blocks"]):
            ks, vs = shared if shared_cache else caches[layer]
            h = _ln(x, p["norm1"])  # (B, 1, d_model)
            W_q, W_k, W_v, W_o = p["attn"]
            q = split_heads(h @ W_q, n_heads)  # (B, n_heads, 1, d_k)
            if whole_prefix:  # recompute the keys of the whole prefix and append them all
                prefix = params["W_E"][idx[:, :t + 1]] + params["W_P"][:t + 1]
                for p_before in params["blocks"][:layer]:
                    prefix = gpt_block(prefix, p_before, n_heads)
                hp = _ln(prefix, p["norm1"])
                new_k, new_v = split_heads(hp @ W_k, n_heads), split_heads(hp @ W_v, n_heads)
            else:
                src = x if kv_from_x else h  # the keys and values of the normed input, as the query's
                new_k, new_v = split_heads(src @ W_k, n_heads), split_heads(src @ W_v, n_heads)
            if no_cache:  # the cache never kept: the new token sees itself alone
                ks.clear(), vs.clear()
            if attend_before_append and ks:
                K, V = np.concatenate(ks, axis=-2), np.concatenate(vs, axis=-2)
            elif attend_before_append == "itself first":  # the first step sees its own key
                K, V = new_k, new_v
            elif attend_before_append:
                K = V = None
            ks.append(new_k)
            vs.append(new_v)
            if not attend_before_append:
                K, V = np.concatenate(ks, axis=-2), np.concatenate(vs, axis=-2)
            if last_only:  # the cache keeps the newest key and value alone
                ks[:], vs[:] = [new_k], [new_v]
            if K is None:
                heads = np.zeros_like(q)
            else:
                mask = causal_mask(K.shape[-2]) if mask_first_key else None
                heads = attention_forward(q, K, V, None if mask is None else mask[:1])[0]
            x = x + merge_heads(heads) @ W_o
            x = x + ffn_forward(_ln(x, p["norm2"]), *p["ffn"])[0]
        out.append(((_ln(x, params["norm_f"]) if final_norm else x) @ params["W_E"].T)[:, 0])
    return np.stack(out, axis=1)


def _step_reference(idx, params, n_heads):
    return gpt_forward(idx, params, n_heads)


def _step_cases(rng, hidden):
    if not hidden:
        return [_forward_case(rng, 2, 4, 7, 4, 2, 1), _forward_case(rng, 1, 5, 9, 6, 3, 2),
                _forward_case(rng, 2, 1, 5, 4, 1, 1), _forward_case(rng, 2, 3, 6, 4, 2, 2, block_size=3)]
    return [_forward_case(rng, 3, 5, 8, 4, 2, 2), _forward_case(rng, 2, 3, 6, 6, 2, 1),
            _forward_case(rng, 1, 6, 11, 8, 4, 1), _forward_case(rng, 2, 4, 5, 4, 1, 2, block_size=4)]


@switchable
def _stepped_with(**mistake):
    return lambda idx, params, n_heads: stepped(idx, params, n_heads, **mistake)


STEP_MISTAKES = (
    Mistake(name="KV cache that appends the whole prefix each step",
            hint="append only the new token's key and value; the cache already holds the earlier "
                 "ones, so appending the prefix again makes each earlier key count several times.",
            wrong=_stepped_with(whole_prefix=True)),
    Mistake(name="position index not advanced", hint="the token fed at step pos sits at position pos: "
            "add W_P[pos], not W_P[0].", wrong=_stepped_with(fixed_position=True)),
    Mistake(name="causal mask applied to the cached keys of the single new query",
            hint="the new token's query may see every cached key (none is in its future): row 0 "
                 "of a causal mask lets it see only the first.", wrong=_stepped_with(mask_first_key=True)),
    Mistake(name="cache updated after attending", hint="append the new token's key and value before "
            "its query attends: a token sees itself.", wrong=_stepped_with(attend_before_append=True),
            detect=any_of(*(_stepped_with(attend_before_append=how)  # the first step: its own key, or none
                            for how in (True, "itself first")))),
    Mistake(name="keys and values from the block's input instead of LN_1(x)",
            hint="the new token's query, key and value all come from the same normed input "
                 "h = LN_1(x): k = h W_k, v = h W_v.", wrong=_stepped_with(kv_from_x=True)),
    Mistake(name="one cache shared by all blocks", hint="each block keeps its own keys and values "
            "(e.g. cache[layer]); one list for all mixes the layers' keys.",
            wrong=_stepped_with(shared_cache=True)),
    Mistake(name="the cache never keeps the earlier keys and values",
            hint="each new token attends to itself alone: store every step's keys and values in "
                 "cache (cache[layer] = (K, V) after appending) so that the next step finds them.",
            wrong=_stepped_with(no_cache=True)),
    Mistake(name="the cache keeps only the newest key and value",
            hint="store what the step attended to, every key and value so far with the new ones "
                 "appended (cache[layer] = (K, V)), not the new token's alone: the next step must "
                 "find all the earlier ones.", wrong=_stepped_with(last_only=True)),
    Mistake(name="final layer norm missing", hint="after the last block comes LN_f = params['norm_f'], "
            "then the output layer, at every step as in gpt_forward.", wrong=_stepped_with(final_norm=False)),
)

KV_STEP = Exercise(
    id="gpt.kv_step",
    search_sites=3600,  # benchmarks/repair_search.py: about 3 s of edits
    function="gpt_step",
    signature="gpt_step(token, pos, cache, params, n_heads) -> logits (B, vocab_size)",
    cases=_step_cases,
    reference=_step_reference,
    call="stepwise",
    points=3,
    output_names=("logits",),
    axes={"logits": ("B", "vocab_size")},
    forbidden=FORBIDDEN,
    features=FORWARD_FEATURES,
    equivalent=STEP_EQUIVALENT,
    mistakes=STEP_MISTAKES,
)


EXERCISES = [BLOCK, FORWARD, NEXT_TOKEN_PROBS, KV_STEP]
