"""The grader's side of a case run again alone: what it reads from the process, and whom it kills."""
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from autograder.exercises import get
from autograder.judge.verdict import judge
from autograder.kernel import wire
from autograder.kernel.cases import CODE
from autograder.kernel.transport import (OverMemory, Raised, as_outputs, decode_results, encode_array, encode_ask,
                                         encode_outcome)
from autograder.paths import REPO
from autograder.pipeline import rerun
from autograder.pipeline.sandbox import _pidfd
from exercise_bank import TEST_KEY
from helpers import SOLUTIONS, grade, mutant


def _converse(code: str, seconds: float = 3.0, answer=None):
    """``rerun.converse`` with ``python -c code`` in a session of its own: (the results, seconds taken)."""
    process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               start_new_session=True)

    def stop():
        if process.returncode is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    began = time.monotonic()
    return rerun.converse(process, stop, "{}", answer, seconds), time.monotonic() - began


def test_the_results_line_is_read_whole_however_it_arrives_and_requests_are_answered():
    code = ("import sys, json, time; sys.stdin.readline()\n"
            "print(json.dumps({'ask': 7}), flush=True); got = json.loads(sys.stdin.readline())\n"
            "sys.stdout.write('{\"res'); sys.stdout.flush(); time.sleep(0.2)\n"
            "sys.stdout.write('ults\": [' + str(got['n']) + ']}\\n{\"results\": [0]}\\n')")
    results, _ = _converse(code, answer=lambda message: {"n": message["ask"] * 2})
    assert results == [14]


def test_a_child_that_escapes_the_kill_and_keeps_the_pipe_open_does_not_hold_the_grader():
    """Its session of its own puts it out of the group ``stop`` kills; the grader reads with a
    deadline, never a line it waits for."""
    code = ("import os, sys, time; sys.stdin.readline()\n"
            "if os.fork() == 0:\n    os.setsid(); time.sleep(20)\n"
            "time.sleep(20)")
    results, took = _converse(code, seconds=1.0)
    assert results is None and took < 8, took


def test_a_line_longer_than_the_grader_reads_ends_the_conversation():
    code = f"import sys; sys.stdin.readline(); sys.stdout.write('x' * {rerun.LINE + (1 << 16)}); sys.stdout.flush()"
    results, took = _converse(code, seconds=20.0)
    assert results is None and took < 15, took


def test_a_pid_is_only_taken_for_the_sandboxs_first_process_while_its_parent_is_bubblewrap():
    """A pid that bubblewrap reported may be another process's by the time it is opened: only
    a child of the process the grader started is signalled, and through a pidfd, never a number."""
    parent = subprocess.Popen(["sh", "-c", "sleep 30 & wait"])
    try:
        for _ in range(100):
            children = subprocess.run(["pgrep", "-P", str(parent.pid)], capture_output=True, text=True).stdout.split()
            if children:
                break
            time.sleep(0.05)
        child = int(children[0])
        with pytest.raises(ProcessLookupError):
            _pidfd(child, parent=os.getpid())  # not our child: refused
        fd = _pidfd(child, parent=parent.pid)
        try:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
            assert parent.wait(timeout=10) == 0  # `wait` in sh returns once its child is gone
        finally:
            os.close(fd)
    finally:
        parent.kill()
        parent.wait()


# --- fuzz: whatever the fresh process sends, the grader answers or gives up; nothing escapes ------

class _Sent:
    """A process run alone that has sent ``lines`` and ended: what ``converse`` reads from."""

    def __init__(self, lines: list[bytes]):
        self.stdout = tempfile.TemporaryFile()
        self.stdout.write(b"\n".join(lines) + b"\n")
        self.stdout.seek(0)
        self.stdin = open(os.devnull, "wb")

    def wait(self):
        self.stdin.close()
        self.stdout.close()


GREEDY = get("encdec.greedy")
TABLES = {n: case["logp"] for n, case in enumerate(GREEDY.graded_cases(TEST_KEY)[:2])}
plain = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                 max_size=3),
                     max_leaves=12)
