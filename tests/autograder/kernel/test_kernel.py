"""The graded cell's runner (``autograder.kernel.run_cases``): limits count CPU time, not the clock."""
import time

import numpy as np

from autograder.kernel import cases as kernel
from autograder.kernel.transport import COUNTED, OverMemory


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
    assert result.text.startswith("did not finish within") and "endless loop" in result.text
    assert time.process_time() - start < 5


def test_a_case_that_waits_forever_is_stopped_by_the_clock(monkeypatch):
    start = time.monotonic()
    [result] = _run(monkeypatch, "import time\ndef f(x):\n    time.sleep(60)\n", seconds=0.25)
    assert "waiting" in result.text, result
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
    assert "waiting" in results[0].text and results[-1].text.startswith("not run"), results


def _changed(source, case):
    scope = {"np": np}
    exec(source, scope)
    changed = []
    results = kernel.run_cases(scope, "f", None, [case], changed=changed)
    return results[0], changed[0]


def test_inputs_changed_in_place_are_named_and_the_case_keeps_its_outputs():
    case = {"x": np.arange(4.0), "p": {"W": np.ones((2, 2)), "b": np.zeros(2)}, "n": 3}
    result, changed = _changed("def f(x, p, n):\n    x -= x.mean()\n    p['W'][0, 0] = 5\n    return x\n", case)
    assert changed == ["x", "p"] and np.allclose(result[0], np.arange(4.0) - 1.5)
    assert np.array_equal(case["x"], np.arange(4.0))  # the grader's own copy is untouched


def test_an_input_put_back_up_to_rounding_is_not_changed():
    # numerical_gradient's x[i] += eps; x[i] -= eps can come back one rounding off
    source = "def f(x, p, n):\n    x += 1e-6\n    x -= 1e-6\n    return x.sum()\n"
    case = {"x": np.random.default_rng(0).standard_normal(50), "p": {}, "n": 3}
    _, changed = _changed(source, case)
    assert changed == []
    _, changed = _changed("def f(x, p, n):\n    return x * 2\n", case)
    assert changed == []


def test_a_long_case_over_its_memory_limit_reports_its_peak():
    scope = {"np": np}
    exec("def f(x):\n    big = np.ones((1000, 1000))\n    return x + big.sum()\n"
         "def g(x):\n    return x + 1\n", scope)
    case = [{"x": np.ones(3)}]
    [over] = kernel.run_cases(scope, "f", None, case, memory=[1 << 20])
    assert isinstance(over, OverMemory) and over.by == COUNTED and over.peak >= 8_000_000
    [fine] = kernel.run_cases(scope, "g", None, case, memory=[1 << 20])
    assert np.allclose(fine[0], 2)
    [unbounded] = kernel.run_cases(scope, "f", None, case, memory=[None])
    assert isinstance(unbounded, tuple)


def test_a_cases_file_the_wire_does_not_read_is_the_exercises_failure(tmp_path, monkeypatch):
    """``$AUTOGRADER_CASES`` is the kernel's to change (an earlier cell), and without isolation
    its folder is the learner's: the graded cell reads its cases file as any message is read."""
    from autograder.exercises import get
    from autograder.kernel.transport import MIME, encode_cases
    from autograder.kernel import wire

    ex = get("warmup.softmax")
    spec = encode_cases(ex.id, ex.function, ex.call, ex.public_cases(), ex.signature)
    monkeypatch.setenv(kernel.CASES_ENV, str(tmp_path))
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj, raw=False: shown.append(obj[MIME]))
    scope = {"np": np}
    exec("def softmax(z, axis=-1):\n    e = np.exp(z - z.max(axis=axis, keepdims=True))\n"
         "    return e / e.sum(axis=axis, keepdims=True)\n", scope)
    path = tmp_path / f"{ex.id}.json"
    path.write_text(wire.dumps(spec))
    kernel.record(ex.id, scope)
    assert "failure" not in shown[-1] and shown[-1]["cases"]
    for text in (wire.dumps(spec)[:-1] + ', "x": NaN}', wire.dumps(spec)[:-1] + ', "x": ' + "[" * 50 + "]" * 50 + "}"):
        path.write_text(text)
        kernel.record(ex.id, scope)
        assert shown[-1]["cases"] == [] and "Unreadable" in shown[-1]["failure"], shown[-1]
