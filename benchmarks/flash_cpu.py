"""Tiled attention (FlashAttention) on the CPU vs the textbook, autograd and SDPA paths.

Forward + backward of causal attention on random (1, batch*heads, T, d_k) float32 inputs, the
five paths taking turns in one process (``course_lib.timing.cpu_timings``): the tiles in torch
("tiled") and compiled in C++ ("compiled", ``course_lib.flash.compiled``; it says so when the
extension did not build and the tiled path stood in). The baseline
"sdpa" is ``F.scaled_dot_product_attention`` called as a model calls it, on 4-D inputs: on
the CPU that is PyTorch's fused FlashAttention kernel (3-D inputs would take its unfused math
pass, which holds the T x T weights). Prints the
times, the speed-ups of the course's fastest path (the compiled or tiled one, or the textbook
``attention_torch`` where that is faster) over torch autograd and over
``F.scaled_dot_product_attention``, the peak memory of every path, and whether the goals
hold from T = 1024 up: at least 1.2x autograd, at least 1.0x SDPA, and a tiled peak memory
that grows at most linearly in T (each doubling of T at most doubles it, with 10% slack;
below the block sizes a tile is all of T x T, so small T are not judged).

    python benchmarks/flash_cpu.py [--lengths 256 512 1024 2048 4096] [--repeats 3] [--threads 2]
"""
from __future__ import annotations

import argparse
import os

import torch

from course_lib.flash import compiled
from course_lib.timing import cpu_timings

GOAL_FROM_T, GOAL_VS_AUTOGRAD, GOAL_VS_SDPA, LINEAR_SLACK = 1024, 1.2, 1.0, 1.1
PATHS = ("textbook", "autograd", "tiled", "compiled", "sdpa")
COURSE_PATHS = ("compiled", "tiled", "textbook")  # candidates for the course's fastest path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 512, 1024, 2048, 4096])
    parser.add_argument("--batch-heads", type=int, default=8)
    parser.add_argument("--d-k", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"cpu threads={torch.get_num_threads()} batch*heads={args.batch_heads} d_k={args.d_k} "
          f"causal, float32, forward+backward, best of {args.repeats}; sdpa = PyTorch's fused "
          f"scaled_dot_product_attention on 4-D (B, n_heads, T, d_k) inputs")
    # other processes' threads make every path slower, the tiled one most (it runs many
    # medium-sized parallel ops, each waiting for its slowest thread): say how busy it was
    print("compiled kernel: " + ("built" if compiled.available() else
                                 f"not built ({compiled.reason()}): the tiled path stands in"))
    print("load average before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    rows = cpu_timings(args.lengths, args.batch_heads, args.d_k, repeats=args.repeats)
    print("load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    print(f"\n{'T':>6}" + "".join(f"{name + ' ms':>13}" for name in PATHS)
          + f"{'best':>10}{'autograd/best':>15}{'sdpa/best':>11}{'sdpa/compiled':>15}")
    for r in rows:
        best = _best(r)
        print(f"{r['T']:>6}" + "".join(f"{1e3 * r[name]:>13.1f}" for name in PATHS)
              + f"{best:>10}{r['autograd'] / r[best]:>15.2f}{r['sdpa'] / r[best]:>11.2f}"
              + f"{r['compiled_vs_sdpa']:>15.2f}")
    print(f"\n{'T':>6}" + "".join(f"{name + ' MiB':>13}" for name in PATHS)
          + f"{'tiled B/T':>12}{'compiled B/T':>14}")
    for r in rows:
        print(f"{r['T']:>6}" + "".join(f"{r[name + '_bytes'] / 2**20:>13.1f}" for name in PATHS)
              + f"{r['tiled_bytes'] / r['T']:>12.0f}{r['compiled_bytes'] / r['T']:>14.0f}")
    _verdict(rows)


def _best(row):
    """The course's fastest path for this row: "compiled", "tiled" or "textbook"."""
    return min(COURSE_PATHS, key=row.__getitem__)


def _verdict(rows):
    """Print whether each goal holds; a goal with no T >= GOAL_FROM_T measured is not judged."""
    judged = [r for r in rows if r["T"] >= GOAL_FROM_T]
    best = [r[_best(r)] for r in judged]
    # below the block sizes a tile is the whole T x T, so linearity is judged from GOAL_FROM_T too
    growth = {name: [b[f"{name}_bytes"] / a[f"{name}_bytes"] / (b["T"] / a["T"])  # 1: linear
                     for a, b in zip(judged, judged[1:])] for name in ("tiled", "compiled")}
    goals = {f"fastest path >= {GOAL_VS_AUTOGRAD}x autograd from T={GOAL_FROM_T}":
             [r["autograd"] / t >= GOAL_VS_AUTOGRAD for r, t in zip(judged, best)],
             f"fastest path >= {GOAL_VS_SDPA}x SDPA from T={GOAL_FROM_T}":
             [r["sdpa"] / t >= GOAL_VS_SDPA for r, t in zip(judged, best)],
             f"compiled >= {GOAL_VS_SDPA}x SDPA from T={GOAL_FROM_T}":
             [r["compiled_vs_sdpa"] >= GOAL_VS_SDPA for r in judged],
             **{f"{name} peak memory at most linear in T from T={GOAL_FROM_T}":
                [g <= LINEAR_SLACK for g in growth[name]] for name in growth}}
    print()
    for goal, checks in goals.items():
        verdict = "not measured" if not checks else "holds" if all(checks) else "FAILS"
        print(f"{goal}: {verdict}")


if __name__ == "__main__":
    main()
