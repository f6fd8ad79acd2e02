"""Realistic bugs that no exercise's mistake list names, for the generic diagnoses (``diagnose``).

Each mutant is a learner's function with one bug and the words a specific, correct
diagnosis must contain. None of them is modelled by a ``Mistake`` (a test checks), so only
the generic diagnoses can name them; ``test_diagnose.py`` measures the share they name.
"""
from __future__ import annotations

from learner_code import LearnerCode


def _mutant(exercise: str, bug: str, source: str, expect: str) -> LearnerCode:
    """``bug``: what the bug is, for the report; ``source``: the learner's code (numpy imported
    as np), run alone; ``expect``: words a specific, correct diagnosis contains, as written."""
    return LearnerCode(exercise=exercise, what=(bug,), source=source, says=(expect,))


_SOFTMAX = "def softmax(z, axis=-1):\n    e = np.exp(z - z.max(axis=axis, keepdims=True))\n"
_JVP = "def softmax_jvp(s, g, axis=-1):\n"

N00 = [
    _mutant("warmup.softmax", "powers of 2 instead of e",
            "def softmax(z, axis=-1):\n    e = np.exp2(z - z.max(axis=axis, keepdims=True))\n"
            "    return e / e.sum(axis=axis, keepdims=True)", "`z` multiplied by ln 2"),
    _mutant("warmup.softmax", "temperature 2 left in",
            "def softmax(z, axis=-1):\n    z = z / 2\n    e = np.exp(z - z.max(axis=axis, keepdims=True))\n"
            "    return e / e.sum(axis=axis, keepdims=True)", "`z` multiplied by 1/2"),
    _mutant("warmup.softmax", "softmax of -z",
            "def softmax(z, axis=-1):\n    e = np.exp(-z + z.min(axis=axis, keepdims=True))\n"
            "    return e / e.sum(axis=axis, keepdims=True)", "`z` negated"),
    _mutant("warmup.softmax", "mean subtracted instead of the max",
            "def softmax(z, axis=-1):\n    with np.errstate(all='ignore'):\n"
            "        e = np.exp(z - z.mean(axis=axis, keepdims=True))\n"
            "        return e / e.sum(axis=axis, keepdims=True)", "overflow"),
    _mutant("warmup.softmax", "moves the axis last and never back",
            "def softmax(z, axis=-1):\n    z = np.moveaxis(z, axis, -1)\n"
            "    e = np.exp(z - z.max(axis=-1, keepdims=True))\n"
            "    return e / e.sum(axis=-1, keepdims=True)", "swapped"),
    _mutant("warmup.softmax_jvp", "sign of the whole result flipped", _JVP +
            "    return s * (np.sum(g * s, axis=axis, keepdims=True) - g)", "opposite sign"),
    _mutant("warmup.softmax_jvp", "halved", _JVP +
            "    return 0.5 * s * (g - np.sum(g * s, axis=axis, keepdims=True))", "multiplied by 1/2"),
    _mutant("warmup.softmax_jvp", "s and g mixed up", _JVP +
            "    return g * (s - np.sum(g * s, axis=axis, keepdims=True))", "`s` and `g` swapped"),
    _mutant("warmup.softmax_jvp", "g negated (a sign error upstream)", _JVP +
            "    g = -g\n    return s * (g - np.sum(g * s, axis=axis, keepdims=True))", "opposite sign"),
    _mutant("warmup.softmax_jvp", "result transposed", _JVP +
            "    return (s * (g - np.sum(g * s, axis=axis, keepdims=True))).T", "transpose"),
]

