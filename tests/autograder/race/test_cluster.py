"""``autograder leaderboard --scheduler``: each (entry, seed) verified on a Dask worker.

A LocalCluster of two worker processes races a learner and the course's entry (one seed each,
a budget of two CPU seconds), while this process runs no entry itself. First its workers are
made to fail every task: the race goes on, the runs are the grader's fault; then they work, and
the next race runs those seeds again on them; a third takes every run from ``runs/`` and sends
the cluster nothing. A worker's answers are plain data, checked again here.
"""
from __future__ import annotations

from dataclasses import asdict

import pytest

from autograder.pipeline.sandbox import isolation
from autograder.race import board, cluster, leaderboard
from autograder.race.cluster import checked
from autograder.race.leaderboard import race
from autograder.race.verify import Run
from course_lib.data import generated_text
from race_entries import RULES, class_of

distributed = pytest.importorskip("distributed")


def _broken(on: bool) -> None:
    """Run on each worker: its ``verify`` raises (``on``), or is the real one again."""
    from autograder.race import cluster, verify  # the worker's own modules

    def fails(*args, **kwargs):
        raise RuntimeError("this worker is broken")
    cluster.verify = fails if on else verify.verify


def test_a_race_on_the_cluster_runs_on_its_workers_and_runs_again_what_it_lost(tmp_path, monkeypatch):
    if not isolation()[0]:
        pytest.skip("the race runs entries in the sandbox (bubblewrap)")

    def here(*args, **kwargs):
        raise AssertionError("an entry was verified in the instructor's process")
    monkeypatch.setattr(leaderboard, "verify", here)
    sent, real = [], cluster.DaskRaces.verify
    monkeypatch.setattr(cluster.DaskRaces, "verify", lambda self, code, seeds: sent.append(seeds) or real(self, code, seeds))
    heldout = tmp_path / "unseen.txt"
    heldout.write_text(generated_text(12_000, seed=99))
    folder, out = class_of(tmp_path / "class", 1), tmp_path / "out"

    def raced(address):
        ranked, _ = race("06_gpt", folder, out, RULES, heldout, train_text=generated_text(40_000), scheduler=address)
        return {s.name: s for s in ranked}
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=50) as local, distributed.Client(local) as client:
        client.run(_broken, True)
        lost = raced(local.scheduler_address)
        assert {s.name for s in lost.values()} == {"learner0", board.BASELINE}
        assert all(s.rank is None and s.runs[0].grader_fault and "this worker is broken" in s.reason
                   for s in lost.values())
        client.run(_broken, False)
        again = raced(local.scheduler_address)
        assert len(sent) == 4  # each entry's seed sent twice: lost, then run again
        for s in again.values():
            assert s.rank is not None and s.reason is None, s.reason
            assert s.runs[0].curve and 0 < s.runs[0].cpu <= RULES.budget + RULES.startup
        kept = {p.name: p.read_text() for p in (out / "runs").glob("*.json")}
        third = raced(local.scheduler_address)
    assert len(sent) == 4  # nothing sent: every run from runs/
    assert {p.name: p.read_text() for p in (out / "runs").glob("*.json")} == kept
    assert {n: s.mean for n, s in third.items()} == {n: s.mean for n, s in again.items()}


def _first_to_take_a_task_breaks(claim: str) -> None:
    """Run on each worker: the first of them to start a task (it creates ``claim``) fails that
    task and every later one, as a worker without bubblewrap would; the others work."""
    import os

    from distributed import get_worker

    from autograder.race import cluster, verify

    def maybe(*args, **kwargs):
        try:
            os.close(os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            open(claim, "w").write(get_worker().address)
        except FileExistsError:
            pass
        if open(claim).read() == get_worker().address:
            raise RuntimeError("this worker is broken")
        return verify.verify(*args, **kwargs)
    cluster.verify = maybe


def test_one_broken_worker_in_a_good_cluster_costs_no_entry(tmp_path):
    """A run the grader's fault on one worker is tried again on another, in the same race."""
    if not isolation()[0]:
        pytest.skip("the race runs entries in the sandbox (bubblewrap)")
    heldout = tmp_path / "unseen.txt"
    heldout.write_text(generated_text(12_000, seed=99))
    folder, claim = class_of(tmp_path / "class", 1), tmp_path / "broken"
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=50) as local, distributed.Client(local) as client:
        client.run(_first_to_take_a_task_breaks, str(claim))
        ranked, _ = race("06_gpt", folder, tmp_path / "out", RULES, heldout, train_text=generated_text(40_000),
                         scheduler=local.scheduler_address)
        workers = set(client.scheduler_info(n_workers=-1)["workers"])
    assert claim.read_text() in workers  # one worker broke, on the first task it took
    for s in ranked:
        assert s.rank is not None and s.reason is None and not s.runs[0].grader_fault, (s.name, s.reason)


