"""The class race on an idle and on a busy machine: the same entry, the same seeds, the same score?

The race's budget is CPU time, so an entry should train as far with every core busy as on an
idle machine, only over more wall time. This script verifies the course's entry
(``course_lib.race.BASELINE``) with the same seeds twice, in the grading sandbox: once idle, once
beside one busy process per core, and prints each run's bits per character (mean ± spread over
the random seeds), the CPU and wall seconds, and the ratios.

    python benchmarks/race_load.py --budget 30 --seeds 3
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import time

from autograder.race.heldout import texts
from autograder.race.verify import Rules, verify
from course_lib.race import BASELINE


def _spin(stop) -> None:
    os.setsid()  # a session of its own, as the sandbox has: the scheduler shares the CPU between sessions
    while not stop.is_set():
        sum(i * i for i in range(10_000))


def measure(rules: Rules, seeds: list[int], busy: int) -> dict:
    data = texts()
    stop = multiprocessing.Event()
    spinners = [multiprocessing.Process(target=_spin, args=(stop,), daemon=True) for _ in range(busy)]
    for p in spinners:
        p.start()
    try:
        start = time.monotonic()
        runs = verify(BASELINE, data.train, data.heldout, data.tokenizer.vocab_size, rules, seeds)
        wall = time.monotonic() - start
    finally:
        stop.set()
        for p in spinners:
            p.join()
    bad = [r.reason for r in runs if r.reason]
    if bad:
        raise SystemExit(f"a run failed: {bad[0]}")
    scores = [r.bpc for r in runs]
    return {"scores": scores, "mean": statistics.mean(scores),
            "spread": statistics.stdev(scores) if len(scores) > 1 else 0.0,
            "cpu": sum(r.cpu for r in runs), "wall": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", type=float, default=30.0, help="CPU seconds of training per seed")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--busy", type=int, default=os.cpu_count(), help="busy processes in the second run")
    args = parser.parse_args()
    rules = Rules(budget=args.budget, seeds=args.seeds)
    seeds = list(range(1, args.seeds + 1))
    idle = measure(rules, seeds, 0)
    busy = measure(rules, seeds, args.busy)
    for name, run in (("idle", idle), (f"{args.busy} busy processes", busy)):
        print(f"{name:>18}: {run['mean']:.4f} ± {run['spread']:.4f} bits per character "
              f"({', '.join(f'{s:.4f}' for s in run['scores'])}); CPU {run['cpu']:.0f} s, wall {run['wall']:.0f} s")
    gap = abs(busy["mean"] - idle["mean"])
    print(f"busy / idle: wall {busy['wall'] / idle['wall']:.2f}x, CPU {busy['cpu'] / idle['cpu']:.2f}x; "
          f"means differ by {gap:.4f} ({'within' if gap <= max(idle['spread'], busy['spread']) else 'outside'} the spread)")


if __name__ == "__main__":
    main()