N01 = [
    _mutant("lm.count_ngrams", "each n-gram counted twice",
            "def count_ngrams(idx, n, vocab_size):\n    counts = np.zeros((vocab_size,) * n, dtype=int)\n"
            "    for t in range(n - 1, len(idx)):\n        counts[tuple(idx[t - n + 1:t + 1])] += 2\n"
            "    return counts", "multiplied by 2"),
    _mutant("lm.ngram_probs", "k halved",
            "def ngram_probs(counts, k=0.0):\n    c = counts + k / 2\n    total = c.sum(axis=-1, keepdims=True)\n"
            "    V = counts.shape[-1]\n    return np.where(total > 0, c / np.where(total > 0, total, 1), 1 / V)",
            "`k` multiplied by 1/2"),
    _mutant("lm.roll_die", "faces counted from -1",
            "def roll_die(weights, u):\n    cdf = np.cumsum(weights, axis=-1) / weights.sum(axis=-1, keepdims=True)\n"
            "    return np.minimum((cdf <= u[:, None]).sum(axis=-1), weights.shape[-1] - 1) - 1",
            "off by -1"),
    _mutant("lm.rnn_forward", "bias added twice",
            "def rnn_forward(x, h0, Wxh, Whh, b):\n    h, hs = h0, []\n    for t in range(x.shape[1]):\n"
            "        h = np.tanh(x[:, t] @ Wxh + h @ Whh + 2 * b)\n        hs.append(h)\n"
            "    H = np.stack(hs, axis=1)\n    return H, (x, h0, Wxh, Whh, H)", "`b` multiplied by 2"),
    _mutant("lm.rnn_forward", "states stacked time-first",
            "def rnn_forward(x, h0, Wxh, Whh, b):\n    h, hs = h0, []\n    for t in range(x.shape[1]):\n"
            "        h = np.tanh(x[:, t] @ Wxh + h @ Whh + b)\n        hs.append(h)\n"
            "    H = np.stack(hs)\n    return H, (x, h0, Wxh, Whh, H)", "swapped"),
    _mutant("lm.rnn_backward", "dx with the wrong sign",
            "from course_lib.rnn import rnn_backward as _ref\n"
            "def rnn_backward(dh, cache):\n    dx, dh0, dWxh, dWhh, db = _ref(dh, cache)\n"
            "    return -dx, dh0, dWxh, dWhh, db", "opposite sign"),
    _mutant("lm.rnn_backward", "dWhh transposed",
            "from course_lib.rnn import rnn_backward as _ref\n"
            "def rnn_backward(dh, cache):\n    dx, dh0, dWxh, dWhh, db = _ref(dh, cache)\n"
            "    return dx, dh0, dWxh, dWhh.T, db", "`dWhh` differs"),
    _mutant("lm.rnn_backward", "db kept per example",
            "from course_lib.rnn import rnn_backward as _ref\n"
            "def rnn_backward(dh, cache):\n    dx, dh0, dWxh, dWhh, db = _ref(dh, cache)\n"
            "    return dx, dh0, dWxh, dWhh, np.broadcast_to(db / len(dh), dh0.shape)", "`db` differs"),
    _mutant("lm.lstm_cell", "h and c returned in the other order",
            "from course_lib.rnn import lstm_cell_forward as _ref\n"
            "def lstm_cell_forward(x, h_prev, c_prev, W, b):\n    h, c = _ref(x, h_prev, c_prev, W, b)[:2]\n"
            "    return c, h", "are swapped"),
    _mutant("lm.lstm_cell", "h_prev and c_prev mixed up",
            "from course_lib.rnn import lstm_cell_forward as _ref\n"
            "def lstm_cell_forward(x, h_prev, c_prev, W, b):\n    return _ref(x, c_prev, h_prev, W, b)[:2]",
            "`h_prev` and `c_prev` swapped"),
    _mutant("lm.perplexity", "bits per character doubled",
            "def perplexity(probs, targets):\n    nll = -np.log(probs[np.arange(len(targets)), targets])\n"
            "    return np.exp(nll.mean()), 2 * nll.mean() / np.log(2)", "`bpc` equals the reference multiplied by 2"),
]

_ATT = ("def attention_forward(Q, K, V, mask=None):\n"
        "    S = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])\n"
        "    if mask is not None:\n        S = np.where(mask, S, -np.inf)\n"
        "    m = np.max(S, axis=-1, keepdims=True)\n    m = np.where(np.isfinite(m), m, 0)\n"
        "    e = np.exp(S - m)\n    z = e.sum(axis=-1, keepdims=True)\n"
        "    A = np.divide(e, z, out=np.zeros_like(e), where=z > 0)\n")
_BWD = "from course_lib.attention import attention_backward as _ref, AttentionCache\n" \
       "def attention_backward(dout, Q, K, V, A):\n    dQ, dK, dV = _ref(dout, AttentionCache(Q, K, V, A))\n"
_MHA = ("from course_lib.attention import mha_forward as _ref\n"
        "def multi_head_attention(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):\n")

