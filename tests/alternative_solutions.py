"""Correct solutions written differently from the instructor's, which must score full marks.

A learner who gets an exercise right by another road (einsum instead of matmul, Python loops
instead of vectorised code, recursion, float32 inside, -1e9 or ``np.finfo.min`` instead of
-inf as the masking constant, the row form of a column-form exercise, ...) must get every
point and the plain "All N cases match the reference." line, never a diagnosis. Each entry
of ``ALTERNATIVES`` is the whole solution cell such a learner would write, in place of the
instructor's cell of ``solutions/`` (``solution_cells.verdict_with`` grades it with the rest
of the notebook's code as written); ``test_alternative_solutions.py`` grades them all.

The cells run as a graded notebook runs them: numpy as ``np`` and what the notebook's set-up
cell and its other solution cells define; neither torch nor the course_lib module that
computes the exercise's answer is available.
"""
from __future__ import annotations

import textwrap

from autograder.exercises import get
from learner_code import LearnerCode


def _alt(exercise: str, how: str, source: str) -> LearnerCode:
    """``how``: how it differs from the instructor's solution, in words; ``source``: the whole
    solution cell as the learner would write it (dedented here)."""
    return LearnerCode(exercise=exercise, what=(), how=how, source=textwrap.dedent(source).strip() + "\n",
                       full_marks=True)


# ===================================================================== 00 start here
N00 = [
    _alt("warmup.softmax", "scipy-free log-sum-exp: exp(z - logsumexp(z))", """
        def softmax(z, axis=-1):
            \"\"\"Numerically stable softmax of z along axis. Shape in = shape out.\"\"\"
            m = np.max(z, axis=axis, keepdims=True)
            lse = m + np.log(np.sum(np.exp(z - m), axis=axis, keepdims=True))
            return np.exp(z - lse)
        """),
    _alt("warmup.softmax", "explicit Python loop over the slices along axis, math.exp on scalars", """
        import math

        def softmax(z, axis=-1):
            \"\"\"Numerically stable softmax of z along axis. Shape in = shape out.\"\"\"
            moved = np.moveaxis(np.asarray(z, dtype=float), axis, -1)
            out = np.empty_like(moved)
            for index in np.ndindex(moved.shape[:-1]):
                row = moved[index]
                top = max(row)
                e = [math.exp(v - top) for v in row]
                total = sum(e)
                out[index] = [v / total for v in e]
            return np.moveaxis(out, -1, axis)
        """),
    _alt("warmup.softmax", "float32 inside: the shifted logits exponentiated in float32", """
        def softmax(z, axis=-1):
            \"\"\"Numerically stable softmax of z along axis. Shape in = shape out.\"\"\"
            shifted = (z - np.max(z, axis=axis, keepdims=True)).astype(np.float32)
            e = np.exp(shifted)
            return e / np.sum(e, axis=axis, keepdims=True)
        """),
    _alt("warmup.softmax_jvp", "the explicit Jacobian diag(s) - s s^T of each slice, applied with einsum", """
        def softmax_jvp(s, g, axis=-1):
            \"\"\"dL/dz = s * (g - sum(g * s along axis)). s, g and the result share one shape.\"\"\"
            s_last, g_last = np.moveaxis(s, axis, -1), np.moveaxis(g, axis, -1)
            n = s_last.shape[-1]
            J = np.eye(n) * s_last[..., None, :] - s_last[..., :, None] * s_last[..., None, :]
            return np.moveaxis(np.einsum("...ij,...j->...i", J, g_last), -1, axis)
        """),
    _alt("warmup.softmax_jvp", "another order of operations: s * g minus s times its sum", """
        def softmax_jvp(s, g, axis=-1):
            \"\"\"dL/dz = s * (g - sum(g * s along axis)). s, g and the result share one shape.\"\"\"
            sg = s * g
            return sg - s * sg.sum(axis=axis, keepdims=True)
        """),
]

