"""Scaled dot-product and multi-head attention, forward and hand-derived backward.

Row form (Week 7, eq. (4); what the code of the course uses):

    Q (..., T_q, d_k)   K (..., T_k, d_k)   V (..., T_k, d_v)
    S   = Q K^T / sqrt(d_k)                       (..., T_q, T_k)  scores
    A   = softmax(S + M), row-wise (over keys)    (..., T_q, T_k)  attention weights
    out = A V                                     (..., T_q, d_v)

Column form (the blog post, forward steps 1-3), in the blog's own letters (bold in the
notebooks): X (d, T) holds one token per column, Q = A X, K = B X, V = C X with projections
A, B, C (d_k, d), and Z = V softmax(Q^T K / sqrt(d_k)) with the softmax taken column-wise (the
blog writes a head's width d_k as h). Its letters appear only in the ``self_attention_col_*``
functions; in the glossary's row form (course_lib/README.md) they are X_blog = X^T,
A = W_k^T, B = W_q^T, C = W_v^T, the blog's Q = K_row^T (keys) and K = Q_row^T (queries),
Att = A^T (the row form's weights), Z = out^T, E = dout^T.
``self_attention_col_forward`` says why A makes the keys.

Masks are boolean, True where a query may attend to a key (PyTorch's convention for a
boolean ``attn_mask``), broadcastable to (..., T_q, T_k). Week 7's additive mask is
``M = np.where(mask, 0.0, -np.inf)``. A query whose keys are all masked gets zero weights
and a zero output, never NaN.

numpy functions are the reference (float64 friendly, line by line with the derivation);
the ``*_torch`` twins are the device-agnostic fast path whose backward is the same
hand-derived one, wired in through ``torch.autograd.Function``.
"""
from __future__ import annotations

from functools import lru_cache, wraps
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from course_lib.softmax import softmax, softmax_jvp


# ----------------------------------------------------------------------------- numpy
class AttentionCache(NamedTuple):
    """What ``attention_backward`` needs: the inputs and the weights A (..., T_q, T_k)."""
    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray
    A: np.ndarray


class MHACache(NamedTuple):
    """What ``mha_backward`` needs; ``attention.A`` holds the weights (B, n_heads, T_q, T_k)."""
    x_q: np.ndarray
    x_kv: np.ndarray
    W_q: np.ndarray
    W_k: np.ndarray
    W_v: np.ndarray
    W_o: np.ndarray
    concat: np.ndarray
    attention: AttentionCache


def masked_scores(S, mask=None):
    """Week 7's S + M: the scores with -inf where ``mask`` is False (unchanged if None)."""
    return S if mask is None else np.where(mask, S, -np.inf)


def causal_mask(T_q, T_k=None):
    """Boolean (T_q, T_k) mask, True where key j is not in the future of query i.

    With T_k > T_q the queries are the last T_q positions (as with a KV cache):
    query i sits at position i + T_k - T_q. Week 7's M is -inf exactly where this is False.
    """
    T_k = T_q if T_k is None else T_k
    return np.tril(np.ones((T_q, T_k), dtype=bool), k=T_k - T_q)


def padding_mask(lengths, T):
    """Boolean (B, 1, T) mask, True for the first lengths[b] keys of sequence b.

    The middle axis of size 1 broadcasts over the queries.
    """
    lengths = np.asarray(lengths)
    return (np.arange(T)[None, :] < lengths[:, None])[:, None, :]


def attention_forward(Q, K, V, mask=None):
    """Scaled dot-product attention (Week 7, eq. (4)).

    Q: (..., T_q, d_k), K: (..., T_k, d_k), V: (..., T_k, d_v), mask: bool, broadcastable
    to (..., T_q, T_k). Returns out (..., T_q, d_v) and an ``AttentionCache`` whose
    weights A (..., T_q, T_k) sum to 1 over the keys (0 for fully masked queries).
    """
    d_k = Q.shape[-1]
    S = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)  # (..., T_q, T_k)
    A = softmax(masked_scores(S, mask))  # (..., T_q, T_k), 0 where masked
    out = A @ V  # (..., T_q, d_v)
    return out, AttentionCache(Q, K, V, A)


