"""Case adequacy: do an exercise's graded cases tell every mutant of its reference apart? [trusted]

Trusted side, for authors and the tests (``tests/autograder/exercises/test_mutation_adequacy.py``);
never staged in the sandbox, never run by the check cell; beside the registry, not in the judge,
because it takes every exercise of it. A mutant (``autograder.judge.mutation``) survives a key when its outputs equal the
reference's on every graded case drawn from that key. Each survivor is a bug some learner
would keep full marks with: add a case that tells it apart (in every key's draw, not by
luck), or, when no legitimate input can, list it in ``Exercise.equivalent`` with the reason.
Mutants at places whose value never reaches the outputs on any case (a cache the exercise
does not return) are counted apart, as unreached.

    python -m autograder.exercises.adequacy attention.forward [more ids] [--keys 8]
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from autograder.exercises import all_exercises, get
from autograder.judge.exercise import Exercise
from autograder.judge.explain import matching
from autograder.judge.mutation import Mutant, live_sites, mutants
from autograder.kernel.transport import as_outputs

KEYS = tuple(f"adequacy key {i}".encode() for i in range(64))


@dataclass
class Report:
    exercise: str
    total: int = 0                                  # mutants made
    live: int = 0                                   # of those, at a place that reaches the outputs
    survivors: dict = field(default_factory=dict)   # mutant id -> Mutant, not killed under some key
    listed: int = 0                                 # survivors listed as equivalent

    @property
    def unexplained(self) -> list[Mutant]:
        return [m for m in self.survivors.values() if m.id not in self._equivalent]

    _equivalent: dict = field(default_factory=dict, repr=False)

    @property
    def score(self) -> float:
        """Killed share of the live mutants that are not listed as equivalent."""
        counted = self.live - self.listed
        return 1.0 if counted <= 0 else 1 - len(self.unexplained) / counted


def check(ex: Exercise, keys=KEYS[:3]) -> Report:
    """Survivors of ``ex``'s mutants over the graded cases of each of ``keys``."""
    report = Report(ex.id, total=len(mutants(ex)), _equivalent=dict(ex.equivalent))
    live = set()
    for key in keys:
        cases = ex.graded_cases(key)
        wants = [as_outputs(ex.reference(**c)) for c in cases]
        live |= live_sites(ex, cases, wants)
        found = matching(ex, list(zip(cases, wants)), budget=600)
        if found is None:
            raise RuntimeError(f"{ex.id}: the mutants did not finish within the budget")
        report.survivors.update((m.id, m) for m in found)
    report.survivors = {k: m for k, m in report.survivors.items() if (m.host, m.site) in live}
    report.live = sum((m.host, m.site) in live for m in mutants(ex))
    report.listed = sum(k in ex.equivalent for k in report.survivors)
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0].removesuffix(" [trusted]"))
    parser.add_argument("ids", nargs="*", help="exercise ids (default: all)")
    parser.add_argument("--keys", type=int, default=3, help="how many keys to draw cases from")
    args = parser.parse_args(argv)
    exercises = [get(i) for i in args.ids] if args.ids else all_exercises()
    bad = 0
    for ex in exercises:
        r = check(ex, KEYS[:args.keys])
        print(f"{ex.id:28s} mutants {r.total:4d}  reaching the outputs {r.live:4d}  "
              f"equivalent {r.listed:3d}  surviving {len(r.unexplained):3d}  score {r.score:.1%}")
        for m in r.unexplained:
            print(f"    {m.id!r}: {m.words}")
        stale = [k for k in ex.equivalent if k not in r.survivors]
        for k in stale:
            print(f"    listed as equivalent but killed or gone: {k!r}")
        bad += len(r.unexplained) + len(stale)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
