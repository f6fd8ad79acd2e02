"""FlashAttention on a GPU: the course's Triton kernels against PyTorch's SDPA, side by side.

Causal attention on (B, n_heads, T, d_k) = (4, 24, T, 64) inputs (B * n_heads = 96), T from 1024
to 16384, in bfloat16 and float32. For each path it prints the forward and the forward +
backward time (median of --repeats runs after --warmup runs, timed with CUDA events; the
paths take turns, so a slow spell of the GPU hits all of them), the achieved TFLOP/s, the peak
memory one forward + backward adds to what was allocated before it (inputs excluded: q, k, v,
dout; the gradients are included), and both as ratios to SDPA's. Paths:

- ``triton``: ``course_lib.flash.triton_kernels.flash_attention_triton`` (notebook 07);
- ``sdpa``: ``torch.nn.functional.scaled_dot_product_attention(is_causal=True)``, with the
  backend PyTorch picks (--sdpa-backend to force one);
- ``textbook``: ``course_lib.attention.attention_torch`` with a causal mask, which holds the
  (B, n_heads, T, T) weights; only for T <= --textbook-max-t, and "out of memory" if so;
- ``tutorial``: the Triton tutorial's fused attention (its ``06-fused-attention.py``, from
  github.com/triton-lang/triton, given with --tutorial PATH; never committed here), float16
  only (its kernels cast to float16) and T a multiple of 128, for the d_k in --tutorial-d-k:
  the published kernel in the same language, on the same device, in the same process.

FLOPs, as the FlashAttention papers count them: the forward is two matmuls (Q K^T and A V) of
2 T^2 d_k each per (batch, head), 4 B n_heads T^2 d_k; the backward five, 2.5 times the
forward; causal halves both. TFLOP/s = those FLOPs / time, whatever a path really computes.

Each row also gives the largest |gradient - SDPA's gradient| over dQ, dK and dV, relative to
SDPA's largest gradient (bf16 rounding is about 1e-2).

Goals (issue 44), checked in bfloat16 from T = 2048 up, for each d_k measured: the Triton
forward + backward at most SDPA's time, and its peak memory at most SDPA's.

    .venv/bin/python benchmarks/flash_gpu.py [--d-k 64 128] [--lengths 1024 2048 ...]
        [--dtypes bfloat16 float32] [--repeats 10] [--sdpa-backend default]
        [--tutorial PATH/06-fused-attention.py] [--tutorial-d-k 64]

The first call per shape autotunes the Triton kernels (compiles and times a few tile sizes):
the first T of each dtype and d_k takes a minute longer. float32 matmuls stay float32 (no
TF32) in all paths: SDPA and the textbook path because torch's default is off, Triton by tf32x3.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import math
import os
import statistics
import sys

import torch
import torch.nn.functional as F

from course_lib.attention import attention_torch, causal_mask

GOAL = {"from_T": 2048, "dtype": "bfloat16", "time": 1.0, "memory": 1.0}
DEVICE = "cuda"


def _require_gpu():
    """Exit with a message unless CUDA and the Triton kernels can run here."""
    if not torch.cuda.is_available():
        sys.exit("flash_gpu.py measures GPU kernels and needs a CUDA GPU: none is visible here.")
    if os.environ.get("TRITON_INTERPRET") == "1":
        sys.exit("unset TRITON_INTERPRET: the interpreter would time numpy, not the GPU kernels.")
    from course_lib.flash import triton_kernels
    if not triton_kernels.available():
        sys.exit("triton is not installed: pip install -e '.[triton]'")


def _flops(B, n_heads, T, d_k):
    """(forward, forward + backward) FLOPs of causal attention, by the convention above."""
    forward = 4 * B * n_heads * T * T * d_k / 2
    return forward, 3.5 * forward


def _load_tutorial(path):
    """The Triton tutorial's module from its file (it needs a GPU to import), or exit saying why."""
    if not os.path.isfile(path):
        sys.exit(f"--tutorial {path}: no such file (the tutorial's 06-fused-attention.py)")
    spec = importlib.util.spec_from_file_location("triton_tutorial_fused_attention", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _paths(T, d_k, dtype, device, args, tutorial):
    """name -> fn(q, k, v) returning out (B, n_heads, T, d_k), all causal."""
    from course_lib.flash.triton_kernels import flash_attention_triton
    textbook_max_t, sdpa_backend = args.textbook_max_t, args.sdpa_backend

    def sdpa(q, k, v):
        with _sdpa_backend(sdpa_backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    paths = {"triton": lambda q, k, v: flash_attention_triton(q, k, v, causal=True), "sdpa": sdpa}
    if T <= textbook_max_t:
        mask = torch.from_numpy(causal_mask(T)).to(device)  # (T, T) bool, broadcast over B, n_heads
        paths["textbook"] = lambda q, k, v: attention_torch(q, k, v, mask)[0]
    if (tutorial is not None and dtype == torch.float16 and T % 128 == 0
            and d_k in args.tutorial_d_k):
        scale = 1.0 / math.sqrt(d_k)
        paths["tutorial"] = lambda q, k, v: tutorial.attention(q, k, v, True, scale, False)
    return paths


def _sdpa_backend(name):
    if name == "default":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
                "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}
    return sdpa_kernel(backends[name])


SDPA_OPS = {"aten::_scaled_dot_product_flash_attention": "flash",
            "aten::_scaled_dot_product_efficient_attention": "efficient",
            "aten::_scaled_dot_product_cudnn_attention": "cudnn"}


def _backend_taken(args):
    """The fused kernel SDPA runs for bfloat16 causal inputs, read off the aten op it calls."""
    q = torch.randn(1, 2, 256, 64, device=DEVICE, dtype=torch.bfloat16)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        with _sdpa_backend(args.sdpa_backend):
            F.scaled_dot_product_attention(q, q, q, is_causal=True)
    taken = [name for op, name in SDPA_OPS.items() if op in {e.key for e in prof.key_averages()}]
    chosen = "chosen by PyTorch" if args.sdpa_backend == "default" else "forced"
    return f"{', '.join(taken) or 'unfused (math)'} ({chosen}; --sdpa-backend)"


def _run(fn, q, k, v, dout, backward):
    """One forward (and backward) of fn; gradients are dropped first so each run makes its own."""
    q.grad = k.grad = v.grad = None
    out = fn(q, k, v)
    if backward:
        out.backward(dout)
    return out


def _time_ms(fn, *args):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn(*args)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end)


def _peak_mib(fn, q, k, v, dout):
    """Memory one forward + backward of fn adds at its peak, in MiB, the gradients included,
    and that run's out (its gradients stay in q.grad, k.grad and v.grad).

    The timed runs leave their gradients in q.grad, k.grad and v.grad; they are dropped before
    ``before`` is read, so that they are not counted as allocated already (``_run`` drops them
    too, which would otherwise hide the new gradients' own memory).
    """
    q.grad = k.grad = v.grad = None
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    out = _run(fn, q, k, v, dout, True)
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 2**20, out


def measure(T, d_k, dtype, args, tutorial=None):
    """name -> {"fwd", "total" (ms), "peak" (MiB), "out_diff", "grad_diff"} or {"error": str}."""
    gen = torch.Generator(device=DEVICE).manual_seed(T)
    shape = (args.batch, args.heads, T, d_k)
    q, k, v = (torch.randn(shape, device=DEVICE, dtype=dtype, generator=gen).requires_grad_()
               for _ in range(3))
    dout = torch.randn(shape, device=DEVICE, dtype=dtype, generator=gen)
    paths = _paths(T, d_k, dtype, DEVICE, args, tutorial)
    times = {name: {"fwd": [], "total": []} for name in paths}
    errors = {}
    for rep in range(args.warmup + args.repeats):
        for name, fn in paths.items():
            if name in errors:
                continue
            try:
                fwd = _time_ms(_run, fn, q, k, v, dout, False)
                total = _time_ms(_run, fn, q, k, v, dout, True)
            except Exception as error:  # out of memory, or a kernel that fails: report, go on
                errors[name] = _describe(error)
            if name in errors:
                torch.cuda.empty_cache()  # here, once the failed call's tensors are released
                continue
            if rep >= args.warmup:
                times[name]["fwd"].append(fwd)
                times[name]["total"].append(total)
    reference = None
    if "sdpa" not in errors:
        out = _run(paths["sdpa"], q, k, v, dout, True)
        reference = (out.detach().float(), [t.grad.float() for t in (q, k, v)])
    results = {}
    for name, fn in paths.items():
        if name not in errors:
            try:
                results[name] = _summary(fn, times[name], reference, q, k, v, dout)
            except Exception as error:
                errors[name] = _describe(error)
        if name in errors:
            results[name] = {"error": errors[name]}
    return results


def _summary(fn, times, reference, q, k, v, dout):
    """Median times, peak memory, max |out - SDPA's| and the largest gradient difference."""
    peak, out = _peak_mib(fn, q, k, v, dout)
    out = out.detach().float()
    diff = grad_diff = math.nan
    if reference is not None:
        ref_out, ref_grads = reference
        diff = (out - ref_out).abs().max().item()
        largest = max(g.abs().max().item() for g in ref_grads)
        grad_diff = max((t.grad.float() - g).abs().max().item()
                        for t, g in zip((q, k, v), ref_grads)) / largest
    return {"fwd": statistics.median(times["fwd"]), "total": statistics.median(times["total"]),
            "peak": peak, "out_diff": diff, "grad_diff": grad_diff}


def _describe(error):
    """A one-line reason for a failed path."""
    if isinstance(error, torch.cuda.OutOfMemoryError):
        return "out of memory"
    first_line = (str(error).splitlines() or [""])[0]
    return f"failed: {type(error).__name__}: {first_line[:100]}"


def _print_rows(T, d_k, results, args):
    forward_flops, total_flops = _flops(args.batch, args.heads, T, d_k)
    sdpa = results["sdpa"]
    for name, r in results.items():
        if "error" in r:
            print(f"{T:>6} {name:<9} {r['error']}")
            continue
        ratios = (f"{'':>9} {'':>9}" if "error" in sdpa else
                  f"{r['total'] / sdpa['total']:>9.2f} {r['peak'] / sdpa['peak']:>9.2f}")
        print(f"{T:>6} {name:<9} {r['fwd']:>9.2f} {forward_flops / r['fwd'] / 1e9:>8.1f} "
              f"{r['total']:>10.2f} {total_flops / r['total'] / 1e9:>8.1f} {r['peak']:>10.0f} "
              f"{ratios} {r['out_diff']:>10.1e} {r['grad_diff']:>10.1e}")


def _print_goals(goal_rows):
    """The two goals for every (d_k, T) measured in GOAL's dtype from GOAL's T up."""
    if not goal_rows:
        print(f"goals not checked: run T >= {GOAL['from_T']} in {GOAL['dtype']}")
        return
    for (d_k, T), results in sorted(goal_rows.items()):
        triton, sdpa = results["triton"], results["sdpa"]
        where = f"d_k={d_k}, T={T}, {GOAL['dtype']}"
        if "error" in triton or "error" in sdpa:
            print(f"goal at {where} not checked: triton {triton.get('error', 'ran')}, "
                  f"sdpa {sdpa.get('error', 'ran')}")
            continue
        for what, key in (("time", "total"), ("memory", "peak")):
            ratio = triton[key] / sdpa[key]
            verdict = "holds" if ratio <= GOAL[what] else "MISSED"
            print(f"goal: Triton forward+backward {what} at most {GOAL[what]}x SDPA's at {where}: "
                  f"{ratio:.2f}x, {verdict}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384])
    parser.add_argument("--d-k", type=int, nargs="+", default=[64], help="head sizes (64, 128)")
    parser.add_argument("--dtypes", nargs="+", default=["bfloat16", "float32"],
                        choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--heads", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--textbook-max-t", type=int, default=4096)
    parser.add_argument("--sdpa-backend", default="default",
                        choices=["default", "flash", "efficient", "cudnn", "math"])
    parser.add_argument("--tutorial", help="the Triton tutorial's 06-fused-attention.py")
    parser.add_argument("--tutorial-d-k", type=int, nargs="+", default=[64])
    args = parser.parse_args(argv)
    _require_gpu()
    tutorial = _load_tutorial(args.tutorial) if args.tutorial else None
    import triton
    print(f"device: {torch.cuda.get_device_name()} | torch {torch.__version__} | "
          f"triton {triton.__version__}")
    print(f"causal, B={args.batch}, n_heads={args.heads}; median of {args.repeats} runs after "
          f"{args.warmup} warm-up; peak = MiB one forward+backward adds; ratios to sdpa; "
          f"out diff = max |out - sdpa's out|; grad diff = max |grad - sdpa's| / max |sdpa's|")
    print(f"sdpa's backend: {_backend_taken(args)}")
    goal_rows = {}
    for d_k in args.d_k:
        for dtype_name in args.dtypes:
            print(f"\n{dtype_name}, d_k={d_k}")
            print(f"{'T':>6} {'path':<9} {'fwd ms':>9} {'TFLOP/s':>8} {'fwd+bwd ms':>10} "
                  f"{'TFLOP/s':>8} {'peak MiB':>10} {'time/sdpa':>9} {'mem/sdpa':>9} "
                  f"{'out diff':>10} {'grad diff':>10}")
            for T in args.lengths:
                results = measure(T, d_k, getattr(torch, dtype_name), args, tutorial)
                _print_rows(T, d_k, results, args)
                if dtype_name == GOAL["dtype"] and T >= GOAL["from_T"]:
                    goal_rows[d_k, T] = results
    print()
    _print_goals(goal_rows)


if __name__ == "__main__":
    main()
