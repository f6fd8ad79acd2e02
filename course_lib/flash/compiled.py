"""FlashAttention on the CPU as a compiled C++ kernel (``cpu_kernel.cpp``), built once at set-up.

The algorithm of ``course_lib.flash.cpu`` (tiles, online softmax, the hand-derived backward
that recomputes each tile's weights from the saved log-sum-exp), with every tile's element-wise
steps done in C++ loops while the tile is in cache: the torch tile loop dispatches a dozen
small ops per tile from Python, and on a 2-core CPU those cost as much as the tiles' products.
The tile products are a hand-written register-blocked GEMM (``cpu_kernel.cpp`` says why).

    compiled_attention(q, k, v, causal=False, mask=None) -> out (..., T_q, d_v)
    available() -> bool        whether the extension built and loaded; ``reason()`` says why not

Supported by the kernel: float32 CPU tensors, ``causal`` or not (query i at position
i + T_k - T_q, as ``cpu``), any leading axes. Everything else (a ``mask``, float16, bfloat16,
float64, CUDA tensors, an empty axis) and every call when the build failed fall back to
``cpu.tiled_attention``, which gives the same result more slowly.

The kernel is one of the course's C++ kernels (``course_lib.cpu_kernels``: one library with
layer norm's backward, built once at set-up by ``python -m course_lib.data``, about a minute);
where set-up did not build it, the first ``available()`` or ``compiled_attention`` of a process
builds it, once.

Shapes (course glossary): q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v);
out (..., T_q, d_v).
"""
from __future__ import annotations

import torch

from course_lib import cpu_kernels
from course_lib.flash.cpu import tiled_attention

# tile sizes: rows of queries x columns of keys; benchmarks/flash_cpu.py measured them
BLOCK_Q, BLOCK_K = 128, 256


def available() -> bool:
    """Whether the compiled kernel is usable: loads the build of set-up, or builds it on the first
    call where set-up did not (a minute); never raises."""
    return _ops() is not None


def reason() -> str:
    """Why ``available()`` is False ('' when it is True)."""
    return "" if available() else cpu_kernels.reason()


def compiled_attention(q, k, v, causal=False, mask=None, block_q=BLOCK_Q, block_k=BLOCK_K):
    """softmax(q k^T / sqrt(d_k) + M) v by the compiled tiles, differentiable through the
    compiled hand-derived backward; ``cpu.tiled_attention`` where the kernel does not apply."""
    if not _supported(q, k, v, mask) or _ops() is None:
        return tiled_attention(q, k, v, causal, mask)
    return _CompiledAttention.apply(q, k, v, causal, block_q, block_k)


class _CompiledAttention(torch.autograd.Function):
    """The kernel's forward, whose backward is the kernel's backward (the derivation)."""

    @staticmethod
    def forward(ctx, q, k, v, causal, block_q, block_k):
        lead, T_q = q.shape[:-2], q.shape[-2]
        q3, k3, v3 = (x.reshape(-1, *x.shape[-2:]).contiguous() for x in (q, k, v))
        out, lse = _ops().forward(q3, k3, v3, causal, block_q, block_k)
        ctx.save_for_backward(q3, k3, v3, out, lse)
        ctx.settings = causal, block_q, block_k, q.shape, k.shape, v.shape
        return out.reshape(*lead, T_q, v.shape[-1])

    @staticmethod
    def backward(ctx, dout):
        q3, k3, v3, out, lse = ctx.saved_tensors
        causal, block_q, block_k, *shapes = ctx.settings
        do = dout.reshape(out.shape).contiguous()
        grads = _ops().backward(do, q3, k3, v3, out, lse, causal, block_q, block_k)
        return (*(g.reshape(s) for g, s in zip(grads, shapes)), None, None, None)


def _supported(q, k, v, mask):
    tensors = (q, k, v)
    return (mask is None and all(x.dtype == torch.float32 and x.device.type == "cpu"
                                 for x in tensors)
            and q.ndim >= 2 and all(x.numel() > 0 for x in tensors))


def _ops():
    """torch.ops.course_flash once the kernels are loaded (built first if need be), else None."""
    return torch.ops.course_flash if cpu_kernels.loaded(build_if_missing=True) else None