# ===================================================================== 01 language models
N01 = [
    _alt("lm.count_ngrams", "vectorised: sliding windows and np.add.at instead of a loop", """
        def count_ngrams(idx, n, vocab_size):
            \"\"\"counts (vocab_size,) * n of int: how often each n-gram occurs.\"\"\"
            counts = np.zeros((vocab_size,) * n, dtype=np.int64)
            if len(idx) >= n:
                windows = np.lib.stride_tricks.sliding_window_view(np.asarray(idx), n)
                np.add.at(counts, tuple(windows.T), 1)
            return counts
        """),
    _alt("lm.count_ngrams", "flat indices: np.ravel_multi_index and np.bincount", """
        def count_ngrams(idx, n, vocab_size):
            \"\"\"counts (vocab_size,) * n of int: how often each n-gram occurs.\"\"\"
            idx = np.asarray(idx)
            last = len(idx) - n + 1                  # number of n-grams
            columns = [idx[j:j + last] for j in range(n)]
            flat = np.ravel_multi_index(columns, (vocab_size,) * n)
            return np.bincount(flat, minlength=vocab_size ** n).reshape((vocab_size,) * n)
        """),
    _alt("lm.ngram_probs", "plain division under np.errstate, unseen contexts filled by np.where", """
        def ngram_probs(counts, k=0.0):
            \"\"\"Add-k probabilities; a context with no counts gets 1 / vocab_size.\"\"\"
            num = np.asarray(counts, dtype=float) + k
            total = num.sum(axis=-1, keepdims=True)
            with np.errstate(invalid="ignore", divide="ignore"):
                probs = num / total
            return np.where(total == 0, 1.0 / num.shape[-1], probs)
        """),
    _alt("lm.roll_die", "a loop over the rows with np.searchsorted", """
        def roll_die(weights, u):
            \"\"\"One roll per row: the smallest face whose cumulative probability exceeds u.\"\"\"
            faces = np.empty(len(u), dtype=np.int64)
            for b in range(len(u)):
                cdf = np.cumsum(weights[b]) / np.sum(weights[b])
                faces[b] = min(np.searchsorted(cdf, u[b], side="right"), len(cdf) - 1)
            return faces
        """),
    _alt("lm.perplexity", "math instead of numpy for the scalars, a generator over the targets", """
        def perplexity(probs, targets):
            \"\"\"(ppl, bpc) of the targets under the model: exp(mean nll) and mean nll / ln 2.\"\"\"
            nll = -sum(math.log(probs[t, y]) for t, y in enumerate(targets)) / len(targets)
            return math.exp(nll), nll / math.log(2)
        """),
    _alt("lm.rnn_forward", "einsum; every input projection at once, states stacked from a list", """
        def rnn_forward(x, h0, Wxh, Whh, b):
            \"\"\"Elman RNN over T steps: h_t = tanh(x_t Wxh + h_{t-1} Whh + b).\"\"\"
            inputs = np.einsum("btd,dh->bth", x, Wxh) + b
            states, h = [], h0
            for t in range(x.shape[1]):
                h = np.tanh(inputs[:, t] + np.einsum("bk,kh->bh", h, Whh))
                states.append(h)
            h = np.stack(states, axis=1)
            return h, (x, h0, Wxh, Whh, h)
        """),
    _alt("lm.rnn_backward", "the loop only carries the gradient back; the weight gradients are "
         "summed over time afterwards with einsum", """
        def rnn_backward(dh, cache):
            \"\"\"Backpropagation through time for rnn_forward.\"\"\"
            x, h0, Wxh, Whh, h = cache
            h_prev = np.concatenate([h0[:, None], h[:, :-1]], axis=1)  # (B, T, H)
            da = np.zeros_like(h)
            carry = np.zeros_like(h0)
            for t in range(h.shape[1] - 1, -1, -1):
                da[:, t] = (dh[:, t] + carry) * (1 - h[:, t] ** 2)
                carry = da[:, t] @ Whh.T
            dx = np.einsum("bth,dh->btd", da, Wxh)
            dWxh = np.einsum("btd,bth->dh", x, da)
            dWhh = np.einsum("btk,bth->kh", h_prev, da)
            return dx, carry, dWxh, dWhh, da.sum(axis=(0, 1))
        """),
    _alt("lm.lstm_cell", "W split by rows instead of concatenating [h, x]; np.split into gates; "
         "sigmoid written with tanh", """
        def lstm_cell_forward(x, h_prev, c_prev, W, b):
            \"\"\"One LSTM step: gates i, f, o and candidate c_tilde from [h_prev, x] W + b, then c and h.\"\"\"
            H = h_prev.shape[1]
            z = h_prev @ W[:H] + x @ W[H:] + b
            i, f, o, c_tilde = np.split(z, 4, axis=1)
            sigmoid = lambda v: 0.5 * (1.0 + np.tanh(0.5 * v))
            c = sigmoid(f) * c_prev + sigmoid(i) * np.tanh(c_tilde)
            return sigmoid(o) * np.tanh(c), c
        """),
]

