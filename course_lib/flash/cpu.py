"""FlashAttention's tiled forward and backward in torch, with the hand-derived backward.

The same algorithm as ``course_lib.flash.reference`` (read its docstring for the derivation),
written for speed: the leading axes are flattened into one batch axis N, every tile product
is one batched GEMM (``torch.bmm``), and the softmax steps run in place on the tile. It is
plain torch, so it runs wherever the tensors live (CPU or CUDA), but it was tuned for the CPU.

Shapes (course glossary, row form): q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v),
the same leading axes for all three; out (..., T_q, d_v); lse (..., T_q).

Supported: ``causal`` with ``causal_mask``'s alignment (query i sits at position
i + T_k - T_q), and any boolean ``mask`` broadcastable to (..., T_q, T_k) (True: may attend),
which is sliced tile by tile, so an expanded padding mask costs no T_q x T_k memory. With
both, a key must pass both. Key blocks wholly in a query block's future are skipped, and the
last one is cut at the last visible key. A query with no key gets out = 0, lse = -inf and
zero gradients. float16 and bfloat16 inputs are computed in float32 and the results cast back.

Why these block sizes: on a CPU a tile is cheapest when it is large enough for an efficient
GEMM and small enough for its (N, block_q, block_k) scores to stay in cache between the
element-wise passes that follow; ``benchmarks/flash_cpu.py`` measured the choice.
"""
from __future__ import annotations

import torch

BLOCK_Q = 128
BLOCK_K = 512


def tiled_forward(q, k, v, causal=False, mask=None, block_q=BLOCK_Q, block_k=BLOCK_K):
    """out = softmax(q k^T / sqrt(d_k) + M) v in tiles; returns out (..., T_q, d_v) and
    lse (..., T_q), the log-sum-exp of each query's scaled, masked scores (in float32 for
    half-precision inputs)."""
    lead, T_q, T_k = q.shape[:-2], q.shape[-2], k.shape[-2]
    qs, k3, v3 = _batched(q, k, v)
    N, d_v = qs.shape[0], v3.shape[-1]
    kT = k3.transpose(1, 2)  # (N, d_k, T_k), a view: bmm reads it transposed for free
    mask = _aligned_mask(mask, lead)
    out = torch.empty(N, T_q, d_v, dtype=qs.dtype, device=qs.device)
    lse = torch.empty(N, T_q, dtype=qs.dtype, device=qs.device)
    for q0, rows, tiles in _tiles(T_q, T_k, causal, block_q, block_k):
        m = torch.full((N, rows), float("-inf"), dtype=qs.dtype, device=qs.device)
        l = torch.zeros(N, rows, dtype=qs.dtype, device=qs.device)
        acc = torch.zeros(N, rows, d_v, dtype=qs.dtype, device=qs.device)
        for k0, cols in tiles:
            s = torch.bmm(qs[:, q0:q0 + rows], kT[:, :, k0:k0 + cols])  # (N, rows, cols)
            _mask_tile_(s, q0, k0, T_q, T_k, causal, mask, lead)
            m_new = torch.maximum(m, s.amax(dim=-1))
            shift = _finite(m_new)
            alpha = (m - shift).exp_()  # rescales what was summed under the old maximum
            p = s.sub_(shift[..., None]).exp_()  # (N, rows, cols), 0 where masked
            l.mul_(alpha).add_(p.sum(dim=-1))
            acc.mul_(alpha[..., None]).add_(torch.bmm(p, v3[:, k0:k0 + cols]))
            m = m_new
        torch.div(acc, torch.where(l == 0, 1.0, l)[..., None], out=out[:, q0:q0 + rows])
        lse[:, q0:q0 + rows] = m + l.log()  # -inf for a query with no keys
    return out.to(q.dtype).reshape(*lead, T_q, d_v), lse.reshape(*lead, T_q)


def tiled_backward(dout, q, k, v, out, lse, causal=False, mask=None, block_q=BLOCK_Q,
                   block_k=BLOCK_K):
    """Gradients of ``tiled_forward``: dq (..., T_q, d_k), dk (..., T_k, d_k), dv (..., T_k, d_v).

    Each tile's weights are recomputed as exp(S - lse); delta = rowsum(dout * out) stands in for
    rowsum(dA * A), so nothing of size T_q x T_k is kept.
    """
    lead, T_q, T_k = q.shape[:-2], q.shape[-2], k.shape[-2]
    qs, k3, v3 = _batched(q, k, v)
    do, o = (x.reshape(-1, T_q, x.shape[-1]).to(qs.dtype) for x in (dout, out))
    kT, vT = k3.transpose(1, 2), v3.transpose(1, 2)  # (N, d_k, T_k), (N, d_v, T_k)
    mask = _aligned_mask(mask, lead)
    delta = (do * o).sum(dim=-1)  # (N, T_q)
    lse = lse.reshape(-1, T_q)
    lse = torch.where(torch.isfinite(lse), lse, float("inf"))  # exp(S - inf) = 0: no keys
    dqs, dk, dv = torch.zeros_like(qs), torch.zeros_like(k3), torch.zeros_like(v3)
    for q0, rows, tiles in _tiles(T_q, T_k, causal, block_q, block_k):
        q_i, do_i = qs[:, q0:q0 + rows], do[:, q0:q0 + rows]
        for k0, cols in tiles:
            s = torch.bmm(q_i, kT[:, :, k0:k0 + cols])  # (N, rows, cols)
            _mask_tile_(s, q0, k0, T_q, T_k, causal, mask, lead)
            p = s.sub_(lse[:, q0:q0 + rows, None]).exp_()  # A_ij, the textbook weights
            dv[:, k0:k0 + cols] += torch.bmm(p.transpose(1, 2), do_i)
            dp = torch.bmm(do_i, vT[:, :, k0:k0 + cols])  # dA_ij
            ds = dp.sub_(delta[:, q0:q0 + rows, None]).mul_(p)  # dS_ij = A_ij * (dA_ij - delta_i)
            dqs[:, q0:q0 + rows] += torch.bmm(ds, k3[:, k0:k0 + cols])
            dk[:, k0:k0 + cols] += torch.bmm(ds.transpose(1, 2), q_i)  # q_i holds 1/sqrt(d_k)
    dq = dqs.mul_(q.shape[-1] ** -0.5)
    return tuple(g.to(x.dtype).reshape(x.shape) for g, x in ((dq, q), (dk, k), (dv, v)))


