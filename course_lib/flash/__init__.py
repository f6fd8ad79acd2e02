"""Attention that never holds the T_q x T_k matrix (FlashAttention, notebook 07).

Three modules, one algorithm (online softmax over key tiles, the log-sum-exp saved for a
backward that recomputes each tile's weights):

    reference       numpy, written to mirror the derivation; the oracle for everything else
    cpu             torch tiles as batched GEMMs, with the hand-derived backward wired in
                    through ``torch.autograd.Function``; device-agnostic, tuned for the CPU
    triton_kernels  a fused GPU kernel in Triton (needs CUDA and triton)

Public API:

    flash_attention(q, k, v, causal=False, mask=None) -> out
        the course's fast attention: the Triton kernel for CUDA tensors it supports,
        ``cpu.tiled_attention`` otherwise. ``MultiHeadAttention(flash=True)`` calls it.
    cpu_timings(seq_lens, ...) -> rows
        forward + backward time and peak memory of the textbook, autograd, tiled and SDPA
        paths side by side, for notebook 07's plot and ``benchmarks/flash_cpu.py``.
    peak_memory(fn) -> bytes
        the most CPU memory that tensors allocated while ``fn()`` runs hold at once.

Shapes (course glossary): q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v), the same
leading axes (e.g. B, n_heads) for all three; out (..., T_q, d_v); mask bool, broadcastable
to (..., T_q, T_k), True where a query may attend to a key.
"""
from __future__ import annotations

import json
import os
import tempfile
import time

import torch
from torch.nn import functional as F

from course_lib.attention import attention_autograd_torch, attention_torch, causal_mask
from course_lib.flash.cpu import tiled_attention
from course_lib.runmode import progress


def flash_attention(q, k, v, causal=False, mask=None):
    """softmax(q k^T / sqrt(d_k) + M) v without the T_q x T_k weights; differentiable.

    ``causal`` uses ``course_lib.attention.causal_mask``'s alignment (query i sits at
    position i + T_k - T_q, as with a KV cache) and combines with ``mask``.
    """
    kernels = _triton_kernels() if q.is_cuda else None
    if kernels is not None and kernels.supports(q, k, v, causal, mask):
        return kernels.flash_attention_triton(q, k, v, causal=causal)
    return tiled_attention(q, k, v, causal, mask)


def _triton_kernels():
    """The Triton module when it imports and finds a GPU, else None (no triton, no CUDA)."""
    try:
        from course_lib.flash import triton_kernels
    except ImportError:
        return None
    return triton_kernels if triton_kernels.available() else None


# ----------------------------------------------------------------------------- measuring
def peak_memory(fn) -> int:
    """Peak bytes held by CPU tensors allocated while ``fn()`` runs (its result discarded).

    torch keeps no allocator statistics for the CPU, but its profiler with
    ``profile_memory=True`` records every allocation and free, with its size, in order.
    The running sum of those sizes is what is held at each moment; its maximum is the
    peak. Tensors that existed before (the inputs) are not counted, nor are their frees.
    """
    # the profiler's native logger prints two lines per session to stderr, which a notebook
    # shows; level 6 silences it (read when the process first profiles; a user's choice wins)
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                profile_memory=True) as prof:
        fn()
    with tempfile.TemporaryDirectory() as folder:  # the trace is the public way to the events
        path = os.path.join(folder, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    held = peak = 0
    for event in sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: e["ts"]):
        if event["args"].get("Device Type", 0) == 0:  # 0: CPU
            held += event["args"]["Bytes"]
            peak = max(peak, held)
    return peak


def _paths(causal, T):
    """The four attention paths as fn(q, k, v) -> out, causal or not."""
    mask = torch.from_numpy(causal_mask(T)) if causal else None
    return {"textbook": lambda q, k, v: attention_torch(q, k, v, mask)[0],
            "autograd": lambda q, k, v: attention_autograd_torch(q, k, v, mask)[0],
            "tiled": lambda q, k, v: tiled_attention(q, k, v, causal),
            "sdpa": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal)}


def _forward_backward(fn, q, k, v):
    fn(q, k, v).sum().backward()


def cpu_timings(seq_lens, batch_heads=8, d_k=64, causal=True, repeats=3, dtype=torch.float32):
    """Forward + backward time and peak memory of four attention paths on the CPU, per T.

    "textbook" (``attention_torch``: hand-derived backward, T x T weights kept), "autograd"
    (the same forward, torch autograd), "tiled" (``cpu.tiled_attention``) and "sdpa"
    (``F.scaled_dot_product_attention``) run on the same random (batch_heads, T, d_k)
    inputs, taking turns so a burst of load on a shared machine hits them all. Returns one
    dict per T: the best of ``repeats`` timed runs after a warm-up, in seconds, under each
    name; the peak bytes under "<name>_bytes" (``peak_memory``, one more run); and the
    tiled path's speed-ups "vs_textbook", "vs_autograd", "vs_sdpa" (other time / tiled
    time, above 1: tiled is faster). In full mode a progress bar counts the lengths.
    """
    rows = []
    for T in progress(seq_lens, desc="sequence lengths"):
        gen = torch.Generator().manual_seed(T)
        q, k, v = (torch.randn(batch_heads, T, d_k, generator=gen, dtype=dtype).requires_grad_()
                   for _ in range(3))
        paths = _paths(causal, T)
        times = {name: [] for name in paths}
        for _ in range(repeats + 1):
            for name, fn in paths.items():
                q.grad = k.grad = v.grad = None
                start = time.perf_counter()
                _forward_backward(fn, q, k, v)
                times[name].append(time.perf_counter() - start)
        row = {"T": T, **{name: min(t[1:]) for name, t in times.items()}}
        for name, fn in paths.items():
            q.grad = k.grad = v.grad = None  # freed here: the profiler never saw them made
            row[f"{name}_bytes"] = peak_memory(lambda: _forward_backward(fn, q, k, v))
        row.update({f"vs_{name}": row[name] / row["tiled"]
                    for name in ("textbook", "autograd", "sdpa")})
        rows.append(row)
    return rows