# ===================================================================== 02 attention
N02 = [
    _alt("attention.forward", "einsum instead of matmul; masked scores set to -1e9 and fully "
         "masked queries zeroed with np.where", """
        def attention_forward(Q, K, V, mask=None):
            \"\"\"Scaled dot-product attention. Returns out and the weights A.\"\"\"
            S = np.einsum("...qd,...kd->...qk", Q, K) / np.sqrt(Q.shape[-1])
            if mask is not None:
                S = np.where(mask, S, -1e9)
            e = np.exp(S - S.max(axis=-1, keepdims=True))
            A = e / e.sum(axis=-1, keepdims=True)
            if mask is not None:
                seen = np.broadcast_to(mask, A.shape).any(axis=-1, keepdims=True)
                A = np.where(seen, A, 0.0)
            return np.einsum("...qk,...kv->...qv", A, V), A
        """),
    _alt("attention.forward", "np.finfo(float).min as the masking constant; fully masked "
         "queries zeroed by boolean indexing", """
        def attention_forward(Q, K, V, mask=None):
            \"\"\"Scaled dot-product attention. Returns out and the weights A.\"\"\"
            S = Q @ K.swapaxes(-1, -2) / np.sqrt(Q.shape[-1])
            if mask is not None:
                mask = np.broadcast_to(mask, S.shape)
                S = np.where(mask, S, np.finfo(S.dtype).min)
            e = np.exp(S - S.max(axis=-1, keepdims=True))
            A = e / e.sum(axis=-1, keepdims=True)
            if mask is not None:
                A[~mask.any(axis=-1)] = 0.0
            return A @ V, A
        """),
    _alt("attention.forward", "scipy-free log-sum-exp: A = exp(S - lse); queries with no key "
         "(lse = -inf) get 0 through np.where", """
        def attention_forward(Q, K, V, mask=None):
            \"\"\"Scaled dot-product attention. Returns out and the weights A.\"\"\"
            S = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
            if mask is not None:
                S = np.where(mask, S, -np.inf)
            m = S.max(axis=-1, keepdims=True)
            m = np.where(np.isfinite(m), m, 0.0)
            with np.errstate(divide="ignore"):
                lse = m + np.log(np.exp(S - m).sum(axis=-1, keepdims=True))
            seen = np.isfinite(lse)
            A = np.where(seen, np.exp(S - np.where(seen, lse, 0.0)), 0.0)
            return A @ V, A
        """),
    _alt("attention.causal_mask", "index comparison instead of np.tril", """
        def causal_mask(T):
            \"\"\"Boolean (T, T): True on and below the diagonal.\"\"\"
            return np.arange(T)[:, None] >= np.arange(T)[None, :]
        """),
    _alt("attention.padding_mask", "a Python loop filling a boolean array", """
        def padding_mask(lengths, T):
            \"\"\"Boolean (B, 1, T): True for the real tokens of each sequence, False for padding.\"\"\"
            mask = np.zeros((len(lengths), 1, T), dtype=bool)
            for b, length in enumerate(lengths):
                mask[b, 0, :length] = True
            return mask
        """),
    _alt("attention.backward", "einsum throughout; softmax backward as A * dA - A * rowsum", """
        def attention_backward(dout, Q, K, V, A):
            \"\"\"Gradients of attention_forward. Returns dQ, dK, dV shaped like Q, K, V.\"\"\"
            scale = 1.0 / np.sqrt(Q.shape[-1])
            dA = np.einsum("...qv,...kv->...qk", dout, V)
            dS = A * dA - A * np.einsum("...qk,...qk->...q", A, dA)[..., None]
            dQ = np.einsum("...qk,...kd->...qd", dS, K) * scale
            dK = np.einsum("...qk,...qd->...kd", dS, Q) * scale
            dV = np.einsum("...qk,...qv->...kv", A, dout)
            return dQ, dK, dV
        """),
    _alt("attention.backward_col", "each gradient on its own instead of the stacked P matrix; "
         "column sums broadcast without keepdims", """
        def attention_backward_col(E, X, A, B, C, Att):
            \"\"\"The blog post's backward in its own letters. Returns dA, dB, dC (h, d) and dX (d, T).\"\"\"
            scale = 1.0 / np.sqrt(A.shape[0])
            Q, K, V = A @ X, B @ X, C @ X
            g = V.T @ E                                   # dF/dAtt
            G = Att * g - Att * np.sum(Att * g, axis=0)   # each column is one softmax
            dQ, dK, dV = K @ G.T * scale, Q @ G * scale, E @ Att.T
            dX = A.T @ dQ + B.T @ dK + C.T @ dV
            return dQ @ X.T, dK @ X.T, dV @ X.T, dX
        """),
    _alt("attention.backward_col", "the row form inside: transposed to rows, the row-form "
         "backward, transposed back", """
        def attention_backward_col(E, X, A, B, C, Att):
            \"\"\"The blog post's backward in its own letters. Returns dA, dB, dC (h, d) and dX (d, T).\"\"\"
            scale = 1.0 / np.sqrt(A.shape[0])
            Xr = X.T                                # (T, d): a row per position
            Qr, Kr, Vr = Xr @ A.T, Xr @ B.T, Xr @ C.T
            W, dO = Att.T, E.T                      # row t: output t and its weights
            dW = dO @ Vr.T
            dS = W * (dW - np.sum(dW * W, axis=-1, keepdims=True))
            dKr = dS @ Qr * scale                   # k_t plays the query of output t
            dQr = dS.T @ Kr * scale
            dVr = W.T @ dO
            dX = (dQr @ A + dKr @ B + dVr @ C).T
            return dQr.T @ Xr, dKr.T @ Xr, dVr.T @ Xr, dX
        """),
    _alt("attention.split_heads", "reshape + transpose(0, 2, 1, 3) instead of swapaxes", """
        def split_heads(x, n_heads):
            \"\"\"(B, T, d_model) -> (B, n_heads, T, d_k).\"\"\"
            B, T, d_model = x.shape
            return x.reshape(B, T, n_heads, d_model // n_heads).transpose(0, 2, 1, 3)
        """),
    _alt("attention.split_heads", "a Python loop over the heads' column slices, np.stack", """
        def split_heads(x, n_heads):
            \"\"\"(B, T, d_model) -> (B, n_heads, T, d_k).\"\"\"
            d_k = x.shape[-1] // n_heads
            return np.stack([x[..., j * d_k:(j + 1) * d_k] for j in range(n_heads)], axis=1)
        """),
    _alt("attention.multi_head", "a Python loop over the heads on column slices of the weights", """
        def multi_head_attention(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
            \"\"\"Multi-head (cross-)attention. Returns out (B, T_q, d_model), A (B, n_heads, T_q, T_k).\"\"\"
            d_k, d_v = W_q.shape[1] // n_heads, W_v.shape[1] // n_heads
            B, T_q, T_k = x_q.shape[0], x_q.shape[1], x_kv.shape[1]
            heads, weights = [], []
            for j in range(n_heads):
                q = x_q @ W_q[:, j * d_k:(j + 1) * d_k]
                k = x_kv @ W_k[:, j * d_k:(j + 1) * d_k]
                v = x_kv @ W_v[:, j * d_v:(j + 1) * d_v]
                m = None if mask is None else np.broadcast_to(mask, (B, n_heads, T_q, T_k))[:, j]
                out, A = attention_forward(q, k, v, m)
                heads.append(out)
                weights.append(A)
            return np.concatenate(heads, axis=-1) @ W_o, np.stack(weights, axis=1)
        """),
    _alt("attention.multi_head", "heads split and merged inline with reshape + np.moveaxis, "
         "einsum for the projections", """
        def multi_head_attention(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
            \"\"\"Multi-head (cross-)attention. Returns out (B, T_q, d_model), A (B, n_heads, T_q, T_k).\"\"\"
            def heads(x, W):
                y = np.einsum("btd,de->bte", x, W)
                return np.moveaxis(y.reshape(y.shape[0], y.shape[1], n_heads, -1), 2, 1)
            out, A = attention_forward(heads(x_q, W_q), heads(x_kv, W_k), heads(x_kv, W_v), mask)
            B, _, T_q, _ = out.shape
            return np.moveaxis(out, 1, 2).reshape(B, T_q, -1) @ W_o, A
        """),
]

