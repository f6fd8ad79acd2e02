"""The graded cell's runner (``autograder.kernel.run_cases``): limits count CPU time, not the clock."""
import time

import numpy as np

from autograder.kernel import cases as kernel


def _run(monkeypatch, source, seconds=0.5):
    monkeypatch.setattr(kernel, "CASE_SECONDS", seconds)
    scope = {"np": np}
    exec(source, scope)
    return kernel.run_cases(scope, "f", None, [{"x": np.ones(3)}])


def test_a_case_that_waits_is_not_stopped_by_the_cpu_limit(monkeypatch):
    # A busy grading machine stretches the clock, not the CPU time: waiting twice the limit
    # (the clock runs on, no CPU is used) still gives the answer, up to WALL_FACTOR times it.
    start = time.monotonic()
    [result] = _run(monkeypatch, "import time\ndef f(x):\n    time.sleep(1.0)\n    return 2 * x\n")
    assert isinstance(result, tuple) and np.allclose(result[0], 2), result
    assert time.monotonic() - start >= 1.0


def test_an_endless_loop_is_stopped_after_its_cpu_seconds(monkeypatch):
    start = time.process_time()
    [result] = _run(monkeypatch, "def f(x):\n    while True:\n        pass\n")
    assert result.startswith("did not finish within") and "endless loop" in result
    assert time.process_time() - start < 5


def test_a_case_that_waits_forever_is_stopped_by_the_clock(monkeypatch):
    start = time.monotonic()
    [result] = _run(monkeypatch, "import time\ndef f(x):\n    time.sleep(60)\n", seconds=0.25)
    assert "waiting" in result, result
    assert time.monotonic() - start < 10


def test_a_graded_exercise_that_waits_stops_within_its_budget_on_the_clock(monkeypatch):
    # The graded cell must end before the grader's cell timeout: cases that wait share the
    # exercise's budget on the clock too, and the rest are not run.
    monkeypatch.setattr(kernel, "CASE_SECONDS", 0.5)
    scope = {"np": np}
    exec("import time\ndef f(x):\n    time.sleep(60)\n", scope)
    start = time.monotonic()
    results = kernel.run_cases(scope, "f", None, [{"x": np.ones(3)}] * 3, budget=1.0)
    assert time.monotonic() - start < 5
    assert "waiting" in results[0] and results[-1].startswith("not run"), results
