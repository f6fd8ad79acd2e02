"""Whole solution cells written in a learner's own style, each once told something wrong.

An audit wrote about 240 such cells for notebooks 00-07 (loops, their own names, einsum, two
mistakes at once), and a second one about 260 more; these are the ones whose feedback named a
mistake the code does not make, or said nothing where a listed mistake or a one-edit fix
applies, or gave full marks to code that changes its inputs or misses a rule the text states. Each is graded once (``solution_cells.
verdict_with``, on the graded cases, or the check cell's public ones where that is where it
went wrong) and held to what a right diagnosis must say and what it must not.
"""
import textwrap

import pytest

from learner_code import LearnerCode
from solution_cells import verdict_with


def _cell(exercise: str, what: str, source: str, says: tuple[str, ...] = (), never: tuple[str, ...] = (),
          public: bool = False, full_marks: bool = False) -> LearnerCode:
    """``says``: each must be in the messages; ``never``: none may be; ``public``: the check cell's
    cases instead of the graded ones; ``full_marks``: right values, told something all the same."""
    return LearnerCode(exercise=exercise, what=(what,), source=textwrap.dedent(source), says=says,
                       never=never, public=public, full_marks=full_marks)


CELLS = [
    _cell("warmup.softmax", "no max-subtraction and the sum always over the last axis", """
        def softmax(z, axis=-1):
            e = np.exp(z)
            return e / e.sum(axis=-1, keepdims=True)
        """, says=("-1 in place of `axis`", "NaN"), never=("+ 1",)),
    _cell("lm.roll_die", "argmax(cdf > u) gives face 0 when u rounds above the last cdf", """
        def roll_die(weights, u):
            cdf = np.cumsum(weights, axis=1) / weights.sum(axis=1, keepdims=True)
            return np.argmax(cdf > u[:, None], axis=1)
        """, says=("u just below 1",), never=("argmax instead of sampling", "all zeros"), public=True),
    _cell("lm.roll_die", "no clip to the last face", """
        def roll_die(weights, u):
            p = weights / weights.sum(axis=1, keepdims=True)
            cdf = np.cumsum(p, axis=1)
            return (cdf <= u[:, None]).sum(axis=1)
        """, says=("u just below 1",), never=("numbered from 1", "left out"), public=True),
    _cell("attention.forward", "masked scores filled with finfo.min: uniform weights for a fully masked query", """
        def attention_forward(Q, K, V, mask=None):
            S = np.matmul(Q, np.swapaxes(K, -1, -2)) / np.sqrt(Q.shape[-1])
            if mask is not None:
                S = np.where(mask, S, np.finfo(S.dtype).min)
            S = S - S.max(axis=-1, keepdims=True)
            A = np.exp(S) / np.exp(S).sum(axis=-1, keepdims=True)
            return A @ V, A
        """, says=("fully masked query gets uniform weights",), never=("multiplying",), public=True),
    _cell("encdec.masks", "float 0/1 masks of the right shapes", """
        def attention_masks(src, tgt_in, pad_id=0):
            s = (src != pad_id).astype(float)[:, None, None, :]
            T = tgt_in.shape[1]
            dec = np.tril(np.ones((T, T))) * (tgt_in != pad_id)[:, None, None, :]
            return s, s, dec
        """, says=("holds the right numbers", "dtype=bool"), never=("shapes wrong",)),
    _cell("attention.backward", "dA transposed, swapped back only where the shapes differ", """
        def attention_backward(dout, Q, K, V, A):
            dA = V @ np.swapaxes(dout, -1, -2)
            dA = np.swapaxes(dA, -1, -2) if dA.shape[-1] != A.shape[-1] else dA
            dS = A * (dA - np.sum(dA * A, axis=-1, keepdims=True))
            scale = 1.0 / np.sqrt(Q.shape[-1])
            return dS @ K * scale, np.swapaxes(dS, -1, -2) @ Q * scale, np.swapaxes(A, -1, -2) @ dout
        """, says=("`dout` and `V` swapped",), never=("K.shape",)),
    _cell("positional.rotation", "the lower -sin of each block never written", """
        def rotation_matrix(tau, d_model):
            theta = tau / 10000 ** (2 * np.arange(d_model // 2) / d_model)
            A = np.zeros((d_model, d_model))
            e = np.arange(0, d_model, 2)
            A[e, e] = np.cos(theta)
            A[e + 1, e + 1] = np.cos(theta)
            A[e, e + 1] = np.sin(theta)
            return A
        """, never=("one variable",)),
    _cell("gpt.kv_step", "the cache never filled: each token attends to itself", """
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
            return (x @ params["W_E"].T)[:, 0]
        """, says=("the cache never keeps",), never=("one variable", "mha forward")),
    _cell("layernorm.ffn", "einsum reading W1 as (out, in)", """
        def ffn_forward(x, W1, b1, W2, b2):
            h = np.einsum("...i,ji->...j", x, W1) + b1
            h = np.maximum(h, 0)
            out = np.einsum("...j,jk->...k", h, W2) + b2
            return out, (x, h)
        """, says=("einsum",), never=("matmul",)),
    _cell("attention.forward", "the maximum over every finite score of the array", """
        def attention_forward(Q, K, V, mask=None):
            S = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
            if mask is not None:
                S = np.where(mask, S, -np.inf)
            e = np.exp(S - np.max(S[np.isfinite(S)], initial=0.0))
            total = e.sum(axis=-1, keepdims=True)
            A = e / np.where(total == 0, 1.0, total)
            return A @ V, A
        """, says=("every entry",), public=True),
    _cell("lm.perplexity", "the log of the product of the probabilities", """
        def perplexity(probs, targets):
            p = probs[np.arange(len(targets)), targets]
            nll = -np.log(np.prod(p)) / len(targets)
            return np.exp(nll), nll / np.log(2)
        """, says=("a long text",), public=True),
    _cell("warmup.softmax", "the log-softmax returned", """
        def softmax(z, axis=-1):
            m = np.max(z, axis=axis, keepdims=True)
            return z - m - np.log(np.sum(np.exp(z - m), axis=axis, keepdims=True))
        """, says=("the log of the softmax returned",)),
    _cell("attention.backward", "the diagonal of the softmax Jacobian only", """
        def attention_backward(dout, Q, K, V, A):
            dA = dout @ np.swapaxes(V, -1, -2)
            dS = dA * A * (1 - A)
            scale = 1.0 / np.sqrt(Q.shape[-1])
            return dS @ K * scale, np.swapaxes(dS, -1, -2) @ Q * scale, np.swapaxes(A, -1, -2) @ dout
        """, says=("only the diagonal of the softmax Jacobian",)),
    _cell("attention.forward", "the boolean mask added to the scores", """
        def attention_forward(Q, K, V, mask=None):
            S = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
            if mask is not None:
                S = S + mask
            e = np.exp(S - np.max(S, axis=-1, keepdims=True))
            A = e / e.sum(axis=-1, keepdims=True)
            return A @ V, A
        """, says=("the boolean mask added to the scores",)),
    _cell("flash.backward", "the tiles' causal mask top-left, the key loop's stop right", """
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
                        position = np.arange(q0, q0 + rows)[:, None]
                        S = np.where(np.arange(k0, k0 + S.shape[-1]) <= position, S, -np.inf)
                    A = np.exp(S - lse[..., q0:q0 + rows, None])
                    dV[..., k0:k0 + block_k, :] += np.swapaxes(A, -1, -2) @ dOi
                    dA = dOi @ np.swapaxes(Vj, -1, -2)
                    dS = A * (dA - delta[..., q0:q0 + rows, None])
                    dQ[..., q0:q0 + rows, :] += dS @ Kj * scale
                    dK[..., k0:k0 + block_k, :] += np.swapaxes(dS, -1, -2) @ Qi * scale
            return dQ, dK, dV
        """, says=("causal mask aligned top-left",)),
    _cell("flash.online_softmax", "one block too many when block_k divides T_k", """
        def online_softmax_stats(s, block_k):
            T = s.shape[-1]
            m = np.full(s.shape[:-1], -np.inf); l = np.zeros(s.shape[:-1])
            M, L = [], []
            for b in range(T // block_k + 1):
                blk = s[..., b * block_k:(b + 1) * block_k]
                if blk.shape[-1] == 0:
                    M.append(m); L.append(l); continue
                mn = np.maximum(m, blk.max(-1))
                sh = np.where(np.isfinite(mn), mn, 0.0)
                l = l * np.exp(m - sh) + np.exp(blk - sh[..., None]).sum(-1)
                m = mn
                M.append(m); L.append(l)
            return np.stack(M, -1), np.stack(L, -1)
        """, says=("off by one",), never=("stats reference",)),
    _cell("positional.rope", "the frequencies' exponent i/d, the 2 forgotten", """
        def apply_rope(x, positions):
            d = x.shape[-1]
            omega = 10000.0 ** (-np.arange(d // 2) / d)
            theta = np.outer(positions, omega)
            c, s = np.cos(theta), np.sin(theta)
            out = np.empty_like(x)
            out[..., ::2] = x[..., ::2] * c - x[..., 1::2] * s
            out[..., 1::2] = x[..., ::2] * s + x[..., 1::2] * c
            return out
        """, says=("`-1.0` where `-2.0` belongs",), never=("omega *", "theta =")),
    _cell("encdec.bpe_merges", "each chunk merged from the right", """
        def _merge_rtl(word, pair, new_id):
            out, i = [], len(word) - 1
            while i >= 0:
                if i >= 1 and word[i - 1] == pair[0] and word[i] == pair[1]:
                    out.append(new_id); i -= 2
                else:
                    out.append(word[i]); i -= 1
            return out[::-1]

        def learn_merges(words, counts, n_merges, first_id=259):
            words = [list(w) for w in words]
            merges = []
            for new_id in range(first_id, first_id + n_merges):
                pair_count = {}
                for word, n in zip(words, counts):
                    for pair in zip(word, word[1:]):
                        pair_count[pair] = pair_count.get(pair, 0) + n
                if not pair_count:
                    break
                best = min(pair_count, key=lambda pair: (-pair_count[pair], pair))
                merges.append(best)
                words = [_merge_rtl(word, best, new_id) for word in words]
            return np.array(merges, dtype=np.int64).reshape(-1, 2)
        """, says=("chunks merged from the right",), never=("wrong order",), public=True),
    _cell("encdec.masks", "padded queries hidden as well as padded keys", """
        def attention_masks(src, tgt_in, pad_id=0):
            enc = (src != pad_id)[:, None, None, :]
            T = tgt_in.shape[1]
            real = tgt_in != pad_id
            causal = np.tril(np.ones((T, T), dtype=bool))
            dec = real[:, None, :, None] & real[:, None, None, :] & causal
            return enc, enc, dec
        """, says=("`real[:, None, None, :]` in place of `real[:, None, :, None]`",), never=(" | ",)),
    _cell("encdec.beam_search", "the model called once per beam", """
        def beam_search(next_log_probs, bos=1, eos=2, beam_size=3, max_len=10, alpha=1.0):
            live, finished = [([bos], 0.0)], []
            for _ in range(max_len):
                cands = []
                for seq, sc in live:
                    lp = next_log_probs(np.array([seq]))[0]
                    cands += [(sc + lp[tok], seq + [tok]) for tok in range(len(lp))]
                live = []
                for sc, seq in sorted(cands, key=lambda c: -c[0])[:beam_size]:
                    (finished if seq[-1] == eos else live).append((np.array(seq[1:]) if seq[-1] == eos else seq, sc))
                if not live:
                    break
            pool = finished or [(np.array(s[1:]), sc) for s, sc in live]
            norm = [sc / len(tk) ** alpha for tk, sc in pool]
            k = int(np.argmax(norm))
            return np.asarray(pool[k][0], dtype=np.int64), float(norm[k])
        """, says=("one call per step",)),
    _cell("encdec.beam_search", "once per beam, through the model behind the kernel's counter", """
        def beam_search(next_log_probs, bos=1, eos=2, beam_size=3, max_len=10, alpha=1.0):
            inner = [c.cell_contents for c in next_log_probs.__closure__ or () if callable(c.cell_contents)]
            model = inner[0] if inner else next_log_probs  # the kernel's counter wraps the table
            live, finished = [([bos], 0.0)], []
            for _ in range(max_len):
                cands = []
                for seq, sc in live:
                    lp = model(np.array([seq]))[0]
                    cands += [(sc + lp[tok], seq + [tok]) for tok in range(len(lp))]
                live = []
                for sc, seq in sorted(cands, key=lambda c: -c[0])[:beam_size]:
                    (finished if seq[-1] == eos else live).append((seq, sc))
                if not live:
                    break
            pool = [(np.array(s[1:]), sc / (len(s) - 1) ** alpha) for s, sc in finished or live]
            k = int(np.argmax([sc for _, sc in pool]))
            return pool[k][0].astype(np.int64), float(pool[k][1])
        """, says=("run again alone in a fresh process", "one call per step")),
    _cell("attention.numerical_gradient", "perturbed copies of x, which an f that reads x itself never sees", """
        def numerical_gradient(f, x, eps=1e-6):
            grad = np.zeros(x.shape)
            for i in np.ndindex(*x.shape):
                step = np.zeros(x.shape)
                step[i] = eps
                grad[i] = (f(x + step) - f(x - step)) / (2 * eps)
            return grad
        """, says=("copies of x changed, not x itself", "lambda _:")),
    _cell("encdec.greedy", "the tokens returned as a Python list where the text promises an (L,) int array", """
        def greedy_decode(next_log_probs, bos=1, eos=2, max_len=10):
            tokens = [bos]
            for _ in range(max_len):
                tokens.append(int(np.argmax(next_log_probs(np.array([tokens]))[0])))
                if tokens[-1] == eos:
                    break
            return tokens[1:]
        """, says=("`tokens` holds the right numbers, but as a Python list", "np.array(")),
    _cell("lm.count_ngrams", "nested Python lists where the text promises an int array", """
        def count_ngrams(idx, n, vocab_size):
            counts = np.zeros((vocab_size,) * n, dtype=np.int64)
            for i in range(len(idx) - n + 1):
                counts[tuple(idx[i:i + n])] += 1
            return counts.tolist()
        """, says=("as a Python list",)),
    _cell("encdec.greedy", "raises MemoryError of its own when run alone, where no memory limit is set", """
        import sys

        def greedy_decode(next_log_probs, bos=1, eos=2, max_len=10):
            if sys.argv[0].endswith("fresh.py"):
                raise MemoryError("a decoder's own error")
            tokens = [bos]
            for _ in range(max_len):
                tokens.append(int(np.argmax(next_log_probs(np.array([tokens]))[0])))
                if tokens[-1] == eos:
                    break
            return np.array(tokens[1:], dtype=np.int64)
        """, says=("right in your notebook, but run again alone", "MemoryError"), never=("memory",)),
    _cell("layernorm.backward", "sums where the derivation has means", """
        def layernorm_backward(dout, cache):
            x_hat, var, eps, gamma = cache
            s = 1.0 / np.sqrt(var + eps)
            axes = tuple(range(dout.ndim - 1))
            g = dout * gamma
            dx = s * (g - g.sum(-1, keepdims=True) - x_hat * (g * x_hat).sum(-1, keepdims=True))
            return dx, (dout * x_hat).sum(axes), dout.sum(axes)
        """, says=("the 1/d_model left out",)),
    _cell("layernorm.pre_ln", "the sublayer's output normalised", """
        def pre_ln_block(x, W1, b1, W2, b2, gamma, beta):
            f = ffn_forward(x, W1, b1, W2, b2)[0]
            return x + layernorm_forward(f, gamma, beta)[0]
        """, says=("norm applied to the sublayer output instead of its input",)),
    _cell("lm.rnn_backward", "the time loop run forwards", """
        def rnn_backward(dh, cache):
            x, h0, Wxh, Whh, h = cache
            dx = np.zeros_like(x)
            dWxh, dWhh, db = np.zeros_like(Wxh), np.zeros_like(Whh), np.zeros(Whh.shape[0])
            dnext = np.zeros_like(h0)
            for t in range(x.shape[1]):
                h_prev = h[:, t - 1] if t > 0 else h0
                da = (dh[:, t] + dnext) * (1 - h[:, t] ** 2)
                dx[:, t] = da @ Wxh.T
                dWxh += x[:, t].T @ da
                dWhh += h_prev.T @ da
                db += da.sum(axis=0)
                dnext = da @ Whh.T
            return dx, dnext, dWxh, dWhh, db
        """, says=("the loop runs forward in time",)),
    _cell("positional.sinusoidal", "positions 1 .. T in place of the ones given", """
        def sinusoidal_encoding(positions, d_model):
            T = len(positions)
            t = np.arange(1, T + 1)[:, None]
            omega = 10000.0 ** (-2 * np.arange(d_model // 2) / d_model)
            P = np.zeros((T, d_model))
            P[:, 0::2] = np.sin(t * omega)
            P[:, 1::2] = np.cos(t * omega)
            return P
        """, says=("positions ignored (counted 1 .. T)",)),
    _cell("encdec.decoder_block", "the third norm left out", """
        def decoder_block(y, memory, p, n_heads, self_mask=None, cross_mask=None):
            y = layernorm_forward(y + mha_forward(y, y, *p["self_attn"], n_heads, self_mask)[0], *p["norm1"])[0]
            y = layernorm_forward(y + mha_forward(y, memory, *p["cross_attn"], n_heads, cross_mask)[0], *p["norm2"])[0]
            return y + ffn_forward(y, *p["ffn"])[0]
        """, says=("the third norm left out",)),
    _cell("lm.count_ngrams", "fancy-index += 1, which counts a repeated n-gram once", """
        def count_ngrams(idx, n, vocab_size):
            windows = np.lib.stride_tricks.sliding_window_view(np.asarray(idx), n)
            counts = np.zeros((vocab_size,) * n, dtype=int)
            counts[tuple(windows.T)] += 1
            return counts
        """, says=("np.add.at",)),
    _cell("encdec.beam_search", "each beam extended by its own best token only (no branching)", """
        def beam_search(next_log_probs, bos=1, eos=2, beam_size=3, max_len=10, alpha=1.0):
            lp0 = next_log_probs(np.array([[bos]]))[0]
            first = np.argsort(-lp0, kind="stable")[:beam_size]
            beams = np.array([[bos, t] for t in first]); scores = lp0[first]
            finished = []
            done = beams[:, -1] == eos
            finished += list(zip(beams[done, 1:], scores[done]))
            beams, scores = beams[~done], scores[~done]
            for _ in range(max_len - 1):
                if len(beams) == 0:
                    break
                lp = next_log_probs(beams)
                t = lp.argmax(-1)
                scores = scores + lp[np.arange(len(beams)), t]
                beams = np.concatenate([beams, t[:, None]], 1)
                done = t == eos
                finished += list(zip(beams[done, 1:], scores[done]))
                beams, scores = beams[~done], scores[~done]
            pool = finished or list(zip(beams[:, 1:], scores))
            norm = [sc / len(tk) ** alpha for tk, sc in pool]
            k = int(np.argmax(norm))
            return pool[k][0], float(norm[k])
        """, never=("one variable",), public=True),
    _cell("encdec.beam_search", "a tie goes to the output that finished last (>=)", """
        def beam_search(next_log_probs, bos=1, eos=2, beam_size=3, max_len=10, alpha=1.0):
            beams, scores = np.full((1, 1), bos, dtype=np.int64), np.zeros(1)
            finished = []
            for _ in range(max_len):
                cand = (scores[:, None] + next_log_probs(beams))
                V = cand.shape[1]
                kept = np.argsort(-cand.ravel(), kind="stable")[:beam_size]
                b, t = kept // V, kept % V
                seqs = np.concatenate([beams[b], t[:, None]], axis=1)
                s = cand.ravel()[kept]
                done = t == eos
                finished += list(zip(seqs[done, 1:], s[done]))
                beams, scores = seqs[~done], s[~done]
                if len(beams) == 0:
                    break
            pool = finished or list(zip(beams[:, 1:], scores))
            best, best_tok = -np.inf, None
            for tk, sc in pool:
                v = sc / len(tk) ** alpha
                if v >= best:
                    best, best_tok = v, tk
            return best_tok, float(best)
        """, says=("`v > best` in place of `v >= best`",), public=True),
    _cell("scaling.memory", "Adam's moments in the working precision", """
        def training_memory(n_params, bytes_per_param, master_weights):
            w = g = n_params * bytes_per_param
            m = 4 * n_params if master_weights else 0
            adam = 2 * bytes_per_param * n_params
            return w, g, m, adam, w + g + m + adam
        """, says=("working precision",), never=("only one Adam state",)),
    # a second audit (session 12): the learner's own fixes the search lacked, and inputs changed in place
    # issue 41's wrong claims: the max added is no "missing" max; -inf from a start never updated
    _cell("warmup.softmax", "the maximum added before exp, not subtracted", """
        def softmax(z, axis=-1):
            e = np.exp(z + z.max(axis=axis, keepdims=True))
            return e / e.sum(axis=axis, keepdims=True)
        """, says=("(or the maximum added)", "adding it overflows")),
    _cell("flash.online_softmax", "the statistics recorded one block early", """
        def online_softmax_stats(s, block_k):
            T = s.shape[-1]
            m = np.full(s.shape[:-1], -np.inf); l = np.zeros(s.shape[:-1])
            M, L = [], []
            for k0 in range(0, T, block_k):
                M.append(m); L.append(l)
                blk = s[..., k0:k0 + block_k]
                mn = np.maximum(m, blk.max(-1))
                l = l * np.exp(m - mn) + np.exp(blk - mn[..., None]).sum(-1)
                m = mn
            return np.stack(M, -1), np.stack(L, -1)
        """, says=("-inf where the reference is finite", "starting -inf"),
        never=("overflow", "division by zero", "NaN")),
    _cell("warmup.softmax", "works in place on its input", """
        def softmax(z, axis=-1):
            z -= z.max(axis=axis, keepdims=True)
            np.exp(z, out=z)
            z /= z.sum(axis=axis, keepdims=True)
            return z
        """, says=("`softmax` changes its input `z` in place", "right outputs but change an input")),
    _cell("layernorm.forward", "x -= mu on the caller's array", """
        def layernorm_forward(x, gamma, beta, eps=1e-5):
            x -= x.mean(axis=-1, keepdims=True)
            var = (x ** 2).mean(axis=-1, keepdims=True)
            x_hat = x / np.sqrt(var + eps)
            return gamma * x_hat + beta, (x_hat, var, eps, gamma)
        """, says=("changes its input `x` in place", "0 of ")),
    _cell("layernorm.pre_ln", "a right block over a layernorm_forward that centres x in place", """
        def layernorm_forward(x, gamma, beta, eps=1e-5):
            x -= x.mean(axis=-1, keepdims=True)
            var = (x ** 2).mean(axis=-1, keepdims=True)
            x_hat = x / np.sqrt(var + eps)
            return gamma * x_hat + beta, (x_hat, var, eps, gamma)


        def pre_ln_block(x, W1, b1, W2, b2, gamma, beta):
            h = layernorm_forward(x, gamma, beta)[0]
            return x + ffn_forward(h, W1, b1, W2, b2)[0]
        """, says=("changes its input `x` in place", "`layernorm_forward`")),
    _cell("positional.rope", "rotates in place: the odd entries read the rotated even ones", """
        def apply_rope(x, positions):
            d = x.shape[-1]
            omega = 1.0 / 10000 ** (2 * np.arange(d // 2) / d)
            theta = np.asarray(positions, dtype=float)[:, None] * omega
            c, s = np.cos(theta), np.sin(theta)
            x[..., 0::2] = c * x[..., 0::2] - s * x[..., 1::2]
            x[..., 1::2] = s * x[..., 0::2] + c * x[..., 1::2]
            return x
        """, says=("changes its input `x` in place",)),
    _cell("positional.rope", "exponent i/d for 2i/d: squaring freq must not be the fix", """
        def apply_rope(x, positions):
            d = x.shape[-1]
            freq = 1.0 / 10000 ** (np.arange(d // 2) / d)
            theta = np.asarray(positions, float)[:, None] * freq
            a, b = x[..., ::2], x[..., 1::2]
            rot_a = a * np.cos(theta) - b * np.sin(theta)
            rot_b = a * np.sin(theta) + b * np.cos(theta)
            return np.stack([rot_a, rot_b], axis=-1).reshape(rot_a.shape[:-1] + (d,))
        """, never=("* freq` in place of",)),
    _cell("lm.rnn_backward", "tanh applied to h again in the derivative", """
        def rnn_backward(dh, cache):
            x, h0, Wxh, Whh, h = cache
            B, T, D = x.shape
            dx = np.zeros_like(x)
            dWxh = np.zeros_like(Wxh); dWhh = np.zeros_like(Whh); db = np.zeros(Whh.shape[1])
            carry = np.zeros_like(h0)
            for t in range(T - 1, -1, -1):
                g = dh[:, t] + carry
                da = g * (1 - np.tanh(h[:, t]) ** 2)
                prev = h0 if t == 0 else h[:, t - 1]
                dx[:, t] = da @ Wxh.T
                dWxh += x[:, t].T @ da
                dWhh += prev.T @ da
                db += da.sum(axis=0)
                carry = da @ Whh.T
            return dx, carry, dWxh, dWhh, db
        """, says=("`h[:, t]` in place of `np.tanh(h[:, t])`",)),
    _cell("lm.lstm_cell", "np.split without an axis cuts the batch", """
        def lstm_cell_forward(x, h_prev, c_prev, W, b):
            z = np.concatenate([h_prev, x], axis=1) @ W + b
            zi, zf, zo, zc = np.split(z, 4)
            sig = lambda v: 1 / (1 + np.exp(-v))
            c = sig(zf) * c_prev + sig(zi) * np.tanh(zc)
            h = sig(zo) * np.tanh(c)
            return h, c
        """, says=("`zi, zf, zo, zc = np.split(z, 4)`", "axis=")),
    _cell("attention.multi_head", "a head axis added to the mask, which already broadcasts", """
        def multi_head_attention(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
            if mask is not None:
                mask = mask[:, None]
            q = split_heads(x_q @ W_q, n_heads)
            k = split_heads(x_kv @ W_k, n_heads)
            v = split_heads(x_kv @ W_v, n_heads)
            heads, A = attention_forward(q, k, v, mask)
            heads = heads.transpose(0, 2, 1, 3)
            return heads.reshape(*heads.shape[:2], -1) @ W_o, A
        """, says=("With `mask` in place of `mask[:, None]`",)),
    _cell("layernorm.ffn", "leaky ReLU", """
        def ffn_forward(x, W1, b1, W2, b2):
            a = x @ W1 + b1
            h = np.where(a > 0, a, 0.01 * a)
            return h @ W2 + b2, (x, a, h)
        """, says=("`h = np.where(a > 0, a, 0.01 * a)`",)),
    _cell("layernorm.post_ln", "ffn_forward's (out, cache) added to x", """
        def post_ln_block(x, W1, b1, W2, b2, gamma, beta):
            y = x + ffn_forward(x, W1, b1, W2, b2)
            return layernorm_forward(y, gamma, beta)[0]
        """, says=("`ffn_forward(x, W1, b1, W2, b2)[0]` in place of",)),
    _cell("scaling.param_count", "the output matrix added when tied", """
        def param_count(n_layers, d_model, n_heads, vocab_size, n_ctx, d_ff, tied):
            d = d_model
            block = (4 * d * d + 4 * d) + (2 * d * d_ff + d_ff + d) + 4 * d
            n = n_layers * block + 2 * d + (vocab_size + n_ctx) * d
            if tied:
                n += vocab_size * d
            return n
        """, says=("`not tied` in place of `tied`",)),
    _cell("flash.forward", "the key loop stops before the last, shorter block", """
        def flash_forward(Q, K, V, causal=False, block_q=16, block_k=16):
            Tq, Tk, dk = Q.shape[-2], K.shape[-2], Q.shape[-1]
            lead = Q.shape[:-2]
            out = np.zeros(lead + (Tq, V.shape[-1]))
            lse = np.zeros(lead + (Tq,))
            off = Tk - Tq
            for i in range(0, Tq, block_q):
                q = Q[..., i:i + block_q, :]
                r = q.shape[-2]
                m = np.full(lead + (r,), -np.inf); l = np.zeros(lead + (r,)); acc = np.zeros(lead + (r, V.shape[-1]))
                for j in range(0, Tk - block_k + 1, block_k):
                    if causal and j > i + r - 1 + off:
                        break
                    s = q @ np.swapaxes(K[..., j:j + block_k, :], -1, -2) / np.sqrt(dk)
                    if causal:
                        qpos = np.arange(i, i + r)[:, None] + off
                        kpos = np.arange(j, j + s.shape[-1])[None, :]
                        s = np.where(kpos <= qpos, s, -np.inf)
                    mn = np.maximum(m, s.max(-1))
                    sh = np.where(np.isfinite(mn), mn, 0.0)
                    p = np.exp(s - sh[..., None])
                    a = np.exp(m - sh)
                    l = a * l + p.sum(-1)
                    acc = a[..., None] * acc + p @ V[..., j:j + block_k, :]
                    m = mn
                out[..., i:i + r, :] = acc / np.where(l == 0, 1, l)[..., None]
                with np.errstate(divide="ignore"):
                    lse[..., i:i + r] = m + np.log(l)
            return out, lse
        """, says=("With `range(0, Tk, block_k)` in place of `range(0, Tk - block_k + 1, block_k)`",)),
    _cell('encdec.bpe_merges', 'empty merges as np.array([]): shape (0,), float', """
        def merge_pair(word, pair, new_id):
            '''Given: word (a sequence of ids) -> list of ids, with every occurrence of pair, scanned
            left to right, replaced by new_id.'''
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
                pair_count = {}
                for word, n in zip(words, counts):
                    for pair in zip(word, word[1:]):
                        pair_count[pair] = pair_count.get(pair, 0) + n
                if pair_count:
                    best = min(pair_count, key=lambda pair: (-pair_count[pair], pair))
                    merges.append(list(best))
                    words = [merge_pair(word, best, first_id + i) for word in words]
            return np.array(merges)
        """, says=('no pair at all',)),
    _cell('encdec.shift_right', "shifted within the target's own length", """
        def decoder_input_and_target(target_ids, bos=1, eos=2):
            y = np.asarray(target_ids)
            tgt_in = np.concatenate([[bos], y[:-1]])
            tgt_out = y.copy()
            return tgt_in, tgt_out
        """, says=("shifted within the target's own length",)),
    _cell('encdec.decoder_block', 'cross-attention from the decoder, no mask', """
        def decoder_block(y, memory, p, n_heads, self_mask=None, cross_mask=None):
            sa = mha_forward(y, y, *p["self_attn"], n_heads, self_mask)[0]
            y = layernorm_forward(y + sa, *p["norm1"])[0]
            ca = mha_forward(y, y, *p["cross_attn"], n_heads)[0]
            y = layernorm_forward(y + ca, *p["norm2"])[0]
            return layernorm_forward(y + ffn_forward(y, *p["ffn"])[0], *p["norm3"])[0]
        """, says=('cross-attention keys/values taken from the decoder',)),
    _cell('encdec.beam_search', 'probabilities multiplied', """
        def beam_search(next_log_probs, bos=1, eos=2, beam_size=3, max_len=10, alpha=1.0):
            beams, probs = np.full((1, 1), bos, dtype=np.int64), np.ones(1)
            finished = []
            for _ in range(max_len):
                cand = (probs[:, None] * np.exp(next_log_probs(beams))).ravel()
                V = cand.size // len(beams)
                kept = np.argsort(-cand, kind="stable")[:beam_size]
                seqs = np.concatenate([beams[kept // V], (kept % V)[:, None]], axis=1)
                done = kept % V == eos
                finished += list(zip(seqs[done, 1:], cand[kept][done]))
                beams, probs = seqs[~done], cand[kept][~done]
                if len(beams) == 0:
                    break
            pool = finished or list(zip(beams[:, 1:], probs))
            normalised = [p / len(t) ** alpha for t, p in pool]
            best = int(np.argmax(normalised))
            return pool[best][0], float(normalised[best])
        """, says=('products of probabilities',)),
    _cell('encdec.beam_search', 'candidate ties to the largest (beam, token)', """
        def beam_search(next_log_probs, bos=1, eos=2, beam_size=3, max_len=10, alpha=1.0):
            live = [((bos,), 0.0)]
            finished = []
            for _ in range(max_len):
                logp = next_log_probs(np.array([list(s) for s, _ in live]))
                cands = []
                for i, (seq, sc) in enumerate(live):
                    for j in range(logp.shape[1]):
                        cands.append((sc + logp[i, j], i, j))
                cands.sort(reverse=True)
                live_next = []
                for sc, i, j in cands[:beam_size]:
                    seq = live[i][0] + (j,)
                    (finished if j == eos else live_next).append((seq, sc))
                live = live_next
                if not live:
                    break
            pool = finished or live
            normed = [sc / (len(seq) - 1) ** alpha for seq, sc in pool]
            k = int(np.argmax(normed))
            return np.array(pool[k][0][1:], dtype=np.int64), float(normed[k])
        """, says=("a tie between candidates at the beam's cut",)),
    _cell('gpt.block', 'own attention, scores not scaled', """
        def gpt_block(x, p, n_heads):
            B, T, d = x.shape
            W_q, W_k, W_v, W_o = p["attn"]
            h = layernorm_forward(x, *p["norm1"])[0]
            heads = lambda m: m.reshape(B, T, n_heads, d // n_heads).transpose(0, 2, 1, 3)
            q, k, v = heads(h @ W_q), heads(h @ W_k), heads(h @ W_v)
            s = np.einsum("bhid,bhjd->bhij", q, k)
            s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
            w = np.exp(s - s.max(-1, keepdims=True)); w /= w.sum(-1, keepdims=True)
            o = np.einsum("bhij,bhjd->bhid", w, v).transpose(0, 2, 1, 3).reshape(B, T, d)
            x = x + o @ W_o
            return x + ffn_forward(layernorm_forward(x, *p["norm2"])[0], *p["ffn"])[0]
        """, says=('attention scores not scaled',)),
    _cell('gpt.kv_step', 'keys and values from x', """
        def gpt_step(token, pos, cache, params, n_heads):
            x = params["W_E"][token][:, None, :] + params["W_P"][pos]
            for layer, p in enumerate(params["blocks"]):
                W_q, W_k, W_v, W_o = p["attn"]
                h = layernorm_forward(x, *p["norm1"])[0]
                k, v = split_heads(x @ W_k, n_heads), split_heads(x @ W_v, n_heads)
                if layer in cache:
                    k = np.concatenate([cache[layer][0], k], axis=2)
                    v = np.concatenate([cache[layer][1], v], axis=2)
                cache[layer] = (k, v)
                x = x + merge_heads(attention_forward(split_heads(h @ W_q, n_heads), k, v)[0]) @ W_o
                x = x + ffn_forward(layernorm_forward(x, *p["norm2"])[0], *p["ffn"])[0]
            x = layernorm_forward(x, *params["norm_f"])[0]
            return (x @ params["W_E"].T)[:, 0]
        """, says=("keys and values from the block's input",)),
    _cell('gpt.kv_step', 'attends to the old cache, its own key only at the first step', """
        def gpt_step(token, pos, cache, params, n_heads):
            x = params["W_E"][token][:, None, :] + params["W_P"][pos]
            for layer, p in enumerate(params["blocks"]):
                W_q, W_k, W_v, W_o = p["attn"]
                h = layernorm_forward(x, *p["norm1"])[0]
                q = split_heads(h @ W_q, n_heads)
                k, v = split_heads(h @ W_k, n_heads), split_heads(h @ W_v, n_heads)
                if layer not in cache:
                    cache[layer] = (k, v)
                K, V = cache[layer]
                att = attention_forward(q, K, V)[0]
                cache[layer] = (np.concatenate([K, k], axis=2), np.concatenate([V, v], axis=2)) if pos > 0 else (K, V)
                x = x + merge_heads(att) @ W_o
                x = x + ffn_forward(layernorm_forward(x, *p["norm2"])[0], *p["ffn"])[0]
            x = layernorm_forward(x, *params["norm_f"])[0]
            return (x @ params["W_E"].T)[:, 0]
        """, says=('cache updated after attending',)),
    _cell('flash.online_softmax', 'each block exponentiated against the old maximum', """
        def online_softmax_stats(s, block_k):
            m = np.full(s.shape[:-1], -np.inf)
            l = np.zeros(s.shape[:-1])
            out_m, out_l = [], []
            for j in range(0, s.shape[-1], block_k):
                x = s[..., j:j + block_k]
                bm = x.max(axis=-1)
                m_new = np.maximum(m, bm)
                ref = np.where(np.isfinite(m), m, bm)
                ref = np.where(np.isfinite(ref), ref, 0.0)
                l = (l + np.exp(x - ref[..., None]).sum(-1)) * np.exp(ref - np.where(np.isfinite(m_new), m_new, 0.0))
                m = m_new
                out_m.append(m); out_l.append(l)
            return np.stack(out_m, -1), np.stack(out_l, -1)
        """, says=('a later block 1000 above the first',)),
    _cell('encdec.embed', 'the positions scaled', """
        def embed(ids, W_E, P):
            T = ids.shape[1]
            return W_E[ids] + P[:T] * np.sqrt(W_E.shape[1])
        """, says=('positions scaled instead of the token embedding',)),
    _cell('gpt.block', 'LN_1 and LN_2 swapped', """
        def gpt_block(x, p, n_heads):
            mask = causal_mask(x.shape[1])
            h = layernorm_forward(x, *p["norm2"])[0]
            x = x + mha_forward(h, h, *p["attn"], n_heads, mask)[0]
            h = layernorm_forward(x, *p["norm1"])[0]
            return x + ffn_forward(h, *p["ffn"])[0]
        """, says=('the two layer norms swapped',)),
    _cell("gpt.forward", "notebook 05's sqrt(d_model) kept, and no final norm", """
        def gpt_forward(idx, params, n_heads):
            T = idx.shape[1]
            d = params["W_E"].shape[1]
            x = params["W_E"][idx] * np.sqrt(d) + params["W_P"][:T]
            for p in params["blocks"]:
                x = gpt_block(x, p, n_heads)
            return x @ params["W_E"].T
        """, says=("two mistakes at once", "embedding scaled by sqrt(d_model)", "final layer norm missing")),
    _cell('lm.lstm_cell', 'the candidate through a sigmoid', """
        def lstm_cell_forward(x, h_prev, c_prev, W, b):
            H = h_prev.shape[1]
            z = np.concatenate([h_prev, x], axis=1) @ W + b
            acts = 1 / (1 + np.exp(-z))          # all four blocks
            i, f, o, cand = np.split(acts, 4, axis=1)
            c = f * c_prev + i * cand
            h = o * np.tanh(c)
            return h, c
        """, says=('candidate squashed by a sigmoid',)),
    _cell('positional.rotation', 'blocks written at A[i:i+2, i:i+2]', """
        def rotation_matrix(tau, d_model):
            A = np.zeros((d_model, d_model))
            for i in range(d_model // 2):
                theta = tau / 10000 ** (2 * i / d_model)
                A[i:i+2, i:i+2] = np.array([[np.cos(theta), np.sin(theta)], [-np.sin(theta), np.cos(theta)]])
            return A
        """, says=('blocks that overlap',)),
    _cell('encdec.beam_search', 'the search stops at the first finished output', """
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
                if finished:
                    break
            pool = finished or list(zip(beams[:, 1:], scores))
            normalised = [score / len(tokens) ** alpha for tokens, score in pool]
            best = int(np.argmax(normalised))
            return pool[best][0], float(normalised[best])
        """, says=('stopped at the first finished output',)),
    _cell('gpt.forward', 'W_P[idx]', """
        def gpt_forward(idx, params, n_heads):
            x = params["W_E"][idx] + params["W_P"][idx]
            for blk in params["blocks"]:
                x = gpt_block(x, blk, n_heads)
            x = layernorm_forward(x, *params["norm_f"])[0]
            return x @ params["W_E"].T
        """, says=('position embeddings picked by token id',)),
    _cell('lm.rnn_backward', 'the loop stops before t = 0', """
        def rnn_backward(dh, cache):
            x, h0, Wxh, Whh, h = cache
            T = x.shape[1]
            dx = np.zeros_like(x)
            dWxh, dWhh, db = np.zeros_like(Wxh), np.zeros_like(Whh), np.zeros(Whh.shape[0])
            dnext = np.zeros_like(h0)
            for t in range(T - 1, 0, -1):
                da = (dh[:, t] + dnext) * (1 - h[:, t] ** 2)
                dx[:, t] = da @ Wxh.T
                dWxh += x[:, t].T @ da
                dWhh += h[:, t - 1].T @ da
                db += da.sum(axis=0)
                dnext = da @ Whh.T
            return dx, dnext, dWxh, dWhh, db
        """, says=("Looks like the loop stops before t = 0", "reversed(range(T))")),
    _cell('lm.ngram_probs', 'k times counts.size (every entry) for k times vocab_size', """
        def ngram_probs(counts, k=0.0):
            counts = counts.astype(float)
            V = counts.size
            totals = counts.sum(axis=-1, keepdims=True)
            denom = totals + k * V
            probs = np.where(denom > 0, (counts + k) / np.maximum(denom, 1e-300), 1.0 / counts.shape[-1])
            return probs
        """, says=("`V = counts.size`", "in place of `counts.size`")),
    _cell('scaling.param_count', 'the final norm and the positions both forgotten', """
        def param_count(n_layers, d_model, n_heads, vocab_size, n_ctx, d_ff, tied):
            attn = 4 * (d_model * d_model + d_model)
            mlp = d_model * d_ff + d_ff + d_ff * d_model + d_model
            ln = 4 * d_model
            emb = vocab_size * d_model * (1 if tied else 2)
            return n_layers * (attn + mlp + ln) + emb
        """, says=("two mistakes at once", "final layer norm forgotten", "position embeddings forgotten")),
    _cell('encdec.decoder_block', 'no causal mask, and norm2 and norm3 swapped', """
        def decoder_block(y, memory, p, n_heads, self_mask=None, cross_mask=None):
            y = layernorm_forward(y + mha_forward(y, y, *p["self_attn"], n_heads)[0], *p["norm1"])[0]
            y = layernorm_forward(y + mha_forward(y, memory, *p["cross_attn"], n_heads, cross_mask)[0], *p["norm3"])[0]
            y = layernorm_forward(y + ffn_forward(y, *p["ffn"])[0], *p["norm2"])[0]
            return y
        """, says=("two mistakes at once", "causal mask missing", "norm2 and norm3 swapped")),
    _cell('lm.rnn_backward', 'no tanh derivative, and W_hh not transposed', """
        def rnn_backward(dh, cache):
            x, h0, Wxh, Whh, h = cache
            T = x.shape[1]
            dx = np.zeros_like(x)
            dWxh, dWhh, db = np.zeros_like(Wxh), np.zeros_like(Whh), np.zeros(Whh.shape[0])
            grad_h = np.zeros_like(h0)
            for t in reversed(range(T)):
                da = dh[:, t] + grad_h
                h_prev = h[:, t - 1] if t > 0 else h0
                dx[:, t] = da @ Wxh.T
                dWxh += x[:, t].T @ da
                dWhh += h_prev.T @ da
                db += da.sum(axis=0)
                grad_h = da @ Whh
            return dx, grad_h, dWxh, dWhh, db
        """, says=('two mistakes at once', 'tanh derivative left out', 'W_hh not transposed')),
    _cell('gpt.block', 'heads split and merged by reshapes alone', """
        def gpt_block(x, p, n_heads):
            B, T, d = x.shape
            dk = d // n_heads
            W_q, W_k, W_v, W_o = p["attn"]
            h = layernorm_forward(x, *p["norm1"])[0]
            q = (h @ W_q).reshape(B, n_heads, T, dk)
            k = (h @ W_k).reshape(B, n_heads, T, dk)
            v = (h @ W_v).reshape(B, n_heads, T, dk)
            s = np.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(dk)
            s = np.where(np.tril(np.ones((T, T), dtype=bool)), s, -np.inf)
            a = np.exp(s - s.max(-1, keepdims=True))
            a = a / a.sum(-1, keepdims=True)
            o = np.einsum("bhqk,bhkd->bhqd", a, v).reshape(B, T, d)
            x = x + o @ W_o
            h = layernorm_forward(x, *p["norm2"])[0]
            return x + ffn_forward(h, *p["ffn"])[0]
        """, says=('heads split by a reshape alone',)),
    _cell('lm.roll_die', 'an unnormalised cumulative sum, argmax of the first to pass u', """
        def roll_die(weights, u):
            cum = np.cumsum(weights, axis=1)
            return np.argmax(cum > u[:, None], axis=1)
        """, says=('weights not normalised',)),
    _cell('lm.perplexity', 'row t scored against targets[t + 1]', """
        def perplexity(probs, targets):
            T = len(targets)
            p = probs[np.arange(T - 1), targets[1:]]
            nll = -np.log(p).mean()
            return np.exp(nll), nll / np.log(2)
        """, says=('targets shifted by one',)),
    _cell('flash.online_softmax', 'the row cut by np.array_split', """
        def online_softmax_stats(s, block_k):
            lead = s.shape[:-1]
            m = np.full(lead, -np.inf)
            lse = np.full(lead, -np.inf)
            M, L = [], []
            for b in np.array_split(np.arange(s.shape[-1]), int(np.ceil(s.shape[-1] / block_k))):
                blk = s[..., b[0]:b[-1] + 1]
                bm = blk.max(-1)
                safe = np.where(np.isfinite(bm), bm, 0.0)
                with np.errstate(divide="ignore"):
                    blse = safe + np.log(np.exp(blk - safe[..., None]).sum(-1))
                lse = np.logaddexp(lse, blse)
                m = np.maximum(m, bm)
                with np.errstate(invalid="ignore"):
                    l = np.where(np.isfinite(m), np.exp(lse - m), 0.0)
                M.append(m); L.append(l)
            return np.stack(M, -1), np.stack(L, -1)
        """, says=('cut into equal parts',)),
    _cell("lm.roll_die", "no clip to the last face, on the graded cases (one of the two failing has B = 1)", """
        def roll_die(weights, u):
            probs = weights / weights.sum(axis=1, keepdims=True)
            cdf = np.cumsum(probs, axis=1)
            return (cdf <= u[:, None]).sum(axis=1)
        """, says=("The failing cases all have u just below 1",), never=("first index",)),
    _cell('encdec.beam_search', "each beam's own best tokens all kept: the beam grows", """
        def beam_search(next_log_probs, bos=1, eos=2, beam_size=3, max_len=10, alpha=1.0):
            live = [([bos], 0.0)]
            finished = []
            for _ in range(max_len):
                logp = next_log_probs(np.array([seq for seq, _ in live]))
                new_live = []
                for (seq, s), row in zip(live, logp):
                    for tok in np.argsort(-row, kind="stable")[:beam_size]:
                        cand = (seq + [int(tok)], s + row[tok])
                        if tok == eos:
                            finished.append(cand)
                        else:
                            new_live.append(cand)
                live = new_live
                if not live:
                    break
            pool = finished or live
            normed = [s / (len(seq) - 1) ** alpha for seq, s in pool]
            b = int(np.argmax(normed))
            return np.array(pool[b][0][1:]), float(normed[b])
        """, says=("each beam's own best tokens kept",)),
    _cell('flash.forward', 'no 1/sqrt(d_k) on the tiles', """
        def flash_forward(Q, K, V, causal=False, block_q=16, block_k=16):
            Tq, Tk = Q.shape[-2], K.shape[-2]
            sc = 1.0
            lead = Q.shape[:-2]
            out = np.zeros(lead + (Tq, V.shape[-1]))
            lse = np.zeros(lead + (Tq,))
            for q0 in range(0, Tq, block_q):
                Qi = Q[..., q0:q0 + block_q, :]
                r = Qi.shape[-2]
                m = np.full(lead + (r,), -np.inf); l = np.zeros(lead + (r,))
                acc = np.zeros(lead + (r, V.shape[-1]))
                end = min(Tk, q0 + r + Tk - Tq) if causal else Tk
                for k0 in range(0, max(end, 0), block_k):
                    S = Qi @ np.swapaxes(K[..., k0:k0 + block_k, :], -1, -2) * sc
                    if causal:
                        qpos = np.arange(q0, q0 + r)[:, None] + Tk - Tq
                        kpos = np.arange(k0, k0 + S.shape[-1])[None, :]
                        S = np.where(kpos <= qpos, S, -np.inf)
                    mn = np.maximum(m, S.max(-1))
                    ref = np.where(np.isfinite(mn), mn, 0.0)
                    a = np.exp(m - ref)
                    P = np.exp(S - ref[..., None])
                    l = a * l + P.sum(-1)
                    acc = a[..., None] * acc + P @ V[..., k0:k0 + block_k, :]
                    m = mn
                out[..., q0:q0 + r, :] = acc / np.where(l == 0, 1.0, l)[..., None]
                with np.errstate(divide="ignore"):
                    lse[..., q0:q0 + r] = m + np.log(l)
            return out, lse
        """, says=('scores not scaled',)),
    _cell('flash.forward', 'the mask without the T_k - T_q offset, the loop stop with it', """
        def flash_forward(Q, K, V, causal=False, block_q=16, block_k=16):
            Tq, Tk = Q.shape[-2], K.shape[-2]
            sc = 1.0 / np.sqrt(Q.shape[-1])
            lead = Q.shape[:-2]
            out = np.zeros(lead + (Tq, V.shape[-1]))
            lse = np.zeros(lead + (Tq,))
            for q0 in range(0, Tq, block_q):
                Qi = Q[..., q0:q0 + block_q, :]
                r = Qi.shape[-2]
                m = np.full(lead + (r,), -np.inf); l = np.zeros(lead + (r,))
                acc = np.zeros(lead + (r, V.shape[-1]))
                end = min(Tk, q0 + r + Tk - Tq) if causal else Tk
                for k0 in range(0, max(end, 0), block_k):
                    S = Qi @ np.swapaxes(K[..., k0:k0 + block_k, :], -1, -2) * sc
                    if causal:
                        qpos = np.arange(q0, q0 + r)[:, None] 
                        kpos = np.arange(k0, k0 + S.shape[-1])[None, :]
                        S = np.where(kpos <= qpos, S, -np.inf)
                    mn = np.maximum(m, S.max(-1))
                    ref = np.where(np.isfinite(mn), mn, 0.0)
                    a = np.exp(m - ref)
                    P = np.exp(S - ref[..., None])
                    l = a * l + P.sum(-1)
                    acc = a[..., None] * acc + P @ V[..., k0:k0 + block_k, :]
                    m = mn
                out[..., q0:q0 + r, :] = acc / np.where(l == 0, 1.0, l)[..., None]
                with np.errstate(divide="ignore"):
                    lse[..., q0:q0 + r] = m + np.log(l)
            return out, lse
        """, says=('causal mask aligned top-left',)),
    _cell('flash.backward', 'dK without the scale', """
        def flash_backward(dout, Q, K, V, out, lse, causal=False, block_q=16, block_k=16):
            Tq, Tk = Q.shape[-2], K.shape[-2]
            sc = 1.0 / np.sqrt(Q.shape[-1])
            D = (dout * out).sum(-1)
            L = np.where(np.isfinite(lse), lse, np.inf)
            dQ, dK, dV = np.zeros_like(Q), np.zeros_like(K), np.zeros_like(V)
            for q0 in range(0, Tq, block_q):
                Qi, dO = Q[..., q0:q0 + block_q, :], dout[..., q0:q0 + block_q, :]
                r = Qi.shape[-2]
                end = min(Tk, q0 + r + Tk - Tq) if causal else Tk
                for k0 in range(0, max(end, 0), block_k):
                    Kj, Vj = K[..., k0:k0 + block_k, :], V[..., k0:k0 + block_k, :]
                    S = Qi @ np.swapaxes(Kj, -1, -2) * sc
                    if causal:
                        qpos = np.arange(q0, q0 + r)[:, None] + Tk - Tq
                        S = np.where(np.arange(k0, k0 + S.shape[-1]) <= qpos, S, -np.inf)
                    P = np.exp(S - L[..., q0:q0 + r, None])
                    dV[..., k0:k0 + block_k, :] += np.swapaxes(P, -1, -2) @ dO
                    dP = dO @ np.swapaxes(Vj, -1, -2)
                    dS = P * (dP - D[..., q0:q0 + r, None])
                    dQ[..., q0:q0 + r, :] += dS @ Kj * sc
                    dK[..., k0:k0 + block_k, :] += np.swapaxes(dS, -1, -2) @ Qi
            return dQ, dK, dV
        """, says=('dK not scaled',)),
    _cell('gpt.kv_step', 'the cache keeps the new key and value only', """
        def gpt_step(token, pos, cache, params, n_heads):
            x = params["W_E"][token][:, None, :] + params["W_P"][pos]
            for L, blk in enumerate(params["blocks"]):
                Wq, Wk, Wv, Wo = blk["attn"]
                h = layernorm_forward(x, *blk["norm1"])[0]
                q = split_heads(h @ Wq, n_heads)
                k_new, v_new = split_heads(h @ Wk, n_heads), split_heads(h @ Wv, n_heads)
                if L in cache:
                    K = np.concatenate([cache[L][0], k_new], axis=2)
                    V = np.concatenate([cache[L][1], v_new], axis=2)
                else:
                    K, V = k_new, v_new
                cache[L] = (k_new, v_new)
                x = x + merge_heads(attention_forward(q, K, V)[0]) @ Wo
                x = x + ffn_forward(layernorm_forward(x, *blk["norm2"])[0], *blk["ffn"])[0]
            x = layernorm_forward(x, *params["norm_f"])[0]
            return (x @ params["W_E"].T)[:, 0]
        """, says=('keeps only the newest key and value',)),
    _cell('lm.rnn_backward', "tanh's derivative at h_{t-1}", """
        def rnn_backward(dh, cache):
            x, h0, Wxh, Whh, h = cache
            B, T, _ = x.shape
            dx = np.zeros_like(x)
            dWxh = np.zeros_like(Wxh); dWhh = np.zeros_like(Whh); db = np.zeros(Whh.shape[0])
            carry = np.zeros_like(h0)
            for t in range(T - 1, -1, -1):
                hprev = h[:, t - 1] if t > 0 else h0
                da = (dh[:, t] + carry) * (1 - hprev ** 2)
                dx[:, t] = da @ Wxh.T
                dWxh += x[:, t].T @ da
                dWhh += hprev.T @ da
                db += da.sum(axis=0)
                carry = da @ Whh.T
            return dx, carry, dWxh, dWhh, db
        """, says=('tanh derivative taken at h_{t-1}',)),
    _cell('lm.rnn_backward', "tanh's derivative at h_{t-1}, and W_hh not transposed", """
        def rnn_backward(dh, cache):
            x, h0, Wxh, Whh, h = cache
            B, T, _ = x.shape
            dx = np.zeros_like(x)
            dWxh = np.zeros_like(Wxh); dWhh = np.zeros_like(Whh); db = np.zeros(Whh.shape[0])
            carry = np.zeros_like(h0)
            for t in range(T - 1, -1, -1):
                hprev = h[:, t - 1] if t > 0 else h0
                da = (dh[:, t] + carry) * (1 - hprev ** 2)
                dx[:, t] = da @ Wxh.T
                dWxh += x[:, t].T @ da
                dWhh += hprev.T @ da
                db += da.sum(axis=0)
                carry = da @ Whh
            return dx, carry, dWxh, dWhh, db
        """, says=('two mistakes at once', 'tanh derivative taken at h_{t-1}', 'W_hh not transposed')),
    _cell('positional.rope', 'the odd entries rotated from the new even ones', """
        def apply_rope(x, positions):
            d = x.shape[-1]
            w = 1.0 / 10000 ** (np.arange(0, d, 2) / d)
            th = np.asarray(positions, dtype=float)[:, None] * w
            c, s = np.cos(th), np.sin(th)
            x = x.astype(float)
            x[..., 0::2] = c * x[..., 0::2] - s * x[..., 1::2]
            x[..., 1::2] = s * x[..., 0::2] + c * x[..., 1::2]
            return x
        """, says=("rotated from the other's new value",)),
    _cell('lm.rnn_forward', 'the pre-activation stored in h', """
        def rnn_forward(x, h0, Wxh, Whh, b):
            B, T, _ = x.shape
            h = np.zeros((B, T, Whh.shape[0]))
            prev = h0
            for t in range(T):
                a = x[:, t] @ Wxh + prev @ Whh + b
                h[:, t] = a
                prev = np.tanh(a)
            return h, (x, h0, Wxh, Whh, h)
        """, says=('pre-activation stored in h',)),
    _cell('lm.rnn_forward', 'h_t stored at slot t + 1, slot 0 left at zero', """
        def rnn_forward(x, h0, Wxh, Whh, b):
            B, T, _ = x.shape
            h = np.zeros((B, T, Whh.shape[0]))
            prev = h0
            for t in range(T):
                prev = np.tanh(x[:, t] @ Wxh + prev @ Whh + b)
                if t + 1 < T:
                    h[:, t + 1] = prev
            return h, (x, h0, Wxh, Whh, h)
        """, says=('hidden states shifted by one step',)),
    _cell('lm.rnn_backward', 'h[:, t - 1] at t = 0 wraps to the last state', """
        def rnn_backward(dh, cache):
            x, h0, Wxh, Whh, h = cache
            B, T, _ = x.shape
            dx = np.zeros_like(x)
            dWxh = np.zeros_like(Wxh); dWhh = np.zeros_like(Whh); db = np.zeros(Whh.shape[0])
            carry = np.zeros_like(h0)
            for t in range(T - 1, -1, -1):
                hprev = h[:, t - 1]
                da = (dh[:, t] + carry) * (1 - h[:, t] ** 2)
                dx[:, t] = da @ Wxh.T
                dWxh += x[:, t].T @ da
                dWhh += hprev.T @ da
                db += da.sum(axis=0)
                carry = da @ Whh.T
            return dx, carry, dWxh, dWhh, db
        """, says=('h[:, t - 1] at t = 0',)),
    _cell('layernorm.backward', "dx's means over axis 0, twice in one line", """
        def layernorm_backward(dout, cache):
            x_hat, var, eps, gamma = cache
            s = 1.0 / np.sqrt(var + eps)
            axes = tuple(range(dout.ndim - 1))
            dgamma = np.sum(dout * x_hat, axis=axes)
            dbeta = np.sum(dout, axis=axes)
            g = dout * gamma
            dx = s * (g - g.mean(0, keepdims=True) - x_hat * (g * x_hat).mean(0, keepdims=True))
            return dx, dgamma, dbeta
        """, says=('axis `-1` in place of `0` in both calls of `mean`',)),
    _cell('gpt.kv_step', 'keys and values concatenated along the heads axis', """
        def gpt_step(token, pos, cache, params, n_heads):
            x = params["W_E"][token][:, None, :] + params["W_P"][pos]
            for L, blk in enumerate(params["blocks"]):
                Wq, Wk, Wv, Wo = blk["attn"]
                h = layernorm_forward(x, *blk["norm1"])[0]
                q = split_heads(h @ Wq, n_heads)
                k_new, v_new = split_heads(h @ Wk, n_heads), split_heads(h @ Wv, n_heads)
                if L in cache:
                    K = np.concatenate([cache[L][0], k_new], axis=1)
                    V = np.concatenate([cache[L][1], v_new], axis=1)
                else:
                    K, V = k_new, v_new
                cache[L] = (K, V)
                x = x + merge_heads(attention_forward(q, K, V)[0]) @ Wo
                x = x + ffn_forward(layernorm_forward(x, *blk["norm2"])[0], *blk["ffn"])[0]
            x = layernorm_forward(x, *params["norm_f"])[0]
            return (x @ params["W_E"].T)[:, 0]
        """, says=("`K = np.concatenate([cache[L][0], k_new], axis=1)`", "in both calls of `concatenate`")),
    _cell('encdec.beam_search', "each beam's own best tokens, then the first beam_size of them", """
        def beam_search(next_log_probs, bos=1, eos=2, beam_size=3, max_len=10, alpha=1.0):
            beams = [([bos], 0.0)]
            finished = []
            for _ in range(max_len):
                lp = next_log_probs(np.array([b for b, _ in beams]))
                cands = []
                for (seq, s), row in zip(beams, lp):
                    for tok in np.argsort(-row, kind="stable")[:beam_size]:
                        cands.append((seq + [int(tok)], s + row[tok]))
                cands = cands[:beam_size]
                beams = []
                for seq, s in cands:
                    (finished if seq[-1] == eos else beams).append((seq, s))
                if not beams:
                    break
            pool = finished or beams
            norm = [s / (len(seq) - 1) ** alpha for seq, s in pool]
            k = int(np.argmax(norm))
            return np.array(pool[k][0][1:]), float(norm[k])
        """, says=("each beam's own best tokens kept",)),
    _cell("flash.backward", "`.T` on two batched tiles (it reverses every axis)", """
        def flash_backward(dout, Q, K, V, out, lse, causal=False, block_q=16, block_k=16):
            Tq, Tk = Q.shape[-2], K.shape[-2]
            c = Q.shape[-1] ** -0.5
            D = (dout * out).sum(-1)
            L = np.where(np.isinf(lse), np.inf, lse)
            dQ = np.zeros(Q.shape); dK = np.zeros(K.shape); dV = np.zeros(V.shape)
            for i in range(0, Tq, block_q):
                q, g = Q[..., i:i + block_q, :], dout[..., i:i + block_q, :]
                n = q.shape[-2]
                for j in range(0, Tk, block_k):
                    k, v = K[..., j:j + block_k, :], V[..., j:j + block_k, :]
                    s = q @ np.swapaxes(k, -1, -2) * c
                    if causal:
                        keep = np.arange(j, j + s.shape[-1])[None, :] <= np.arange(i, i + n)[:, None] + Tk - Tq
                        s = np.where(keep, s, -np.inf)
                    p = np.exp(s - L[..., i:i + n, None])
                    dV[..., j:j + block_k, :] += p.T @ g
                    ds = p * (g @ np.swapaxes(v, -1, -2) - D[..., i:i + n, None])
                    dQ[..., i:i + n, :] += c * ds @ k
                    dK[..., j:j + block_k, :] += c * ds.T @ q
            return dQ, dK, dV
        """, says=("With `np.swapaxes(…, -1, -2)` in place of `.T` in both places, every case matches.",
                    "`dV[..., j:j + block_k, :] += p.T @ g`")),
    _cell("encdec.beam_search", "finished beams kept in the beam and extended; all beams ending with eos stops it", """
        def beam_search(next_log_probs, bos=1, eos=2, beam_size=3, max_len=10, alpha=1.0):
            beams = np.array([[bos]])
            scores = np.zeros(1)
            for t in range(max_len):
                logp = next_log_probs(beams)
                V = logp.shape[-1]
                total = (scores[:, None] + logp).reshape(-1)
                top = np.argsort(-total, kind="stable")[:beam_size]
                beams = np.concatenate([beams[top // V], (top % V)[:, None]], axis=1)
                scores = total[top]
                if np.all(beams[:, -1] == eos):
                    break
            results = []
            for seq, s in zip(beams, scores):
                toks = list(seq[1:])
                if eos in toks:
                    toks = toks[:toks.index(eos) + 1]
                results.append((np.array(toks), s / len(toks) ** alpha))
            best = int(np.argmax([r[1] for r in results]))
            return results[best][0], float(results[best][1])
        """, says=("finished beams extended",)),
    _cell("encdec.beam_search", "finished beams kept in the beam; the best beam ending with eos stops it", """
        def beam_search(next_log_probs, bos=1, eos=2, beam_size=3, max_len=10, alpha=1.0):
            beams = np.array([[bos]], dtype=np.int64)
            sc = np.zeros(1)
            for step in range(max_len):
                lp = next_log_probs(beams)
                tot = sc[:, None] + lp
                Vv = tot.shape[1]
                flat = tot.ravel()
                top = np.argsort(-flat, kind="stable")[:beam_size]
                beams = np.concatenate([beams[top // Vv], (top % Vv)[:, None]], axis=1)
                sc = flat[top]
                if beams[0, -1] == eos:
                    break
            toks = beams[0, 1:]
            if eos in toks:
                toks = toks[:list(toks).index(eos) + 1]
            return toks, float(sc[0] / len(toks) ** alpha)
        """, says=("finished beams extended",)),
    _cell("flash.backward", "lse sliced by the key block, a row along the keys", """
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
                    A = np.exp(S - lse[..., None, k0:k0 + block_k])
                    dV[..., k0:k0 + block_k, :] += np.swapaxes(A, -1, -2) @ dOi
                    dA = dOi @ np.swapaxes(Vj, -1, -2)
                    dS = A * (dA - delta[..., q0:q0 + rows, None])
                    dQ[..., q0:q0 + rows, :] += dS @ Kj * scale
                    dK[..., k0:k0 + block_k, :] += np.swapaxes(dS, -1, -2) @ Qi * scale
            return dQ, dK, dV
        """, says=("lse sliced by the key block", "lse[..., q0:q0 + rows, None]")),
    # a fourth audit (session 15): 142 cells written from the notebooks' text alone
    _cell("lm.rnn_backward", "the gradient from step t+1 added after the tanh derivative", """
        def rnn_backward(dh, cache):
            x, h0, Wxh, Whh, h = cache
            T = x.shape[1]
            dx = np.zeros(x.shape)
            dWxh = np.zeros(Wxh.shape)
            dWhh = np.zeros(Whh.shape)
            db = np.zeros(Whh.shape[1])
            from_future = np.zeros(h0.shape)
            for t in range(T - 1, -1, -1):
                prev = h0 if t == 0 else h[:, t - 1]
                da = dh[:, t] * (1 - h[:, t] ** 2) + from_future
                dx[:, t] = da @ Wxh.T
                dWxh += x[:, t].T @ da
                dWhh += prev.T @ da
                db += da.sum(0)
                from_future = da @ Whh.T
            return dx, from_future, dWxh, dWhh, db
        """, says=("added after the tanh derivative",)),
    _cell("lm.rnn_backward", "W_hh not transposed, and the loop stops before t = 0", """
        def rnn_backward(dh, cache):
            x, h0, Wxh, Whh, h = cache
            T = x.shape[1]
            dx = np.zeros_like(x)
            dWxh, dWhh = np.zeros_like(Wxh), np.zeros_like(Whh)
            db = np.zeros(Wxh.shape[1])
            back = np.zeros_like(h0)
            for t in range(T - 1, 0, -1):
                da = (dh[:, t] + back) * (1 - h[:, t] ** 2)
                dx[:, t] = da @ Wxh.T
                dWxh += x[:, t].T @ da
                dWhh += h[:, t - 1].T @ da
                db += da.sum(axis=0)
                back = da @ Whh
            return dx, back, dWxh, dWhh, db
        """, says=("two mistakes at once", "the loop stops before t = 0", "W_hh not transposed")),
    _cell("encdec.beam_search", "after the first step each beam extended by its own best token", """
        def beam_search(next_log_probs, bos=1, eos=2, beam_size=3, max_len=10, alpha=1.0):
            beams = np.array([[bos]], dtype=np.int64)
            scores = np.zeros(1)
            finished = []
            for step in range(max_len):
                logp = next_log_probs(beams)
                if step == 0:
                    toks = np.argsort(-logp[0], kind="stable")[:beam_size]
                    parents = np.zeros(len(toks), dtype=np.int64)
                else:
                    toks = np.argmax(logp, axis=1)
                    parents = np.arange(len(beams))
                new_scores = scores[parents] + logp[parents, toks]
                new_beams = np.concatenate([beams[parents], toks[:, None]], axis=1)
                stop = toks == eos
                finished += [(b[1:], s) for b, s in zip(new_beams[stop], new_scores[stop])]
                beams, scores = new_beams[~stop], new_scores[~stop]
                if len(beams) == 0:
                    break
            pool = finished if finished else [(b[1:], s) for b, s in zip(beams, scores)]
            vals = [s / len(t) ** alpha for t, s in pool]
            i = int(np.argmax(vals))
            return pool[i][0], float(vals[i])
        """, says=("each beam extended by its own best token only",)),
    _cell("positional.rope", "turned the other way, and by the row index instead of the positions", """
        def apply_rope(x, positions):
            T, d = x.shape[-2], x.shape[-1]
            pos = np.arange(T, dtype=float)
            inv = 1.0 / 10000 ** (2 * np.arange(d // 2) / d)
            ang = pos[:, None] * inv[None, :]
            ev, od = x[..., 0::2], x[..., 1::2]
            rot = np.empty(np.broadcast_shapes(x.shape, (T, d)))
            rot[..., 0::2] = np.cos(ang) * ev + np.sin(ang) * od
            rot[..., 1::2] = -np.sin(ang) * ev + np.cos(ang) * od
            return rot
        """, says=("two mistakes at once", "rotation sign flipped", "positions ignored")),
    _cell("gpt.block", "the FFN fed LN_1 of the block's input (attention and FFN side by side)", """
        def gpt_block(x, p, n_heads):
            gamma, beta = p["norm1"]
            mask = np.tril(np.ones((x.shape[1], x.shape[1]), dtype=bool))
            normed = layernorm_forward(x, gamma, beta)[0]
            h = x + mha_forward(normed, normed, *p["attn"], n_heads, mask)[0]
            normed_again = layernorm_forward(x, gamma, beta)[0]
            return h + ffn_forward(normed_again, *p["ffn"])[0]
        """, says=("two mistakes at once", "the first layer norm used twice", "the FFN fed the norm of the block's input")),
    _cell("gpt.next_token_probs", "top-p keeps the tokens whose sum stays below p, the crossing one dropped", """
        def next_token_probs(logits, temperature=1.0, top_k=None, top_p=None):
            probs = softmax(np.asarray(logits, dtype=float) / temperature, axis=-1)
            B, V = probs.shape
            if top_k is not None:
                keep = np.zeros_like(probs, dtype=bool)
                best = np.argpartition(-probs, top_k - 1, axis=-1)[:, :top_k]
                np.put_along_axis(keep, best, True, axis=-1)
                probs = np.where(keep, probs, 0.0)
                probs /= probs.sum(axis=-1, keepdims=True)
            if top_p is not None:
                for b in range(B):
                    order = np.argsort(-probs[b])
                    csum = np.cumsum(probs[b, order])
                    drop = order[csum >= top_p]
                    probs[b, drop] = 0.0
                with np.errstate(invalid="ignore"):
                    probs /= probs.sum(axis=-1, keepdims=True)
            return probs
        """, says=("top-p that drops the token crossing the threshold",)),
    _cell("encdec.decoder_block", "the cross-attention reads y (the self-attention dropped), and norms 2 and 3 swapped", """
        def decoder_block(y, memory, p, n_heads, self_mask=None, cross_mask=None):
            self_out = mha_forward(y, y, *p["self_attn"], n_heads, self_mask)[0]
            a = layernorm_forward(y + self_out, *p["norm1"])[0]
            cross_out = mha_forward(y, memory, *p["cross_attn"], n_heads, cross_mask)[0]
            b = layernorm_forward(y + cross_out, *p["norm3"])[0]
            return layernorm_forward(b + ffn_forward(b, *p["ffn"])[0], *p["norm2"])[0]
        """, says=("two mistakes at once", "the self-attention's result dropped", "norm2 and norm3 swapped")),
]


@pytest.mark.parametrize("cell", CELLS, ids=lambda c: f"{c.exercise}: {c.what[0]}")
def test_the_feedback_says_what_the_cell_does_and_nothing_it_does_not(cell):
    verdict = verdict_with(cell.exercise, cell.source, public=cell.public)
    text = " ".join(verdict.messages)
    assert verdict.full_marks == cell.full_marks, text
    for words in cell.says:
        assert words in text, (words, text)
    for words in cell.never:
        assert words not in text, (words, text)