# ===================================================================== 03 positional encoding
N03 = [
    _alt("positional.sinusoidal", "omega from exp and log; sin and cos stacked on a new axis and "
         "reshaped to interleave", """
        def sinusoidal_encoding(positions, d_model):
            \"\"\"P (T, d_model): P[:, 2i] = sin(omega_i t), P[:, 2i+1] = cos(omega_i t).\"\"\"
            t = np.asarray(positions, dtype=float)[:, None]
            omega = np.exp(-np.log(10000.0) * np.arange(0, d_model, 2) / d_model)
            angles = t * omega
            return np.stack([np.sin(angles), np.cos(angles)], axis=-1).reshape(len(t), d_model)
        """),
    _alt("positional.sinusoidal", "two nested Python loops with math.sin and math.cos", """
        import math

        def sinusoidal_encoding(positions, d_model):
            \"\"\"P (T, d_model): P[:, 2i] = sin(omega_i t), P[:, 2i+1] = cos(omega_i t).\"\"\"
            P = np.zeros((len(positions), d_model))
            for row, t in enumerate(positions):
                for k in range(d_model // 2):
                    angle = float(t) / 10000 ** (2 * k / d_model)
                    P[row, 2 * k] = math.sin(angle)
                    P[row, 2 * k + 1] = math.cos(angle)
            return P
        """),
    _alt("positional.rotation", "a loop over the 2x2 blocks, each written out with math", """
        import math

        def rotation_matrix(tau, d_model):
            \"\"\"A(tau) (d_model, d_model): block diagonal, block i = [[cos, sin], [-sin, cos]](omega_i tau).\"\"\"
            A = np.zeros((d_model, d_model))
            for i in range(d_model // 2):
                theta = tau / 10000 ** (2 * i / d_model)
                c, s = math.cos(theta), math.sin(theta)
                A[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[c, s], [-s, c]]
            return A
        """),
    _alt("positional.rope", "complex numbers: each pair x_2i, x_2i+1 as x_2i + 1j x_2i+1, times e^(1j theta)", """
        def apply_rope(x, positions):
            \"\"\"Row t of x (..., T, d) rotated by R(positions[t]) = A(-positions[t]).\"\"\"
            d = x.shape[-1]
            theta = np.asarray(positions, dtype=float)[:, None] / 10000 ** (np.arange(0, d, 2) / d)
            z = (x[..., 0::2] + 1j * x[..., 1::2]) * np.exp(1j * theta)
            out = np.empty(z.shape[:-1] + (d,))
            out[..., 0::2], out[..., 1::2] = z.real, z.imag
            return out
        """),
    _alt("positional.rope", "the rotation matrices A(-t) of the cell above, applied with einsum", """
        def apply_rope(x, positions):
            \"\"\"Row t of x (..., T, d) rotated by R(positions[t]) = A(-positions[t]).\"\"\"
            R = np.stack([rotation_matrix(-t, x.shape[-1]) for t in positions])  # (T, d, d)
            return np.einsum("tij,...tj->...ti", R, x)
        """),
]

# ===================================================================== 04 layer norm
N04 = [
    _alt("layernorm.forward", "variance as the mean of squared deviations, times the reciprocal "
         "of the standard deviation", """
        def layernorm_forward(x, gamma, beta, eps=1e-5):
            \"\"\"out (..., d_model) = gamma * (x - mean) / sqrt(var + eps) + beta; and a cache.\"\"\"
            centred = x - np.mean(x, axis=-1, keepdims=True)
            var = np.mean(centred ** 2, axis=-1, keepdims=True)
            x_hat = centred * (1.0 / np.sqrt(var + eps))
            return x_hat * gamma + beta, (x_hat, var, eps, gamma)
        """),
    _alt("layernorm.forward", "a Python loop over the vectors with math.fsum and math.sqrt", """
        import math

        def layernorm_forward(x, gamma, beta, eps=1e-5):
            \"\"\"out (..., d_model) = gamma * (x - mean) / sqrt(var + eps) + beta; and a cache.\"\"\"
            x_hat = np.empty(x.shape)
            var = np.empty(x.shape[:-1] + (1,))
            n = x.shape[-1]
            for i in np.ndindex(x.shape[:-1]):
                mu = math.fsum(x[i]) / n
                v = math.fsum((a - mu) ** 2 for a in x[i]) / n
                x_hat[i] = [(a - mu) / math.sqrt(v + eps) for a in x[i]]
                var[i] = v
            return gamma * x_hat + beta, (x_hat, var, eps, gamma)
        """),
    _alt("layernorm.backward", "the staged chain rule through the variance and the mean", """
        def layernorm_backward(dout, cache):
            \"\"\"dout (..., d_model) -> dx (..., d_model), dgamma (d_model,), dbeta (d_model,).\"\"\"
            x_hat, var, eps, gamma = cache
            n = x_hat.shape[-1]
            std = np.sqrt(var + eps)
            lead = tuple(range(dout.ndim - 1))
            dxhat = dout * gamma
            centred = x_hat * std                                   # x - mean
            dvar = np.sum(dxhat * centred, axis=-1, keepdims=True) * -0.5 / std ** 3
            dmu = -np.sum(dxhat, axis=-1, keepdims=True) / std \\
                - 2.0 * dvar * np.mean(centred, axis=-1, keepdims=True)
            dx = dxhat / std + dvar * 2.0 * centred / n + dmu / n
            return dx, np.sum(dout * x_hat, axis=lead), np.sum(dout, axis=lead)
        """),
    _alt("layernorm.ffn", "einsum instead of matmul, ReLU as np.where", """
        def ffn_forward(x, W1, b1, W2, b2):
            \"\"\"out (..., d_model) = ReLU(x W1 + b1) W2 + b2, and a cache.\"\"\"
            pre = np.einsum("...i,ij->...j", x, W1) + b1
            h = np.where(pre > 0, pre, 0.0)
            return np.einsum("...j,jk->...k", h, W2) + b2, (x, h)
        """),
    _alt("layernorm.post_ln", "step by step, the residual sum named and the tuples unpacked", """
        def post_ln_block(x, W1, b1, W2, b2, gamma, beta):
            \"\"\"Post-LN: LN(x + FFN(x)). x (..., d_model) -> (..., d_model).\"\"\"
            sub, _ = ffn_forward(x, W1, b1, W2, b2)
            residual = sub + x
            out, _ = layernorm_forward(residual, gamma, beta)
            return out
        """),
    _alt("layernorm.pre_ln", "the residual added first and the sublayer's output added to it", """
        def pre_ln_block(x, W1, b1, W2, b2, gamma, beta):
            \"\"\"Pre-LN: x + FFN(LN(x)). x (..., d_model) -> (..., d_model).\"\"\"
            out = x.copy()
            out += ffn_forward(layernorm_forward(x, gamma, beta)[0], W1, b1, W2, b2)[0]
            return out
        """),
]

