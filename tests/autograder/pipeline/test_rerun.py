"""The grader's side of a case run again alone: what it reads from the process, and whom it kills."""
import os
import signal
import subprocess
import sys
import time

import pytest

from autograder.pipeline import rerun
from autograder.pipeline.sandbox import _pidfd


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
