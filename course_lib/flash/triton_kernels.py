"""FlashAttention in Triton: ``reference``'s tiled forward and backward as GPU kernels.

Each kernel is a loop nest of ``reference.flash_forward`` / ``flash_backward`` turned inside
out: the outer loop over query blocks (or key blocks) becomes the grid, one program per block
and per (batch, head), and the inner loop over tiles runs inside the program, with its own
block held on chip from start to end. Three kernels:

    _forward_kernel    grid (B*n_heads, query blocks): out and lse, online softmax
    _delta_kernel      grid (query blocks, B*n_heads): delta = rowsum(dout * out)
    _backward_kernel   grid (B*n_heads, blocks): program j makes dK_j, dV_j (holding key block j,
                       looping over the queries), then dQ_j (holding query block j, looping
                       over the keys)

The backward's two halves recompute each tile's weights twice but let every program own the
rows it writes: no atomics, and each kernel can be re-run (which ``triton.autotune`` does
while it times the candidates). Pairing key block j with query block j in one program
balances causal work (the first key blocks are seen by the most queries, the first query
blocks see the fewest keys) and makes the backward one launch after the delta kernel's.

exp2. GPUs evaluate 2^x natively, and e^x = 2^(x log2 e); so the kernels scale the scores by
scale2 = log2(e) / sqrt(d_k) and keep the running maximum m and the log-sum-exp in base 2:
lse2 = lse * log2(e). The softmax is unchanged, since 2^(s2 - m2) = e^(s - m). The wrapper
hands back lse in natural units, as ``reference.flash_forward`` does.

Masking. A tile wholly below the causal diagonal and inside both sequences needs no mask;
only tiles that straddle the diagonal or run past the end of the keys do. Each kernel splits
its loop into an unmasked and a masked part (``MASKED`` is a compile-time flag, so the bulk
of the tiles pays nothing for masking) and never visits tiles wholly in the future. Rows past
the end of a sequence are loaded as zeros: never stored, and where they are summed over (the
queries, for dK and dV) they add exactly 0. Causal alignment is
``course_lib.attention.causal_mask``'s: query i sits at position i + T_k - T_q, and a query
with no key to see (T_q > T_k) gets out = 0 and lse = -inf, as in the reference.

Precision: inputs float32, bfloat16 or float16; every sum (scores, l, acc, dQ, dK, dV, delta) is
float32, and the weights (A_tilde in the forward, A in the backward) and dS are cast to the
input type before their matmuls, as in FlashAttention. float32 matmuls run on tensor cores as
tf32x3 (see ``_dot``), which keeps about float32's precision where plain TF32 would keep 10 bits.

Shapes follow the course glossary: q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v),
the leading axes (typically B, n_heads) the same for all three and flattened into one.
With ``TRITON_INTERPRET=1`` set before this module is imported, Triton runs the kernels in
numpy on the CPU (slowly: small blocks, no autotuning), which is how tests/course_lib/test_flash_triton.py
checks them on a machine without a GPU.
"""
from __future__ import annotations

import math
import os

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # the module still imports; available() is then False and nothing launches
    triton = tl = None

HEAD_SIZES = (16, 32, 64, 128)  # d_k and d_v: powers of two (tl.arange), at least 16 (tl.dot)
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
LOG2_E = math.log2(math.e)


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


# Candidate tiles per kernel, for 16-bit inputs and for float32 (twice the bytes per element, and
# tf32x3 splits each operand in two, so smaller tiles), and for head sizes up to 64 and of 128
# (twice the registers per row, so fewer rows or fewer warps). The forward's are (BLOCK_M,
# BLOCK_N, num_warps, num_stages), BLOCK_M counting queries and BLOCK_N keys. The backward's are
# (BLOCK, STEP, num_warps, num_stages): a program holds BLOCK keys while it streams the queries
# STEP at a time (dK, dV), then BLOCK queries while it streams the keys (dQ). On a GPU
# ``triton.autotune`` times the candidates once per shape and dtype and keeps the fastest; one
# that does not fit in shared memory is skipped. The interpreter gets one small tile: it is slow,
# and autotuning slower.
if _interpreting():  # not square, so that a mix-up of the two sides shows
    _FORWARD_TILES = {key: [(32, 16, 1, 1)] for key in ((2, True), (2, False), (4, True), (4, False))}
    _BACKWARD_TILES = {key: [(32, 16, 1, 1)] for key in _FORWARD_TILES}