# ===================================================================== 05 encoder-decoder
N05 = [
    _alt("encdec.bpe_merges", "collections.Counter for the pairs, max with a key that breaks "
         "ties towards the smallest pair (the given merge_pair kept as it is)", """
        from collections import Counter


        def merge_pair(word, pair, new_id):
            \"\"\"Given: word (a sequence of ids) -> list of ids, with every occurrence of pair, scanned
            left to right, replaced by new_id.\"\"\"
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
            \"\"\"Learn BPE merges. Returns merges (n_pairs, 2) int, n_pairs <= n_merges.\"\"\"
            words = [[int(t) for t in w] for w in words]
            merges = []
            for i in range(n_merges):
                pairs = Counter()
                for word, n in zip(words, counts):
                    for a, b in zip(word[:-1], word[1:]):
                        pairs[a, b] += int(n)
                if not pairs:
                    break
                best = max(pairs, key=lambda p: (pairs[p], -p[0], -p[1]))
                merges.append(best)
                words = [merge_pair(w, best, first_id + i) for w in words]
            return np.array(merges, dtype=np.int64).reshape(len(merges), 2)
        """),
    _alt("encdec.bpe_encode", "recursion: apply the first merge, then encode with the rest", """
        def bpe_encode(ids, merges, first_id=259):
            \"\"\"One chunk ids (L,) int -> its tokens (L',) int: merges[0] first, then merges[1], ...\"\"\"
            if len(merges) == 0:
                return np.array(ids, dtype=np.int64)
            return bpe_encode(merge_pair(list(ids), merges[0], first_id), merges[1:], first_id + 1)
        """),
    _alt("encdec.shift_right", "np.insert and np.append", """
        def decoder_input_and_target(target_ids, bos=1, eos=2):
            \"\"\"target_ids [y1 .. yn] -> tgt_in [bos, y1 .. yn], tgt_out [y1 .. yn, eos].\"\"\"
            y = np.asarray(target_ids, dtype=np.int64)
            return np.insert(y, 0, bos), np.append(y, eos)
        """),
    _alt("encdec.masks", "index comparison for the causal part, np.logical_and, reshape", """
        def attention_masks(src, tgt_in, pad_id=0):
            \"\"\"Boolean masks, True = may attend: enc_mask, cross_mask (B, 1, 1, S), dec_mask (B, 1, T, T).\"\"\"
            B, S = src.shape
            T = tgt_in.shape[1]
            keys = (src != pad_id).reshape(B, 1, 1, S)
            causal = np.arange(T)[:, None] >= np.arange(T)[None, :]
            dec = np.logical_and(causal[None, None], (tgt_in != pad_id).reshape(B, 1, 1, T))
            return keys, keys.copy(), dec
        """),
    _alt("encdec.encoder_block", "the sublayer outputs named, the tuples unpacked, the residual "
         "added the other way round", """
        def encoder_block(x, p, n_heads, mask=None):
            \"\"\"Post-LN encoder block: x -> LN(x + SelfAttn(x)) -> LN(. + FFN(.)).\"\"\"
            attn, _ = mha_forward(x, x, *p["self_attn"], n_heads, mask)
            h, _ = layernorm_forward(attn + x, *p["norm1"])
            f, _ = ffn_forward(h, *p["ffn"])
            out, _ = layernorm_forward(f + h, *p["norm2"])
            return out
        """),
    _alt("encdec.decoder_block", "an inner 'add & norm' helper applied to the three sublayers", """
        def decoder_block(y, memory, p, n_heads, self_mask=None, cross_mask=None):
            \"\"\"Post-LN decoder block: masked self-attention, cross-attention to memory, FFN.\"\"\"
            def add_norm(x, sublayer_out, norm):
                return layernorm_forward(x + sublayer_out, *p[norm])[0]
            y = add_norm(y, mha_forward(y, y, *p["self_attn"], n_heads, self_mask)[0], "norm1")
            y = add_norm(y, mha_forward(y, memory, *p["cross_attn"], n_heads, cross_mask)[0], "norm2")
            return add_norm(y, ffn_forward(y, *p["ffn"])[0], "norm3")
        """),
    _alt("encdec.embed", "a one-hot matrix product instead of indexing; math.sqrt", """
        def embed(ids, W_E, P):
            \"\"\"ids (B, T) -> x (B, T, d_model) = sqrt(d_model) * W_E[ids] + P[:T].\"\"\"
            vocab_size, d_model = W_E.shape
            one_hot = (ids[..., None] == np.arange(vocab_size)).astype(W_E.dtype)
            return math.sqrt(d_model) * (one_hot @ W_E) + P[:ids.shape[-1]]
        """),
    _alt("encdec.greedy", "recursion instead of a loop", """
        def greedy_decode(next_log_probs, bos=1, eos=2, max_len=10):
            \"\"\"The likeliest token at every step -> tokens (L,) int after bos, L <= max_len.\"\"\"
            def extend(seq):
                if len(seq) > max_len or (len(seq) > 1 and seq[-1] == eos):
                    return seq
                return extend(seq + [int(np.argmax(next_log_probs(np.array([seq]))[0]))])
            return np.array(extend([bos])[1:], dtype=np.int64)
        """),
    _alt("encdec.beam_search", "Python lists of (score, beam, token) and a stable sort instead "
         "of a flat argsort", """
        def beam_search(next_log_probs, bos=1, eos=2, beam_size=3, max_len=10, alpha=1.0):
            \"\"\"Beam search with log-probability scores and length normalisation.\"\"\"
            live, finished = [([bos], 0.0)], []       # (tokens with bos, score)
            for _ in range(max_len):
                logp = next_log_probs(np.array([tokens for tokens, _ in live]))
                candidates = [(score + logp[i, j], i, j)
                              for i, (_, score) in enumerate(live) for j in range(logp.shape[1])]
                candidates.sort(key=lambda c: -c[0])   # stable: ties stay in (beam, token) order
                kept = [(live[i][0] + [j], score) for score, i, j in candidates[:beam_size]]
                finished += [(tokens, score) for tokens, score in kept if tokens[-1] == eos]
                live = [(tokens, score) for tokens, score in kept if tokens[-1] != eos]
                if not live:
                    break
            pool = [(tokens[1:], score) for tokens, score in (finished or live)]
            normalised = [score / len(tokens) ** alpha for tokens, score in pool]
            best = normalised.index(max(normalised))
            return np.array(pool[best][0], dtype=np.int64), float(normalised[best])
        """),
    _alt("encdec.beam_search", "heapq.nlargest on (score, -flat index): ties go to the earlier "
         "(beam, token)", """
        import heapq

        def beam_search(next_log_probs, bos=1, eos=2, beam_size=3, max_len=10, alpha=1.0):
            \"\"\"Beam search with log-probability scores and length normalisation.\"\"\"
            beams, scores, finished = [[bos]], [0.0], []
            for _ in range(max_len):
                logp = next_log_probs(np.array(beams))
                V = logp.shape[1]
                candidates = [(scores[i] + logp[i, j], -(i * V + j))
                              for i in range(len(beams)) for j in range(V)]
                next_beams, next_scores = [], []
                for score, negative in heapq.nlargest(beam_size, candidates):
                    i, j = divmod(-negative, V)
                    if j == eos:
                        finished.append((beams[i][1:] + [j], score))
                    else:
                        next_beams.append(beams[i] + [j])
                        next_scores.append(score)
                beams, scores = next_beams, next_scores
                if not beams:
                    break
            pool = finished or [(b[1:], s) for b, s in zip(beams, scores)]
            normalised = [score / len(tokens) ** alpha for tokens, score in pool]
            best = int(np.argmax(normalised))
            return np.array(pool[best][0]), normalised[best]
        """),
]