class _TiledAttention(torch.autograd.Function):
    """``tiled_forward`` whose backward is ``tiled_backward`` (the derivation, not autograd)."""

    @staticmethod
    def forward(ctx, q, k, v, causal, mask, block_q, block_k):
        out, lse = tiled_forward(q, k, v, causal, mask, block_q, block_k)
        ctx.save_for_backward(q, k, v, out, lse, mask)
        ctx.settings = causal, block_q, block_k
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse, mask = ctx.saved_tensors
        causal, block_q, block_k = ctx.settings
        grads = tiled_backward(dout, q, k, v, out, lse, causal, mask, block_q, block_k)
        return (*grads, None, None, None, None)


def tiled_attention(q, k, v, causal=False, mask=None, block_q=BLOCK_Q, block_k=BLOCK_K):
    """Attention out (..., T_q, d_v) by tiles, differentiable through ``tiled_backward``."""
    return _TiledAttention.apply(q, k, v, causal, mask, block_q, block_k)


# ----------------------------------------------------------------------------- helpers
def _batched(q, k, v):
    """q / sqrt(d_k), k, v as (N, T, d_k) tensors in the working precision (float32 at least).

    Scaling q once costs O(T d) instead of O(T^2) on every tile.
    """
    dtype = q.dtype if q.dtype in (torch.float32, torch.float64) else torch.float32
    q3, k3, v3 = (x.reshape(-1, *x.shape[-2:]).to(dtype) for x in (q, k, v))
    return q3 * q.shape[-1] ** -0.5, k3, v3


def _aligned_mask(mask, lead):
    """A bool mask broadcastable to lead + (T_q, T_k), given len(lead) + 2 axes (a view).

    It is not expanded: a padding mask (B, 1, 1, T_k) stays that small, and each tile
    broadcasts its slice against the scores.
    """
    if mask is None:
        return None
    return mask.reshape((1,) * (len(lead) + 2 - mask.ndim) + tuple(mask.shape))


def _tiles(T_q, T_k, causal, block_q, block_k):
    """(q0, rows, [(k0, cols), ...]) for each query block: the key tiles it can see.

    Causal: the last visible key of rows q0 .. q0+rows-1 is q0 + rows - 1 + T_k - T_q, so
    the key range stops there; blocks beyond it are never visited and the last is cut short.
    """
    for q0 in range(0, T_q, block_q):
        rows = min(block_q, T_q - q0)
        stop = T_k if not causal else max(0, min(T_k, q0 + rows + T_k - T_q))
        yield q0, rows, [(k0, min(block_k, stop - k0)) for k0 in range(0, stop, block_k)]


def _mask_tile_(s, q0, k0, T_q, T_k, causal, mask, lead):
    """Write -inf into tile s (N, rows, cols) where a key is masked or in a query's future.

    mask: as ``_aligned_mask`` returns, for leading axes ``lead`` (N = their product).

    Only the columns past the block's first query position can be in its future, so the
    causal fill touches that strip (at most rows x rows per tile), not the whole tile.
    """
    rows, cols = s.shape[-2:]
    if mask is not None:
        # a size-1 axis of the mask broadcasts, so only axes of full length are sliced
        r = slice(q0, q0 + rows) if mask.shape[-2] > 1 else slice(None)
        c = slice(k0, k0 + cols) if mask.shape[-1] > 1 else slice(None)
        s.view(*lead, rows, cols).masked_fill_(~mask[..., r, c], float("-inf"))
    if causal:
        pos = q0 + T_k - T_q  # position of the block's first query
        first = max(0, pos + 1 - k0)  # first column the first query cannot see
        if first < cols:
            # future[r, c] = key k0+first+c is later than query pos+r
            future = torch.ones(rows, cols - first, dtype=torch.bool, device=s.device)
            s[:, :, first:].masked_fill_(future.triu_(pos + 1 - k0 - first), float("-inf"))


def _finite(m):
    """m where finite, 0 where -inf: exp(-inf - 0) = 0 instead of exp(-inf + inf) = NaN."""
    return torch.where(torch.isfinite(m), m, 0.0)
