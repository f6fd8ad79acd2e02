"""Timings and memory, side by side in one process: attention's backward, the KV cache, tiles.

Every function runs the paths it compares in turn on the same inputs (a burst of load on a
shared machine hits them all), keeps the best of a few runs after a warm-up, and returns one
dict per size, for the notebooks' plots and the scripts in ``benchmarks/``:

    backward_timings(seq_lens, ...)    notebook 02: the hand-derived attention backward
                                       against torch autograd
    cache_timings(model, lengths, ...) notebook 06: generation with and without the KV cache
    cpu_timings(seq_lens, ...)         notebook 07: textbook, autograd, tiled (FlashAttention),
                                       compiled (the tiles in C++) and PyTorch's SDPA, forward +
                                       backward, with peak memory
    peak_memory(fn) -> bytes           the most CPU memory that tensors made by ``fn()`` hold

Above the modules it measures: they never import this one. In full mode a progress bar counts
the sizes.
"""
from __future__ import annotations

import json
import os
import tempfile
import time

import torch
from torch.nn import functional as F

from course_lib.attention import attention_autograd_torch, attention_torch, causal_mask
from course_lib.flash.compiled import compiled_attention
from course_lib.flash.cpu import tiled_attention
from course_lib.generate import sample
from course_lib.runmode import progress


# ----------------------------------------------------------------------------- notebook 02
def _sdpa_4d(q, k, v, mask):
    """``F.scaled_dot_product_attention`` as a model calls it: on 4-D (1, batch_heads, T, d_k)
    views, where a CPU takes PyTorch's fused kernel (3-D takes its unfused math pass). Causal
    (``is_causal``: what ``mask`` holds here); returns (out, None), no weights."""
    out = F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True)[0]
    return out, None


def backward_timings(seq_lens, batch_heads=8, d_k=64, repeats=5, device="cpu",
                     dtype=torch.float32, sdpa=False):
    """Forward + backward time of the hand-derived and the autograd attention, per T.

    The blog post deriving the Transformer's forward and backward passes says the hand-derived
    backward can beat autograd; this measures it side by side on random (batch_heads, T, d_k)
    inputs with a causal mask. The two paths take turns, so a
    burst of load on a shared machine hits both. Returns one dict per T with the best of
    ``repeats`` runs in seconds for "manual" and "autograd" (after one warm-up run each), their
    ratio autograd / manual (above 1: the hand-derived pass is faster) and "ratios", the ratio
    of each round: their spread is the noise of the measurement (the best-of ratio lies within
    it). The two paths do the same matrix products; autograd adds passes over the (T, T)
    scores (notebook 02, section 10), which weigh more as T grows, while at small T a shared
    machine moves the ratio more than the method does. In full mode a progress bar counts the
    sequence lengths. With ``sdpa``, PyTorch's fused attention (``_sdpa_4d``) takes its turn
    too, under "sdpa": what a model calls in place of either, and "sdpa_ratio" is sdpa / manual.
    """
    paths = {"manual": attention_torch, "autograd": attention_autograd_torch}
    if sdpa:
        paths["sdpa"] = _sdpa_4d
    rows = []
    for T in progress(seq_lens, desc="sequence lengths"):
        gen = torch.Generator().manual_seed(T)
        q, k, v = (torch.randn(batch_heads, T, d_k, generator=gen, dtype=dtype).to(device)
                   .requires_grad_() for _ in range(3))
        mask = torch.from_numpy(causal_mask(T)).to(device)
        times = {name: [] for name in paths}
        for _ in range(repeats + 1):
            for name, fn in paths.items():
                q.grad = k.grad = v.grad = None
                _sync(device)
                start = time.perf_counter()
                out, _weights = fn(q, k, v, mask)
                out.sum().backward()
                _sync(device)
                times[name].append(time.perf_counter() - start)
        row = {"T": T, **{name: min(t[1:]) for name, t in times.items()}}
        row["ratio"] = row["autograd"] / row["manual"]
        if sdpa:
            row["sdpa_ratio"] = row["sdpa"] / row["manual"]
        row["ratios"] = [a / m for m, a in zip(times["manual"][1:], times["autograd"][1:])]  # per round
        rows.append(row)
    return rows


