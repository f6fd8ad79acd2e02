"""The class race on a Dask cluster (``autograder leaderboard --scheduler ADDRESS``). [trusted]

Each (entry, seed) is one task: a worker runs ``verify`` on it, in the worker's own sandboxes,
exactly as ``--jobs`` does here, and sends back the ``Run`` as plain data (a dict of numbers and
text). The texts go to the workers once (scattered), the race's key never: the drawn
seeds travel. The instructor's process checks each answer again (``checked``) before it keeps it: an
answer for another seed, a score or CPU time the rules do not allow, or anything that is not a
run's plain data counts as the grader's fault, as does a task the cluster lost (a worker that
died too often, a lost connection): the entry is ranked nowhere this time, and the next race
runs that seed again. Only the instructor's process writes ``runs/``, so a race stopped halfway
resumes from there as it does on one machine.

A worker is trusted code, but it runs learners' code: should one be made to lie, its answer
counts only for the run it was given and only with numbers the rules allow. The workers need this
repository (the same commit), its environment and bubblewrap, as for ``autograder grade``
(docs/instructor.md §5), not the course's data: the texts come with the race.
"""
from __future__ import annotations

import math
from dataclasses import asdict, fields

import numpy as np

from autograder.classroom.pools import connect
from autograder.race.process import Starts
from autograder.race.verify import MAX_BITS, Rules, Run, curve_points, verify

MAX_REASON = 1000  # characters of a reason a worker sends


def verify_on_worker(code: str, seed: int, train: np.ndarray, heldout: np.ndarray, vocab_size: int,
                     rules: dict, isolate: bool) -> dict:
    """Runs on a Dask worker: seed ``seed`` of the entry ``code`` verified there, as plain data."""
    (run,) = verify(code, train, heldout, vocab_size, Rules(**rules), [seed], isolate=isolate)
    return asdict(run)


def checked(answer, seed: int, rules: Rules) -> Run:
    """The ``Run`` a worker's ``answer`` for ``seed`` says, if it is one the rules allow; else a
    run with the reason, the grader's fault."""
    def refused(why: str) -> Run:
        return Run(seed, reason=f"the cluster's answer for this run was not kept ({why}): not the entry's "
                                "doing; the next race runs it again", grader_fault=True)
    names = {f.name for f in fields(Run)}
    if not isinstance(answer, dict) or set(answer) != names:
        return refused("not a run")
    run = Run(**answer)
    number = lambda v: type(v) in (int, float) and math.isfinite(v)  # noqa: E731
    if type(run.seed) is not int or run.seed != seed:
        return refused(f"it answered for seed {run.seed!a}")
    if not number(run.cpu) or run.cpu < 0 or type(run.params) is not int or run.params < 0 \
            or type(run.grader_fault) is not bool or run.grader_fault and run.reason is None:
        return refused("its CPU time, size or fault are not what a run holds")
    if run.reason is not None and (not isinstance(run.reason, str) or len(run.reason) > MAX_REASON):
        return refused("its reason is not a sentence")
    if run.reason is None and not (number(run.bpc) and 0 <= run.bpc <= MAX_BITS and run.params <= rules.params
                                   and run.cpu <= rules.budget + rules.startup):
        return refused("a score, a size or a CPU time the rules do not allow")
    if not isinstance(run.windows, list) or len(run.windows) > rules.windows \
            or not all(number(v) and 0 <= v <= MAX_BITS for v in run.windows) \
            or run.reason is None and not (run.windows and abs(sum(run.windows) / len(run.windows) - run.bpc) <= 1e-5):
        return refused("its windows' scores are not what a run holds, or not the score's")
    run.curve = curve_points(run.curve, rules.train_limit)
    run.bpc = run.bpc if run.reason is None else None
    return run


class DaskRaces:
    """The cluster behind ``scheduler`` verifying one race's runs: ``threads`` at once."""

    def __init__(self, scheduler: str, train: np.ndarray, heldout: np.ndarray, vocab_size: int, rules: Rules,
                 isolate: bool, starts: Starts):
        self.client, self.threads = connect(scheduler)
        self.rules, self.vocab_size, self.isolate, self.starts = rules, vocab_size, isolate, starts
        # once to every worker, rather than a copy with each task
        self.train, self.heldout = self.client.scatter([train, heldout], broadcast=True)

    def verify(self, code: str, seeds: list[int]) -> list[Run]:
        """``verify`` of ``code``'s ``seeds``, each a task of the cluster's, each answer checked."""
        futures = [self.client.submit(verify_on_worker, code, seed, self.train, self.heldout, self.vocab_size,
                                      asdict(self.rules), self.isolate, pure=False) for seed in seeds]
        runs = []
        for seed, future in zip(seeds, futures):
            try:
                run = checked(future.result(), seed, self.rules)
            except Exception as err:  # KilledWorker (died too often), lost connection, ...
                run = Run(seed, reason=f"the cluster could not run it ({type(err).__name__}: {err}"[:300]
                                       + "): not the entry's doing; the next race runs it again", grader_fault=True)
            if run.grader_fault:  # as a sandbox that did not start here: the race stops where none starts
                self.starts.fault(run.reason)
            else:
                self.starts.up()
            runs.append(run)
        return runs

    def close(self) -> None:
        self.client.close()