def attention_backward(dout, cache):
    """Gradients of scaled dot-product attention, the blog post's backward steps in row form.

    dout: (..., T_q, d_v). Returns dQ (..., T_q, d_k), dK (..., T_k, d_k), dV (..., T_k, d_v).
    Masked entries need no special care: their weights are 0, so are their gradients.
    """
    Q, K, V, A = cache
    scale = 1.0 / np.sqrt(Q.shape[-1])
    dA = dout @ np.swapaxes(V, -1, -2)  # step 1: (..., T_q, T_k)
    dS = softmax_jvp(A, dA)  # step 2: softmax JVP, row by row
    dQ = dS @ K * scale  # step 3: (..., T_q, d_k)
    dK = np.swapaxes(dS, -1, -2) @ Q * scale  # (..., T_k, d_k)
    dV = np.swapaxes(A, -1, -2) @ dout  # (..., T_k, d_v)
    return dQ, dK, dV


def self_attention_col_forward(X, A, B, C, causal=False):
    """The blog post's self-attention in column form, its forward steps 1-3.

    X: (d, T), one token per column; A, B, C: (d_k, d). The blog's Q = A X, K = B X,
    V = C X (d_k, T), c_it = q_i . k_t / sqrt(d_k), Att[:, t] = softmax over i, Z = V Att: (d_k, T).
    Output t mixes the values v_i weighted by q_i . k_t, so in the row form the *keys*
    are the rows of (A X)^T and the *queries* those of (B X)^T:
    Z^T = attention_forward(Q=(B X)^T, K=(A X)^T, V=(C X)^T) and Att = A_row^T.
    ``causal`` keeps i <= t, the upper triangle (the blog post's causal z_t, forward step 3).
    Returns Z and cache = (X, A, B, C, Q, K, V, Att).
    """
    h = A.shape[0]  # the blog's letter for a head's width, d_k
    Q, K, V = A @ X, B @ X, C @ X  # (d_k, T) each
    mask = causal_mask(X.shape[1]).T if causal else None  # (T, T), i <= t
    Att = softmax(masked_scores(Q.T @ K / np.sqrt(h), mask), axis=0)  # (T, T), columns sum to 1
    Z = V @ Att  # (d_k, T)
    return Z, (X, A, B, C, Q, K, V, Att)


def self_attention_col_backward(E, cache):
    """The blog post's compact backward: dF/d[A; B; C] = P X^T and dF/dX = [A; B; C]^T P.

    E = dF/dZ: (d_k, T). G = Att (x) (V^T E) is the column-wise softmax JVP (T, T) and
    P = [K G^T / sqrt(d_k); Q G / sqrt(d_k); E Att^T] is (3 d_k, T).
    Returns dA, dB, dC (d_k, d) and dX (d, T).
    """
    X, A, B, C, Q, K, V, Att = cache
    h = A.shape[0]  # the blog's letter for a head's width, d_k
    G = softmax_jvp(Att, V.T @ E, axis=0)  # (T, T), dF/dc_it
    P = np.vstack([K @ G.T / np.sqrt(h), Q @ G / np.sqrt(h), E @ Att.T])  # (3 d_k, T)
    dA, dB, dC = np.split(P @ X.T, 3)  # each (d_k, d)
    dX = np.vstack([A, B, C]).T @ P  # (d, T)
    return dA, dB, dC, dX


def self_attention_col_via_rows(X, A, B, C, E, causal=False):
    """The blog post's Z and its gradients computed in the row form instead, to compare.

    Row form with X_r = X^T (T, d): queries X_r B^T, keys X_r A^T, values X_r C^T (see
    ``self_attention_col_forward`` for why B makes the queries). Returns Z (d_k, T) and
    dA, dB, dC (d_k, d), dX (d, T) for dF/dZ = E: transposes of the row-form results.
    """
    X_r = X.T  # (T, d)
    mask = causal_mask(X.shape[1]) if causal else None
    out, cache = attention_forward(X_r @ B.T, X_r @ A.T, X_r @ C.T, mask)  # (T, d_k)
    dQ_r, dK_r, dV_r = attention_backward(E.T, cache)  # (T, d_k) each
    dA, dB, dC = (X_r.T @ g for g in (dK_r, dQ_r, dV_r))  # (d, d_k): dF/dW for X_r @ W
    dX_r = dQ_r @ B + dK_r @ A + dV_r @ C  # (T, d)
    return out.T, dA.T, dB.T, dC.T, dX_r.T


