"""Layer norm forward + backward: the course's hand-derived backward, compiled and in torch, vs
PyTorch's ``F.layer_norm`` (ATen's fused forward and backward: the baseline).

The three paths take turns, call after call, in one process, on float32 CPU tensors of
nanoGPT's CPU recipe by default ((B, T, d_model) = (12, 64, 128), 2 threads; its GPT runs 9
layer norms a step): "compiled" is ``layer_norm_torch`` with the backward in C++
(``course_lib/layernorm_kernel.cpp``), "torch" the same with ``compiled=False`` (the backward
as a dozen torch ops), "F.layer_norm" the baseline. Every call is one training step's share: x
(a leaf that requires grad), gamma and beta get fresh gradients. Prints the median time of each
path and the ratios, how long this process took to load the kernels, and the load average
(another process's threads slow every path).

    python benchmarks/layer_norm.py [--shape 12 64 128] [--calls 400] [--threads 2]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
from torch.nn import functional as F

from course_lib import cpu_kernels
from course_lib import layernorm as ln

WARMUP = 40  # calls per path not counted (allocator, caches, the thread pool's start)


def paths(d_model):
    """name -> fn(x, gamma, beta) -> out, the baseline last."""
    return {"compiled": lambda x, g, b: ln.layer_norm_torch(x, g, b),
            "torch": lambda x, g, b: ln.layer_norm_torch(x, g, b, compiled=False),
            "F.layer_norm": lambda x, g, b: F.layer_norm(x, (d_model,), g, b, ln.EPS)}


def timings(shape, calls, seed=0):
    """Median seconds of forward + backward per path, the paths interleaved call by call."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=gen).requires_grad_()
    gamma = (1 + 0.1 * torch.randn(shape[-1], generator=gen)).requires_grad_()
    beta = torch.randn(shape[-1], generator=gen).requires_grad_()
    dout = torch.randn(shape, generator=gen)
    fns = paths(shape[-1])
    times = {name: [] for name in fns}
    for call in range(WARMUP + calls):
        for name, fn in fns.items():
            x.grad = gamma.grad = beta.grad = None
            start = time.perf_counter()
            fn(x, gamma, beta).backward(dout)
            if call >= WARMUP:
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=int, nargs="+", default=[12, 64, 128])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    loaded = cpu_kernels.loaded()  # what a training process's first layer-norm backward pays
    load_ms = 1e3 * (time.perf_counter() - start)
    threads = torch.get_num_threads()
    print(f"float32 CPU, shape {tuple(args.shape)}, {threads} thread{'s' * (threads > 1)}, forward + "
          f"backward, median of {args.calls} interleaved calls per path; baseline: "
          "torch.nn.functional.layer_norm (ATen's fused backward)")
    print(f"kernels: loaded in {load_ms:.1f} ms" if loaded else
          f"kernels: not loaded ({cpu_kernels.reason()}): 'compiled' runs the torch backward too")
    print("load average before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    t = timings(tuple(args.shape), args.calls)
    print("load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    for name, seconds in t.items():
        print(f"{name:>14}: {1e6 * seconds:8.0f} us   {seconds / t['F.layer_norm']:5.2f}x F.layer_norm")
    print(f"compiled / torch backward: {t['compiled'] / t['torch']:.2f}")


if __name__ == "__main__":
    main()