def test_a_workers_answer_is_kept_only_for_its_own_seed_and_within_the_rules():
    good = asdict(Run(7, bpc=1.5, cpu=3.0, params=100, curve=[(1.0, 2.0), (1.0, 1.7e308)], windows=[1.4, 1.6]))
    assert checked(good, 7, RULES) == Run(7, bpc=1.5, cpu=3.0, params=100, curve=[(1.0, 2.0)], windows=[1.4, 1.6])
    refused = checked({**good, "bpc": None, "reason": "the model is not causal"}, 7, RULES)
    assert refused.reason == "the model is not causal" and not refused.grader_fault  # the entry's, kept
    for bad, why in (({**good, "seed": 8}, "for seed 8"), ("a run", "not a run"), ({**good, "extra": 1}, "not a run"),
                     ({**good, "bpc": float("nan")}, "rules do not allow"), ({**good, "bpc": 5000.0}, "rules do not allow"),
                     ({**good, "cpu": RULES.budget + RULES.startup + 1}, "rules do not allow"),
                     ({**good, "params": RULES.params + 1}, "rules do not allow"), ({**good, "cpu": -1.0}, "CPU time"),
                     ({**good, "grader_fault": True}, "fault"), ({**good, "reason": "x" * 5000}, "not a sentence"),
                     # each window's bits: what the check of the seeds against each other reads
                     ({**good, "windows": []}, "windows' scores"), ({**good, "windows": [1.5, "2"]}, "windows' scores"),
                     ({**good, "windows": [1.5] * (RULES.windows + 1)}, "windows' scores"),
                     ({**good, "windows": [1.5, float("inf")]}, "windows' scores"),
                     ({**good, "windows": {"a": 1}}, "windows' scores"),
                     ({**good, "windows": [1.0, 1.2]}, "not the score's")):
        run = checked(bad, 7, RULES)
        assert run.seed == 7 and run.grader_fault and run.bpc is None and why in run.reason, (bad, run.reason)


def test_what_a_worker_sends_is_unwrapped_with_care():
    class Done:  # a future that has its answer
        def __init__(self, answer):
            self.answer = answer

        def result(self):
            if isinstance(self.answer, Exception):
                raise self.answer
            return self.answer
    races = cluster.DaskRaces.__new__(cluster.DaskRaces)
    races.rules = RULES
    good = asdict(Run(7, bpc=1.5, cpu=3.0, params=100, windows=[1.5]))
    assert races._answer(Done({"worker": "tcp://a:1", "run": good}), 7) == (checked(good, 7, RULES), "tcp://a:1")
    for answer, where, why in (({"worker": "tcp://a:1", "error": "OSError: no bwrap"}, "tcp://a:1", "no bwrap"),
                               ({"worker": 3, "run": good}, None, None),  # no address: not tried elsewhere
                               ({"worker": "tcp://a:1", "run": good, "more": 1}, "tcp://a:1", "not a run"),
                               ({"worker": "tcp://a:1", "error": 5}, "tcp://a:1", "not a run"),
                               (good, None, "not a run"), (RuntimeError("lost"), None, "lost")):
        run, said = races._answer(Done(answer), 7)
        assert said == where, answer
        if why:
            assert run.grader_fault and run.bpc is None and why in run.reason, (answer, run.reason)
