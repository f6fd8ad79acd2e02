"""Attention that never holds the T_q x T_k matrix (FlashAttention, notebook 07).

Three modules, one algorithm (online softmax over key tiles, the log-sum-exp saved for a
backward that recomputes each tile's weights):

    reference       numpy, written to mirror the derivation; the oracle for everything else
    cpu             torch tiles as batched GEMMs, with the hand-derived backward wired in
                    through ``torch.autograd.Function``; device-agnostic, tuned for the CPU
    triton_kernels  a fused GPU kernel in Triton (needs CUDA and triton)

Public API:

    flash_attention(q, k, v, causal=False, mask=None) -> out
        the course's fast attention: the Triton kernel for CUDA tensors it supports, the
        compiled C++ kernel (``compiled``) for float32 CPU tensors without a mask where set-up
        built it, ``cpu.tiled_attention`` otherwise. ``MultiHeadAttention(flash=True)`` calls it.

Its timings against the textbook pass and PyTorch's SDPA are ``course_lib.timing.cpu_timings``.

Shapes (course glossary): q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v), the same
leading axes (e.g. B, n_heads) for all three; out (..., T_q, d_v); mask bool, broadcastable
to (..., T_q, T_k), True where a query may attend to a key.
"""
from __future__ import annotations

from course_lib import cpu_kernels
from course_lib.flash import compiled
from course_lib.flash.cpu import tiled_attention


def flash_attention(q, k, v, causal=False, mask=None):
    """softmax(q k^T / sqrt(d_k) + M) v without the T_q x T_k weights; differentiable.

    ``causal`` uses ``course_lib.attention.causal_mask``'s alignment (query i sits at
    position i + T_k - T_q, as with a KV cache) and combines with ``mask``.
    """
    kernels = _triton_kernels() if q.is_cuda else None
    if kernels is not None and kernels.supports(q, k, v, causal, mask):
        return kernels.flash_attention_triton(q, k, v, causal=causal)
    # set-up's C++ build (loaded, never built, here), outside torch.compile, which traces the
    # torch tiles instead
    if q.device.type == "cpu" and not cpu_kernels.why_not_usable():
        return compiled.compiled_attention(q, k, v, causal, mask)  # the tiles where it can't
    return tiled_attention(q, k, v, causal, mask)


def _triton_kernels():
    """The Triton module when it imports and finds a GPU, else None (no triton, no CUDA)."""
    try:
        from course_lib.flash import triton_kernels  # lazy: triton (seconds), for CUDA tensors alone
    except ImportError:
        return None
    return triton_kernels if triton_kernels.available() else None
