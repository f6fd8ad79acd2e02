"""Attention in tiles: the online softmax and FlashAttention's forward and backward, in numpy.

The textbook pass (``course_lib.attention``) builds S and A, two (..., T_q, T_k) arrays, and
keeps A for the backward. Here nothing of size T_q x T_k is ever held: queries go in blocks
of ``block_q`` rows, keys and values in blocks of ``block_k`` rows, and each pair of blocks
makes one (block_q, block_k) tile of scores that is used and dropped.

Online softmax. For one row s of scores read block by block, keep a running maximum m and a
running normaliser l = sum_j exp(s_j - m). When a block raises the maximum from m to m',
everything summed so far was scaled by exp(-m) and must be scaled by exp(-m'): multiply by
alpha = exp(m - m') before adding the block's own terms. After the last block,
softmax(s)_j = exp(s_j - m) / l, and the log-sum-exp is lse = m + log l.

Forward (per query block i): the same update carries a running output acc, the numerator
sum_j exp(s_j - m) v_j, rescaled by the same alpha; out_i = acc / l at the end. Only out and
lse (..., T_q) are saved.

Backward (per tile): recompute A_ij = exp(S_ij - lse_i) from the saved lse (exactly the
textbook weights), then with D_i = rowsum(dout_i * out_i), which equals rowsum(dA_i * A_i)
because out_i = A_i V:
    dV_j += A_ij^T dout_i        dA_ij = dout_i V_j^T        dS_ij = A_ij * (dA_ij - D_i)
    dQ_i += dS_ij K_j / sqrt(d_k)     dK_j += dS_ij^T Q_i / sqrt(d_k)
which is ``attention_backward``'s softmax JVP with the row sum taken from out instead of A.

Shapes follow the course glossary (row form): Q (..., T_q, d_k), K (..., T_k, d_k),
V (..., T_k, d_v), the same leading axes for all three. ``causal`` uses
``course_lib.attention.causal_mask``'s alignment (query i sits at position i + T_k - T_q); a
key block wholly in the future of a query block is skipped, never computed. A query with no
key to attend to (possible only when T_q > T_k) gets out = 0 and lse = -inf.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np


class FlashCache(NamedTuple):
    """What ``flash_backward`` needs: inputs, output (..., T_q, d_v), lse (..., T_q), settings."""
    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray
    out: np.ndarray
    lse: np.ndarray
    causal: bool
    block_q: int
    block_k: int


def online_softmax_stats(s, block_size):
    """Running maximum and normaliser of ``s`` (..., T_k) read in blocks of ``block_size``.

    Returns m (...) = max_j s_j and l (...) = sum_j exp(s_j - m), computed in one pass.
    A row that is -inf everywhere gives m = -inf and l = 0.
    """
    s = np.asarray(s)
    m = np.full(s.shape[:-1], -np.inf, dtype=s.dtype)
    l = np.zeros(s.shape[:-1], dtype=s.dtype)
    for start in range(0, s.shape[-1], block_size):
        block = s[..., start:start + block_size]
        m_new = np.maximum(m, block.max(axis=-1))
        shift = finite_shift(m_new)
        l = l * np.exp(m - shift) + np.exp(block - shift[..., None]).sum(axis=-1)
        m = m_new
    return m, l


def online_softmax(s, block_size):
    """softmax(s) along the last axis from ``online_softmax_stats`` (zeros for an all -inf row)."""
    m, l = online_softmax_stats(s, block_size)
    return np.exp(s - finite_shift(m)[..., None]) / np.where(l == 0, 1.0, l)[..., None]


def flash_forward(Q, K, V, causal=False, block_q=64, block_k=64):
    """Attention out = softmax(Q K^T / sqrt(d_k) + M) V in tiles, never holding T_q x T_k.

    Returns out (..., T_q, d_v), equal to ``attention_forward``'s, and a ``FlashCache``
    whose lse (..., T_q) is the log-sum-exp of each query's scaled scores.
    """
    T_q, T_k, d_k = Q.shape[-2], K.shape[-2], Q.shape[-1]
    scale = 1.0 / np.sqrt(d_k)
    lead = Q.shape[:-2]
    out = np.zeros(lead + (T_q, V.shape[-1]), dtype=np.result_type(Q, K, V))
    lse = np.zeros(lead + (T_q,), dtype=out.dtype)
    for q0 in range(0, T_q, block_q):
        Qi = Q[..., q0:q0 + block_q, :]
        rows = Qi.shape[-2]
        m = np.full(lead + (rows,), -np.inf, dtype=out.dtype)
        l = np.zeros(lead + (rows,), dtype=out.dtype)
        acc = np.zeros(lead + (rows, V.shape[-1]), dtype=out.dtype)
        for k0 in _key_blocks(q0, rows, T_q, T_k, block_k, causal):
            S = Qi @ np.swapaxes(K[..., k0:k0 + block_k, :], -1, -2) * scale  # (..., rows, cols)
            S = _mask_tile(S, q0, k0, T_q, T_k, causal)
            m_new = np.maximum(m, S.max(axis=-1))
            shift = finite_shift(m_new)
            alpha = np.exp(m - shift)  # rescales what was summed under the old maximum
            A_tilde = np.exp(S - shift[..., None])  # (..., rows, cols), 0 where masked
            l = alpha * l + A_tilde.sum(axis=-1)
            acc = alpha[..., None] * acc + A_tilde @ V[..., k0:k0 + block_k, :]
            m = m_new
        out[..., q0:q0 + rows, :] = acc / np.where(l == 0, 1.0, l)[..., None]
        with np.errstate(divide="ignore"):
            lse[..., q0:q0 + rows] = m + np.log(l)  # -inf for a query with no keys
    return out, FlashCache(Q, K, V, out, lse, causal, block_q, block_k)


def flash_backward(dout, cache):
    """Gradients of ``flash_forward``: dQ (..., T_q, d_k), dK (..., T_k, d_k), dV (..., T_k, d_v).

    The weights of each tile are recomputed from lse; delta = rowsum(dout * out) replaces the
    row sums of the softmax JVP, so no T_q x T_k array is stored.
    """
    Q, K, V, out, lse, causal, block_q, block_k = cache
    T_q, T_k = Q.shape[-2], K.shape[-2]
    scale = 1.0 / np.sqrt(Q.shape[-1])
    delta = (dout * out).sum(axis=-1)  # (..., T_q)
    lse_safe = np.where(np.isfinite(lse), lse, np.inf)  # exp(S - inf) = 0: no keys, no weight
    dQ, dK, dV = np.zeros_like(Q), np.zeros_like(K), np.zeros_like(V)
    for q0 in range(0, T_q, block_q):
        Qi, dOi = Q[..., q0:q0 + block_q, :], dout[..., q0:q0 + block_q, :]
        rows = Qi.shape[-2]
        for k0 in _key_blocks(q0, rows, T_q, T_k, block_k, causal):
            Kj, Vj = K[..., k0:k0 + block_k, :], V[..., k0:k0 + block_k, :]
            S = _mask_tile(Qi @ np.swapaxes(Kj, -1, -2) * scale, q0, k0, T_q, T_k, causal)
            A = np.exp(S - lse_safe[..., q0:q0 + rows, None])  # (..., rows, cols)
            dV[..., k0:k0 + block_k, :] += np.swapaxes(A, -1, -2) @ dOi
            dA = dOi @ np.swapaxes(Vj, -1, -2)
            dS = A * (dA - delta[..., q0:q0 + rows, None])
            dQ[..., q0:q0 + rows, :] += dS @ Kj * scale
            dK[..., k0:k0 + block_k, :] += np.swapaxes(dS, -1, -2) @ Qi * scale
    return dQ, dK, dV


# ----------------------------------------------------------------------------- helpers
def finite_shift(m):
    """m where finite, 0 where -inf: exp(-inf - 0) = 0 instead of exp(-inf + inf) = NaN."""
    return np.where(np.isfinite(m), m, 0.0)


def _key_blocks(q0, rows, T_q, T_k, block_k, causal):
    """Starts of the key blocks query rows q0 .. q0+rows-1 can see (causal: none past the last)."""
    stop = T_k if not causal else min(T_k, q0 + rows + T_k - T_q)
    return range(0, max(stop, 0), block_k)


def _mask_tile(S, q0, k0, T_q, T_k, causal):
    """Set to -inf the entries of tile S (..., rows, cols) where a key is in a query's future."""
    if not causal:
        return S
    rows, cols = S.shape[-2:]
    query_pos = np.arange(q0, q0 + rows)[:, None] + (T_k - T_q)
    return np.where(np.arange(k0, k0 + cols)[None, :] <= query_pos, S, -np.inf)