N02 = [
    _mutant("attention.forward", "scores scaled by sqrt(d_v)", _ATT.replace(
        "np.sqrt(Q.shape[-1])", "np.sqrt(V.shape[-1])") + "    return A @ V, A", "d_k ≠ d_v"),
    _mutant("attention.forward", "weights returned transposed", _ATT +
            "    return A @ V, np.swapaxes(A, -1, -2)", "swapped"),
    _mutant("attention.forward", "output doubled", _ATT + "    return 2 * (A @ V), A",
            "multiplied by 2"),
    _mutant("attention.forward", "mask ignored for the returned weights", _ATT +
            "    S0 = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])\n"
            "    A0 = np.exp(S0 - S0.max(-1, keepdims=True))\n"
            "    return A @ V, A0 / A0.sum(-1, keepdims=True)", "`mask` ignored"),
    _mutant("attention.backward", "dQ with the wrong sign", _BWD + "    return -dQ, dK, dV",
            "opposite sign"),
    _mutant("attention.backward", "dQ not scaled by 1/sqrt(d_k)", _BWD +
            "    return dQ * np.sqrt(Q.shape[-1]), dK, dV", "sqrt(d_k)"),
    _mutant("attention.backward", "dV transposed", _BWD +
            "    return dQ, dK, np.swapaxes(dV, -1, -2)", "`dV` differs"),
    _mutant("attention.backward_col", "dX misses the path through the keys",
            "from course_lib.softmax import softmax_jvp\n"
            "def attention_backward_col(E, X, A, B, C, Att):\n    h = A.shape[0]\n"
            "    Q, K, V = A @ X, B @ X, C @ X\n    G = softmax_jvp(Att, V.T @ E, axis=0)\n"
            "    PA, PB, PC = K @ G.T / np.sqrt(h), Q @ G / np.sqrt(h), E @ Att.T\n"
            "    return PA @ X.T, PB @ X.T, PC @ X.T, A.T @ PA + C.T @ PC", "through the keys"),
    _mutant("attention.backward_col", "dC transposed",
            "from course_lib.attention import self_attention_col_backward as _ref\n"
            "def attention_backward_col(E, X, A, B, C, Att):\n"
            "    dA, dB, dC, dX = _ref(E, (X, A, B, C, A @ X, B @ X, C @ X, Att))\n"
            "    return dA, dB, dC.T, dX", "`dC` differs"),
    _mutant("attention.multi_head", "mask never passed on", _MHA +
            "    out, cache = _ref(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads)\n"
            "    return out, cache.attention.A", "`mask` ignored"),
    _mutant("attention.multi_head", "mask inverted", _MHA +
            "    out, cache = _ref(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, None if mask is None else ~mask)\n"
            "    return out, cache.attention.A", "`mask` inverted"),
    _mutant("attention.split_heads", "d_k and T axes exchanged",
            "def split_heads(x, n_heads):\n    B, T, d = x.shape\n"
            "    return x.reshape(B, T, n_heads, d // n_heads).transpose(0, 2, 3, 1)", "swapped"),
]

_SIN = ("def sinusoidal_encoding(positions, d_model):\n"
        "    k = np.arange(d_model // 2)\n")
_ROPE = "from course_lib.positional import apply_rope as _ref\ndef apply_rope(x, positions):\n"

