"""A bank of wrong learner answers (and a few right ones) for notebooks 00-07, written from the
notebooks' text alone: each is a whole solution cell as a learner might type it, with one or two
independent mistakes, labelled in plain words, and per mistake the words a message that names it
could hardly avoid. Graded with ``solution_cells.verdict_with``.
"""
from learner_code import KINDS, LearnerCode


def _answer(exercise: str, kind: str, what: tuple[str, ...], expect: tuple[tuple[str, ...], ...],
            source: str) -> LearnerCode:
    """``kind``: "correct", "single" or "two", as many mistakes as ``what`` holds; ``expect[i]``:
    words any one of which a message naming mistake ``what[i]`` holds."""
    if KINDS[len(what)] != kind:
        raise ValueError(f"{exercise}: {what} is not {kind!r}")
    return LearnerCode(exercise=exercise, what=what, source=source, names=expect, full_marks=kind == "correct")


ANSWERS = [
# ---------------------------------------------------------------- 00 start here
_answer("warmup.softmax", "two",
        ("no max subtraction, overflows for large logits", "sum without keepdims, broadcasts along the wrong axis"),
        (("max", "overflow", "large", "nan", "inf"), ("keepdims", "broadcast", "axis", "shape")), """
def softmax(z, axis=-1):
    \"\"\"Numerically stable softmax of z along axis. Shape in = shape out.\"\"\"
    e = np.exp(z)
    return e / e.sum(axis=axis)
"""),
_answer("warmup.softmax", "two",
        ("max taken along axis without keepdims", "sum always over the last axis, axis ignored"),
        (("keepdims", "broadcast", "max", "shape"), ("axis", "last"))
        , """
def softmax(z, axis=-1):
    shifted = z - np.max(z, axis=axis)
    e = np.exp(shifted)
    return e / np.sum(e, axis=-1, keepdims=True)
"""),
_answer("warmup.softmax", "two",
        ("-inf entries replaced by 0 before the exponential, so masked entries get weight", "normalised by the sum over the whole array, not along axis"),
        (("-inf", "inf", "mask", "0"), ("axis", "sum", "whole", "all"))
        , """
def softmax(z, axis=-1):
    z = np.where(np.isinf(z), 0.0, z)
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum()
"""),
_answer("warmup.softmax", "two",
        ("exponential in base 2 instead of e", "subtracts the maximum in place, changing the caller's array"),
        (("base", "exp", "2", "e^"), ("in place", "input", "changed", "modif", "mutat"))
        , """
def softmax(z, axis=-1):
    z -= np.max(z, axis=axis, keepdims=True)
    e = 2.0 ** z
    return e / np.sum(e, axis=axis, keepdims=True)
"""),
_answer("warmup.softmax_jvp", "two",
        ("sum of g alone instead of g * s", "sum without keepdims"),
        (("g * s", "s", "inner", "product", "weighted"), ("keepdims", "broadcast", "shape", "axis"))
        , """
def softmax_jvp(s, g, axis=-1):
    return s * (g - np.sum(g, axis=axis))
"""),
_answer("warmup.softmax_jvp", "two",
        ("multiplies by g outside instead of s (roles of s and g swapped)", "inner product over the whole array, not along axis"),
        (("s", "swap", "g"), ("axis", "whole", "all", "sum"))
        , """
def softmax_jvp(s, g, axis=-1):
    inner = np.sum(g * s)
    return g * (s - inner)
"""),
_answer("warmup.softmax_jvp", "two",
        ("Jacobian built over the last axis only, axis ignored", "plus sign: diag(s) + s s^T"),
        (("axis", "last"), ("sign", "diag", "minus", "jacobian", "-"))
        , """
def softmax_jvp(s, g, axis=-1):
    n = s.shape[-1]
    J = s[..., :, None] * np.eye(n) + s[..., :, None] * s[..., None, :]
    return np.einsum("...ij,...j->...i", J, g)
"""),
_answer("warmup.softmax", "single",
        ("no max subtraction, overflows for large logits",),
        (("max", "overflow", "large", "nan", "inf"),), """
def softmax(z, axis=-1):
    ez = np.exp(z)
    return ez / ez.sum(axis=axis, keepdims=True)
"""),
_answer("warmup.softmax", "single",
        ("sum without keepdims",),
        (("keepdims", "broadcast", "shape", "axis"),), """
def softmax(z, axis=-1):
    e = np.exp(z - np.max(z, axis=axis, keepdims=True))
    total = np.sum(e, axis=axis)
    return e / total
"""),
_answer("warmup.softmax_jvp", "single",
        ("axis ignored, always the last axis",),
        (("axis", "last"),), """
def softmax_jvp(s, g, axis=-1):
    return s * (g - (g * s).sum(axis=-1, keepdims=True))
"""),
_answer("warmup.softmax_jvp", "single",
        ("the outer factor s is missing",),
        (("s", "factor", "multipl", "missing"),), """
def softmax_jvp(s, g, axis=-1):
    return g - np.sum(g * s, axis=axis, keepdims=True)
"""),

# ---------------------------------------------------------------- 01 language models
_answer("lm.count_ngrams", "two",
        ("loop starts at n instead of n - 1, first n-gram missed", "counts array of float, not int"),
        (("first", "off-by-one", "off by one", "window", "start", "missing", "n - 1"), ("int", "dtype", "float"))
        , """
def count_ngrams(idx, n, vocab_size):
    counts = np.zeros([vocab_size] * n)
    for t in range(n, len(idx)):
        counts[tuple(idx[t - n + 1:t + 1])] += 1
    return counts
"""),
_answer("lm.count_ngrams", "two",
        ("last window missed (range stops at len - n)", "sets the count to 1 instead of adding 1"),
        (("last", "off-by-one", "off by one", "window", "missing", "end"), ("1", "increment", "+=", "repeat", "add", "once"))
        , """
def count_ngrams(idx, n, vocab_size):
    counts = np.zeros((vocab_size,) * n, dtype=int)
    for t in range(len(idx) - n):
        gram = tuple(int(i) for i in idx[t:t + n])
        counts[gram] = 1
    return counts
"""),
_answer("lm.ngram_probs", "two",
        ("denominator adds k instead of k * vocab_size", "unseen context with k = 0 gives NaN instead of uniform"),
        (("vocab_size", "k *", "denominator", "sum to 1", "normal"), ("uniform", "nan", "unseen", "never seen", "zero", "0"))
        , """
def ngram_probs(counts, k=0.0):
    counts = np.asarray(counts, dtype=float)
    total = counts.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (counts + k) / (total + k)
"""),
_answer("lm.ngram_probs", "two",
        ("normalised over the first axis instead of the last", "unseen contexts get 0 instead of uniform"),
        (("axis", "last", "first"), ("uniform", "unseen", "never seen", "0", "zero"))
        , """
def ngram_probs(counts, k=0.0):
    c = counts.astype(float) + k
    total = c.sum(axis=0, keepdims=True)
    return np.divide(c, total, out=np.zeros_like(c), where=total > 0)
"""),
_answer("lm.roll_die", "two",
        ("weights not normalised before comparing with u", "cdf < u instead of cdf <= u (boundary ties)"),
        (("normal", "sum", "total", "unnormal"), ("<=", "tie", "boundary", "equal", "greater", "exceed", "zero weight", "weight 0"))
        , """
def roll_die(weights, u):
    cdf = np.cumsum(weights, axis=1)
    return (cdf < u[:, None]).sum(axis=1)
"""),
_answer("lm.roll_die", "two",
        ("searchsorted with side='left' picks a face whose cdf equals u", "faces returned as float"),
        (("side", "left", "right", "equal", "tie", "boundary", "weight 0", "zero weight", "greater"), ("int", "dtype", "float"))
        , """
def roll_die(weights, u):
    B = weights.shape[0]
    faces = np.zeros(B)
    for b in range(B):
        cdf = np.cumsum(weights[b]) / np.sum(weights[b])
        faces[b] = np.searchsorted(cdf, u[b])
    return faces
"""),
_answer("lm.perplexity", "two",
        ("sum of the negative log-probabilities instead of their mean", "bpc multiplies by ln 2 instead of dividing"),
        (("mean", "sum", "average", "1/T", "length"), ("ln 2", "log(2)", "bits", "bpc", "divide", "base"))
        , """
def perplexity(probs, targets):
    T = len(targets)
    nll = 0.0
    for t in range(T):
        nll -= np.log(probs[t, targets[t]])
    return np.exp(nll), nll * np.log(2)
"""),
_answer("lm.perplexity", "two",
        ("probs[:, targets] picks a (T, T) block instead of one entry per row", "perplexity as 2 ** nll instead of e ** nll"),
        (("index", "arange", "row", "diagonal", "(T, T)", "pair", "fancy"), ("base", "exp", "2 **", "e^", "2^"))
        , """
def perplexity(probs, targets):
    p = probs[:, targets]
    nll = -np.log(p).mean()
    return 2 ** nll, nll / np.log(2)
"""),
_answer("lm.rnn_forward", "two",
        ("previous state never updated: h0 used at every step", "bias added outside the tanh"),
        (("h0", "previous", "h_{t-1}", "recurren", "update", "state"), ("bias", "tanh", "inside", "outside", "b"))
        , """
def rnn_forward(x, h0, Wxh, Whh, b):
    B, T, d_in = x.shape
    H = Wxh.shape[1]
    h = np.empty((B, T, H))
    for t in range(T):
        h[:, t, :] = np.tanh(x[:, t, :] @ Wxh + h0 @ Whh) + b
    return h, (x, h0, Wxh, Whh, h)
"""),
_answer("lm.rnn_forward", "two",
        ("h stacked time-first, shape (T, B, H)", "Whh transposed in the recurrence"),
        (("shape", "(B, T, H)", "axis", "time", "transpos", "swap"), ("Whh", "transpos", ".T"))
        , """
def rnn_forward(x, h0, Wxh, Whh, b):
    states = []
    h_t = h0
    for t in range(x.shape[1]):
        h_t = np.tanh(x[:, t] @ Wxh + h_t @ Whh.T + b)
        states.append(h_t)
    h = np.array(states)
    return h, (x, h0, Wxh, Whh, h)
"""),
_answer("lm.rnn_backward", "two",
        ("dWhh uses h_t instead of h_{t-1}", "db overwritten each step instead of summed over time"),
        (("dWhh", "h_{t-1}", "previous", "off-by-one", "off by one", "shift", "time"), ("db", "sum", "accumul", "+=", "over time", "steps"))
        , """
def rnn_backward(dh, cache):
    x, h0, Wxh, Whh, h = cache
    B, T, H = dh.shape
    dx = np.zeros_like(x)
    dWxh, dWhh, db = np.zeros_like(Wxh), np.zeros_like(Whh), np.zeros(H)
    carry = np.zeros((B, H))
    for t in range(T - 1, -1, -1):
        da = (dh[:, t] + carry) * (1 - h[:, t] ** 2)
        dx[:, t] = da @ Wxh.T
        dWxh += x[:, t].T @ da
        dWhh += h[:, t].T @ da
        db = da.sum(axis=0)
        carry = da @ Whh.T
    return dx, carry, dWxh, dWhh, db
"""),
_answer("lm.rnn_backward", "two",
        ("gradient from step t+1 not carried back (no recurrent term)", "tanh derivative computed as 1 - tanh(h)^2, tanh applied twice"),
        (("recurren", "t+1", "t + 1", "through time", "carry", "Whh", "later", "next step", "future"), ("tanh", "derivative", "1 - h", "twice"))
        , """
def rnn_backward(dh, cache):
    x, h0, Wxh, Whh, h = cache
    T = x.shape[1]
    dx = np.zeros_like(x)
    dWxh = np.zeros_like(Wxh)
    dWhh = np.zeros_like(Whh)
    db = np.zeros(Whh.shape[0])
    dh_prev = np.zeros_like(h0)
    for t in reversed(range(T)):
        h_prev = h0 if t == 0 else h[:, t - 1]
        da = dh[:, t] * (1 - np.tanh(h[:, t]) ** 2)
        dx[:, t] = da @ Wxh.T
        dWxh += x[:, t].T @ da
        dWhh += h_prev.T @ da
        db += da.sum(axis=0)
        dh_prev = da @ Whh.T
    return dx, dh_prev, dWxh, dWhh, db
"""),
_answer("lm.lstm_cell", "two",
        ("gate blocks read in the order f, i instead of i, f", "h = o * c, the tanh of the cell is missing"),
        (("order", "gate", "i, f", "block", "forget", "input"), ("tanh", "h = o"))
        , """
def sigmoid(z):
    return 1 / (1 + np.exp(-z))


def lstm_cell_forward(x, h_prev, c_prev, W, b):
    H = h_prev.shape[1]
    z = np.hstack([h_prev, x]) @ W + b
    f = sigmoid(z[:, :H])
    i = sigmoid(z[:, H:2 * H])
    o = sigmoid(z[:, 2 * H:3 * H])
    g = np.tanh(z[:, 3 * H:])
    c = f * c_prev + i * g
    h = o * c
    return h, c
"""),
_answer("lm.lstm_cell", "two",
        ("concatenates [x, h_prev] instead of [h_prev, x]", "input gate missing: c = f * c_prev + c_tilde"),
        (("order", "concat", "[h_prev, x]", "h_prev, x"), ("input gate", "i *", "gate", "c_tilde", "candidate"))
        , """
def lstm_cell_forward(x, h_prev, c_prev, W, b):
    H = h_prev.shape[1]
    z = np.concatenate([x, h_prev], axis=1) @ W + b
    sig = lambda v: 1.0 / (1.0 + np.exp(-v))
    i, f, o = sig(z[:, :H]), sig(z[:, H:2 * H]), sig(z[:, 2 * H:3 * H])
    c_tilde = np.tanh(z[:, 3 * H:])
    c = f * c_prev + c_tilde
    return o * np.tanh(c), c
"""),
_answer("lm.count_ngrams", "single",
        ("windows wrap around the end of the text (T windows instead of T - n + 1)",),
        (("wrap", "T - n + 1", "around", "end", "extra", "too many"),), """
def count_ngrams(idx, n, vocab_size):
    counts = np.zeros((vocab_size,) * n, dtype=np.int64)
    T = len(idx)
    for t in range(T):
        gram = tuple(idx[(t + j) % T] for j in range(n))
        counts[gram] += 1
    return counts
"""),
_answer("lm.ngram_probs", "single",
        ("unseen context with k = 0 gives NaN instead of uniform",),
        (("uniform", "nan", "unseen", "never seen", "zero", "0"),), """
def ngram_probs(counts, k=0.0):
    c = np.asarray(counts, dtype=float) + k
    with np.errstate(invalid="ignore"):
        return c / c.sum(axis=-1, keepdims=True)
"""),
_answer("lm.roll_die", "single",
        ("weights not normalised",),
        (("normal", "sum", "total", "unnormal"),), """
def roll_die(weights, u):
    cdf = np.cumsum(weights, axis=-1)
    faces = (cdf <= u[:, None]).sum(axis=-1)
    return np.minimum(faces, weights.shape[-1] - 1)
"""),
_answer("lm.perplexity", "single",
        ("log base 10 instead of natural log",),
        (("log", "base", "ln", "natural"),), """
def perplexity(probs, targets):
    p = probs[np.arange(len(targets)), targets]
    nll = -np.mean(np.log10(p))
    return np.exp(nll), nll / np.log(2)
"""),
_answer("lm.rnn_forward", "single",
        ("cache in the wrong order (Whh before Wxh)",),
        (("cache", "order", "tuple"),), """
def rnn_forward(x, h0, Wxh, Whh, b):
    B, T, _ = x.shape
    h = np.zeros((B, T, Whh.shape[0]))
    prev = h0
    for t in range(T):
        prev = np.tanh(x[:, t] @ Wxh + prev @ Whh + b)
        h[:, t] = prev
    return h, (x, h0, Whh, Wxh, h)
"""),
_answer("lm.rnn_backward", "single",
        ("tanh derivative (1 - h^2) missing",),
        (("tanh", "derivative", "1 - h"),), """
def rnn_backward(dh, cache):
    x, h0, Wxh, Whh, h = cache
    dx = np.zeros_like(x)
    dWxh, dWhh, db = np.zeros_like(Wxh), np.zeros_like(Whh), np.zeros(Whh.shape[0])
    dnext = np.zeros_like(h0)
    for t in reversed(range(x.shape[1])):
        h_prev = h[:, t - 1] if t > 0 else h0
        da = dh[:, t] + dnext
        dx[:, t] = da @ Wxh.T
        dWxh += x[:, t].T @ da
        dWhh += h_prev.T @ da
        db += da.sum(axis=0)
        dnext = da @ Whh.T
    return dx, dnext, dWxh, dWhh, db
"""),
_answer("lm.lstm_cell", "single",
        ("output gate through tanh instead of a sigmoid",),
        (("sigmoid", "output gate", "gate", "o"),), """
def lstm_cell_forward(x, h_prev, c_prev, W, b):
    H = h_prev.shape[1]
    z = np.concatenate([h_prev, x], axis=1) @ W + b
    sig = lambda v: 1 / (1 + np.exp(-v))
    i, f = sig(z[:, :H]), sig(z[:, H:2 * H])
    o = np.tanh(z[:, 2 * H:3 * H])
    c = f * c_prev + i * np.tanh(z[:, 3 * H:])
    return o * np.tanh(c), c
"""),

# ---------------------------------------------------------------- 02 attention
_answer("attention.forward", "two",
        ("scale by d_k instead of sqrt(d_k)", "masked scores set to 0 instead of -inf"),
        (("sqrt", "scale", "d_k"), ("mask", "-inf", "inf"))
        , """
def attention_forward(Q, K, V, mask=None):
    d_k = Q.shape[-1]
    S = Q @ np.swapaxes(K, -1, -2) / d_k
    if mask is not None:
        S = np.where(mask, S, 0.0)
    S = S - S.max(axis=-1, keepdims=True)
    e = np.exp(S)
    A = e / e.sum(axis=-1, keepdims=True)
    return A @ V, A
"""),
_answer("attention.forward", "two",
        ("softmax along the query axis (-2) instead of the keys", "K.T reverses every axis of batched inputs"),
        (("axis", "row", "column", "keys", "-2"), ("transpos", ".T", "swapaxes", "batch", "leading"))
        , """
def attention_forward(Q, K, V, mask=None):
    S = Q @ K.T / np.sqrt(Q.shape[-1])
    if mask is not None:
        S = np.where(mask, S, -np.inf)
    m = np.max(S, axis=-2, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(S - m)
    tot = e.sum(axis=-2, keepdims=True)
    A = e / np.where(tot == 0, 1.0, tot)
    return A @ V, A
"""),
_answer("attention.forward", "two",
        ("no guard for fully masked rows: NaN", "scaled by sqrt(d_v) instead of sqrt(d_k)"),
        (("nan", "fully masked", "all masked", "masked", "every key"), ("sqrt", "d_k", "d_v", "scale"))
        , """
def attention_forward(Q, K, V, mask=None):
    scores = np.einsum("...qd,...kd->...qk", Q, K) / np.sqrt(V.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    A = w / w.sum(axis=-1, keepdims=True)
    return A @ V, A
"""),
_answer("attention.forward", "two",
        ("-1e9 instead of -inf: fully masked rows get uniform weights, not 0", "returns (A, out) instead of (out, A)"),
        (("mask", "-inf", "1e9", "uniform", "fully masked", "all masked", "0"), ("order", "swap", "(out, A)", "return"))
        , """
def attention_forward(Q, K, V, mask=None):
    S = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        S = np.where(mask, S, -1e9)
    S = S - S.max(axis=-1, keepdims=True)
    A = np.exp(S)
    A /= A.sum(axis=-1, keepdims=True)
    return A, A @ V
"""),
_answer("attention.causal_mask", "two",
        ("upper triangle instead of lower", "float array instead of bool"),
        (("upper", "lower", "triangle", "transpos", "future", "tril", "triu"), ("bool", "dtype", "float"))
        , """
def causal_mask(T):
    return np.triu(np.ones((T, T)))
"""),
_answer("attention.causal_mask", "two",
        ("diagonal excluded (j < i instead of j <= i)", "returns a Python list of lists"),
        (("diagonal", "<=", "itself", "j <= i"), ("array", "list", "numpy", "ndarray", "type"))
        , """
def causal_mask(T):
    return [[j < i for j in range(T)] for i in range(T)]
"""),
_answer("attention.padding_mask", "two",
        ("<= instead of <: one padding position kept", "shape (B, T) without the middle axis"),
        (("<=", "<", "length", "off-by-one", "off by one", "one more"), ("shape", "(B, 1, T)", "axis", "middle"))
        , """
def padding_mask(lengths, T):
    lengths = np.asarray(lengths)
    return np.arange(T)[None, :] <= lengths[:, None]
"""),
_answer("attention.padding_mask", "two",
        ("middle axis in the wrong place: shape (B, T, 1)", "int array instead of bool"),
        (("shape", "(B, 1, T)", "axis"), ("bool", "dtype", "int"))
        , """
def padding_mask(lengths, T):
    B = len(lengths)
    mask = np.zeros((B, T, 1), dtype=int)
    for b in range(B):
        mask[b, :lengths[b], 0] = 1
    return mask
"""),
_answer("attention.numerical_gradient", "two",
        ("one-sided difference instead of central", "entries not put back: x is changed on return"),
        (("central", "one-sided", "forward difference", "2 * eps", "-eps", "2eps"), ("put back", "restor", "unchanged", "changed", "modif", "in place"))
        , """
def numerical_gradient(f, x, eps=1e-6):
    grad = np.zeros_like(x)
    fx = f(x)
    for idx in np.ndindex(x.shape):
        x[idx] += eps
        grad[idx] = (f(x) - fx) / eps
    return grad
"""),
_answer("attention.numerical_gradient", "two",
        ("divides by eps instead of 2 * eps", "changes a copy of x, which f does not read"),
        (("2 * eps", "2eps", "factor", "2", "half", "twice"), ("copy", "x itself", "reads", "ignored", "zero", "0"))
        , """
def numerical_gradient(f, x, eps=1e-6):
    xc = x.copy()
    g = np.empty(x.shape)
    for i in np.ndindex(x.shape):
        orig = xc[i]
        xc[i] = orig + eps
        fp = f(xc)
        xc[i] = orig - eps
        fm = f(xc)
        xc[i] = orig
        g[i] = (fp - fm) / eps
    return g
"""),
_answer("attention.backward", "two",
        ("dK not divided by sqrt(d_k)", "dV uses A.T, which reverses every axis of batched inputs"),
        (("dK", "sqrt", "scale"), ("dV", "transpos", ".T", "swapaxes", "batch", "leading"))
        , """
def attention_backward(dout, Q, K, V, A):
    d_k = Q.shape[-1]
    dA = dout @ np.swapaxes(V, -1, -2)
    dS = A * (dA - (A * dA).sum(-1, keepdims=True))
    dQ = dS @ K / np.sqrt(d_k)
    dK = np.swapaxes(dS, -1, -2) @ Q
    dV = A.T @ dout
    return dQ, dK, dV
"""),
_answer("attention.backward", "two",
        ("softmax backward: row sum not multiplied by A (dS = A*dA - rowsum)", "dQ multiplied by sqrt(d_k) instead of divided"),
        (("softmax", "dS", "A *", "jacobian", "row"), ("dQ", "sqrt", "scale", "divid"))
        , """
def attention_backward(dout, Q, K, V, A):
    d_k = Q.shape[-1]
    dA = dout @ np.swapaxes(V, -1, -2)
    dS = A * dA - np.sum(A * dA, axis=-1, keepdims=True)
    dQ = dS @ K * np.sqrt(d_k)
    dK = np.swapaxes(dS, -1, -2) @ Q / np.sqrt(d_k)
    dV = np.swapaxes(A, -1, -2) @ dout
    return dQ, dK, dV
"""),
_answer("attention.backward", "two",
        ("row sum of the softmax backward over the query axis (-2)", "dV einsum indexes dout by the key instead of the query (sums the wrong product)"),
        (("axis", "row", "sum", "-2", "keys"), ("dV", "transpos", "swapaxes", "A^T"))
        , """
def attention_backward(dout, Q, K, V, A):
    scale = 1 / np.sqrt(Q.shape[-1])
    dA = np.einsum("...qv,...kv->...qk", dout, V)
    dS = A * (dA - np.sum(dA * A, axis=-2, keepdims=True))
    dQ = np.einsum("...qk,...kd->...qd", dS, K) * scale
    dK = np.einsum("...qk,...qd->...kd", dS, Q) * scale
    dV = np.einsum("...qk,...kv->...kv", A, dout)
    return dQ, dK, dV
"""),
_answer("attention.backward_col", "two",
        ("column-wise softmax backward summed along rows (axis=1)", "dX misses the C^T term (value path)"),
        (("axis", "column", "row", "softmax", "sum"), ("dX", "C", "three", "path", "value", "term"))
        , """
def attention_backward_col(E, X, A, B, C, Att):
    d_k = A.shape[0]
    Qb, Kb, Vb = A @ X, B @ X, C @ X
    dAtt = Vb.T @ E
    G = Att * (dAtt - np.sum(Att * dAtt, axis=1, keepdims=True))
    dQb = Kb @ G.T / np.sqrt(d_k)
    dKb = Qb @ G / np.sqrt(d_k)
    dVb = E @ Att.T
    dA, dB, dC = dQb @ X.T, dKb @ X.T, dVb @ X.T
    dX = A.T @ dQb + B.T @ dKb
    return dA, dB, dC, dX
"""),
_answer("attention.backward_col", "two",
        ("scaled by h instead of sqrt(h)", "dA and dB returned in swapped order"),
        (("sqrt", "scale", "d_k", "h"), ("swap", "order", "dA", "dB"))
        , """
def attention_backward_col(E, X, A, B, C, Att):
    h = A.shape[0]
    Q, K, V = A @ X, B @ X, C @ X
    g = V.T @ E
    G = Att * (g - np.sum(Att * g, axis=0, keepdims=True))
    P = np.vstack([K @ G.T / h, Q @ G / h, E @ Att.T])
    dA, dB, dC = np.split(P @ X.T, 3)
    dX = np.vstack([A, B, C]).T @ P
    return dB, dA, dC, dX
"""),
_answer("attention.multi_head", "two",
        ("keys and values taken from x_q, not x_kv", "heads concatenated by reshape without moving the head axis back"),
        (("x_kv", "cross", "keys", "values", "memory"), ("head", "swapaxes", "reshape", "concat", "transpos", "merge"))
        , """
def multi_head_attention(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    B, T_q, _ = x_q.shape
    q = split_heads(x_q @ W_q, n_heads)
    k = split_heads(x_q @ W_k, n_heads)
    v = split_heads(x_q @ W_v, n_heads)
    heads, A = attention_forward(q, k, v, mask)
    return heads.reshape(B, T_q, -1) @ W_o, A
"""),
_answer("attention.multi_head", "two",
        ("output projection W_o not applied", "mask not passed to attention"),
        (("W_o", "output projection", "project"), ("mask",))
        , """
def multi_head_attention(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    Qh = split_heads(x_q @ W_q, n_heads)
    Kh = split_heads(x_kv @ W_k, n_heads)
    Vh = split_heads(x_kv @ W_v, n_heads)
    o, A = attention_forward(Qh, Kh, Vh)
    B, H, T, dv = o.shape
    return np.transpose(o, (0, 2, 1, 3)).reshape(B, T, H * dv), A
"""),
_answer("attention.forward", "single",
        ("no max subtraction: overflow for large scores",),
        (("max", "overflow", "large", "nan", "inf"),), """
def attention_forward(Q, K, V, mask=None):
    S = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        S = np.where(mask, S, -np.inf)
    e = np.exp(S)
    total = e.sum(axis=-1, keepdims=True)
    A = e / np.where(total == 0, 1.0, total)
    return A @ V, A
"""),
_answer("attention.causal_mask", "single",
        ("float array (np.tri) instead of bool",),
        (("bool", "dtype", "float"),), """
def causal_mask(T):
    return np.tri(T)
"""),
_answer("attention.padding_mask", "single",
        ("<= instead of <",),
        (("<=", "<", "length", "off-by-one", "off by one", "one more"),), """
def padding_mask(lengths, T):
    keep = np.arange(T)[None, :] <= np.asarray(lengths)[:, None]
    return keep[:, None, :]
"""),
_answer("attention.numerical_gradient", "single",
        ("operator precedence: / 2 * eps multiplies by eps",),
        (("2 * eps", "2eps", "eps", "precedence", "parenthes", "scale", "factor"),), """
def numerical_gradient(f, x, eps=1e-6):
    grad = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        keep = x[i]
        x[i] = keep + eps
        up = f(x)
        x[i] = keep - eps
        down = f(x)
        x[i] = keep
        grad[i] = (up - down) / 2 * eps
    return grad
"""),
_answer("attention.backward", "single",
        ("dK computed without transposing dS (dS @ Q)",),
        (("dK", "transpos", "swapaxes", "dS^T"),), """
def attention_backward(dout, Q, K, V, A):
    dA = dout @ np.swapaxes(V, -1, -2)
    dS = A * (dA - np.sum(dA * A, axis=-1, keepdims=True))
    scale = 1.0 / np.sqrt(Q.shape[-1])
    return dS @ K * scale, dS @ Q * scale, np.swapaxes(A, -1, -2) @ dout
"""),
_answer("attention.split_heads", "single",
        ("reshaped straight to (B, n_heads, T, d_k), mixing tokens",),
        (("reshape", "swapaxes", "transpos", "order", "mix", "head"),), """
def split_heads(x, n_heads):
    B, T, d_model = x.shape
    return x.reshape(B, n_heads, T, d_model // n_heads)
"""),
_answer("attention.split_heads", "single",
        ("strided split: head j gets features j, j + n_heads, ... instead of a contiguous block",),
        (("contiguous", "block", "feature", "column", "stride", "reshape", "order", "head"),), """
def split_heads(x, n_heads):
    B, T, d_model = x.shape
    d_k = d_model // n_heads
    return x.reshape(B, T, d_k, n_heads).transpose(0, 3, 1, 2)
"""),
_answer("attention.backward_col", "single",
        ("value gradient uses Att instead of Att^T",),
        (("dC", "Att", "transpos", "value", "E"),), """
def attention_backward_col(E, X, A, B, C, Att):
    h = A.shape[0]
    Q, K, V = A @ X, B @ X, C @ X
    g = V.T @ E
    G = Att * (g - np.sum(Att * g, axis=0, keepdims=True))
    P = np.vstack([K @ G.T / np.sqrt(h), Q @ G / np.sqrt(h), E @ Att])
    dA, dB, dC = np.split(P @ X.T, 3)
    dX = np.vstack([A, B, C]).T @ P
    return dA, dB, dC, dX
"""),
_answer("attention.multi_head", "single",
        ("mask not passed to attention",),
        (("mask",),), """
def multi_head_attention(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    q = split_heads(x_q @ W_q, n_heads)
    k = split_heads(x_kv @ W_k, n_heads)
    v = split_heads(x_kv @ W_v, n_heads)
    heads, A = attention_forward(q, k, v)
    B, _, T_q, _ = heads.shape
    return np.swapaxes(heads, 1, 2).reshape(B, T_q, -1) @ W_o, A
"""),

# ---------------------------------------------------------------- 03 positional encoding
_answer("positional.sinusoidal", "two",
        ("sin and cos swapped (cos in even columns)", "exponent i / d_model instead of 2i / d_model"),
        (("sin", "cos", "swap", "even", "odd"), ("frequenc", "2i", "exponent", "omega", "10000"))
        , """
def sinusoidal_encoding(positions, d_model):
    P = np.zeros((len(positions), d_model))
    for row, t in enumerate(positions):
        for i in range(d_model // 2):
            w = 1 / 10000 ** (i / d_model)
            P[row, 2 * i] = np.cos(w * t)
            P[row, 2 * i + 1] = np.sin(w * t)
    return P
"""),
_answer("positional.sinusoidal", "two",
        ("positions ignored: uses 0 .. T-1", "frequencies 10000^(2i/d) instead of 1/10000^(2i/d)"),
        (("position", "given", "arange", "start", "values", "shift", "offset"), ("frequenc", "omega", "inverse", "1 /", "10000", "reciprocal"))
        , """
def sinusoidal_encoding(positions, d_model):
    T = len(positions)
    pos = np.arange(T)[:, None]
    freqs = 10000 ** (2 * np.arange(d_model // 2) / d_model)
    ang = pos * freqs
    P = np.empty((T, d_model))
    P[:, 0::2] = np.sin(ang)
    P[:, 1::2] = np.cos(ang)
    return P
"""),
_answer("positional.sinusoidal", "two",
        ("sines in the first half and cosines in the second instead of interleaved", "integer division in the exponent: all frequencies 1"),
        (("interleav", "even", "odd", "half", "concat", "column", "order", "pair"), ("integer", "//", "frequenc", "exponent", "omega", "trunc"))
        , """
def sinusoidal_encoding(positions, d_model):
    i = np.arange(d_model // 2)
    omega = 1.0 / 10000 ** (2 * i // d_model)
    angles = np.outer(positions, omega)
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)
"""),
_answer("positional.rotation", "two",
        ("sines on the wrong side (RoPE's [[c, -s], [s, c]]): the transpose", "exponent i / d_model instead of 2i / d_model"),
        (("sign", "sin", "transpos", "-s", "direction", "rotation"), ("frequenc", "2i", "exponent", "omega", "10000"))
        , """
def rotation_matrix(tau, d_model):
    A = np.zeros((d_model, d_model))
    for i in range(d_model // 2):
        th = tau / 10000 ** (i / d_model)
        A[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[np.cos(th), -np.sin(th)], [np.sin(th), np.cos(th)]]
    return A
"""),
_answer("positional.rotation", "two",
        ("angle tau * 10000^(2i/d) instead of tau / 10000^(2i/d)", "chained fancy indexing A[odd][:, even] writes into a copy: -sin entries stay 0"),
        (("frequenc", "omega", "divide", "10000", "angle", "inverse"), ("copy", "fancy", "index", "-sin", "sin", "zero", "0", "missing", "lower"))
        , """
def rotation_matrix(tau, d_model):
    k = np.arange(d_model // 2)
    theta = tau * 10000 ** (2 * k / d_model)
    even = np.arange(0, d_model, 2)
    odd = even + 1
    A = np.zeros((d_model, d_model))
    A[even, even] = np.cos(theta)
    A[even, odd] = np.sin(theta)
    A[odd][:, even] = -np.sin(theta)
    A[odd, odd] = np.cos(theta)
    return A
"""),
_answer("positional.rope", "two",
        ("rotation in the wrong direction (sign of sin flipped)", "writes into x in place, the second line reads the already rotated even entries"),
        (("sign", "direction", "sin", "-theta", "transpos", "negative"), ("in place", "input", "changed", "modif", "overwrit", "copy"))
        , """
def apply_rope(x, positions):
    d = x.shape[-1]
    inv = 1.0 / 10000 ** (np.arange(0, d, 2) / d)
    theta = np.outer(positions, inv)
    cos, sin = np.cos(theta), np.sin(theta)
    x[..., 0::2] = cos * x[..., 0::2] + sin * x[..., 1::2]
    x[..., 1::2] = -sin * x[..., 0::2] + cos * x[..., 1::2]
    return x
"""),
_answer("positional.rope", "two",
        ("rotate-half pairing (x_i with x_{i+d/2}) instead of adjacent pairs", "positions ignored: uses 0 .. T-1"),
        (("pair", "adjacent", "half", "2i", "interleav"), ("position", "given", "arange", "values", "offset"))
        , """
def apply_rope(x, positions):
    T, d = x.shape[-2], x.shape[-1]
    half = d // 2
    theta = np.arange(T)[:, None] * (1.0 / 10000 ** (2 * np.arange(half) / d))
    c, s = np.cos(theta), np.sin(theta)
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([c * x1 - s * x2, s * x1 + c * x2], axis=-1)
"""),
_answer("positional.rope", "two",
        ("exponent i / d instead of 2i / d", "the two rotated components written to swapped slots"),
        (("frequenc", "2i", "exponent", "omega", "10000"), ("swap", "even", "odd", "slot", "order", "pair", "component"))
        , """
def apply_rope(x, positions):
    d = x.shape[-1]
    omega = 1.0 / 10000 ** (np.arange(d // 2) / d)
    theta = np.asarray(positions, dtype=float)[:, None] * omega
    c, s = np.cos(theta), np.sin(theta)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = np.zeros(np.broadcast_shapes(x.shape, (len(theta), d)))
    out[..., 1::2] = c * x0 - s * x1
    out[..., 0::2] = s * x0 + c * x1
    return out
"""),
_answer("positional.sinusoidal", "single",
        ("positions shifted by one (positions + 1)",),
        (("position", "shift", "offset", "+ 1", "one", "given"),), """
def sinusoidal_encoding(positions, d_model):
    t = np.asarray(positions, dtype=float) + 1
    omega = 1.0 / 10000 ** (np.arange(0, d_model, 2) / d_model)
    angles = t[:, None] * omega[None, :]
    P = np.zeros((len(t), d_model))
    P[:, 0::2] = np.sin(angles)
    P[:, 1::2] = np.cos(angles)
    return P
"""),
_answer("positional.sinusoidal", "single",
        ("base 1000 instead of 10000",),
        (("10000", "base", "frequenc", "omega", "constant"),), """
def sinusoidal_encoding(positions, d_model):
    i = np.arange(d_model // 2)
    omega = 1.0 / 1000 ** (2 * i / d_model)
    angles = np.asarray(positions, dtype=float)[:, None] * omega
    P = np.zeros((len(angles), d_model))
    P[:, 0::2] = np.sin(angles)
    P[:, 1::2] = np.cos(angles)
    return P
"""),
_answer("positional.rotation", "single",
        ("transposed blocks: [[c, -s], [s, c]]",),
        (("sign", "sin", "transpos", "-s", "direction"),), """
def rotation_matrix(tau, d_model):
    theta = tau / 10000 ** (2 * np.arange(d_model // 2) / d_model)
    c, s = np.cos(theta), np.sin(theta)
    A = np.zeros((d_model, d_model))
    even = np.arange(0, d_model, 2)
    odd = even + 1
    A[even, even], A[even, odd] = c, -s
    A[odd, even], A[odd, odd] = s, c
    return A
"""),
_answer("positional.rope", "single",
        ("rotation in the wrong direction (sign of sin flipped)",),
        (("sign", "direction", "sin", "-theta", "transpos", "negative"),), """
def apply_rope(x, positions):
    d = x.shape[-1]
    omega = 1.0 / 10000 ** (2 * np.arange(d // 2) / d)
    theta = np.asarray(positions, dtype=float)[:, None] * omega
    c, s = np.cos(theta), np.sin(theta)
    out = np.zeros(np.broadcast_shapes(x.shape, (len(theta), d)))
    out[..., 0::2] = c * x[..., 0::2] + s * x[..., 1::2]
    out[..., 1::2] = -s * x[..., 0::2] + c * x[..., 1::2]
    return out
"""),
_answer("positional.rope", "single",
        ("rotate-half pairing instead of adjacent pairs",),
        (("pair", "adjacent", "half", "2i", "interleav"),), """
def apply_rope(x, positions):
    d = x.shape[-1]
    half = d // 2
    theta = np.asarray(positions, dtype=float)[:, None] / 10000 ** (2 * np.arange(half) / d)
    c, s = np.cos(theta), np.sin(theta)
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([c * a - s * b, s * a + c * b], axis=-1)
"""),

# ---------------------------------------------------------------- 04 layer norm
_answer("layernorm.forward", "two",
        ("standard deviation with ddof=1", "eps added to the std outside the square root"),
        (("ddof", "d_model - 1", "n - 1", "unbiased", "variance"), ("eps", "inside", "sqrt", "outside"))
        , """
def layernorm_forward(x, gamma, beta, eps=1e-5):
    mean = np.mean(x, axis=-1, keepdims=True)
    std = np.std(x, axis=-1, ddof=1, keepdims=True)
    x_hat = (x - mean) / (std + eps)
    out = gamma * x_hat + beta
    return out, (x_hat, std ** 2, eps, gamma)
"""),
_answer("layernorm.forward", "two",
        ("statistics over the batch axis 0 (batch norm) instead of the last axis", "beta not added"),
        (("axis", "last", "batch", "0"), ("beta", "shift", "bias"))
        , """
def layernorm_forward(x, gamma, beta, eps=1e-5):
    mu = x.mean(axis=0, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=0, keepdims=True)
    x_hat = (x - mu) / np.sqrt(var + eps)
    return gamma * x_hat, (x_hat, var, eps, gamma)
"""),
_answer("layernorm.forward", "two",
        ("mean and variance over the whole array, no axis", "eps left out"),
        (("axis", "last", "whole", "vector", "per"), ("eps",))
        , """
def layernorm_forward(x, gamma, beta, eps=1e-5):
    mu = np.mean(x)
    var = np.mean(x ** 2) - mu ** 2
    x_hat = (x - mu) / np.sqrt(var)
    return gamma * x_hat + beta, (x_hat, var, eps, gamma)
"""),
_answer("layernorm.backward", "two",
        ("dgamma and dbeta swapped", "dx misses the -mean(g) term (path through the mean)"),
        (("dgamma", "dbeta", "swap"), ("mean", "dx", "term", "path", "g"))
        , """
def layernorm_backward(dout, cache):
    x_hat, var, eps, gamma = cache
    s = 1 / np.sqrt(var + eps)
    axes = tuple(range(dout.ndim - 1))
    dgamma = dout.sum(axis=axes)
    dbeta = (dout * x_hat).sum(axis=axes)
    g = dout * gamma
    dx = s * (g - x_hat * np.mean(g * x_hat, axis=-1, keepdims=True))
    return dx, dgamma, dbeta
"""),
_answer("layernorm.backward", "two",
        ("dbeta summed over axis 0 only (wrong shape for 3-D inputs)", "gamma left out of g (g = dout)"),
        (("dbeta", "sum", "axis", "shape", "leading", "position"), ("gamma", "g"))
        , """
def layernorm_backward(dout, cache):
    x_hat, var, eps, gamma = cache
    d = dout.shape[-1]
    s = 1.0 / np.sqrt(var + eps)
    dbeta = dout.sum(axis=0)
    dgamma = (dout * x_hat).reshape(-1, d).sum(axis=0)
    g = dout
    dx = s / d * (d * g - g.sum(-1, keepdims=True) - x_hat * (g * x_hat).sum(-1, keepdims=True))
    return dx, dgamma, dbeta
"""),
_answer("layernorm.backward", "two",
        ("dx multiplied by the std instead of divided by it", "dgamma multiplied by gamma"),
        (("dx", "std", "sqrt", "inverse", "scale", "1/"), ("dgamma", "gamma"))
        , """
def layernorm_backward(dout, cache):
    x_hat, var, eps, gamma = cache
    d = dout.shape[-1]
    flat_dout = dout.reshape(-1, d)
    flat_xhat = x_hat.reshape(-1, d)
    dbeta = flat_dout.sum(axis=0)
    dgamma = (flat_dout * flat_xhat * gamma).sum(axis=0)
    g = dout * gamma
    std = np.sqrt(var + eps)
    dx = std * (g - g.mean(-1, keepdims=True) - x_hat * (g * x_hat).mean(-1, keepdims=True))
    return dx, dgamma, dbeta
"""),
_answer("layernorm.ffn", "two",
        ("b1 added after the ReLU instead of before", "ReLU also applied to the output"),
        (("b1", "bias", "before", "after", "relu"), ("relu", "output", "second", "negative"))
        , """
def ffn_forward(x, W1, b1, W2, b2):
    hidden = np.maximum(x @ W1, 0) + b1
    out = np.maximum(hidden @ W2 + b2, 0)
    return out, (x, hidden)
"""),
_answer("layernorm.ffn", "two",
        ("leaky ReLU (0.01 slope) instead of ReLU", "b2 left out"),
        (("relu", "negative", "leak", "0.01", "max"), ("b2", "bias"))
        , """
def ffn_forward(x, W1, b1, W2, b2):
    z = x @ W1 + b1
    h = np.where(z > 0, z, 0.01 * z)
    return h @ W2, (x, h)
"""),
_answer("layernorm.post_ln", "two",
        ("no residual connection", "gamma and beta passed in swapped order"),
        (("residual", "x +", "skip", "add"), ("gamma", "beta", "swap", "order"))
        , """
def post_ln_block(x, W1, b1, W2, b2, gamma, beta):
    y = ffn_forward(x, W1, b1, W2, b2)[0]
    return layernorm_forward(y, beta, gamma)[0]
"""),
_answer("layernorm.forward", "single",
        ("variance with ddof=1",),
        (("ddof", "d_model - 1", "n - 1", "unbiased", "variance"),), """
def layernorm_forward(x, gamma, beta, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, ddof=1, keepdims=True)
    x_hat = (x - mu) / np.sqrt(var + eps)
    return gamma * x_hat + beta, (x_hat, var, eps, gamma)
"""),
_answer("layernorm.forward", "single",
        ("eps outside the square root",),
        (("eps", "inside", "sqrt", "outside"),), """
def layernorm_forward(x, gamma, beta, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    x_hat = (x - mu) / (np.sqrt(var) + eps)
    return gamma * x_hat + beta, (x_hat, var, eps, gamma)
"""),
_answer("layernorm.backward", "single",
        ("dx misses the -x_hat * mean(g x_hat) term (path through the variance)",),
        (("variance", "sigma", "x_hat", "term", "path"),), """
def layernorm_backward(dout, cache):
    x_hat, var, eps, gamma = cache
    lead = tuple(range(dout.ndim - 1))
    g = dout * gamma
    dx = (g - g.mean(axis=-1, keepdims=True)) / np.sqrt(var + eps)
    return dx, (dout * x_hat).sum(axis=lead), dout.sum(axis=lead)
"""),
_answer("layernorm.ffn", "single",
        ("np.max(z, 0) (a reduction over axis 0) instead of np.maximum(z, 0)",),
        (("maximum", "max", "relu", "axis", "shape", "reduc"),), """
def ffn_forward(x, W1, b1, W2, b2):
    h = np.max(x @ W1 + b1, 0)
    return h @ W2 + b2, (x, h)
"""),
_answer("layernorm.post_ln", "single",
        ("norm before the residual: LN(FFN(x)) + x",),
        (("order", "residual", "norm", "after", "before", "pre"),), """
def post_ln_block(x, W1, b1, W2, b2, gamma, beta):
    f = ffn_forward(x, W1, b1, W2, b2)[0]
    return layernorm_forward(f, gamma, beta)[0] + x
"""),
_answer("layernorm.pre_ln", "single",
        ("residual adds the normalised input: LN(x) + FFN(LN(x))",),
        (("residual", "x +", "normalis", "untouched", "input"),), """
def pre_ln_block(x, W1, b1, W2, b2, gamma, beta):
    h = layernorm_forward(x, gamma, beta)[0]
    return h + ffn_forward(h, W1, b1, W2, b2)[0]
"""),
_answer("layernorm.pre_ln", "single",
        ("norm applied to the sublayer's output: x + LN(FFN(x))",),
        (("order", "norm", "input", "before", "post", "output"),), """
def pre_ln_block(x, W1, b1, W2, b2, gamma, beta):
    return x + layernorm_forward(ffn_forward(x, W1, b1, W2, b2)[0], gamma, beta)[0]
"""),

# ---------------------------------------------------------------- 05 encoder-decoder
_answer("encdec.bpe_merges", "two",
        ("ties go to the largest pair instead of the smallest", "pairs not weighted by the chunk counts"),
        (("tie", "smallest", "largest", "min"), ("count", "weight", "frequen"))
        , """
def merge_pair(word, pair, new_id):
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and word[i] == pair[0] and word[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out


def learn_merges(words, counts, n_merges, first_id=259):
    seqs = [[int(t) for t in w] for w in words]
    merges = []
    next_id = first_id
    while len(merges) < n_merges:
        freq = {}
        for s in seqs:
            for a, b in zip(s[:-1], s[1:]):
                freq[(a, b)] = freq.get((a, b), 0) + 1
        if not freq:
            break
        best = max(freq, key=lambda p: (freq[p], p))
        merges.append(best)
        seqs = [merge_pair(s, best, next_id) for s in seqs]
        next_id += 1
    return np.array(merges, dtype=np.int64).reshape(-1, 2)
"""),
_answer("encdec.bpe_merges", "two",
        ("new ids start at first_id + 1", "returns a list of tuples, not an int array (n_pairs, 2)"),
        (("id", "first_id", "off-by-one", "off by one"), ("array", "int", "list", "shape", "(n_pairs, 2)"))
        , """
def merge_pair(word, pair, new_id):
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and word[i] == pair[0] and word[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out


def learn_merges(words, counts, n_merges, first_id=259):
    words = [list(w) for w in words]
    merges = []
    for i in range(n_merges):
        pc = {}
        for w, n in zip(words, counts):
            for pair in zip(w, w[1:]):
                pc[pair] = pc.get(pair, 0) + n
        if not pc:
            break
        best = min(pc, key=lambda pair: (-pc[pair], pair))
        merges.append(best)
        words = [merge_pair(w, best, first_id + i + 1) for w in words]
    return merges
"""),
_answer("encdec.bpe_merges", "two",
        ("a pair counted once per chunk (set), overlaps not counted", "no early stop: min() of an empty dict raises"),
        (("overlap", "count", "twice", "set", "once"), ("stop", "early", "empty", "n_pairs", "no chunk"))
        , """
def merge_pair(word, pair, new_id):
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and word[i] == pair[0] and word[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out


def learn_merges(words, counts, n_merges, first_id=259):
    words = [list(w) for w in words]
    merges = []
    for new_id in range(first_id, first_id + n_merges):
        pair_count = {}
        for word, n in zip(words, counts):
            for pair in set(zip(word, word[1:])):
                pair_count[pair] = pair_count.get(pair, 0) + n
        best = min(pair_count, key=lambda pair: (-pair_count[pair], pair))
        merges.append(best)
        words = [merge_pair(word, best, new_id) for word in words]
    return np.array(merges, dtype=np.int64).reshape(-1, 2)
"""),
_answer("encdec.bpe_encode", "two",
        ("merges replayed in reverse order", "returns a Python list"),
        (("order", "reverse", "learned", "first"), ("array", "list", "int", "numpy"))
        , """
def bpe_encode(ids, merges, first_id=259):
    tokens = list(ids)
    for i in reversed(range(len(merges))):
        tokens = merge_pair(tokens, tuple(merges[i]), first_id + i)
    return tokens
"""),
_answer("encdec.embed", "two",
        ("sqrt(d_model) also multiplies P", "P rows 1 .. T instead of 0 .. T-1"),
        (("sqrt", "scale", "P", "position"), ("P[:T]", "first T", "row", "offset", "shift", "position", "off-by-one", "off by one"))
        , """
def embed(ids, W_E, P):
    T = ids.shape[1]
    d = W_E.shape[1]
    return (W_E[ids] + P[1:T + 1]) * np.sqrt(d)
"""),
_answer("encdec.embed", "two",
        ("scaled by d_model instead of sqrt(d_model)", "P sliced by the batch size len(ids) instead of T"),
        (("sqrt", "scale", "d_model"), ("T", "P", "length", "batch", "shape", "rows", "position"))
        , """
def embed(ids, W_E, P):
    d_model = W_E.shape[1]
    x = W_E[ids] * d_model
    return x + P[:len(ids)]
"""),
_answer("encdec.shift_right", "two",
        ("tgt_in drops the last target token (length T)", "tgt_out has no eos"),
        (("last", "length", "T + 1", "drop", "y_n", "shift"), ("eos", "end", "</s>"))
        , """
def decoder_input_and_target(target_ids, bos=1, eos=2):
    y = np.asarray(target_ids)
    tgt_in = np.concatenate([[bos], y[:-1]])
    tgt_out = y.copy()
    return tgt_in, tgt_out
"""),
_answer("encdec.shift_right", "two",
        ("bos and eos swapped", "returns Python lists, not int arrays"),
        (("bos", "eos", "swap", "start", "end"), ("array", "list", "int", "numpy"))
        , """
def decoder_input_and_target(target_ids, bos=1, eos=2):
    t = [int(v) for v in target_ids]
    return [eos] + t, t + [bos]
"""),
_answer("encdec.masks", "two",
        ("causal part upper triangular (np.triu)", "enc_mask shape (B, 1, T_src) without the head axis"),
        (("causal", "upper", "lower", "triangle", "future", "triu", "tril", "transpos"), ("shape", "enc", "(B, 1, 1, T_src)", "axis"))
        , """
def attention_masks(src, tgt_in, pad_id=0):
    B, T = tgt_in.shape
    src_ok = src != pad_id
    enc = src_ok[:, None, :]
    cross = src_ok[:, None, None, :]
    causal = np.triu(np.ones((T, T), dtype=bool))
    dec = causal[None, None] & (tgt_in != pad_id)[:, None, None, :]
    return enc, cross, dec
"""),
_answer("encdec.masks", "two",
        ("cross mask built from the target's padding instead of the source's", "decoder padding put on the query axis instead of the key axis"),
        (("cross", "src", "source", "target"), ("query", "key", "axis", "padding", "dec", "row", "column"))
        , """
def attention_masks(src, tgt_in, pad_id=0):
    T = tgt_in.shape[1]
    enc = (src != pad_id)[:, None, None, :]
    cross = (tgt_in != pad_id)[:, None, None, :]
    dec = np.tril(np.ones((T, T), dtype=bool)) & (tgt_in != pad_id)[:, None, :, None]
    return enc, cross, dec
"""),
_answer("encdec.encoder_block", "two",
        ("Pre-LN order instead of Post-LN", "mask not passed to self-attention"),
        (("post", "pre", "order", "norm", "residual"), ("mask", "pad"))
        , """
def encoder_block(x, p, n_heads, mask=None):
    h = layernorm_forward(x, *p["norm1"])[0]
    x = x + mha_forward(h, h, *p["self_attn"], n_heads)[0]
    h = layernorm_forward(x, *p["norm2"])[0]
    return x + ffn_forward(h, *p["ffn"])[0]
"""),
_answer("encdec.decoder_block", "two",
        ("norm2 and norm3 swapped", "no residual around the FFN"),
        (("norm2", "norm3", "norm", "swap", "order"), ("residual", "ffn", "skip", "y +"))
        , """
def decoder_block(y, memory, p, n_heads, self_mask=None, cross_mask=None):
    a = mha_forward(y, y, *p["self_attn"], n_heads, self_mask)[0]
    y = layernorm_forward(y + a, *p["norm1"])[0]
    c = mha_forward(y, memory, *p["cross_attn"], n_heads, cross_mask)[0]
    y = layernorm_forward(y + c, *p["norm3"])[0]
    return layernorm_forward(ffn_forward(y, *p["ffn"])[0], *p["norm2"])[0]
"""),
_answer("encdec.decoder_block", "two",
        ("cross-attention uses the self-attention weights", "self-attention without its mask"),
        (("cross_attn", "weights", "cross"), ("mask", "causal", "self_mask", "future"))
        , """
def decoder_block(y, memory, p, n_heads, self_mask=None, cross_mask=None):
    s = mha_forward(y, y, *p["self_attn"], n_heads)[0]
    y = layernorm_forward(y + s, *p["norm1"])[0]
    c = mha_forward(y, memory, *p["self_attn"], n_heads, cross_mask)[0]
    y = layernorm_forward(y + c, *p["norm2"])[0]
    f = ffn_forward(y, *p["ffn"])[0]
    return layernorm_forward(y + f, *p["norm3"])[0]
"""),
_answer("encdec.greedy", "two",
        ("does not stop at eos", "bos included in the output"),
        (("eos", "stop", "end"), ("bos", "start", "first", "after"))
        , """
def greedy_decode(next_log_probs, bos=1, eos=2, max_len=10):
    seq = [bos]
    for step in range(max_len):
        lp = next_log_probs(np.array([seq]))
        seq.append(int(lp[0].argmax()))
    return np.array(seq)
"""),
_answer("encdec.greedy", "two",
        ("only max_len - 1 tokens generated", "eos not included: breaks before appending it"),
        (("max_len", "off-by-one", "off by one", "length", "one fewer", "short"), ("eos", "include", "last", "end"))
        , """
def greedy_decode(next_log_probs, bos=1, eos=2, max_len=10):
    tokens = [bos]
    for _ in range(max_len - 1):
        nxt = int(np.argmax(next_log_probs(np.array(tokens)[None, :])[0]))
        if nxt == eos:
            break
        tokens.append(nxt)
    return np.array(tokens[1:], dtype=int)
"""),
_answer("encdec.beam_search", "two",
        ("refills the beam with beam_size live candidates after setting finished ones aside", "length for the normalisation excludes eos"),
        (("beam_size", "narrow", "finished", "kept", "refill", "live"), ("length", "eos", "normalis", "alpha"))
        , """
def beam_search(next_log_probs, bos=1, eos=2, beam_size=3, max_len=10, alpha=1.0):
    live = [([bos], 0.0)]
    done = []
    for _ in range(max_len):
        logp = next_log_probs(np.array([seq for seq, _ in live]))
        cands = []
        for b, (seq, sc) in enumerate(live):
            for tok in range(logp.shape[1]):
                cands.append((sc + logp[b, tok], seq + [tok]))
        order = np.argsort(-np.array([c[0] for c in cands]), kind="stable")
        live = []
        for j in order:
            score, seq = cands[j]
            if seq[-1] == eos:
                done.append((seq[1:], score))
            else:
                live.append((seq, score))
            if len(live) == beam_size:
                break
        if not live:
            break
    pool = done if done else [(s[1:], sc) for s, sc in live]
    norm = [sc / max(len(t) - 1, 1) ** alpha for t, sc in pool]
    best = int(np.argmax(norm))
    return np.array(pool[best][0], dtype=np.int64), float(norm[best])
"""),
_answer("encdec.beam_search", "two",
        ("ties broken in reverse order (argsort ascending, reversed)", "no length normalisation: alpha ignored"),
        (("tie", "stable", "order", "argsort"), ("length", "normalis", "alpha"))
        , """
def beam_search(next_log_probs, bos=1, eos=2, beam_size=3, max_len=10, alpha=1.0):
    beams, scores = np.full((1, 1), bos, dtype=np.int64), np.zeros(1)
    finished = []
    for _ in range(max_len):
        cand = (scores[:, None] + next_log_probs(beams)).ravel()
        V = cand.size // len(beams)
        kept = np.argsort(cand)[::-1][:beam_size]
        beam, token = kept // V, kept % V
        seqs = np.concatenate([beams[beam], token[:, None]], axis=1)
        done = token == eos
        finished += list(zip(seqs[done, 1:], cand[kept][done]))
        beams, scores = seqs[~done], cand[kept][~done]
        if len(beams) == 0:
            break
    pool = finished or list(zip(beams[:, 1:], scores))
    best = int(np.argmax([s for _, s in pool]))
    return pool[best][0], float(pool[best][1])
"""),
_answer("encdec.bpe_encode", "single",
        ("merges replayed in reverse order",),
        (("order", "reverse", "learned", "first"),), """
def bpe_encode(ids, merges, first_id=259):
    word = list(ids)
    for i in range(len(merges) - 1, -1, -1):
        word = merge_pair(word, merges[i], first_id + i)
    return np.array(word, dtype=np.int64)
"""),
_answer("encdec.embed", "single",
        ("sqrt(d_model) factor missing",),
        (("sqrt", "scale", "d_model", "factor"),), """
def embed(ids, W_E, P):
    return W_E[ids] + P[:ids.shape[1]]
"""),
_answer("encdec.shift_right", "single",
        ("tgt_in drops the last token",),
        (("last", "length", "T + 1", "drop", "y_n"),), """
def decoder_input_and_target(target_ids, bos=1, eos=2):
    y = np.asarray(target_ids, dtype=np.int64)
    return np.concatenate([[bos], y[:-1]]), np.concatenate([y, [eos]])
"""),
_answer("encdec.masks", "single",
        ("decoder mask without its padding part",),
        (("pad", "padding", "dec"),), """
def attention_masks(src, tgt_in, pad_id=0):
    keys = (src != pad_id)[:, None, None, :]
    T = tgt_in.shape[1]
    dec = np.broadcast_to(np.tril(np.ones((T, T), dtype=bool)), (len(tgt_in), 1, T, T))
    return keys, keys, dec
"""),
_answer("encdec.encoder_block", "single",
        ("no residual around the FFN",),
        (("residual", "ffn", "skip", "x +"),), """
def encoder_block(x, p, n_heads, mask=None):
    a = mha_forward(x, x, *p["self_attn"], n_heads, mask)[0]
    x = layernorm_forward(x + a, *p["norm1"])[0]
    return layernorm_forward(ffn_forward(x, *p["ffn"])[0], *p["norm2"])[0]
"""),
_answer("encdec.greedy", "single",
        ("does not stop at eos",),
        (("eos", "stop", "end"),), """
def greedy_decode(next_log_probs, bos=1, eos=2, max_len=10):
    seq = [bos]
    for _ in range(max_len):
        seq.append(int(np.argmax(next_log_probs(np.array([seq]))[0])))
    return np.array(seq[1:], dtype=np.int64)
"""),
_answer("encdec.beam_search", "single",
        ("no length normalisation: alpha ignored",),
        (("length", "normalis", "alpha"),), """
def beam_search(next_log_probs, bos=1, eos=2, beam_size=3, max_len=10, alpha=1.0):
    beams, scores = np.full((1, 1), bos, dtype=np.int64), np.zeros(1)
    finished = []
    for _ in range(max_len):
        cand = scores[:, None] + next_log_probs(beams)
        V = cand.shape[1]
        cand = cand.ravel()
        kept = np.argsort(-cand, kind="stable")[:beam_size]
        beam, token = kept // V, kept % V
        seqs = np.concatenate([beams[beam], token[:, None]], axis=1)
        done = token == eos
        finished += list(zip(seqs[done, 1:], cand[kept][done]))
        beams, scores = seqs[~done], cand[kept][~done]
        if len(beams) == 0:
            break
    pool = finished or list(zip(beams[:, 1:], scores))
    best = int(np.argmax([score for _, score in pool]))
    return pool[best][0], float(pool[best][1])
"""),

# ---------------------------------------------------------------- 06 GPT
_answer("gpt.block", "two",
        ("no causal mask", "LN2 applied to the block's input x instead of h"),
        (("mask", "causal", "future"), ("norm2", "ln", "h", "input", "residual", "stream"))
        , """
def gpt_block(x, p, n_heads):
    a = layernorm_forward(x, *p["norm1"])[0]
    h = x + mha_forward(a, a, *p["attn"], n_heads, None)[0]
    f = ffn_forward(layernorm_forward(x, *p["norm2"])[0], *p["ffn"])[0]
    return h + f
"""),
_answer("gpt.block", "two",
        ("Post-LN around the attention instead of Pre-LN", "norm1 used for both sublayers"),
        (("pre", "post", "order", "norm", "residual"), ("norm2", "norm1", "parameters", "gamma"))
        , """
def gpt_block(x, p, n_heads):
    m = causal_mask(x.shape[1])
    h = layernorm_forward(x + mha_forward(x, x, *p["attn"], n_heads, m)[0], *p["norm1"])[0]
    return h + ffn_forward(layernorm_forward(h, *p["norm1"])[0], *p["ffn"])[0]
"""),
_answer("gpt.forward", "two",
        ("token embeddings scaled by sqrt(d_model)", "final layer norm missing"),
        (("sqrt", "scale", "d_model"), ("norm_f", "final", "layer norm", "ln"))
        , """
def gpt_forward(idx, params, n_heads):
    W_E = params["W_E"]
    B, T = idx.shape
    x = np.sqrt(W_E.shape[1]) * W_E[idx] + params["W_P"][:T]
    for blk in params["blocks"]:
        x = gpt_block(x, blk, n_heads)
    return x @ W_E.T
"""),
_answer("gpt.forward", "two",
        ("position rows 1 .. T instead of 0 .. T-1", "final norm uses the last block's norm2 instead of norm_f"),
        (("position", "W_P", "offset", "shift", "off-by-one", "off by one", "row"), ("norm_f", "final", "norm"))
        , """
def gpt_forward(idx, params, n_heads):
    T = idx.shape[1]
    x = params["W_E"][idx] + params["W_P"][1:T + 1]
    for block in params["blocks"]:
        x = gpt_block(x, block, n_heads)
    x = layernorm_forward(x, *params["blocks"][-1]["norm2"])[0]
    return x @ params["W_E"].T
"""),
_answer("gpt.next_token_probs", "two",
        ("logits multiplied by the temperature instead of divided", "top-k keeps k + 1 faces"),
        (("temperature", "divide", "multipl"), ("top-k", "top_k", "k + 1", "faces", "one more", "kept"))
        , """
def next_token_probs(logits, temperature=1.0, top_k=None, top_p=None):
    p = softmax(logits * temperature, axis=-1)
    if top_k is not None:
        thresh = np.sort(p, axis=-1)[:, -(top_k + 1)][:, None]
        p = np.where(p >= thresh, p, 0.0)
        p = p / p.sum(axis=-1, keepdims=True)
    if top_p is not None:
        order = np.argsort(-p, axis=-1)
        sp = np.take_along_axis(p, order, axis=-1)
        before = np.cumsum(sp, axis=-1) - sp
        drop = np.zeros(p.shape, dtype=bool)
        np.put_along_axis(drop, order, before >= top_p, axis=-1)
        p = np.where(drop, 0.0, p)
        p = p / p.sum(axis=-1, keepdims=True)
    return p
"""),
_answer("gpt.next_token_probs", "two",
        ("top-p drops the face that takes the sum past p", "top-p measured on the die not renormalised after top-k"),
        (("top-p", "top_p", "include", "crossing", "past", "nucleus", "that face"), ("renormal", "top-k", "top_k", "normalis"))
        , """
def next_token_probs(logits, temperature=1.0, top_k=None, top_p=None):
    probs = softmax(logits / temperature)
    if top_k is not None:
        rest = np.argsort(probs, axis=-1)[:, :-top_k]
        np.put_along_axis(probs, rest, 0.0, axis=-1)
    if top_p is not None:
        order = np.argsort(-probs, axis=-1)
        sp = np.take_along_axis(probs, order, axis=-1)
        keep_sorted = np.cumsum(sp, axis=-1) <= top_p
        keep = np.zeros_like(keep_sorted)
        np.put_along_axis(keep, order, keep_sorted, axis=-1)
        probs = np.where(keep, probs, 0.0)
    return probs / probs.sum(axis=-1, keepdims=True)
"""),
_answer("gpt.next_token_probs", "two",
        ("temperature divides the probabilities, not the logits", "top-k keeps the k least likely faces"),
        (("temperature", "logits", "sum to 1", "divide"), ("top-k", "top_k", "likeliest", "largest", "smallest", "least"))
        , """
def next_token_probs(logits, temperature=1.0, top_k=None, top_p=None):
    probs = softmax(logits) / temperature
    if top_k is not None:
        chosen = np.argsort(probs, axis=-1)[:, :top_k]
        keep = np.zeros(probs.shape, dtype=bool)
        np.put_along_axis(keep, chosen, True, axis=-1)
        probs = np.where(keep, probs, 0.0)
        probs = probs / probs.sum(axis=-1, keepdims=True)
    if top_p is not None:
        order = np.argsort(-probs, axis=-1)
        sp = np.take_along_axis(probs, order, axis=-1)
        before = np.cumsum(sp, axis=-1) - sp
        drop = np.zeros(probs.shape, dtype=bool)
        np.put_along_axis(drop, order, before >= top_p, axis=-1)
        probs = np.where(drop, 0.0, probs)
        probs = probs / probs.sum(axis=-1, keepdims=True)
    return probs
"""),
_answer("gpt.kv_step", "two",
        ("position embedding W_P[pos] missing", "cache stores only the newest key and value, not all of them"),
        (("position", "W_P", "pos"), ("cache", "append", "concat", "earlier", "previous", "keys"))
        , """
def gpt_step(token, pos, cache, params, n_heads):
    x = params["W_E"][token][:, None, :]
    for layer, p in enumerate(params["blocks"]):
        Wq, Wk, Wv, Wo = p["attn"]
        h = layernorm_forward(x, *p["norm1"])[0]
        q, k, v = (split_heads(h @ W, n_heads) for W in (Wq, Wk, Wv))
        if layer in cache:
            K_all = np.concatenate([cache[layer][0], k], axis=2)
            V_all = np.concatenate([cache[layer][1], v], axis=2)
        else:
            K_all, V_all = k, v
        cache[layer] = (k, v)
        x = x + merge_heads(attention_forward(q, K_all, V_all)[0]) @ Wo
        x = x + ffn_forward(layernorm_forward(x, *p["norm2"])[0], *p["ffn"])[0]
    x = layernorm_forward(x, *params["norm_f"])[0]
    return x[:, 0] @ params["W_E"].T
"""),
_answer("gpt.kv_step", "two",
        ("final layer norm missing", "FFN input normalised with norm1 instead of norm2"),
        (("norm_f", "final", "layer norm"), ("norm2", "norm1", "ffn"))
        , """
def gpt_step(token, pos, cache, params, n_heads):
    x = (params["W_E"][token] + params["W_P"][pos])[:, None, :]
    for i, blk in enumerate(params["blocks"]):
        W_q, W_k, W_v, W_o = blk["attn"]
        a = layernorm_forward(x, *blk["norm1"])[0]
        k_new, v_new = split_heads(a @ W_k, n_heads), split_heads(a @ W_v, n_heads)
        K_old, V_old = cache.get(f"k{i}"), cache.get(f"v{i}")
        K_all = k_new if K_old is None else np.concatenate([K_old, k_new], axis=-2)
        V_all = v_new if V_old is None else np.concatenate([V_old, v_new], axis=-2)
        cache[f"k{i}"], cache[f"v{i}"] = K_all, V_all
        att, _ = attention_forward(split_heads(a @ W_q, n_heads), K_all, V_all)
        x = x + merge_heads(att) @ W_o
        x = x + ffn_forward(layernorm_forward(x, *blk["norm1"])[0], *blk["ffn"])[0]
    return (x @ params["W_E"].T)[:, 0]
"""),
_answer("scaling.param_count", "two",
        ("attention biases (4d) left out", "tied flag inverted: extra output matrix when tied"),
        (("bias", "4d", "4 * d", "attention"), ("tied", "output", "embedding", "vocab"))
        , """
def param_count(n_layers, d_model, n_heads, vocab_size, n_ctx, d_ff, tied):
    d = d_model
    per_block = 4 * d * d + 2 * d * d_ff + d_ff + d + 4 * d
    total = n_layers * per_block + 2 * d + vocab_size * d + n_ctx * d
    if tied:
        total += vocab_size * d
    return int(total)
"""),
_answer("scaling.param_count", "two",
        ("one layer norm per block counted (2d instead of 4d)", "learned positions n_ctx * d left out"),
        (("norm", "layer norm", "ln", "gamma", "beta", "4d", "2 * 2"), ("position", "n_ctx", "W_P"))
        , """
def param_count(n_layers, d_model, n_heads, vocab_size, n_ctx, d_ff, tied):
    d = d_model
    block = (4 * d * d + 4 * d) + (2 * d * d_ff + d_ff + d) + 2 * d
    return n_layers * block + 2 * d + vocab_size * d * (1 if tied else 2)
"""),
_answer("scaling.compute", "two",
        ("2ND (forward only) instead of 6ND", "a petaflop taken as 1e12"),
        (("6", "backward", "6ND", "factor", "3"), ("1e15", "peta", "pfs", "days", "1000"))
        , """
def training_compute(n_params, n_tokens):
    flops = 2 * n_params * n_tokens
    return flops, flops / (1e12 * 86400)
"""),
_answer("scaling.memory", "two",
        ("Adam's two moments counted as 4 bytes (one moment)", "master copy counted even when master_weights is False"),
        (("adam", "moment", "8", "two", "second"), ("master", "false", "fp32", "0"))
        , """
def training_memory(n_params, bytes_per_param, master_weights):
    w = g = n_params * bytes_per_param
    master = 4 * n_params
    adam = 4 * n_params
    return w, g, master, adam, w + g + master + adam
"""),
_answer("scaling.train_time", "two",
        ("utilisation multiplies the FLOPs instead of dividing", "hours (3600) instead of days (86400)"),
        (("utilisation", "utilization", "divide", "fraction"), ("86400", "day", "hour", "3600"))
        , """
def training_days(flops, n_devices, peak_flops, utilisation):
    rate = n_devices * peak_flops
    return flops * utilisation / rate / 3600
"""),
_answer("gpt.block", "single",
        ("no causal mask",),
        (("mask", "causal", "future"),), """
def gpt_block(x, p, n_heads):
    h = layernorm_forward(x, *p["norm1"])[0]
    x = x + mha_forward(h, h, *p["attn"], n_heads, None)[0]
    return x + ffn_forward(layernorm_forward(x, *p["norm2"])[0], *p["ffn"])[0]
"""),
_answer("gpt.kv_step", "single",
        ("returns logits of shape (B, 1, vocab_size)",),
        (("shape", "(B, vocab_size)", "axis", "squeeze", "dimension"),), """
def gpt_step(token, pos, cache, params, n_heads):
    x = params["W_E"][token][:, None, :] + params["W_P"][pos]
    for layer, p in enumerate(params["blocks"]):
        W_q, W_k, W_v, W_o = p["attn"]
        h = layernorm_forward(x, *p["norm1"])[0]
        q = split_heads(h @ W_q, n_heads)
        k, v = split_heads(h @ W_k, n_heads), split_heads(h @ W_v, n_heads)
        if layer in cache:
            k = np.concatenate([cache[layer][0], k], axis=2)
            v = np.concatenate([cache[layer][1], v], axis=2)
        cache[layer] = (k, v)
        x = x + merge_heads(attention_forward(q, k, v)[0]) @ W_o
        x = x + ffn_forward(layernorm_forward(x, *p["norm2"])[0], *p["ffn"])[0]
    x = layernorm_forward(x, *params["norm_f"])[0]
    return x @ params["W_E"].T
"""),
_answer("scaling.param_count", "single",
        ("final layer norm left out",),
        (("final", "norm", "2d", "2 * d", "layer norm"),), """
def param_count(n_layers, d_model, n_heads, vocab_size, n_ctx, d_ff, tied):
    d = d_model
    per_layer = 4 * d * d + 4 * d + 2 * d * d_ff + d_ff + d + 4 * d
    total = n_layers * per_layer + (vocab_size + n_ctx) * d
    return total if tied else total + vocab_size * d
"""),
_answer("scaling.compute", "single",
        ("petaflop/s-hours instead of days (3600 s)",),
        (("86400", "day", "hour", "3600"),), """
def training_compute(n_params, n_tokens):
    flops = 6 * n_params * n_tokens
    return flops, flops / 1e15 / 3600
"""),
_answer("scaling.memory", "single",
        ("master copy with bytes_per_param instead of 4 bytes",),
        (("master", "fp32", "4", "bytes"),), """
def training_memory(n_params, bytes_per_param, master_weights):
    weights = gradients = n_params * bytes_per_param
    master = n_params * bytes_per_param if master_weights else 0
    adam = 8 * n_params
    return weights, gradients, master, adam, weights + gradients + master + adam
"""),
_answer("scaling.kv_cache", "single",
        ("factor 2 (keys and values) missing",),
        (("2", "key", "value", "K and V", "both", "factor"),), """
def kv_cache_bytes(n_layers, d_model, batch, context, bytes_per_value):
    return n_layers * d_model * batch * context * bytes_per_value
"""),
_answer("scaling.train_time", "single",
        ("utilisation ignored",),
        (("utilisation", "utilization", "fraction"),), """
def training_days(flops, n_devices, peak_flops, utilisation):
    return flops / (n_devices * peak_flops) / 86400
"""),

# ---------------------------------------------------------------- 07 fast attention
_answer("flash.online_softmax", "two",
        ("old sum not rescaled when the maximum moves", "no guard for rows of -inf: NaN"),
        (("rescal", "alpha", "e^{m", "exp(m", "factor", "maximum"), ("-inf", "nan", "guard", "masked", "inf"))
        , """
def online_softmax_stats(s, block_k):
    lead = s.shape[:-1]
    m = np.full(lead, -np.inf)
    l = np.zeros(lead)
    M, L = [], []
    for j in range(0, s.shape[-1], block_k):
        blk = s[..., j:j + block_k]
        m = np.maximum(m, blk.max(axis=-1))
        l = l + np.exp(blk - m[..., None]).sum(axis=-1)
        M.append(m.copy())
        L.append(l.copy())
    return np.stack(M, axis=-1), np.stack(L, axis=-1)
"""),
_answer("flash.online_softmax", "two",
        ("rescale factor inverted: e^{m' - m} instead of e^{m - m'}", "last, shorter block never read"),
        (("rescal", "alpha", "invert", "e^{m", "exp", "factor", "sign"), ("last", "block", "shorter", "partial", "ceil", "n_blocks"))
        , """
def online_softmax_stats(s, block_k):
    m = np.full(s.shape[:-1], -np.inf)
    l = np.zeros(s.shape[:-1])
    ms, ls = [], []
    for b in range(s.shape[-1] // block_k):
        block = s[..., b * block_k:(b + 1) * block_k]
        m_new = np.maximum(m, block.max(axis=-1))
        shift = np.where(np.isfinite(m_new), m_new, 0.0)
        alpha = np.where(np.isfinite(m), np.exp(m_new - np.where(np.isfinite(m), m, 0.0)), 0.0)
        l = alpha * l + np.exp(block - shift[..., None]).sum(axis=-1)
        m = m_new
        ms.append(m)
        ls.append(l)
    return np.stack(ms, axis=-1), np.stack(ls, axis=-1)
"""),
_answer("flash.online_softmax", "two",
        ("maximum updated before the rescale factor, so the factor is always 1", "exponentiates the raw scores, overflow for large scores"),
        (("rescal", "alpha", "factor", "maximum", "old"), ("overflow", "large", "inf", "nan", "subtract", "thousand"))
        , """
def online_softmax_stats(s, block_k):
    m = np.full(s.shape[:-1], -np.inf)
    l = np.zeros(s.shape[:-1])
    ms, ls = [], []
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(0, s.shape[-1], block_k):
            blk = s[..., start:start + block_k]
            m = np.maximum(m, blk.max(axis=-1))
            safe = np.where(np.isfinite(m), m, 0.0)
            alpha = np.exp(m - safe)
            l = alpha * l + np.exp(blk).sum(axis=-1) * np.exp(-safe)
            ms.append(m)
            ls.append(l)
    return np.stack(ms, axis=-1), np.stack(ls, axis=-1)
"""),
_answer("flash.forward", "two",
        ("causal offset T_k - T_q ignored", "lse = m + l instead of m + log l"),
        (("causal", "offset", "T_k - T_q", "position", "align", "mask"), ("lse", "log"))
        , """
def flash_forward(Q, K, V, causal=False, block_q=16, block_k=16):
    Tq, Tk, dk = Q.shape[-2], K.shape[-2], Q.shape[-1]
    lead = Q.shape[:-2]
    out = np.zeros(lead + (Tq, V.shape[-1]))
    lse = np.zeros(lead + (Tq,))
    for qs in range(0, Tq, block_q):
        qe = min(qs + block_q, Tq)
        q = Q[..., qs:qe, :]
        m = np.full(lead + (qe - qs,), -np.inf)
        l = np.zeros(lead + (qe - qs,))
        acc = np.zeros(lead + (qe - qs, V.shape[-1]))
        k_end = min(Tk, qe) if causal else Tk
        for ks in range(0, k_end, block_k):
            ke = min(ks + block_k, Tk)
            s = q @ np.swapaxes(K[..., ks:ke, :], -1, -2) / np.sqrt(dk)
            if causal:
                s = np.where(np.arange(ks, ke)[None, :] <= np.arange(qs, qe)[:, None], s, -np.inf)
            m_new = np.maximum(m, s.max(axis=-1))
            base = np.where(np.isfinite(m_new), m_new, 0.0)
            alpha = np.exp(m - base)
            p = np.exp(s - base[..., None])
            l = alpha * l + p.sum(axis=-1)
            acc = alpha[..., None] * acc + p @ V[..., ks:ke, :]
            m = m_new
        out[..., qs:qe, :] = acc / np.where(l > 0, l, 1.0)[..., None]
        lse[..., qs:qe] = m + l
    return out, lse
"""),
_answer("flash.forward", "two",
        ("running output acc not rescaled by alpha", "no guard for queries without keys: division by 0"),
        (("acc", "rescal", "alpha", "output"), ("nan", "no key", "l == 0", "divide", "guard", "0"))
        , """
def flash_forward(Q, K, V, causal=False, block_q=16, block_k=16):
    T_q, T_k = Q.shape[-2], K.shape[-2]
    scale = 1.0 / np.sqrt(Q.shape[-1])
    lead = Q.shape[:-2]
    out = np.zeros(lead + (T_q, V.shape[-1]))
    lse = np.zeros(lead + (T_q,))
    with np.errstate(divide="ignore", invalid="ignore"):
        for q0 in range(0, T_q, block_q):
            Qi = Q[..., q0:q0 + block_q, :]
            rows = Qi.shape[-2]
            m, l = np.full(lead + (rows,), -np.inf), np.zeros(lead + (rows,))
            acc = np.zeros(lead + (rows, V.shape[-1]))
            stop = min(T_k, q0 + rows + T_k - T_q) if causal else T_k
            for k0 in range(0, max(stop, 0), block_k):
                S = Qi @ np.swapaxes(K[..., k0:k0 + block_k, :], -1, -2) * scale
                if causal:
                    position = np.arange(q0, q0 + rows)[:, None] + T_k - T_q
                    S = np.where(np.arange(k0, k0 + S.shape[-1]) <= position, S, -np.inf)
                m_new = np.maximum(m, S.max(axis=-1))
                shift = np.where(np.isfinite(m_new), m_new, 0.0)
                alpha = np.exp(m - shift)
                P = np.exp(S - shift[..., None])
                l = alpha * l + P.sum(axis=-1)
                acc = acc + P @ V[..., k0:k0 + block_k, :]
                m = m_new
            out[..., q0:q0 + rows, :] = acc / l[..., None]
            lse[..., q0:q0 + rows] = m + np.log(l)
    return out, lse
"""),
_answer("flash.forward", "two",
        ("scores scaled by 1/d_k instead of 1/sqrt(d_k)", "causal mask < instead of <=: the diagonal is hidden"),
        (("sqrt", "scale", "d_k"), ("diagonal", "<=", "causal", "itself", "mask"))
        , """
def flash_forward(Q, K, V, causal=False, block_q=16, block_k=16):
    T_q, T_k, d_k = Q.shape[-2], K.shape[-2], Q.shape[-1]
    lead = Q.shape[:-2]
    out = np.zeros(lead + (T_q, V.shape[-1]))
    lse = np.zeros(lead + (T_q,))
    for q0 in range(0, T_q, block_q):
        Qi = Q[..., q0:q0 + block_q, :]
        rows = Qi.shape[-2]
        m, l = np.full(lead + (rows,), -np.inf), np.zeros(lead + (rows,))
        acc = np.zeros(lead + (rows, V.shape[-1]))
        stop = min(T_k, q0 + rows + T_k - T_q) if causal else T_k
        for k0 in range(0, max(stop, 0), block_k):
            S = Qi @ np.swapaxes(K[..., k0:k0 + block_k, :], -1, -2) / d_k
            if causal:
                position = np.arange(q0, q0 + rows)[:, None] + T_k - T_q
                S = np.where(np.arange(k0, k0 + S.shape[-1]) < position, S, -np.inf)
            m_new = np.maximum(m, S.max(axis=-1))
            shift = np.where(np.isfinite(m_new), m_new, 0.0)
            alpha = np.exp(m - shift)
            P = np.exp(S - shift[..., None])
            l = alpha * l + P.sum(axis=-1)
            acc = alpha[..., None] * acc + P @ V[..., k0:k0 + block_k, :]
            m = m_new
        out[..., q0:q0 + rows, :] = acc / np.where(l == 0, 1.0, l)[..., None]
        with np.errstate(divide="ignore"):
            lse[..., q0:q0 + rows] = m + np.log(l)
    return out, lse
"""),
_answer("flash.backward", "two",
        ("delta taken as the row sum of dA * A within the tile instead of rowsum(dout * out)", "dK not scaled by 1/sqrt(d_k)"),
        (("delta", "row sum", "rowsum", "dout * out", "tile", "Delta"), ("dK", "sqrt", "scale"))
        , """
def flash_backward(dout, Q, K, V, out, lse, causal=False, block_q=16, block_k=16):
    T_q, T_k = Q.shape[-2], K.shape[-2]
    sc = 1.0 / np.sqrt(Q.shape[-1])
    L = np.where(np.isneginf(lse), np.inf, lse)
    dQ, dK, dV = np.zeros_like(Q), np.zeros_like(K), np.zeros_like(V)
    for qs in range(0, T_q, block_q):
        qe = min(qs + block_q, T_q)
        k_end = min(T_k, qe + T_k - T_q) if causal else T_k
        for ks in range(0, max(k_end, 0), block_k):
            ke = min(ks + block_k, T_k)
            s = Q[..., qs:qe, :] @ np.swapaxes(K[..., ks:ke, :], -1, -2) * sc
            if causal:
                ok = np.arange(ks, ke)[None, :] <= np.arange(qs, qe)[:, None] + T_k - T_q
                s = np.where(ok, s, -np.inf)
            a = np.exp(s - L[..., qs:qe, None])
            do = dout[..., qs:qe, :]
            dV[..., ks:ke, :] += np.swapaxes(a, -1, -2) @ do
            da = do @ np.swapaxes(V[..., ks:ke, :], -1, -2)
            ds = a * (da - (da * a).sum(axis=-1, keepdims=True))
            dQ[..., qs:qe, :] += ds @ K[..., ks:ke, :] * sc
            dK[..., ks:ke, :] += np.swapaxes(ds, -1, -2) @ Q[..., qs:qe, :]
    return dQ, dK, dV
"""),
_answer("flash.backward", "two",
        ("lse = -inf not replaced by +inf: NaN for queries without keys", "dQ not scaled by 1/sqrt(d_k)"),
        (("-inf", "inf", "nan", "no key", "lse"), ("dQ", "sqrt", "scale"))
        , """
def flash_backward(dout, Q, K, V, out, lse, causal=False, block_q=16, block_k=16):
    T_q, T_k = Q.shape[-2], K.shape[-2]
    scale = 1.0 / np.sqrt(Q.shape[-1])
    delta = np.sum(dout * out, axis=-1)
    dQ, dK, dV = np.zeros_like(Q), np.zeros_like(K), np.zeros_like(V)
    with np.errstate(invalid="ignore"):
        for q0 in range(0, T_q, block_q):
            Qi, dOi = Q[..., q0:q0 + block_q, :], dout[..., q0:q0 + block_q, :]
            rows = Qi.shape[-2]
            stop = min(T_k, q0 + rows + T_k - T_q) if causal else T_k
            for k0 in range(0, max(stop, 0), block_k):
                Kj, Vj = K[..., k0:k0 + block_k, :], V[..., k0:k0 + block_k, :]
                S = Qi @ np.swapaxes(Kj, -1, -2) * scale
                if causal:
                    position = np.arange(q0, q0 + rows)[:, None] + T_k - T_q
                    S = np.where(np.arange(k0, k0 + S.shape[-1]) <= position, S, -np.inf)
                A = np.exp(S - lse[..., q0:q0 + rows, None])
                dV[..., k0:k0 + block_k, :] += np.swapaxes(A, -1, -2) @ dOi
                dS = A * (dOi @ np.swapaxes(Vj, -1, -2) - delta[..., q0:q0 + rows, None])
                dQ[..., q0:q0 + rows, :] += dS @ Kj
                dK[..., k0:k0 + block_k, :] += np.swapaxes(dS, -1, -2) @ Qi * scale
    return dQ, dK, dV
"""),
_answer("flash.backward", "two",
        ("recomputed tiles not masked (causal skipping only)", "dK multiplied by sqrt(d_k) instead of divided"),
        (("mask", "causal", "diagonal", "tile", "future"), ("dK", "sqrt", "scale"))
        , """
def flash_backward(dout, Q, K, V, out, lse, causal=False, block_q=16, block_k=16):
    T_q, T_k, d_k = Q.shape[-2], K.shape[-2], Q.shape[-1]
    delta = (dout * out).sum(-1)
    lse = np.where(np.isfinite(lse), lse, np.inf)
    dQ, dK, dV = np.zeros_like(Q), np.zeros_like(K), np.zeros_like(V)
    for q0 in range(0, T_q, block_q):
        q1 = min(q0 + block_q, T_q)
        stop = min(T_k, q1 + T_k - T_q) if causal else T_k
        for k0 in range(0, max(stop, 0), block_k):
            k1 = min(k0 + block_k, T_k)
            S = Q[..., q0:q1, :] @ np.swapaxes(K[..., k0:k1, :], -1, -2) / np.sqrt(d_k)
            A = np.exp(S - lse[..., q0:q1, None])
            dV[..., k0:k1, :] += np.swapaxes(A, -1, -2) @ dout[..., q0:q1, :]
            dS = A * (dout[..., q0:q1, :] @ np.swapaxes(V[..., k0:k1, :], -1, -2) - delta[..., q0:q1, None])
            dQ[..., q0:q1, :] += dS @ K[..., k0:k1, :] / np.sqrt(d_k)
            dK[..., k0:k1, :] += np.swapaxes(dS, -1, -2) @ Q[..., q0:q1, :] * np.sqrt(d_k)
    return dQ, dK, dV
"""),
_answer("flash.online_softmax", "single",
        ("no guard for rows of -inf: NaN",),
        (("-inf", "nan", "guard", "masked", "inf"),), """
def online_softmax_stats(s, block_k):
    m = np.full(s.shape[:-1], -np.inf)
    l = np.zeros(s.shape[:-1])
    ms, ls = [], []
    with np.errstate(invalid="ignore"):
        for start in range(0, s.shape[-1], block_k):
            block = s[..., start:start + block_k]
            m_new = np.maximum(m, block.max(axis=-1))
            l = np.exp(m - m_new) * l + np.exp(block - m_new[..., None]).sum(axis=-1)
            m = m_new
            ms.append(m)
            ls.append(l)
    return np.stack(ms, axis=-1), np.stack(ls, axis=-1)
"""),
_answer("flash.forward", "single",
        ("lse = m + l instead of m + log l",),
        (("lse", "log"),), """
def flash_forward(Q, K, V, causal=False, block_q=16, block_k=16):
    T_q, T_k = Q.shape[-2], K.shape[-2]
    scale = 1.0 / np.sqrt(Q.shape[-1])
    lead = Q.shape[:-2]
    out = np.zeros(lead + (T_q, V.shape[-1]))
    lse = np.zeros(lead + (T_q,))
    for q0 in range(0, T_q, block_q):
        Qi = Q[..., q0:q0 + block_q, :]
        rows = Qi.shape[-2]
        m, l = np.full(lead + (rows,), -np.inf), np.zeros(lead + (rows,))
        acc = np.zeros(lead + (rows, V.shape[-1]))
        stop = min(T_k, q0 + rows + T_k - T_q) if causal else T_k
        for k0 in range(0, max(stop, 0), block_k):
            S = Qi @ np.swapaxes(K[..., k0:k0 + block_k, :], -1, -2) * scale
            if causal:
                position = np.arange(q0, q0 + rows)[:, None] + T_k - T_q
                S = np.where(np.arange(k0, k0 + S.shape[-1]) <= position, S, -np.inf)
            m_new = np.maximum(m, S.max(axis=-1))
            shift = np.where(np.isfinite(m_new), m_new, 0.0)
            alpha = np.exp(m - shift)
            P = np.exp(S - shift[..., None])
            l = alpha * l + P.sum(axis=-1)
            acc = alpha[..., None] * acc + P @ V[..., k0:k0 + block_k, :]
            m = m_new
        out[..., q0:q0 + rows, :] = acc / np.where(l == 0, 1.0, l)[..., None]
        lse[..., q0:q0 + rows] = m + l
    return out, lse
"""),
_answer("flash.forward", "single",
        ("causal offset T_k - T_q ignored",),
        (("causal", "offset", "T_k - T_q", "position", "align", "mask"),), """
def flash_forward(Q, K, V, causal=False, block_q=16, block_k=16):
    T_q, T_k = Q.shape[-2], K.shape[-2]
    scale = 1.0 / np.sqrt(Q.shape[-1])
    lead = Q.shape[:-2]
    out = np.zeros(lead + (T_q, V.shape[-1]))
    lse = np.zeros(lead + (T_q,))
    for q0 in range(0, T_q, block_q):
        Qi = Q[..., q0:q0 + block_q, :]
        rows = Qi.shape[-2]
        m, l = np.full(lead + (rows,), -np.inf), np.zeros(lead + (rows,))
        acc = np.zeros(lead + (rows, V.shape[-1]))
        stop = min(T_k, q0 + rows) if causal else T_k
        for k0 in range(0, stop, block_k):
            S = Qi @ np.swapaxes(K[..., k0:k0 + block_k, :], -1, -2) * scale
            if causal:
                position = np.arange(q0, q0 + rows)[:, None]
                S = np.where(np.arange(k0, k0 + S.shape[-1]) <= position, S, -np.inf)
            m_new = np.maximum(m, S.max(axis=-1))
            shift = np.where(np.isfinite(m_new), m_new, 0.0)
            alpha = np.exp(m - shift)
            P = np.exp(S - shift[..., None])
            l = alpha * l + P.sum(axis=-1)
            acc = alpha[..., None] * acc + P @ V[..., k0:k0 + block_k, :]
            m = m_new
        out[..., q0:q0 + rows, :] = acc / np.where(l == 0, 1.0, l)[..., None]
        with np.errstate(divide="ignore"):
            lse[..., q0:q0 + rows] = m + np.log(l)
    return out, lse
"""),
_answer("flash.backward", "single",
        ("dK not scaled by 1/sqrt(d_k)",),
        (("dK", "sqrt", "scale"),), """
def flash_backward(dout, Q, K, V, out, lse, causal=False, block_q=16, block_k=16):
    T_q, T_k = Q.shape[-2], K.shape[-2]
    scale = 1.0 / np.sqrt(Q.shape[-1])
    delta = np.sum(dout * out, axis=-1)
    lse = np.where(np.isfinite(lse), lse, np.inf)
    dQ, dK, dV = np.zeros_like(Q), np.zeros_like(K), np.zeros_like(V)
    for q0 in range(0, T_q, block_q):
        Qi, dOi = Q[..., q0:q0 + block_q, :], dout[..., q0:q0 + block_q, :]
        rows = Qi.shape[-2]
        stop = min(T_k, q0 + rows + T_k - T_q) if causal else T_k
        for k0 in range(0, max(stop, 0), block_k):
            Kj, Vj = K[..., k0:k0 + block_k, :], V[..., k0:k0 + block_k, :]
            S = Qi @ np.swapaxes(Kj, -1, -2) * scale
            if causal:
                position = np.arange(q0, q0 + rows)[:, None] + T_k - T_q
                S = np.where(np.arange(k0, k0 + S.shape[-1]) <= position, S, -np.inf)
            A = np.exp(S - lse[..., q0:q0 + rows, None])
            dV[..., k0:k0 + block_k, :] += np.swapaxes(A, -1, -2) @ dOi
            dS = A * (dOi @ np.swapaxes(Vj, -1, -2) - delta[..., q0:q0 + rows, None])
            dQ[..., q0:q0 + rows, :] += dS @ Kj * scale
            dK[..., k0:k0 + block_k, :] += np.swapaxes(dS, -1, -2) @ Qi
    return dQ, dK, dV
"""),
_answer("flash.backward", "single",
        ("recomputed tiles not masked",),
        (("mask", "causal", "diagonal", "tile", "future"),), """
def flash_backward(dout, Q, K, V, out, lse, causal=False, block_q=16, block_k=16):
    T_q, T_k = Q.shape[-2], K.shape[-2]
    scale = 1.0 / np.sqrt(Q.shape[-1])
    delta = np.sum(dout * out, axis=-1)
    lse = np.where(np.isfinite(lse), lse, np.inf)
    dQ, dK, dV = np.zeros_like(Q), np.zeros_like(K), np.zeros_like(V)
    for q0 in range(0, T_q, block_q):
        Qi, dOi = Q[..., q0:q0 + block_q, :], dout[..., q0:q0 + block_q, :]
        rows = Qi.shape[-2]
        stop = min(T_k, q0 + rows + T_k - T_q) if causal else T_k
        for k0 in range(0, max(stop, 0), block_k):
            Kj, Vj = K[..., k0:k0 + block_k, :], V[..., k0:k0 + block_k, :]
            A = np.exp(Qi @ np.swapaxes(Kj, -1, -2) * scale - lse[..., q0:q0 + rows, None])
            dV[..., k0:k0 + block_k, :] += np.swapaxes(A, -1, -2) @ dOi
            dS = A * (dOi @ np.swapaxes(Vj, -1, -2) - delta[..., q0:q0 + rows, None])
            dQ[..., q0:q0 + rows, :] += dS @ Kj * scale
            dK[..., k0:k0 + block_k, :] += np.swapaxes(dS, -1, -2) @ Qi * scale
    return dQ, dK, dV
"""),
]