# ===================================================================== 06 GPT (and scaling)
N06 = [
    _alt("gpt.block", "attention written inline: heads split with reshape + np.moveaxis, "
         "einsum, an additive -1e9 causal mask from np.triu", """
        def gpt_block(x, p, n_heads):
            \"\"\"One Pre-LN GPT block. x (B, T, d_model) -> (B, T, d_model).\"\"\"
            B, T, d_model = x.shape
            W_q, W_k, W_v, W_o = p["attn"]
            d_k = W_q.shape[1] // n_heads
            h = layernorm_forward(x, *p["norm1"])[0]
            q, k, v = (np.moveaxis((h @ W).reshape(B, T, n_heads, -1), 2, 1) for W in (W_q, W_k, W_v))
            future = -1e9 * np.triu(np.ones((T, T)), k=1)       # 0 where a query may attend
            S = np.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(d_k) + future
            heads = softmax(S, axis=-1) @ v
            x = x + np.moveaxis(heads, 1, 2).reshape(B, T, -1) @ W_o
            return x + ffn_forward(layernorm_forward(x, *p["norm2"])[0], *p["ffn"])[0]
        """),
    _alt("gpt.block", "the causal mask from np.tri, every sublayer's output named", """
        def gpt_block(x, p, n_heads):
            \"\"\"One Pre-LN GPT block. x (B, T, d_model) -> (B, T, d_model).\"\"\"
            mask = np.tri(x.shape[1], dtype=bool)
            attn_in = layernorm_forward(x, *p["norm1"])[0]
            attn_out, _ = mha_forward(attn_in, attn_in, *p["attn"], n_heads, mask)
            x = x + attn_out
            ffn_out, _ = ffn_forward(layernorm_forward(x, *p["norm2"])[0], *p["ffn"])
            return x + ffn_out
        """),
    _alt("gpt.forward", "np.take for the lookup, einsum for the tied output layer", """
        def gpt_forward(idx, params, n_heads):
            \"\"\"idx (B, T) ints -> logits (B, T, vocab_size).\"\"\"
            T = idx.shape[1]
            x = np.take(params["W_E"], idx, axis=0) + params["W_P"][np.arange(T)]
            for p in params["blocks"]:
                x = gpt_block(x, p, n_heads)
            x = layernorm_forward(x, *params["norm_f"])[0]
            return np.einsum("btd,vd->btv", x, params["W_E"])
        """),
    _alt("gpt.next_token_probs", "a loop over the rows: top-k from a sorted copy, top-p by "
         "walking the sorted probabilities", """
        def next_token_probs(logits, temperature=1.0, top_k=None, top_p=None):
            \"\"\"logits (B, V) -> probs (B, V): temperature, then top-k, then top-p.\"\"\"
            probs = softmax(logits / temperature, axis=-1)
            for row in probs:                     # each row is a view: edited in place
                if top_k is not None:
                    kth = np.sort(row)[::-1][min(top_k, len(row)) - 1]
                    row[row < kth] = 0.0
                    row /= row.sum()
                if top_p is not None:
                    order = np.argsort(-row, kind="stable")
                    total = 0.0
                    for n, j in enumerate(order):
                        if total >= top_p:        # the likelier tokens already reach top_p
                            row[order[n:]] = 0.0
                            break
                        total += row[j]
                    row /= row.sum()
            return probs
        """),
    _alt("gpt.next_token_probs", "top-k with np.argpartition; top-p kept where the mass before "
         "a token is below top_p, the likeliest always kept", """
        def next_token_probs(logits, temperature=1.0, top_k=None, top_p=None):
            \"\"\"logits (B, V) -> probs (B, V): temperature, then top-k, then top-p.\"\"\"
            probs = softmax(logits / temperature, axis=-1)
            if top_k is not None:
                top = np.argpartition(-probs, top_k - 1, axis=-1)[:, :top_k]
                keep = np.zeros(probs.shape, dtype=bool)
                np.put_along_axis(keep, top, True, axis=-1)
                probs = np.where(keep, probs, 0.0)
                probs = probs / probs.sum(axis=-1, keepdims=True)
            if top_p is not None:
                order = np.argsort(-probs, axis=-1)
                cum = np.cumsum(np.take_along_axis(probs, order, axis=-1), axis=-1)
                keep_sorted = np.concatenate([np.ones((len(cum), 1), dtype=bool),
                                              cum[:, :-1] < top_p], axis=-1)
                keep = np.zeros(probs.shape, dtype=bool)
                np.put_along_axis(keep, order, keep_sorted, axis=-1)
                probs = np.where(keep, probs, 0.0)
                probs = probs / probs.sum(axis=-1, keepdims=True)
            return probs
        """),
    _alt("gpt.next_token_probs", "float32 inside: the tempered logits cast to float32", """
        def next_token_probs(logits, temperature=1.0, top_k=None, top_p=None):
            \"\"\"logits (B, V) -> probs (B, V): temperature, then top-k, then top-p.\"\"\"
            probs = softmax((logits / temperature).astype(np.float32), axis=-1)
            if top_k is not None:
                kth = np.sort(probs, axis=-1)[:, -top_k][:, None]
                probs = np.where(probs >= kth, probs, 0.0)
                probs = probs / probs.sum(axis=-1, keepdims=True)
            if top_p is not None:
                order = np.argsort(-probs, axis=-1)
                sorted_p = np.take_along_axis(probs, order, axis=-1)
                before = np.cumsum(sorted_p, axis=-1) - sorted_p
                drop = np.zeros(probs.shape, dtype=bool)
                np.put_along_axis(drop, order, before >= top_p, axis=-1)
                probs = np.where(drop, 0.0, probs)
                probs = probs / probs.sum(axis=-1, keepdims=True)
            return probs
        """),
    _alt("gpt.kv_step", "the cache keeps each layer's normalised inputs; keys and values are "
         "recomputed from them every step", """
        def gpt_step(token, pos, cache, params, n_heads):
            \"\"\"One token per call: token (B,) at position pos -> logits (B, vocab_size).\"\"\"
            x = params["W_E"][token][:, None, :] + params["W_P"][pos]   # (B, 1, d_model)
            for layer, p in enumerate(params["blocks"]):
                h = layernorm_forward(x, *p["norm1"])[0]
                seen = np.concatenate([cache[layer], h], axis=1) if layer in cache else h
                cache[layer] = seen                                     # (B, pos + 1, d_model)
                x = x + mha_forward(h, seen, *p["attn"], n_heads)[0]
                x = x + ffn_forward(layernorm_forward(x, *p["norm2"])[0], *p["ffn"])[0]
            x = layernorm_forward(x, *params["norm_f"])[0]
            return x[:, 0] @ params["W_E"].T
        """),
    _alt("scaling.param_count", "every matrix and vector of a block listed, summed with sum()", """
        def param_count(n_layers, d_model, n_heads, vocab_size, n_ctx, d_ff, tied):
            \"\"\"Parameters of a GPT. Returns an int.\"\"\"
            d = d_model
            block = sum([d * d] * 4 + [d] * 4            # W_q, W_k, W_v, W_o and biases
                        + [d * d_ff, d_ff, d_ff * d, d]  # the MLP
                        + [d, d, d, d])                  # LN_1 and LN_2
            embeddings = (vocab_size + n_ctx) * d + (0 if tied else vocab_size * d)
            return n_layers * block + 2 * d + embeddings
        """),
    _alt("scaling.compute", "petaflop/s-days by dividing in two steps", """
        def training_compute(n_params, n_tokens):
            \"\"\"Training FLOPs ~ 6 N D, and the same in petaflop/s-days.\"\"\"
            flops = 6.0 * n_params * n_tokens
            return flops, flops / 1e15 / 86400
        """),
    _alt("scaling.memory", "the parts in a dict, the total with sum()", """
        def training_memory(n_params, bytes_per_param, master_weights):
            \"\"\"Bytes of weights, gradients, fp32 master copy, Adam's m and v, and their total.\"\"\"
            parts = {"weights": bytes_per_param * n_params,
                     "gradients": bytes_per_param * n_params,
                     "master": (4 if master_weights else 0) * n_params,
                     "adam": 8 * n_params}
            return (*parts.values(), sum(parts.values()))
        """),
    _alt("scaling.kv_cache", "a loop over the layers adding keys and values", """
        def kv_cache_bytes(n_layers, d_model, batch, context, bytes_per_value):
            \"\"\"Bytes of the keys and values of every layer, position and sequence.\"\"\"
            per_tensor = batch * context * d_model * bytes_per_value
            total = 0
            for _ in range(n_layers):
                total += per_tensor   # keys
                total += per_tensor   # values
            return total
        """),
    _alt("scaling.train_time", "the cluster's FLOPs per day first", """
        def training_days(flops, n_devices, peak_flops, utilisation):
            \"\"\"Days to do flops FLOPs on n_devices devices at utilisation x peak_flops FLOP/s.\"\"\"
            per_day = 86400 * utilisation * peak_flops * n_devices
            return flops / per_day
        """),
]