else:  # keyed by (bytes per element, head size <= 64)
    _FORWARD_TILES = {(2, True): [(128, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 3),
                                  (128, 64, 4, 4), (128, 32, 4, 3), (64, 64, 4, 3)],
                      (2, False): [(128, 64, 8, 3), (128, 32, 4, 3), (128, 64, 4, 2),
                                   (64, 64, 4, 3), (128, 128, 8, 2)],
                      (4, True): [(64, 32, 4, 2), (64, 16, 4, 2), (64, 64, 8, 2), (32, 32, 4, 2)],
                      (4, False): [(64, 32, 4, 2), (64, 16, 4, 2), (32, 32, 4, 2), (32, 16, 4, 2)]}
    _BACKWARD_TILES = {(2, True): [(128, 32, 4, 5), (128, 32, 4, 3), (128, 32, 8, 3),
                                   (128, 64, 8, 3), (64, 32, 4, 3), (64, 16, 4, 3)],
                       (2, False): [(128, 32, 8, 3), (128, 32, 4, 2), (64, 32, 4, 3),
                                    (128, 16, 4, 3), (64, 16, 4, 2)],
                       (4, True): [(64, 32, 4, 2), (64, 16, 4, 2), (32, 32, 4, 2), (32, 16, 4, 1)],
                       (4, False): [(32, 16, 4, 2), (64, 16, 4, 2), (32, 32, 4, 1)]}
_DELTA_BLOCK = 16 if _interpreting() else 128


def _jit(fn):
    """``triton.jit``, or the plain function when triton is missing (it is then never launched)."""
    return fn if triton is None else triton.jit(fn)


def _tiles_key(q_bytes, d_k, d_v):
    """The key of ``_FORWARD_TILES`` and ``_BACKWARD_TILES`` for inputs of this size and shape."""
    return q_bytes, max(d_k, d_v) <= 64


def _tuned(tiles, names):
    """``triton.jit`` and ``triton.autotune`` over ``tiles[_tiles_key(...)]``, per shape and dtype.

    ``names``: what the kernel calls a candidate's two sizes ("BLOCK_M", "BLOCK_N" or "BLOCK", "STEP").
    """
    def wrap(fn):
        if triton is None:
            return fn
        configs = {key: [triton.Config(dict(zip(names, (a, b))), num_warps=w, num_stages=s)
                         for a, b, w, s in candidates] for key, candidates in tiles.items()}

        def for_inputs(_all_configs, named_args, **kwargs):
            args = {**named_args, **kwargs}
            return configs[_tiles_key(args["Q"].element_size(), args["D_K"], args["D_V"])]
        every = [config for candidates in configs.values() for config in candidates]
        return triton.autotune(every, key=["T_q", "T_k", "D_K", "D_V", "CAUSAL"],
                               prune_configs_by={"early_config_prune": for_inputs})(triton.jit(fn))
    return wrap


# ----------------------------------------------------------------------------- public API
def available() -> bool:
    """Whether the kernels can run here: triton importable, and a CUDA GPU or the interpreter."""
    return triton is not None and (torch.cuda.is_available() or _interpreting())


def supports(q, k, v, causal=False, mask=None) -> bool:
    """Whether ``flash_attention_triton(q, k, v, causal)`` handles these inputs.

    Either value of ``causal``, but no explicit mask; q, k, v of one dtype among ``DTYPES``, on a CUDA
    device (any device under the interpreter); d_k and d_v in ``HEAD_SIZES``; q (..., T_q, d_k),
    k (..., T_k, d_k), v (..., T_k, d_v) with the same leading axes and T_q, T_k >= 1.
    """
    if mask is not None or q.dim() < 2 or not q.dim() == k.dim() == v.dim():
        return False
    same_lead = q.shape[:-2] == k.shape[:-2] == v.shape[:-2] and k.shape[-2] == v.shape[-2]
    return (same_lead and q.shape[-1] == k.shape[-1] and q.shape[-2] >= 1 and k.shape[-2] >= 1
            and q.dtype in DTYPES and q.dtype == k.dtype == v.dtype
            and q.shape[-1] in HEAD_SIZES and v.shape[-1] in HEAD_SIZES
            and q.device == k.device == v.device and (q.is_cuda or _interpreting()))


