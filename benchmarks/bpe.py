"""Naive BPE learning (recount every pair after each merge) vs incremental pair counts,
side by side in one process, on the same corpus; checks that both learn the same merges.

    python benchmarks/bpe.py [--merges 300] [--corpus dates|shakespeare] [--repeats 3]

"dates" is the training split of notebook 05's task (sources and targets); "shakespeare"
is ../shared/data/tinyshakespeare.txt if present, else the cached course corpus.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from course_lib.tokenize import learn_merges, learn_merges_naive, word_counts

TINY = Path(__file__).resolve().parents[2] / "shared" / "data" / "tinyshakespeare.txt"


def corpus(name: str) -> list[str]:
    if name == "dates":
        from course_lib.translation import make_splits
        return [text for pair in make_splits().train for text in pair]
    if TINY.exists():
        return TINY.read_text(encoding="utf-8").splitlines()
    from course_lib.data import load_text
    return load_text(fallback=True)[0].splitlines()


def best_time(fn, repeats: int) -> tuple[float, list]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--merges", type=int, default=300)
    parser.add_argument("--corpus", choices=("dates", "shakespeare"), default="dates")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    words = word_counts(corpus(args.corpus))
    print(f"corpus={args.corpus}: {len(words):,} distinct chunks, "
          f"{sum(words.values()):,} in all; {args.merges} merges, best of {args.repeats}")
    naive, naive_merges = best_time(lambda: learn_merges_naive(words, args.merges), args.repeats)
    fast, fast_merges = best_time(lambda: learn_merges(words, args.merges), args.repeats)
    if naive_merges != fast_merges:
        raise SystemExit("the two learners disagree: this is a bug")
    print(f"learned {len(fast_merges)} merges (fewer if every chunk became one token)")
    print(f"{'naive s':>10} {'incremental s':>14} {'naive/incremental':>18}")
    print(f"{naive:>10.3f} {fast:>14.3f} {naive / fast:>18.1f}")


if __name__ == "__main__":
    main()
