"""pipeline/plan.py: which cells are graded, and the cases: the same for the same code, secret-keyed."""
import json
import os
import stat
import threading
from concurrent.futures import ThreadPoolExecutor

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_output

from autograder.kernel.transport import encode_value
from autograder.pipeline import plan

from helpers import SOLUTIONS

NB = SOLUTIONS / "00_start_here" / "start_here.ipynb"


def _graded(source, grade=True):
    return new_code_cell(source, metadata={"nbgrader": {"grade": grade, "grade_id": "g", "points": 1}})


def test_a_graded_cell_names_its_exercise_only_by_the_exact_record_call():
    assert plan.recorded_exercise(_graded('record("warmup.softmax", globals())')) == "warmup.softmax"
    assert plan.recorded_exercise(_graded("record('warmup.softmax',  globals() )\n")) == "warmup.softmax"
    assert plan.recorded_exercise(_graded('record("warmup.softmax", globals())', grade=False)) is None
    assert plan.recorded_exercise(_graded('record("warmup.softmax", {})')) is None
    assert plan.recorded_exercise(new_markdown_cell('record("warmup.softmax", globals())')) is None


def test_the_secret_is_made_once_readable_by_its_owner_only(tmp_path, monkeypatch):
    path = tmp_path / "course" / ".autograder" / "secret"
    monkeypatch.setenv(plan.SECRET_ENV, str(path))
    key = plan.secret_key()
    assert len(key) >= 32 and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert plan.secret_key() == key and not list(path.parent.glob(".secret.*"))  # no draft left


def test_threads_that_make_the_secret_at_once_all_get_the_same_one(tmp_path, monkeypatch):
    # a class's pool prepares submissions in threads; each one's first key may make the secret
    # (CI failed once: two threads of one process shared a draft file and one unlinked it)
    path = tmp_path / "secret"
    monkeypatch.setenv(plan.SECRET_ENV, str(path))
    start = threading.Barrier(8)

    def make():
        start.wait()
        return plan.secret_key()

    for _ in range(20):
        path.unlink(missing_ok=True)
        with ThreadPoolExecutor(8) as pool:
            keys = list(pool.map(lambda _: make(), range(8)))
        assert len(set(keys)) == 1 and keys[0] == path.read_bytes().strip()
        assert not list(tmp_path.glob(".secret.*"))


def test_the_cases_follow_the_code_and_the_secret_never_the_outputs(tmp_path, monkeypatch):
    monkeypatch.setenv(plan.SECRET_ENV, str(tmp_path / "secret"))
    nb = nbformat.read(NB, as_version=4)
    graded = plan.graded_cases(nb, plan.submission_key(nb))
    assert sorted(graded) == [i for i, c in enumerate(nb.cells) if plan.recorded_exercise(c)]
    assert all(ex.id == plan.recorded_exercise(nb.cells[i]) for i, (ex, _) in graded.items())

    def cases():
        return json.dumps([encode_value(c) for _, c in plan.graded_cases(nb, plan.submission_key(nb)).values()],
                          sort_keys=True)

    drawn = cases()
    nb.cells[0].outputs = [new_output("stream", text="anything")]
    nb.cells.append(new_markdown_cell("a note of the learner's"))
    assert cases() == drawn  # outputs and markdown do not move them
    nb.cells.append(new_code_cell("x = 1"))
    assert cases() != drawn  # other code: other cases
    nb.cells.pop()
    assert cases() == drawn
    monkeypatch.setenv(plan.SECRET_ENV, str(tmp_path / "another secret"))
    assert cases() != drawn  # another course's secret: other cases


def test_the_cases_are_drawn_from_the_key_given_without_the_secret(tmp_path, monkeypatch):
    monkeypatch.setenv(plan.SECRET_ENV, str(tmp_path / "no secret here"))
    nb = nbformat.read(NB, as_version=4)
    one, other = plan.graded_cases(nb, b"k" * 32), plan.graded_cases(nb, b"j" * 32)
    assert not (tmp_path / "no secret here").exists()
    assert [encode_value(c) for _, c in one.values()] == [encode_value(c) for _, c in plan.graded_cases(nb, b"k" * 32).values()]
    assert [encode_value(c) for _, c in one.values()] != [encode_value(c) for _, c in other.values()]