def flash_attention_triton(q, k, v, causal=False):
    """softmax(Q K^T / sqrt(d_k) + M) V by the Triton kernels, differentiable.

    q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v) (see ``supports``) -> out
    (..., T_q, d_v) in q's dtype. The backward is ``reference.flash_backward``'s.
    """
    return _FlashAttention.apply(q, k, v, causal)


def flash_forward_triton(q, k, v, causal=False):
    """The forward kernel alone: out (..., T_q, d_v) and lse (..., T_q) (float32, natural log).

    lse is ``reference.flash_forward``'s: log sum_j exp(S_ij), -inf for a query with no keys.
    """
    out, lse2 = _forward(*(_rows(t) for t in (q, k, v)), causal)
    return out.view(*q.shape[:-1], v.shape[-1]), (lse2 / LOG2_E).view(q.shape[:-1])


class _FlashAttention(torch.autograd.Function):
    """Forward saves q, k, v, out and lse2 (never a T_q x T_k array); backward recomputes tiles."""

    @staticmethod
    def forward(ctx, q, k, v, causal):
        q3, k3, v3 = (_rows(t) for t in (q, k, v))  # (B*n_heads, T, d) each
        out, lse2 = _forward(q3, k3, v3, causal)
        ctx.save_for_backward(q3, k3, v3, out, lse2)
        ctx.causal, ctx.shapes = causal, (q.shape, k.shape, v.shape)
        return out.view(*q.shape[:-1], v.shape[-1])

    @staticmethod
    def backward(ctx, dout):
        grads = _backward(_rows(dout), *ctx.saved_tensors, ctx.causal)
        return (*(g.view(shape) for g, shape in zip(grads, ctx.shapes)), None)


# ----------------------------------------------------------------------------- launchers
def _rows(t):
    """(..., T, d) -> contiguous (B*n_heads, T, d): one row of memory per token."""
    return t.reshape(-1, t.shape[-2], t.shape[-1]).contiguous()


def _shape_args(q, k, v, causal):
    """The sizes and flags the tiled kernels share (the autotuning key)."""
    return dict(T_q=q.shape[1], T_k=k.shape[1], D_K=q.shape[2], D_V=v.shape[2], CAUSAL=causal)


def _scale(q):
    """1 / sqrt(d_k), the scale of the scores."""
    return 1.0 / math.sqrt(q.shape[-1])


def _grid(n_rows, block, batch_heads):
    """(batch·head, row block): consecutive programs take one block of every head, in turn."""
    return lambda meta: (batch_heads, triton.cdiv(n_rows, meta[block]))


def _forward(q, k, v, causal):
    """q (BH, T_q, d_k), k (BH, T_k, d_k), v (BH, T_k, d_v) -> out (BH, T_q, d_v), lse2 (BH, T_q)."""
    BH, T_q = q.shape[:2]
    out = torch.empty(BH, T_q, v.shape[2], device=q.device, dtype=q.dtype)
    lse2 = torch.empty(BH, T_q, device=q.device, dtype=torch.float32)
    _forward_kernel[_grid(T_q, "BLOCK_M", BH)](q, k, v, out, lse2, scale2=_scale(q) * LOG2_E,
                                               **_shape_args(q, k, v, causal))
    return out, lse2


def _backward(dout, q, k, v, out, lse2, causal):
    """Gradients dQ, dK, dV (shapes of q, k, v) from dout (BH, T_q, d_v) and the saved tensors."""
    BH, T_q = q.shape[:2]
    delta = torch.empty_like(lse2)  # (BH, T_q), float32
    _delta_kernel[(triton.cdiv(T_q, _DELTA_BLOCK), BH)](out, dout, delta, T_q, D_V=v.shape[2],
                                                        BLOCK_M=_DELTA_BLOCK)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    shape = dict(_shape_args(q, k, v, causal), scale=_scale(q), scale2=_scale(q) * LOG2_E)
    _backward_kernel[_grid(max(T_q, k.shape[1]), "BLOCK", BH)](
        q, k, v, dout, lse2, delta, dq, dk, dv, **shape)
    return dq, dk, dv