def split_heads(x, n_heads):
    """(..., T, d_model) -> (..., n_heads, T, d_k) with d_k = d_model / n_heads.

    Head j owns the features j*d_k .. (j+1)*d_k - 1 of every token.
    Works on numpy arrays and torch tensors alike.
    """
    *lead, T, d_model = x.shape
    x = x.reshape(*lead, T, n_heads, d_model // n_heads)  # (..., T, n_heads, d_k)
    return x.swapaxes(-3, -2)  # (..., n_heads, T, d_k)


def merge_heads(x):
    """(..., n_heads, T, d_k) -> (..., T, n_heads * d_k): the concatenation of Week 7, eq. (5)."""
    x = x.swapaxes(-3, -2)  # (..., T, n_heads, d_k)
    return x.reshape(*x.shape[:-2], -1)


def mha_forward(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    """Multi-head attention, Week 7, eqs. (5) and (8); self-attention when x_kv is x_q.

    x_q: (B, T_q, d_model), the queries' side (the decoder in cross-attention);
    x_kv: (B, T_k, d_model), the keys' and values' side (the encoder in cross-attention);
    W_q, W_k: (d_model, n_heads * d_k); W_v: (d_model, n_heads * d_v); W_o: (n_heads * d_v,
    d_model). Head j uses columns j*d_k .. (j+1)*d_k - 1 of W_q and W_k (its W_j^Q, W_j^K).
    mask: broadcastable to (B, n_heads, T_q, T_k). Returns out (B, T_q, d_model) and an
    ``MHACache`` whose ``attention.A`` holds the weights (B, n_heads, T_q, T_k).
    """
    q = split_heads(x_q @ W_q, n_heads)  # (B, n_heads, T_q, d_k)
    k = split_heads(x_kv @ W_k, n_heads)  # (B, n_heads, T_k, d_k)
    v = split_heads(x_kv @ W_v, n_heads)  # (B, n_heads, T_k, d_v)
    heads, att_cache = attention_forward(q, k, v, mask)  # (B, n_heads, T_q, d_v)
    concat = merge_heads(heads)  # (B, T_q, n_heads * d_v)
    return concat @ W_o, MHACache(x_q, x_kv, W_q, W_k, W_v, W_o, concat, att_cache)


def _weight_grad(x, dy):
    """dF/dW for y = x @ W over all leading axes: x (..., d_in), dy (..., d_out)."""
    return x.reshape(-1, x.shape[-1]).T @ dy.reshape(-1, dy.shape[-1])


def mha_backward(dout, cache):
    """Gradients of ``mha_forward``: (dx_q, dx_kv, dW_q, dW_k, dW_v, dW_o).

    For self-attention (x_kv is x_q) the input gradient is dx_q + dx_kv.
    """
    x_q, x_kv, W_q, W_k, W_v, W_o, concat, att_cache = cache
    n_heads = att_cache.A.shape[-3]
    dconcat = dout @ W_o.T  # (B, T_q, n_heads * d_v)
    dq, dk, dv = attention_backward(split_heads(dconcat, n_heads), att_cache)
    dq, dk, dv = merge_heads(dq), merge_heads(dk), merge_heads(dv)  # (B, T, n_heads * d_.)
    dx_q = dq @ W_q.T
    dx_kv = dk @ W_k.T + dv @ W_v.T
    return (dx_q, dx_kv, _weight_grad(x_q, dq), _weight_grad(x_kv, dk),
            _weight_grad(x_kv, dv), _weight_grad(concat, dout))


# ----------------------------------------------------------------------------- torch
def _attention_weights(q, k, mask=None):
    """A = softmax(q k^T / sqrt(d_k), masked) in torch, (..., T_q, T_k), for q (..., T_q, d_k)
    and k (..., T_k, d_k) with the same leading axes. A fully masked query's weights come out
    NaN (``_Attention`` zeroes them where that can happen)."""
    s = (q * q.shape[-1] ** -0.5) @ k.transpose(-2, -1)  # q is the smaller to scale
    if mask is not None:
        s.masked_fill_(~mask, float("-inf"))
    return torch.softmax(s, dim=-1)  # subtracts each row's maximum (torch's fused kernel)


def _dropped(a, p):
    """Dropout on the attention weights (GPT-2's and nanoGPT's ``attn_dropout``): A_drop =
    A * keep / (1 - p), keep ~ Bernoulli(1 - p) per weight; returns (A_drop, keep), or (A, None)
    when p is 0. out = A_drop V; each query's weights no longer sum to 1, only on average."""
    return torch.native_dropout(a, p, True) if p else (a, None)  # one fused pass for both


def _attend_backward(dout, q, k, v, a, a_drop=None, out=None):
    """``attention_backward`` in torch: dq, dk, dv from dout (..., T_q, d_v), the inputs and
    the weights A (``_attention_weights``), and, where out = A_drop V with dropout
    (``_dropped``), the dropped weights A_drop. Under CUDA autocast q, k, v and dout are
    bfloat16 while A (from exp) is float32: it works in A's dtype, and autograd casts each
    gradient back to its input's. With ``out`` given, the row sums of step 2 come from it
    (FlashAttention's identity, notebook 07: rowsum(dA * A) = rowsum(dout * out), d_v wide
    instead of T_k).

    Through the dropout dA = dA_drop * keep / (1 - p), so A * dA = A_drop * dA_drop: step 2's
    dS = A * (dA - rowsum) needs A and A_drop, never the keep mask: two passes over the
    (T_q, T_k) numbers where scaling dA_drop and forming A_drop again took six (the forward
    saves A_drop, in A's dtype, in place of the boolean mask)."""
    q, k, v, dout = (t.to(a.dtype) for t in (q, k, v, dout))
    a_out = a if a_drop is None else a_drop  # the weights that made out
    da = dout @ v.transpose(-2, -1)  # step 1: (..., T_q, T_k), the gradient of A_out
    # step 2, dS = A * (dA - rowsum(dA * A)), times the scale of S, in place on dA's buffer
    rowsum = (da * a_out if out is None else dout * out.to(a.dtype)).sum(dim=-1, keepdim=True)
    if a_drop is None:
        ds = da.sub_(rowsum).mul_(a)
    else:
        ds = da.mul_(a_drop).addcmul_(a, rowsum, value=-1)  # A_drop dA_drop - A rowsum
    ds.mul_(q.shape[-1] ** -0.5)
    return ds @ k, ds.transpose(-2, -1) @ q, a_out.transpose(-2, -1) @ dout  # step 3


class _Attention(torch.autograd.Function):
    """Scaled dot-product attention whose backward is ``attention_backward``'s, in torch."""

    @staticmethod
    def forward(ctx, q, k, v, mask, p):
        a = _attention_weights(q, k, mask)  # (..., T_q, T_k)
        # a query with every key hidden gets NaN weights from the softmax: 0 by the course's rule
        if mask is not None and (a.device.type != "cpu" or not bool(mask.any(dim=-1).all())):
            a = a.nan_to_num_(0.0)  # (the test reads the mask's own small shape; on a GPU it
            # would wait for the device, where one more pass costs less)
        a_out, _ = _dropped(a, p)  # the backward needs A_drop, not the keep mask
        ctx.save_for_backward(q, k, v, a, a_out if p else None)
        ctx.mark_non_differentiable(a)
        return a_out @ v, a

    @staticmethod
    def backward(ctx, dout, _):
        return (*_attend_backward(dout, *ctx.saved_tensors), None, None)


class _SelfAttention(torch.autograd.Function):
    """Multi-head self-attention from the packed projections to the concatenated heads, with
    ``_Attention``'s backward: qkv (B, T, 3 d_model) = x [W_q W_k W_v] -> concat (B, T,
    n_heads d_v) and the weights A (B, n_heads, T, T), which carry no gradient. ``bias`` is
    None or Week 7's additive mask M (T, T) (0 where a query sees a key, -inf where not), with
    every query seeing at least one key, as the causal mask does.

    The same numbers as ``split_heads``, ``_Attention`` and ``merge_heads`` in a row, in fewer
    passes over memory, which at GPT's sizes on a CPU cost as much as the products:
    - a matrix product over head-split views copies its operands first (about 7 copies a
      layer); here q, k, v are laid out once, in one copy, and the backward undoes it in one;
    - S = Q K^T / sqrt(d_k) + M is one call (``baddbmm``: the scale and the mask ride on the
      product), where a boolean ``masked_fill`` broadcast over (B, n_heads) took as long as
      the product itself.
    """

    @staticmethod
    def forward(ctx, qkv, n_heads, bias, p):
        B, T, width = qkv.shape
        d_k = width // (3 * n_heads)
        # (3, B * n_heads, T, d_k), contiguous: the heads as rows of 3-D products (``bmm``)
        q, k, v = qkv.view(B, T, 3, n_heads, d_k).permute(2, 0, 3, 1, 4).reshape(3, -1, T, d_k)
        scores = torch.baddbmm(bias if bias is not None else qkv.new_zeros(()), q,
                               k.transpose(-2, -1), alpha=d_k ** -0.5)
        a = torch.softmax(scores, dim=-1)  # (B * n_heads, T, T), max-subtracted, fused
        a_out, _ = _dropped(a, p)  # the backward needs A_drop, not the keep mask
        out = a_out @ v  # (B * n_heads, T, d_k)
        ctx.save_for_backward(q, k, v, a, a_out if p else None, out)
        ctx.n_heads = n_heads
        weights = a.view(B, n_heads, T, T)
        ctx.mark_non_differentiable(weights)
        return merge_heads(out.view(B, n_heads, T, d_k)), weights  # (B, T, n_heads * d_k)

    @staticmethod
    def backward(ctx, dconcat, _):
        q, k, v, a, a_drop, out = ctx.saved_tensors
        (B, T, width), n_heads = dconcat.shape, ctx.n_heads
        d_k = width // n_heads
        dout = split_heads(dconcat, n_heads).reshape(-1, T, d_k)  # (B * n_heads, T, d_k)
        grads = _attend_backward(dout, q, k, v, a, a_drop, out)  # dq, dk, dv
        dqkv = torch.empty(B, T, 3, n_heads, d_k, dtype=a.dtype, device=a.device)  # as qkv
        for into, grad in zip(dqkv.permute(2, 0, 3, 1, 4), grads):
            into.copy_(grad.view(B, n_heads, T, d_k))  # each head's rows back to its columns
        return dqkv.view(B, T, 3 * width), None, None, None


def _once_per_shape(make):
    """``make``, cached by its arguments: every layer of every step asks for the same mask.
    Under ``torch.compile`` it runs uncached and is traced into the graph (TorchDynamo would
    step over the cache anyway, with a warning)."""
    cached = lru_cache(maxsize=64)(make)

    @wraps(make)
    def get(*args):
        return make(*args) if torch.compiler.is_compiling() else cached(*args)
    return get


@_once_per_shape
def _causal_mask_torch(T_q: int, T_k: int, device) -> torch.Tensor:
    """``causal_mask`` as a bool tensor on ``device``, made once per shape."""
    return torch.from_numpy(causal_mask(T_q, T_k)).to(device)


@_once_per_shape
def _causal_bias_torch(T: int, device, dtype) -> torch.Tensor:
    """Week 7's additive causal mask M (T, T) on ``device``: 0 where query i sees key j
    (j <= i), -inf where not. Made once per shape, as ``_causal_mask_torch``."""
    return torch.zeros(T, T, dtype=dtype, device=device).masked_fill_(
        ~_causal_mask_torch(T, T, device), float("-inf"))


def attention_torch(q, k, v, mask=None, dropout=0.0):
    """``attention_forward`` in torch, on whatever device the tensors live.

    q, k, v as in ``attention_forward`` with the same leading axes (no broadcasting
    between them); mask a bool tensor broadcastable to (..., T_q, T_k); ``dropout`` the rate
    at which attention weights are dropped (``_dropped``; 0 outside training).
    Returns out (..., T_q, d_v) and the weights A (..., T_q, T_k) before any dropout, which
    carry no gradient.
    """
    return _Attention.apply(q, k, v, mask, dropout)


def attention_autograd_torch(q, k, v, mask=None, dropout=0.0):
    """The same forward written with plain torch ops, differentiated by torch autograd (the
    same dropout draws as ``attention_torch`` after the same seed)."""
    s = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    a = torch.softmax(s, dim=-1).nan_to_num(0.0)  # fully masked rows: NaN -> 0
    return _dropped(a, dropout)[0] @ v, a


def self_attention_torch(qkv, n_heads, bias=None, dropout=0.0):
    """Multi-head self-attention from the packed projections: qkv (B, T, 3 d_model) -> the
    concatenated heads (B, T, d_model) and the weights A (B, n_heads, T, T), no gradient.
    ``bias``: None or the additive mask (T, T) (``_causal_bias_torch``). The hand-derived
    backward, with the heads laid out once (``_SelfAttention`` says why)."""
    return _SelfAttention.apply(qkv, n_heads, bias, dropout)


def self_attention_autograd_torch(qkv, n_heads, bias=None, dropout=0.0):
    """``self_attention_torch`` in plain torch ops (``attention_autograd_torch`` per head, the
    additive mask as the boolean one it encodes), differentiated by torch autograd."""
    q, k, v = (split_heads(t, n_heads) for t in qkv.chunk(3, dim=-1))
    out, a = attention_autograd_torch(q, k, v, None if bias is None else bias == 0, dropout)
    return merge_heads(out), a


class MultiHeadAttention(nn.Module):
    """``mha_forward`` as a module with the hand-derived backward inside.

    Parameters W_q, W_k, W_v, W_o (d_model, d_model) are used as ``x @ W`` like the numpy
    reference. ``forward(x_q, x_kv=None, mask=None, cache=None, causal=False)``: x_kv
    defaults to x_q (self-attention); ``causal`` hides every key in a query's future
    (``causal_mask``'s alignment), on top of ``mask``. With a ``cache`` (a dict, empty at
    first) the keys and values of x_kv are appended to those of earlier calls, under "k" and
    "v" (B, n_heads, T_past + T_k, d_k), and the queries attend to all of them (a KV cache;
    ``mask`` must then cover T_past + T_k keys).

    ``flash`` picks the path. False (the default): the textbook ``attention_torch``, which
    keeps the last weights (B, n_heads, T_q, T_k) in ``self.attention`` for plots. True:
    ``course_lib.flash.flash_attention`` (notebook 07), the same numbers and gradients
    without ever forming T_q x T_k weights, so ``self.attention`` stays None and
    ``weights()`` refuses.

    ``dropout``: the rate at which attention weights are dropped in training (GPT-2's and
    nanoGPT's attention dropout; ``_dropped``), textbook path only: the flash kernels have
    none. ``self.attention`` keeps the weights before dropout.
    """

    def __init__(self, d_model: int, n_heads: int, flash: bool = False, dropout: float = 0.0):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout={dropout}: a rate in [0, 1) is needed")
        if flash and dropout:
            raise ValueError("the flash attention kernels have no dropout on the attention "
                             "weights: use dropout=0 with flash=True, or flash=False")
        self.n_heads, self.flash, self.dropout = n_heads, flash, dropout
        std = d_model ** -0.5
        self.W_q, self.W_k, self.W_v, self.W_o = (
            nn.Parameter(torch.randn(d_model, d_model) * std) for _ in range(4))
        self.attention = None

    def forward(self, x_q, x_kv=None, mask=None, cache: dict | None = None, causal=False):
        p = self.dropout if self.training else 0.0
        if x_kv is None or x_kv is x_q:  # self-attention: one product for Q, K and V
            x_kv = x_q
            W_qkv = torch.cat((self.W_q, self.W_k, self.W_v), dim=1)  # (d_model, 3 d_model)
            qkv = x_q @ W_qkv  # (B, T, 3 d_model)
            if cache is None and not self.flash and mask is None and qkv.ndim == 3:  # training
                T = x_q.shape[-2]
                bias = _causal_bias_torch(T, qkv.device, qkv.dtype) if causal else None
                concat, weights = self_attention_torch(qkv, self.n_heads, bias, p)
                # detached: the weights carry no gradient, and a module attribute is an output
                # of a compiled graph (torch.compile on a GPU, torch 2.11, took it for one that
                # did and failed to trace the backward)
                self.attention = weights.detach()
                return concat @ self.W_o  # (B, T, d_model)
            qkv = qkv.split(self.W_q.shape[1], dim=-1)  # 3 x (B, T, d_model)
        else:
            qkv = (x_q @ self.W_q, x_kv @ self.W_k, x_kv @ self.W_v)
        q, k, v = (split_heads(t, self.n_heads) for t in qkv)  # (B, n_heads, T_q or T_k, d_k)
        if cache is not None:
            if "k" in cache:
                k = torch.cat([cache["k"], k], dim=-2)  # (B, n_heads, T_past + T_k, d_k)
                v = torch.cat([cache["v"], v], dim=-2)
            cache["k"], cache["v"] = k, v
        if self.flash:
            # imported here: the grading sandbox stages course_lib's modules, not its packages
            # (flash/), and notebooks 02-06 import this module there for its numpy functions
            from course_lib.flash import flash_attention

            heads, self.attention = flash_attention(q, k, v, causal, mask), None
        else:
            if causal:
                visible = _causal_mask_torch(q.shape[-2], k.shape[-2], q.device)
                mask = visible if mask is None else mask & visible
            heads, weights = attention_torch(q, k, v, mask, p)  # (B, n_heads, T_q, d_k)
            self.attention = weights.detach()  # as above
        return merge_heads(heads) @ self.W_o  # (B, T_q, d_model)

    def weights(self):
        """The weights (B, n_heads, T_q, T_k) of the last forward pass (None before one)."""
        if self.flash:
            raise RuntimeError("this attention runs with flash=True, which never forms the "
                               "weights: set flash=False in the model's config (or on this "
                               "layer) and run the model again to look at them")
        return self.attention