# ===================================================================== 07 fast attention
N07 = [
    _alt("flash.online_softmax", "not online: block maxima with np.maximum.accumulate, then each "
         "normaliser summed afresh over the prefix", """
        def online_softmax_stats(s, block_k):
            \"\"\"Running maximum and normaliser of s (..., T_k), read in blocks of block_k entries.\"\"\"
            starts = range(0, s.shape[-1], block_k)
            block_max = np.stack([s[..., b:b + block_k].max(axis=-1) for b in starts], axis=-1)
            m = np.maximum.accumulate(block_max, axis=-1)
            l = np.zeros(m.shape)
            for j, b in enumerate(starts):
                shift = np.where(np.isfinite(m[..., j]), m[..., j], 0.0)
                l[..., j] = np.exp(s[..., :b + block_k] - shift[..., None]).sum(axis=-1)
            return m, l
        """),
    _alt("flash.online_softmax", "online one entry at a time; the statistics recorded at the end "
         "of each block", """
        def online_softmax_stats(s, block_k):
            \"\"\"Running maximum and normaliser of s (..., T_k), read in blocks of block_k entries.\"\"\"
            n = s.shape[-1]
            m, l = np.full(s.shape[:-1], -np.inf), np.zeros(s.shape[:-1])
            ms, ls = [], []
            for j in range(n):
                m_new = np.maximum(m, s[..., j])
                with np.errstate(invalid="ignore"):   # -inf - -inf where nothing is seen yet
                    l = np.where(np.isfinite(m_new),
                                 l * np.exp(m - m_new) + np.exp(s[..., j] - m_new), 0.0)
                m = m_new
                if (j + 1) % block_k == 0 or j == n - 1:
                    ms.append(m)
                    ls.append(l)
            return np.stack(ms, axis=-1), np.stack(ls, axis=-1)
        """),
    _alt("flash.forward", "FlashAttention-1 loop order: key/value blocks outer, query blocks "
         "inner; einsum; the scale folded into Q once", """
        def flash_forward(Q, K, V, causal=False, block_q=16, block_k=16):
            \"\"\"Attention tile by tile. Returns out (..., T_q, d_v) and lse (..., T_q).\"\"\"
            T_q, T_k = Q.shape[-2], K.shape[-2]
            Qs = Q / np.sqrt(Q.shape[-1])
            m = np.full(Q.shape[:-1], -np.inf)                 # running statistics of all queries
            l = np.zeros(Q.shape[:-1])
            acc = np.zeros(Q.shape[:-1] + (V.shape[-1],))
            for k0 in range(0, T_k, block_k):
                Kj, Vj = K[..., k0:k0 + block_k, :], V[..., k0:k0 + block_k, :]
                cols = np.arange(k0, k0 + Kj.shape[-2])
                for q0 in range(0, T_q, block_q):
                    rows = slice(q0, q0 + block_q)
                    S = np.einsum("...qd,...kd->...qk", Qs[..., rows, :], Kj)
                    if causal:
                        last = np.arange(T_q)[rows, None] + T_k - T_q   # last key each query sees
                        S = np.where(cols <= last, S, -np.inf)
                    m_new = np.maximum(m[..., rows], S.max(axis=-1))
                    shift = np.where(np.isfinite(m_new), m_new, 0.0)
                    alpha = np.exp(m[..., rows] - shift)
                    P = np.exp(S - shift[..., None])
                    l[..., rows] = alpha * l[..., rows] + P.sum(axis=-1)
                    acc[..., rows, :] = alpha[..., None] * acc[..., rows, :] \\
                        + np.einsum("...qk,...kv->...qv", P, Vj)
                    m[..., rows] = m_new
            with np.errstate(divide="ignore"):
                lse = m + np.log(l)
            return acc / np.where(l == 0, 1.0, l)[..., None], lse
        """),
    _alt("flash.forward", "a finite masking constant (-1e30) in the tiles; queries that see no "
         "key are set to out 0, lse -inf at the end", """
        def flash_forward(Q, K, V, causal=False, block_q=16, block_k=16):
            \"\"\"Attention tile by tile. Returns out (..., T_q, d_v) and lse (..., T_q).\"\"\"
            T_q, T_k = Q.shape[-2], K.shape[-2]
            scale = 1.0 / np.sqrt(Q.shape[-1])
            outs, lses = [], []
            for q0 in range(0, T_q, block_q):
                Qi = Q[..., q0:q0 + block_q, :]
                last = np.arange(q0, q0 + Qi.shape[-2]) + T_k - T_q   # last key each query sees
                m = np.full(Qi.shape[:-1], -1e30)
                l = np.zeros(Qi.shape[:-1])
                acc = np.zeros(Qi.shape[:-1] + (V.shape[-1],))
                for k0 in range(0, T_k, block_k):
                    S = Qi @ np.swapaxes(K[..., k0:k0 + block_k, :], -1, -2) * scale
                    if causal:
                        S = np.where(np.arange(k0, k0 + S.shape[-1]) <= last[:, None], S, -1e30)
                    m_new = np.maximum(m, S.max(axis=-1))
                    P = np.exp(S - m_new[..., None])
                    alpha = np.exp(m - m_new)
                    l = alpha * l + P.sum(axis=-1)
                    acc = alpha[..., None] * acc + P @ V[..., k0:k0 + block_k, :]
                    m = m_new
                sees = (last >= 0) if causal else np.ones(len(last), dtype=bool)
                outs.append(np.where(sees[:, None], acc / l[..., None], 0.0))
                lses.append(np.where(sees, m + np.log(l), -np.inf))
            return np.concatenate(outs, axis=-2), np.concatenate(lses, axis=-1)
        """),
    _alt("flash.backward", "key/value blocks as the outer loop (FlashAttention-2's backward "
         "order), einsum, masked weights zeroed after the exp", """
        def flash_backward(dout, Q, K, V, out, lse, causal=False, block_q=16, block_k=16):
            \"\"\"Gradients of flash_forward. Returns dQ, dK, dV shaped like Q, K, V.\"\"\"
            T_q, T_k = Q.shape[-2], K.shape[-2]
            scale = 1.0 / np.sqrt(Q.shape[-1])
            D = np.einsum("...qv,...qv->...q", dout, out)
            dQ, dK, dV = np.zeros(Q.shape), np.zeros(K.shape), np.zeros(V.shape)
            for k0 in range(0, T_k, block_k):
                keys = slice(k0, k0 + block_k)
                Kj, Vj = K[..., keys, :], V[..., keys, :]
                cols = np.arange(k0, k0 + Kj.shape[-2])
                for q0 in range(0, T_q, block_q):
                    rows = slice(q0, q0 + block_q)
                    Qi, dOi, lse_i = Q[..., rows, :], dout[..., rows, :], lse[..., rows]
                    S = np.einsum("...qd,...kd->...qk", Qi, Kj) * scale
                    with np.errstate(over="ignore"):
                        P = np.exp(S - lse_i[..., None])
                    visible = np.isfinite(lse_i)[..., None]
                    if causal:
                        visible = visible & (cols <= np.arange(T_q)[rows, None] + T_k - T_q)
                    P = np.where(visible, P, 0.0)
                    dV[..., keys, :] += np.einsum("...qk,...qv->...kv", P, dOi)
                    dP = np.einsum("...qv,...kv->...qk", dOi, Vj)
                    dS = P * (dP - D[..., rows, None])
                    dQ[..., rows, :] += np.einsum("...qk,...kd->...qd", dS, Kj) * scale
                    dK[..., keys, :] += np.einsum("...qk,...qd->...kd", dS, Qi) * scale
            return dQ, dK, dV
        """),
]

ALTERNATIVES: list[LearnerCode] = N00 + N01 + N02 + N03 + N04 + N05 + N06 + N07

for _a in ALTERNATIVES:  # a typo in an id fails at import, not as a puzzling verdict
    get(_a.exercise)
del _a