# ----------------------------------------------------------------------------- tile helpers
@_jit
def _dot(a, b, acc=None):
    """a @ b (+ acc), summed in float32. float32 operands go through tf32x3: three TF32
    tensor-core products (hi*hi + hi*lo + lo*hi) that keep about float32's precision."""
    return tl.dot(a, b, acc, input_precision="tf32x3")


@_jit
def _load_rows(ptr, first, n_rows, BLOCK: tl.constexpr, D: tl.constexpr):
    """Rows first .. first+BLOCK-1 of a contiguous (n_rows, D) matrix: (BLOCK, D), 0 past the end."""
    rows = first + tl.arange(0, BLOCK)
    cols = tl.arange(0, D)
    return tl.load(ptr + rows[:, None] * D + cols[None, :], mask=rows[:, None] < n_rows, other=0.0)


@_jit
def _store_rows(ptr, first, n_rows, x, BLOCK: tl.constexpr, D: tl.constexpr):
    """Write x (BLOCK, D) to rows first .. of a (n_rows, D) matrix, in its dtype, up to n_rows."""
    rows = first + tl.arange(0, BLOCK)
    cols = tl.arange(0, D)
    tl.store(ptr + rows[:, None] * D + cols[None, :], x.to(ptr.dtype.element_ty),
             mask=rows[:, None] < n_rows)


@_jit
def _visible(q_idx, k_idx, T_q, T_k, CAUSAL: tl.constexpr):
    """True where query q_idx may attend to key k_idx and both exist (``reference._mask_tile``).

    q_idx and k_idx broadcast against each other: (BLOCK_M, 1) and (1, BLOCK_N), or transposed.
    """
    ok = (q_idx < T_q) & (k_idx < T_k)
    if CAUSAL:
        ok = ok & (k_idx <= q_idx + T_k - T_q)
    return ok


