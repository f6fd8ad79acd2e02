"""Hand-derived attention backward vs torch autograd, side by side in one process.

The blog post (README, "Sources") says a hand-written backward pass can be faster than
automatic differentiation.
This prints forward + backward times of ``course_lib.attention.attention_torch`` (backward
from the derivation, through torch.autograd.Function) and of the same forward written with
plain torch ops (backward by autograd), and their ratio, per sequence length.

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
          f"d_k={args.d_k} causal, float32, best of {args.repeats}")
    print("autograd/manual: the ratio of the best times; rounds: the range of the ratio over the "
          "rounds (the two take turns), the noise of the measurement")
    print(f"{'T':>6} {'manual ms':>10} {'autograd ms':>12} {'autograd/manual':>16} {'rounds':>14}")
    for r in backward_timings(args.lengths, args.batch_heads, args.d_k, args.repeats, args.device):
        spread = f"{min(r['ratios']):.2f} to {max(r['ratios']):.2f}"
        print(f"{r['T']:>6} {1e3 * r['manual']:>10.2f} {1e3 * r['autograd']:>12.2f} {r['ratio']:>16.2f}"
              f" {spread:>14}")


if __name__ == "__main__":
    main()