N03 = [
    _mutant("positional.sinusoidal", "positions counted from 1 again",
            _SIN + "    angles = (np.asarray(positions)[:, None] + 1) * 10000.0 ** (-2 * k / d_model)\n"
            "    P = np.empty((len(positions), d_model))\n"
            "    P[:, 0::2], P[:, 1::2] = np.sin(angles), np.cos(angles)\n    return P",
            "`positions` shifted by +1"),
    _mutant("positional.sinusoidal", "d_model halved in the exponent",
            _SIN + "    angles = np.asarray(positions)[:, None] * 10000.0 ** (-2 * k / (d_model // 2))\n"
            "    P = np.empty((len(positions), d_model))\n"
            "    P[:, 0::2], P[:, 1::2] = np.sin(angles), np.cos(angles)\n    return P",
            "`d_model` multiplied by 1/2"),
    _mutant("positional.sinusoidal", "returned transposed",
            _SIN + "    angles = np.asarray(positions)[:, None] * 10000.0 ** (-2 * k / d_model)\n"
            "    P = np.empty((len(positions), d_model))\n"
            "    P[:, 0::2], P[:, 1::2] = np.sin(angles), np.cos(angles)\n    return P.T", "swapped"),
    _mutant("positional.sinusoidal", "frequencies in reverse order",
            _SIN + "    angles = np.asarray(positions)[:, None] * 10000.0 ** (-2 * k[::-1] / d_model)\n"
            "    P = np.empty((len(positions), d_model))\n"
            "    P[:, 0::2], P[:, 1::2] = np.sin(angles), np.cos(angles)\n    return P",
            "wrong order along axis -1"),
    _mutant("positional.rotation", "angle of tau + 1",
            "from course_lib.positional import rotation_matrix as _ref\n"
            "def rotation_matrix(tau, d_model):\n    return _ref(tau + 1, d_model)", "`tau` + 1 in place of `tau`"),
    _mutant("positional.rotation", "angles twice too large",
            "from course_lib.positional import rotation_matrix as _ref\n"
            "def rotation_matrix(tau, d_model):\n    return _ref(2 * tau, d_model)", "`tau` multiplied by 2"),
    _mutant("positional.rotation", "half angles",
            "from course_lib.positional import rotation_matrix as _ref\n"
            "def rotation_matrix(tau, d_model):\n    return _ref(tau / 2, d_model)", "`tau` multiplied by 1/2"),
    _mutant("positional.rope", "positions off by one", _ROPE +
            "    return _ref(x, np.asarray(positions) - 1)", "`positions` shifted by -1"),
    _mutant("positional.rope", "angles doubled", _ROPE +
            "    return _ref(x, 2 * np.asarray(positions))", "`positions` multiplied by 2"),
    _mutant("positional.rope", "rotated pairs written out as [evens, odds]", _ROPE +
            "    y = _ref(x, positions)\n    return np.concatenate([y[..., 0::2], y[..., 1::2]], axis=-1)",
            "wrong order along axis -1"),
]

_LN = ("def layernorm_forward(x, gamma, beta, eps=1e-5):\n"
       "    mu = x.mean(axis=-1, keepdims=True)\n    var = x.var(axis=-1, keepdims=True)\n")
_LNB = ("from course_lib.layernorm import layernorm_forward, layernorm_backward as _ref\n"
        "def layernorm_backward(dout, cache):\n    dx, dgamma, dbeta = _ref(dout, cache)\n")
_BLOCKS = "from course_lib.layernorm import layernorm_forward, ffn_forward\n"

N04 = [
    _mutant("layernorm.forward", "eps fixed at 1e-3", _LN +
            "    return gamma * (x - mu) / np.sqrt(var + 1e-3) + beta, None", "a variance below eps"),
    _mutant("layernorm.forward", "beta left out", _LN +
            "    return gamma * (x - mu) / np.sqrt(var + eps), None", "`beta` left out"),
    _mutant("layernorm.forward", "beta subtracted", _LN +
            "    return gamma * (x - mu) / np.sqrt(var + eps) - beta, None", "`beta` negated"),
    _mutant("layernorm.backward", "mean treated as a constant",
            "from course_lib.layernorm import layernorm_forward\n"
            "def layernorm_backward(dout, cache):\n    x_hat, inv_std, gamma = cache\n"
            "    g = dout * gamma\n    dx = (g - x_hat * (g * x_hat).mean(axis=-1, keepdims=True)) * inv_std\n"
            "    lead = tuple(range(dout.ndim - 1))\n"
            "    return dx, (dout * x_hat).sum(axis=lead), dout.sum(axis=lead)", "through the mean"),
    _mutant("layernorm.backward", "variance treated as a constant",
            "from course_lib.layernorm import layernorm_forward\n"
            "def layernorm_backward(dout, cache):\n    x_hat, inv_std, gamma = cache\n"
            "    g = dout * gamma\n    dx = (g - g.mean(axis=-1, keepdims=True)) * inv_std\n"
            "    lead = tuple(range(dout.ndim - 1))\n"
            "    return dx, (dout * x_hat).sum(axis=lead), dout.sum(axis=lead)", "through the variance"),
    _mutant("layernorm.backward", "dgamma with the wrong sign", _LNB +
            "    return dx, -dgamma, dbeta", "opposite sign"),
    _mutant("layernorm.backward", "dbeta averaged instead of summed", _LNB +
            "    return dx, dgamma, dout.reshape(-1, dout.shape[-1]).mean(axis=0)", "`dbeta` differs"),
    _mutant("layernorm.ffn", "b2 added twice",
            "def ffn_forward(x, W1, b1, W2, b2):\n    h = np.maximum(x @ W1 + b1, 0)\n"
            "    return h @ W2 + 2 * b2, None", "`b2` multiplied by 2"),
    _mutant("layernorm.ffn", "b1 left out",
            "def ffn_forward(x, W1, b1, W2, b2):\n    h = np.maximum(x @ W1, 0)\n"
            "    return h @ W2 + b2, None", "`b1` left out"),
    _mutant("layernorm.post_ln", "gamma and beta exchanged", _BLOCKS +
            "def post_ln_block(x, W1, b1, W2, b2, gamma, beta):\n"
            "    return layernorm_forward(x + ffn_forward(x, W1, b1, W2, b2)[0], beta, gamma)[0]",
            "`gamma` and `beta` swapped"),
    _mutant("layernorm.pre_ln", "b2 left out", _BLOCKS +
            "def pre_ln_block(x, W1, b1, W2, b2, gamma, beta):\n"
            "    h = layernorm_forward(x, gamma, beta)[0]\n"
            "    return x + ffn_forward(h, W1, b1, W2, 0 * b2)[0]", "`b2` left out"),
]