@_jit
def _key_range(q0, T_q, T_k, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Keys that queries q0 .. q0+BLOCK_M-1 see: tiles in [0, full) unmasked, [full, stop) masked.

    ``reference._key_blocks``: causal stops after the block's last query; ``full`` ends before
    the first tile that some query of the block may not see in full, or that runs past T_k.
    """
    stop = T_k
    full = T_k
    if CAUSAL:
        stop = tl.maximum(tl.minimum(T_k, q0 + BLOCK_M + T_k - T_q), 0)
        full = tl.maximum(tl.minimum(T_k, q0 + 1 + T_k - T_q), 0)
    return full // BLOCK_N * BLOCK_N, stop


@_jit
def _load_lse2(Lse2, q0, T_q, BLOCK_M: tl.constexpr):
    """lse2 of queries q0 .. (BLOCK_M,), with -inf (no keys) as +inf: then 2^(s - lse2) = 0."""
    rows = q0 + tl.arange(0, BLOCK_M)
    lse2 = tl.load(Lse2 + rows, mask=rows < T_q, other=0.0)
    return tl.where(lse2 == float("-inf"), float("inf"), lse2)


# ----------------------------------------------------------------------------- forward
@_tuned(_FORWARD_TILES, ("BLOCK_M", "BLOCK_N"))
def _forward_kernel(Q, K, V, Out, Lse2, T_q, T_k, scale2,
                    D_K: tl.constexpr, D_V: tl.constexpr, CAUSAL: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """One program: query block i of one (batch, head). Writes out_i (BLOCK_M, D_V) and lse2_i.

    Causal, the last query block sees the most keys: the blocks are taken last first, so that
    the longest programs start first and the short ones fill the end of the launch.
    """
    i = tl.program_id(1)
    if CAUSAL:
        i = tl.num_programs(1) - 1 - i
    q0 = i * BLOCK_M
    bh = tl.program_id(0).to(tl.int64)  # int64: bh * T * d can pass 2^31
    Q += bh * T_q * D_K
    K += bh * T_k * D_K
    V += bh * T_k * D_V
    q = _load_rows(Q, q0, T_q, BLOCK_M, D_K)  # (BLOCK_M, D_K): read once, used for every tile
    m = tl.full([BLOCK_M], float("-inf"), tl.float32)  # running max of s2 (base-2 units)
    l = tl.zeros([BLOCK_M], dtype=tl.float32)  # running sum_j 2^(s2_j - m)
    acc = tl.zeros([BLOCK_M, D_V], dtype=tl.float32)  # running sum_j 2^(s2_j - m) v_j
    full, stop = _key_range(q0, T_q, T_k, CAUSAL, BLOCK_M, BLOCK_N)
    acc, m, l = _forward_tiles(acc, m, l, q, K, V, q0, 0, full, T_q, T_k, scale2,
                               D_K, D_V, CAUSAL, BLOCK_M, BLOCK_N, MASKED=False)
    acc, m, l = _forward_tiles(acc, m, l, q, K, V, q0, full, stop, T_q, T_k, scale2,
                               D_K, D_V, CAUSAL, BLOCK_M, BLOCK_N, MASKED=True)
    l_safe = tl.where(l == 0, 1.0, l)  # l = 0: a query with no keys, out = 0 and lse = -inf
    _store_rows(Out + bh * T_q * D_V, q0, T_q, acc / l_safe[:, None], BLOCK_M, D_V)
    lse2 = tl.where(l == 0, float("-inf"), m + tl.log2(l_safe))
    rows = q0 + tl.arange(0, BLOCK_M)
    tl.store(Lse2 + bh * T_q + rows, lse2, mask=rows < T_q)


@_jit
def _forward_tiles(acc, m, l, q, K, V, q0, lo, hi, T_q, T_k, scale2,
                   D_K: tl.constexpr, D_V: tl.constexpr, CAUSAL: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr):
    """The online softmax over key tiles lo .. hi of ``reference.flash_forward``'s inner loop."""
    q_idx = q0 + tl.arange(0, BLOCK_M)
    for k0 in range(lo, hi, BLOCK_N):
        k = _load_rows(K, k0, T_k, BLOCK_N, D_K)  # (BLOCK_N, D_K)
        v = _load_rows(V, k0, T_k, BLOCK_N, D_V)  # (BLOCK_N, D_V)
        s2 = _dot(q, tl.trans(k)) * scale2  # S * log2(e) (BLOCK_M, BLOCK_N)
        if MASKED:
            k_idx = k0 + tl.arange(0, BLOCK_N)
            s2 = tl.where(_visible(q_idx[:, None], k_idx[None, :], T_q, T_k, CAUSAL), s2,
                          float("-inf"))
        m_new = tl.maximum(m, tl.max(s2, 1))
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)  # reference.finite_shift: no -inf - -inf
        alpha = tl.math.exp2(m - shift)  # rescales what was summed under the old maximum
        p = tl.math.exp2(s2 - shift[:, None])  # (BLOCK_M, BLOCK_N), 0 where masked
        l = alpha * l + tl.sum(p, 1)
        acc = _dot(p.to(v.dtype), v, acc * alpha[:, None])
        m = m_new
    return acc, m, l


# ----------------------------------------------------------------------------- backward
@_jit
def _delta_kernel(Out, dOut, Delta, T_q, D_V: tl.constexpr, BLOCK_M: tl.constexpr):
    """D_i = rowsum(dout_i * out_i) for one query block; equals rowsum(dA_i * A_i) as out = A V."""
    q0 = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1).to(tl.int64)
    out = _load_rows(Out + bh * T_q * D_V, q0, T_q, BLOCK_M, D_V).to(tl.float32)
    dout = _load_rows(dOut + bh * T_q * D_V, q0, T_q, BLOCK_M, D_V).to(tl.float32)
    rows = q0 + tl.arange(0, BLOCK_M)
    tl.store(Delta + bh * T_q + rows, tl.sum(out * dout, 1), mask=rows < T_q)