dtypes = st.sampled_from(["<i8", "<f8", "|b1", "<u2", "<f2", "<c16", "|O", "<U3", "|V8", "S4", "i8,i8"])
shapes = st.lists(st.integers(-2, 12), max_size=4) | st.just([10 ** 18, 10 ** 18, 0]) | st.just([])
forged = st.fixed_dictionaries({"dtype": dtypes | plain, "shape": shapes | plain, "data": st.text(max_size=12) | plain})
arrays = st.builds(lambda shape, fill, kind: encode_array(np.full(shape, fill).astype(kind)),
                   st.lists(st.integers(0, 4), max_size=3).map(tuple), st.integers(-3, 60),
                   st.sampled_from([np.int64, np.float64, np.bool_, np.uint8, np.int8]))
requests = st.fixed_dictionaries({"ask": st.integers(-2, 3) | plain, "prefixes": arrays | forged | plain}) | plain
DEEP = b"[" * 3000 + b"]" * 3000  # deeper than Python's json parser goes
lines = (requests.map(lambda m: json.dumps(m).encode())
         | plain.map(lambda m: json.dumps({"results": m}).encode())
         | st.sampled_from([DEEP, b'{"ask": ' + b"9" * 5000 + b"}", b'{"ask": NaN}', b'{"ask": Infinity}',
                            b'{"results": {"cases": [{"outputs": [1e999]}]}}', b'{"ask": 0, "pref', b"\xff",
                            b'{"results": ' + DEEP + b"}"])
         | st.binary(max_size=40))


@settings(max_examples=300, deadline=None)
@given(requests)
def test_the_served_model_answers_any_request_with_an_answer_or_an_error_never_a_raise(request):
    reply = rerun._server(TABLES)(request)
    assert set(reply) in ({"logp"}, {"error", "type"}) and wire.loads(wire.dumps(reply)) == reply


def test_a_scalar_asked_of_the_served_model_by_mistake_gets_the_error_the_kernels_model_raises():
    answer = rerun._server(TABLES)
    reply = answer(encode_ask(0, 1))
    assert reply["type"] == "ValueError" and "(n, t)" in reply["error"], reply
    assert "logp" in answer(encode_ask(0, np.array([[1]])))  # and the right call after it is answered


@settings(max_examples=150, deadline=None)
@given(st.lists(lines, min_size=1, max_size=4))
def test_converse_reads_whatever_lines_come_without_raising(sent):
    got = rerun.converse(_Sent(sent), lambda: None, "{}", rerun._server(TABLES), 5.0)
    assert got is None or isinstance(got, wire.Unreadable) or wire.check(got) is got


@settings(max_examples=40, deadline=None)
@given(plain, st.lists(lines, min_size=1, max_size=3))
def test_a_rerun_of_any_payload_and_any_reply_costs_its_cases_at_most_and_is_judged(entry, sent):
    cases = GREEDY.graded_cases(TEST_KEY)
    right = GREEDY.reference(**cases[0])
    payload = {"exercise": GREEDY.id, CODE: "not a pickle",
               "cases": [encode_outcome(as_outputs(right)), entry] + [{"raised": "no"}] * (len(cases) - 2)}

    @contextlib.contextmanager
    def start(argv):
        yield _Sent(sent), lambda: None
    alone = rerun.run_again(GREEDY, cases, TEST_KEY, payload, REPO, start)
    assert set(alone) <= {0, 1}
    assert all(a.outcome is None or isinstance(a.outcome, (tuple, Raised, OverMemory)) for a in alone.values())
    verdict = judge(GREEDY, cases, decode_results(payload), alone=alone)
    assert verdict.passed <= 2


def test_a_decoder_that_first_asks_the_model_with_a_scalar_and_catches_the_error_keeps_its_marks(tmp_path):
    """The model served to a case run again alone answers a scalar with the ``ValueError`` the
    kernel's model raises (it used to fail the grading of the whole notebook): the decoders that
    catch it score full marks, and so does every other exercise of notebook 05."""
    solution = SOLUTIONS / "05_encoder_decoder" / "encoder_decoder.ipynb"
    probe = ("    try:\n        next_log_probs({})  # a scalar by mistake, caught\n"
             "    except ValueError:\n        pass\n")
    path = mutant(solution, "encdec_greedy", "    seq = [bos]\n", probe.format("bos") + "    seq = [bos]\n", tmp_path)
    path = mutant(solution, "encdec_beam_search", "    finished = []  ", probe.format("0") + "    finished = []  ",
                  tmp_path, base=path)
    result = grade(path)
    assert result.total == result.max_total, [(e.id, e.points, e.messages) for e in result.exercises
                                              if e.points < e.max_points]
    assert {"encdec.greedy", "encdec.beam_search"} <= {e.id for e in result.exercises}
