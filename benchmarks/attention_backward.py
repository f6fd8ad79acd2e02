"""Hand-derived attention backward vs torch autograd, and vs PyTorch's fused attention, side by
side in one process.

The blog post (README, "Sources") says a hand-written backward pass can be faster than
automatic differentiation.
This prints forward + backward times of ``course_lib.attention.attention_torch`` (backward
from the derivation, through torch.autograd.Function) and of the same forward written with
plain torch ops (backward by autograd), and their ratio, per sequence length: the blog's claim.
The baseline is what a model calls in place of both: ``F.scaled_dot_product_attention`` on 4-D
inputs (PyTorch's fused FlashAttention kernel on a CPU; flash or memory-efficient on a GPU),
and sdpa/manual says how the hand-derived textbook pass compares with it (below 1: SDPA is
faster; notebook 07's tiled kernels are the course's answer, ``benchmarks/flash_cpu.py``).

    python benchmarks/attention_backward.py [--device cuda] [--threads 1] [--lengths 64 128 ...]
"""
from __future__ import annotations

import argparse

import torch

from course_lib.timing import backward_timings


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 128, 256, 512, 1024])
    parser.add_argument("--batch-heads", type=int, default=8)
    parser.add_argument("--d-k", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"device={args.device} threads={torch.get_num_threads()} batch*heads={args.batch_heads} "
          f"d_k={args.d_k} causal, float32, best of {args.repeats}; baseline: sdpa = PyTorch's "
          "fused scaled_dot_product_attention on 4-D (1, batch*heads, T, d_k) inputs")
    print("autograd/manual, sdpa/manual: the ratios of the best times (above 1: the hand-derived "
          "pass is faster); rounds: the range of autograd/manual over the rounds (the paths take "
          "turns), the noise of the measurement")
    rows = backward_timings(args.lengths, args.batch_heads, args.d_k, args.repeats, args.device,
                            sdpa=True)  # first: its progress bar would cut through the table
    print(f"{'T':>6} {'manual ms':>10} {'autograd ms':>12} {'sdpa ms':>9} {'autograd/manual':>16}"
          f" {'rounds':>14} {'sdpa/manual':>12}")
    for r in rows:
        spread = f"{min(r['ratios']):.2f} to {max(r['ratios']):.2f}"
        print(f"{r['T']:>6} {1e3 * r['manual']:>10.2f} {1e3 * r['autograd']:>12.2f}"
              f" {1e3 * r['sdpa']:>9.2f} {r['ratio']:>16.2f} {spread:>14} {r['sdpa_ratio']:>12.2f}")


if __name__ == "__main__":
    main()