@_tuned(_BACKWARD_TILES, ("BLOCK", "STEP"))
def _backward_kernel(Q, K, V, dOut, Lse2, Delta, dQ, dK, dV, T_q, T_k, scale, scale2,
                     D_K: tl.constexpr, D_V: tl.constexpr, CAUSAL: tl.constexpr,
                     BLOCK: tl.constexpr, STEP: tl.constexpr):
    """One program: block j of one (batch, head), on both sides. First dK_j and dV_j of keys
    j*BLOCK .., streaming the queries that see them STEP at a time; then dQ_j of queries
    j*BLOCK .., streaming the keys they see. Each program owns the rows it writes.

    Causal with T_q = T_k, key block j is seen by the queries from block j on, and query block j
    sees the keys up to block j: the two loops of a program add up to about T rows whatever j
    is, so every program does the same work (and one launch does the whole backward).
    """
    j0 = tl.program_id(1) * BLOCK
    bh = tl.program_id(0).to(tl.int64)
    if j0 < T_k:
        _dk_dv_block(Q, K, V, dOut, Lse2, Delta, dK, dV, bh, j0, T_q, T_k, scale, scale2,
                     D_K, D_V, CAUSAL, BLOCK_M=STEP, BLOCK_N=BLOCK)
    if j0 < T_q:
        _dq_block(Q, K, V, dOut, Lse2, Delta, dQ, bh, j0, T_q, T_k, scale, scale2,
                  D_K, D_V, CAUSAL, BLOCK_M=BLOCK, BLOCK_N=STEP)