CORRECT = [
_answer("warmup.softmax", "correct", (), (), """
def softmax(z, axis=-1):
    z = np.moveaxis(np.asarray(z), axis, -1)
    shifted = z - z.max(axis=-1)[..., None]
    e = np.exp(shifted)
    s = e / e.sum(axis=-1)[..., None]
    return np.moveaxis(s, -1, axis)
"""),
_answer("warmup.softmax_jvp", "correct", (), (), """
def softmax_jvp(s, g, axis=-1):
    sg = s * g
    return sg - s * sg.sum(axis=axis, keepdims=True)
"""),
_answer("lm.count_ngrams", "correct", (), (), """
def count_ngrams(idx, n, vocab_size):
    idx = np.asarray(idx)
    counts = np.zeros((vocab_size,) * n, dtype=np.int64)
    if len(idx) < n:
        return counts
    windows = np.lib.stride_tricks.sliding_window_view(idx, n)   # (T - n + 1, n)
    np.add.at(counts, tuple(windows.T), 1)
    return counts
"""),
_answer("lm.roll_die", "correct", (), (), """
def roll_die(weights, u):
    B, V = weights.shape
    faces = np.empty(B, dtype=np.int64)
    for b in range(B):
        cdf = np.cumsum(weights[b]) / weights[b].sum()
        faces[b] = min(np.searchsorted(cdf, u[b], side="right"), V - 1)
    return faces
"""),
_answer("lm.perplexity", "correct", (), (), """
def perplexity(probs, targets):
    p = np.take_along_axis(probs, np.asarray(targets)[:, None], axis=1)[:, 0]
    bpc = -np.mean(np.log2(p))
    return 2.0 ** bpc, bpc
"""),
_answer("attention.causal_mask", "correct", (), (), """
def causal_mask(T):
    i = np.arange(T)
    return i[None, :] <= i[:, None]
"""),
_answer("attention.forward", "correct", (), (), """
def attention_forward(Q, K, V, mask=None):
    scores = np.einsum("...qd,...kd->...qk", Q, K) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    row_max = scores.max(axis=-1, keepdims=True)
    row_max[~np.isfinite(row_max)] = 0.0
    w = np.exp(scores - row_max)
    norm = w.sum(axis=-1, keepdims=True)
    norm[norm == 0] = 1.0
    A = w / norm
    return A @ V, A
"""),
_answer("positional.sinusoidal", "correct", (), (), """
def sinusoidal_encoding(positions, d_model):
    t = np.asarray(positions, dtype=float)
    omega = np.exp(-np.log(10000.0) * np.arange(0, d_model, 2) / d_model)
    ang = t[:, None] * omega[None, :]
    return np.stack([np.sin(ang), np.cos(ang)], axis=-1).reshape(len(t), d_model)
"""),
_answer("positional.rope", "correct", (), (), """
def apply_rope(x, positions):
    d = x.shape[-1]
    theta = np.asarray(positions, dtype=float)[:, None] / 10000 ** (np.arange(0, d, 2) / d)
    z = (x[..., 0::2] + 1j * x[..., 1::2]) * np.exp(1j * theta)
    out = np.stack([z.real, z.imag], axis=-1)
    return out.reshape(out.shape[:-2] + (d,))
"""),
_answer("layernorm.forward", "correct", (), (), """
def layernorm_forward(x, gamma, beta, eps=1e-5):
    d = x.shape[-1]
    centred = x - x.sum(axis=-1, keepdims=True) / d
    var = (centred * centred).sum(axis=-1, keepdims=True) / d
    x_hat = centred / np.sqrt(var + eps)
    return x_hat * gamma + beta, (x_hat, var, eps, gamma)
"""),
_answer("encdec.shift_right", "correct", (), (), """
def decoder_input_and_target(target_ids, bos=1, eos=2):
    y = np.array(target_ids, dtype=np.int64)
    return np.insert(y, 0, bos), np.append(y, eos)
"""),
_answer("encdec.greedy", "correct", (), (), """
def greedy_decode(next_log_probs, bos=1, eos=2, max_len=10):
    out = []
    while len(out) < max_len:
        logp = next_log_probs(np.array([[bos] + out], dtype=np.int64))
        out.append(int(logp[0].argmax()))
        if out[-1] == eos:
            break
    return np.array(out, dtype=np.int64)
"""),
_answer("scaling.param_count", "correct", (), (), """
def param_count(n_layers, d_model, n_heads, vocab_size, n_ctx, d_ff, tied):
    d = d_model
    linear = lambda n_in, n_out: n_in * n_out + n_out          # a weight and its bias
    block = 4 * linear(d, d) + linear(d, d_ff) + linear(d_ff, d) + 2 * (2 * d)
    embeddings = vocab_size * d + n_ctx * d
    head = 0 if tied else vocab_size * d
    return int(n_layers * block + 2 * d + embeddings + head)
"""),
_answer("flash.online_softmax", "correct", (), (), """
def online_softmax_stats(s, block_k):
    T_k = s.shape[-1]
    n_blocks = -(-T_k // block_k)
    m_hist = np.empty(s.shape[:-1] + (n_blocks,))
    l_hist = np.empty(s.shape[:-1] + (n_blocks,))
    m = np.full(s.shape[:-1], -np.inf)
    l = np.zeros(s.shape[:-1])
    for b in range(n_blocks):
        chunk = s[..., b * block_k:(b + 1) * block_k]
        m_next = np.maximum(m, np.max(chunk, axis=-1))
        ref = np.where(m_next == -np.inf, 0.0, m_next)
        l = l * np.exp(m - ref) + np.sum(np.exp(chunk - ref[..., None]), axis=-1)
        m = m_next
        m_hist[..., b], l_hist[..., b] = m, l
    return m_hist, l_hist
"""),
_answer("flash.forward", "correct", (), (), """
def flash_forward(Q, K, V, causal=False, block_q=16, block_k=16):
    Tq, Tk, dk = Q.shape[-2], K.shape[-2], Q.shape[-1]
    dv = V.shape[-1]
    batch = Q.shape[:-2]
    out = np.zeros(batch + (Tq, dv))
    lse = np.full(batch + (Tq,), -np.inf)
    for qs in range(0, Tq, block_q):
        qe = min(qs + block_q, Tq)
        q = Q[..., qs:qe, :]
        n = qe - qs
        m = np.full(batch + (n,), -np.inf)
        l = np.zeros(batch + (n,))
        acc = np.zeros(batch + (n, dv))
        k_end = min(Tk, qe + Tk - Tq) if causal else Tk
        for ks in range(0, max(k_end, 0), block_k):
            ke = min(ks + block_k, Tk)
            s = q @ np.swapaxes(K[..., ks:ke, :], -1, -2) / np.sqrt(dk)
            if causal:
                qpos = np.arange(qs, qe)[:, None] + (Tk - Tq)
                s = np.where(np.arange(ks, ke)[None, :] <= qpos, s, -np.inf)
            m_new = np.maximum(m, s.max(axis=-1))
            base = np.where(np.isfinite(m_new), m_new, 0.0)
            alpha = np.exp(m - base)
            p = np.exp(s - base[..., None])
            l = alpha * l + p.sum(axis=-1)
            acc = alpha[..., None] * acc + p @ V[..., ks:ke, :]
            m = m_new
        out[..., qs:qe, :] = acc / np.where(l > 0, l, 1.0)[..., None]
        with np.errstate(divide="ignore"):
            lse[..., qs:qe] = m + np.log(l)
    return out, lse
"""),
]
