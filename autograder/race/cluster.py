"""The class race on a Dask cluster (``autograder leaderboard --scheduler ADDRESS``). [trusted]

Each (entry, seed) is one task: a worker runs ``verify`` on it, in the worker's own sandboxes,
exactly as ``--jobs`` does here, and sends back the ``Run`` as plain data (a dict of numbers and
text). The texts go to the workers once (scattered), the race's key never: the drawn
seeds travel. The instructor's process checks each answer again (``checked``) before it keeps it: an
answer for another seed, a score or CPU time the rules do not allow, or anything that is not a
run's plain data counts as the grader's fault, as does a task the cluster lost (a worker that
died too often, a lost connection): the entry is ranked nowhere this time, and the next race
runs that seed again. A run that is the grader's fault on a worker that says so (its sandbox did
not start, or it raised) is first tried on each other worker in turn: one broken worker in a good
cluster costs no entry. Only the instructor's process writes ``runs/``, so a race stopped halfway
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
    """Runs on a Dask worker: seed ``seed`` of the entry ``code`` verified there, as plain data:
    ``{"worker": its address, "run": the Run}``, or ``"error"`` in place of the run where this
    worker could not verify it (so that the next try goes to another)."""
    from distributed import get_worker  # lazy: Dask, on a worker only

    where = get_worker().address
    try:
        (run,) = verify(code, train, heldout, vocab_size, Rules(**rules), [seed], isolate=isolate)
    except Exception as err:  # the worker's, not the entry's: verify tells the entry's errors as reasons
        return {"worker": where, "error": f"{type(err).__name__}: {err}"[:MAX_REASON]}
    return {"worker": where, "run": asdict(run)}


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
        """``verify`` of ``code``'s ``seeds``, each a task of the cluster's, each answer checked; a
        run that is the grader's fault is tried again on a worker that has not failed it, while
        there is one (a worker without bubblewrap, say, fails every task it takes)."""
        futures = {seed: self._submit(code, seed, None) for seed in seeds}
        runs = []
        for seed in seeds:
            failed: set[str] = set()
            while True:
                run, where = self._answer(futures[seed], seed)
                if not run.grader_fault or where is None:
                    break
                failed.add(where)
                others = [w for w in self.client.scheduler_info(n_workers=-1)["workers"] if w not in failed]
                if not others:
                    break
                futures[seed] = self._submit(code, seed, others)
            if run.grader_fault:  # as a sandbox that did not start here: the race stops where none starts
                self.starts.fault(run.reason)
            else:
                self.starts.up()
            runs.append(run)
        return runs

    def _submit(self, code: str, seed: int, workers: list[str] | None):
        return self.client.submit(verify_on_worker, code, seed, self.train, self.heldout, self.vocab_size,
                                  asdict(self.rules), self.isolate, pure=False, workers=workers,
                                  allow_other_workers=False)

    def _answer(self, future, seed: int) -> tuple[Run, str | None]:
        """(the checked ``Run`` of ``future``, the worker that answered, where it says one)."""
        try:
            answer = future.result()
        except Exception as err:  # KilledWorker (died too often), lost connection, ...
            return Run(seed, reason=f"the cluster could not run it ({type(err).__name__}: {err}"[:300]
                                    + "): not the entry's doing; the next race runs it again", grader_fault=True), None
        where = answer.get("worker") if isinstance(answer, dict) else None
        where = where if isinstance(where, str) and len(where) <= 300 else None
        if isinstance(answer, dict) and set(answer) == {"worker", "error"} and isinstance(answer["error"], str):
            return Run(seed, reason=f"the cluster could not run it ({answer['error'][:300]}): not the entry's "
                                    "doing; the next race runs it again", grader_fault=True), where
        run = answer.get("run") if isinstance(answer, dict) and set(answer) == {"worker", "run"} else None
        return checked(run, seed, self.rules), where

    def close(self) -> None:
        self.client.close()