@_jit
def _dk_dv_block(Q, K, V, dOut, Lse2, Delta, dK, dV, bh, k0, T_q, T_k, scale, scale2,
                 D_K: tl.constexpr, D_V: tl.constexpr, CAUSAL: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Keys k0 .. k0+BLOCK_N-1: dV_j = sum_i A_ij^T dout_i, dK_j = sum_i dS_ij^T Q_i / sqrt(d_k).

    Queries before lo cannot see key block j; tiles in [lo, a) cross the diagonal (masked),
    those in [a, T_q) see the whole block. The last query block may run past T_q, and needs
    no mask all the same: its missing rows load as zeros (q, dout, lse2, delta), so A = 1 there
    and dS = A * (0 - 0) = 0, which add exactly 0 to dV += A^T dout and dK += dS^T Q.
    """
    Q += bh * T_q * D_K
    dOut += bh * T_q * D_V
    Lse2 += bh * T_q
    Delta += bh * T_q
    k = _load_rows(K + bh * T_k * D_K, k0, T_k, BLOCK_N, D_K)  # (BLOCK_N, D_K), held
    v = _load_rows(V + bh * T_k * D_V, k0, T_k, BLOCK_N, D_V)  # (BLOCK_N, D_V), held
    dk = tl.zeros([BLOCK_N, D_K], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, D_V], dtype=tl.float32)
    lo = 0  # the first query block that sees some key of block j
    a = 0  # the first query block whose every query sees every key of block j
    if CAUSAL:  # query i sees key j when i >= j - (T_k - T_q)
        lo = tl.maximum(k0 - (T_k - T_q), 0) // BLOCK_M * BLOCK_M
        a = tl.cdiv(tl.maximum(k0 + BLOCK_N - 1 - (T_k - T_q), 0), BLOCK_M) * BLOCK_M
    dk, dv = _dk_dv_tiles(dk, dv, k, v, k0, lo, tl.minimum(a, T_q), Q, dOut, Lse2, Delta,
                          T_q, T_k, scale2, D_K, D_V, CAUSAL, BLOCK_M, BLOCK_N, MASKED=True)
    dk, dv = _dk_dv_tiles(dk, dv, k, v, k0, a, T_q, Q, dOut, Lse2, Delta,
                          T_q, T_k, scale2, D_K, D_V, CAUSAL, BLOCK_M, BLOCK_N, MASKED=False)
    _store_rows(dK + bh * T_k * D_K, k0, T_k, dk * scale, BLOCK_N, D_K)
    _store_rows(dV + bh * T_k * D_V, k0, T_k, dv, BLOCK_N, D_V)


@_jit
def _dk_dv_tiles(dk, dv, k, v, k0, lo, hi, Q, dOut, Lse2, Delta, T_q, T_k, scale2,
                 D_K: tl.constexpr, D_V: tl.constexpr, CAUSAL: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr):
    """Query tiles lo .. hi of ``reference.flash_backward``'s loop, for one key block, transposed.

    The tile is computed as S^T = K Q^T (BLOCK_N, BLOCK_M), so that A^T and dS^T come out
    ready to be the left operands of dV += A^T dout and dK += dS^T Q.
    """
    k_idx = k0 + tl.arange(0, BLOCK_N)
    for q0 in range(lo, hi, BLOCK_M):
        q_idx = q0 + tl.arange(0, BLOCK_M)
        q = _load_rows(Q, q0, T_q, BLOCK_M, D_K)  # (BLOCK_M, D_K)
        dout = _load_rows(dOut, q0, T_q, BLOCK_M, D_V)  # (BLOCK_M, D_V)
        lse2 = _load_lse2(Lse2, q0, T_q, BLOCK_M)  # (BLOCK_M,)
        delta = tl.load(Delta + q_idx, mask=q_idx < T_q, other=0.0)  # D_i (BLOCK_M,)
        s2_t = _dot(k, tl.trans(q)) * scale2  # (BLOCK_N, BLOCK_M)
        if MASKED:
            s2_t = tl.where(_visible(q_idx[None, :], k_idx[:, None], T_q, T_k, CAUSAL), s2_t,
                            float("-inf"))
        a_t = tl.math.exp2(s2_t - lse2[None, :])  # A^T recomputed from lse: exp(S - lse)
        dv = _dot(a_t.to(dout.dtype), dout, dv)
        da_t = _dot(v, tl.trans(dout))  # dA^T = (dout V^T)^T
        ds_t = a_t * (da_t - delta[None, :])  # dS = A * (dA - delta)
        dk = _dot(ds_t.to(q.dtype), q, dk)
    return dk, dv


@_jit
def _dq_block(Q, K, V, dOut, Lse2, Delta, dQ, bh, q0, T_q, T_k, scale, scale2,
              D_K: tl.constexpr, D_V: tl.constexpr, CAUSAL: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Queries q0 .. q0+BLOCK_M-1: dQ_i = sum_j dS_ij K_j / sqrt(d_k), over the keys they see."""
    K += bh * T_k * D_K
    V += bh * T_k * D_V
    q = _load_rows(Q + bh * T_q * D_K, q0, T_q, BLOCK_M, D_K)  # (BLOCK_M, D_K), held
    dout = _load_rows(dOut + bh * T_q * D_V, q0, T_q, BLOCK_M, D_V)  # (BLOCK_M, D_V), held
    lse2 = _load_lse2(Lse2 + bh * T_q, q0, T_q, BLOCK_M)
    rows = q0 + tl.arange(0, BLOCK_M)
    delta = tl.load(Delta + bh * T_q + rows, mask=rows < T_q, other=0.0)
    dq = tl.zeros([BLOCK_M, D_K], dtype=tl.float32)
    full, stop = _key_range(q0, T_q, T_k, CAUSAL, BLOCK_M, BLOCK_N)
    dq = _dq_tiles(dq, q, dout, lse2, delta, K, V, q0, 0, full, T_q, T_k, scale2,
                   D_K, D_V, CAUSAL, BLOCK_M, BLOCK_N, MASKED=False)
    dq = _dq_tiles(dq, q, dout, lse2, delta, K, V, q0, full, stop, T_q, T_k, scale2,
                   D_K, D_V, CAUSAL, BLOCK_M, BLOCK_N, MASKED=True)
    _store_rows(dQ + bh * T_q * D_K, q0, T_q, dq * scale, BLOCK_M, D_K)


@_jit
def _dq_tiles(dq, q, dout, lse2, delta, K, V, q0, lo, hi, T_q, T_k, scale2,
              D_K: tl.constexpr, D_V: tl.constexpr, CAUSAL: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr):
    """Key tiles lo .. hi of ``reference.flash_backward``'s loop, for one query block."""
    q_idx = q0 + tl.arange(0, BLOCK_M)
    for k0 in range(lo, hi, BLOCK_N):
        k = _load_rows(K, k0, T_k, BLOCK_N, D_K)  # (BLOCK_N, D_K)
        v = _load_rows(V, k0, T_k, BLOCK_N, D_V)  # (BLOCK_N, D_V)
        s2 = _dot(q, tl.trans(k)) * scale2  # (BLOCK_M, BLOCK_N)
        if MASKED:
            k_idx = k0 + tl.arange(0, BLOCK_N)
            s2 = tl.where(_visible(q_idx[:, None], k_idx[None, :], T_q, T_k, CAUSAL), s2,
                          float("-inf"))
        a = tl.math.exp2(s2 - lse2[:, None])  # A recomputed from lse
        da = _dot(dout, tl.trans(v))  # dA = dout V^T
        ds = a * (da - delta[:, None])  # dS = A * (dA - delta)
        dq = _dot(ds.to(k.dtype), k, dq)
    return dq