# Written after the diagnoses, without trying them first: how far the diagnoses reach.
BLIND = [
    _mutant("warmup.softmax", "normalised over axis 0 whatever the axis", _SOFTMAX +
            "    return e / e.sum(axis=0, keepdims=True)", "0 in place of `axis`"),
    _mutant("lm.perplexity", "probabilities clipped at 1e-3",
            "def perplexity(probs, targets):\n    p = np.maximum(probs[np.arange(len(targets)), targets], 1e-3)\n"
            "    return np.exp(-np.log(p).mean()), -np.log2(p).mean()", "clip"),
    _mutant("attention.split_heads", "batch and time axes exchanged",
            "def split_heads(x, n_heads):\n    B, T, d = x.shape\n"
            "    return x.reshape(B, T, n_heads, d // n_heads).transpose(2, 0, 1, 3)", "swapped"),
    _mutant("positional.rope", "positions read in reverse", _ROPE +
            "    return _ref(x, np.asarray(positions)[::-1])", "order"),
    _mutant("layernorm.pre_ln", "gamma ignored", _BLOCKS +
            "def pre_ln_block(x, W1, b1, W2, b2, gamma, beta):\n"
            "    h = layernorm_forward(x, np.ones_like(gamma), beta)[0]\n"
            "    return x + ffn_forward(h, W1, b1, W2, b2)[0]", "`gamma` replaced by ones"),
    _mutant("layernorm.ffn", "tanh in place of ReLU",
            "def ffn_forward(x, W1, b1, W2, b2):\n    return np.tanh(x @ W1 + b1) @ W2 + b2, None", "ReLU"),
]

MUTANTS = N00 + N01 + N02 + N03 + N04 + BLIND


# The mutation engine (``autograder.judge.explain``) names some of these bugs from the reference's
# code rather than from the outputs' shape; each sentence below was reviewed as a correct
# diagnosis of the same bug (an equivalent single change), and counts as naming it.
ENGINE_WORDS = {
    "powers of 2 instead of e": "`exp2` is used where `exp` belongs",
    "sign of the whole result flipped": "the two sides of a `-` are swapped",
    "g negated (a sign error upstream)": "the two sides of a `-` are swapped",
    "each n-gram counted twice": "the constant 1 is 2",
    "dQ not scaled by 1/sqrt(d_k)": "a factor is missing",
    "mask inverted": "the two branches of `np.where` are swapped",
    "d_model halved in the exponent": "`-4.0` where `-2.0` belongs",
    "beta left out": "`beta` is not added",
    "beta subtracted": "a term is subtracted where it should be added",
    "b1 left out": "`b1` is not added",
    "gamma and beta exchanged": "the arguments 2 and 3 of `layernorm_forward` are swapped",
    "b2 left out": "`b2` is not added",
    "normalised over axis 0 whatever the axis": "`sum` is taken over axis 0 instead of over `axis`",
}