def _sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


# ----------------------------------------------------------------------------- notebook 06
def cache_timings(model, lengths, batch_size: int = 1, seed: int = 0) -> list[dict]:
    """Seconds to generate each of ``lengths`` tokens greedily from one random token, with
    and without the KV cache, side by side (the two take turns, so a burst of load on the
    machine hits both). Checks that both produce the same tokens.

    Returns one dict per length: {"length", "no_cache", "cache", "ratio"} (ratio = no_cache /
    cache: how many times faster the cache is). Needs ``model.block_size >= max(lengths) + 1``.
    """
    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for length in progress(lengths, desc="generated lengths"):
        start_ids = torch.randint(0, model.cfg.vocab_size, (batch_size, 1), generator=gen).to(device)
        seconds, outputs = {}, {}
        for use_cache in (False, True):
            start = time.perf_counter()
            outputs[use_cache] = sample(model, start_ids, length, temperature=0, use_cache=use_cache)
            seconds[use_cache] = time.perf_counter() - start
        if not torch.equal(outputs[False], outputs[True]):
            raise AssertionError("cached and uncached generation disagree")
        rows.append({"length": length, "no_cache": seconds[False], "cache": seconds[True],
                     "ratio": seconds[False] / seconds[True]})
    return rows


# ----------------------------------------------------------------------------- notebook 07
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
    """The five attention paths as fn(q, k, v) -> out, causal or not."""
    mask = torch.from_numpy(causal_mask(T)) if causal else None
    return {"textbook": lambda q, k, v: attention_torch(q, k, v, mask)[0],
            "autograd": lambda q, k, v: attention_autograd_torch(q, k, v, mask)[0],
            "tiled": lambda q, k, v: tiled_attention(q, k, v, causal),
            "compiled": lambda q, k, v: compiled_attention(q, k, v, causal),
            "sdpa": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal)}


def _forward_backward(fn, q, k, v):
    fn(q, k, v).sum().backward()


def cpu_timings(seq_lens, batch_heads=8, d_k=64, causal=True, repeats=3, dtype=torch.float32):
    """Forward + backward time and peak memory of five attention paths on the CPU, per T.

    "textbook" (``attention_torch``: hand-derived backward, T x T weights kept), "autograd"
    (the same forward, torch autograd), "tiled" (``cpu.tiled_attention``), "compiled"
    (``compiled.compiled_attention``: the same tiles in C++; the tiled path again where the
    extension did not build, as ``compiled.available()`` says) and "sdpa"
    (``F.scaled_dot_product_attention``) run on the same random (1, batch_heads, T, d_k)
    inputs, taking turns so a burst of load on a shared machine hits them all. The inputs are
    4-D, (B, n_heads, T, d_k), as a model passes them: on the CPU, SDPA runs its fused
    (FlashAttention) kernel only for 4-D inputs and falls back to the unfused math pass, which
    holds the T x T weights, for 3-D ones. Returns one
    dict per T: the best of ``repeats`` timed runs after a warm-up, in seconds, under each
    name; the peak bytes under "<name>_bytes" (``peak_memory``, one more run); and the
    tiled path's speed-ups "vs_textbook", "vs_autograd", "vs_sdpa" (other time / tiled
    time, above 1: tiled is faster), and the compiled path's "compiled_vs_sdpa" (sdpa time /
    compiled time). In full mode a progress bar counts the lengths.
    """
    rows = []
    for T in progress(seq_lens, desc="sequence lengths"):
        gen = torch.Generator().manual_seed(T)
        q, k, v = (torch.randn(1, batch_heads, T, d_k, generator=gen, dtype=dtype).requires_grad_()
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
        row["compiled_vs_sdpa"] = row["sdpa"] / row["compiled"]
        rows.append(row)
    return rows
