"""`autograder grade --scheduler`: a class fanned out over Dask workers, one killed mid-run.

A LocalCluster of two worker processes grades a class of notebook 00 while the test kills
the worker that is grading; its submissions are graded by the other (or its restarted
self), and the gradebook, autograded notebooks and feedback equal a sequential run's.
"""
from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest

from autograder.classroom.grade import grade_submissions
from autograder.classroom.journal import Journal
from autograder.pipeline.course import new_course
from helpers import NOTEBOOKS, SOLUTIONS, mutant

distributed = pytest.importorskip("distributed")

ASSIGNMENT = "00_start_here"
SOLUTION = SOLUTIONS / ASSIGNMENT / "start_here.ipynb"
JVP = "return s * (g - np.sum(g * s, axis=axis, keepdims=True))"


def _course(path: Path) -> Path:
    path.mkdir()
    new_course(path)
    return path


def _state(course: Path) -> dict:
    """Everything a run leaves per student: gradebook rows, autograded cells, feedback."""
    import nbformat
    from nbgrader.api import Gradebook

    out = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for sub in gb.assignment_submissions(ASSIGNMENT):
            (nb,) = sub.notebooks
            student = sub.student.id
            graded = nbformat.read(course / "autograded" / student / ASSIGNMENT / "start_here.ipynb", 4)
            out[student] = ({g.name: (g.auto_score, g.needs_manual_grade) for g in nb.grades},
                            {c.name: c.auto_comment for c in nb.comments},
                            [(c.id, c.source, c.get("outputs")) for c in graded.cells],
                            (course / "feedback" / student / ASSIGNMENT / "start_here.html").read_text())
    return out


def test_a_killed_worker_costs_nothing_and_the_result_equals_a_sequential_run(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "ada.ipynb").write_bytes(SOLUTION.read_bytes())
    (folder / "bo.ipynb").write_bytes(mutant(SOLUTION, "warmup_softmax_jvp", JVP, "return s * g",
                                             tmp_path).read_bytes())
    (folder / "cy.ipynb").write_bytes((NOTEBOOKS / ASSIGNMENT / "start_here.ipynb").read_bytes())
    (folder / "dee.ipynb").write_bytes(SOLUTION.read_bytes())

    sequential = _course(tmp_path / "sequential")
    alone = grade_submissions(folder, ASSIGNMENT, sequential, jobs=1, progress=False)
    assert len(alone.graded) == 4 and not alone.failed

    course = _course(tmp_path / "cluster")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, silence_logs=50) as cluster, \
            distributed.Client(cluster) as client:
        result = {}
        run = threading.Thread(target=lambda: result.update(summary=grade_submissions(
            folder, ASSIGNMENT, course, scheduler=cluster.scheduler_address, progress=False)))
        run.start()
        # once the workers are warm (one submission recorded), kill one that is grading
        journal = Journal(course, ASSIGNMENT).folder
        deadline = time.monotonic() + 180
        victim = None
        while victim is None and run.is_alive():
            assert time.monotonic() < deadline, "the cluster graded nothing in time"
            busy = {w: keys for w, keys in client.processing().items() if keys}
            if busy and list(journal.glob("*.done")):
                victim, in_flight = next(iter(busy.items()))
                pid = client.run(os.getpid, workers=[victim])[victim]
                os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)
        run.join(timeout=300)
        assert not run.is_alive()
    summary = result["summary"]
    assert victim is not None, "the class was graded before a worker could be killed"
    assert not summary.failed and len(summary.graded) == 4
    lost = {key.split("-")[1] for key in in_flight}  # grade-<student>-<digest>
    regraded = [o for o in summary.graded if o.student in lost]
    # graded again on the other worker, unless the victim's answer was on its way when the kill
    # landed (a race the kill cannot avoid): either way each learner has one outcome, as alone
    assert regraded and all(o.ok for o in regraded)
    assert summary.workers == 2
    assert _state(course) == _state(sequential)


def test_a_task_carries_its_submissions_key_never_the_secret(tmp_path):
    """What travels to a worker (pickled, as Dask sends it) holds the key of that one submission."""
    import pickle

    from autograder.classroom.grade import make_task
    from autograder.pipeline.plan import secret_key, submission_key
    from autograder.pipeline.submission import prepare

    folder = tmp_path / "submitted" / "ada" / ASSIGNMENT
    folder.mkdir(parents=True)
    shutil.copyfile(SOLUTION, folder / SOLUTION.name)
    task = make_task(folder, "ada", ASSIGNMENT, SOLUTION.name)
    sent = pickle.dumps(task)
    assert secret_key() not in sent and secret_key().hex().encode() not in sent
    assert task.key == submission_key(prepare(folder / SOLUTION.name, ASSIGNMENT, SOLUTION.name).nb)
    (folder / SOLUTION.name).write_bytes(NOTEBOOKS.joinpath(ASSIGNMENT, SOLUTION.name).read_bytes())
    assert make_task(folder, "ada", ASSIGNMENT, SOLUTION.name).key != task.key  # other code, other cases
