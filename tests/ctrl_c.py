"""Ctrl-C (SIGINT) as a process takes it, read from /proc: the tests that press Ctrl-C in a
command check that it would hear it, and every test that its process still does afterwards
(``conftest.ctrl_c_kept``, through ``put_back``); a test that presses it in its own process
takes it as a terminal's Python would (``pythons_ctrl_c``). A Python started with SIGINT
ignored keeps it ignored, so a test run whose worker inherited that would test nothing."""
from __future__ import annotations

import os
import signal
from contextlib import contextmanager
from pathlib import Path

_BIT = 1 << (signal.SIGINT - 1)


def sigint_state(status: str = "/proc/thread-self/status") -> dict[str, bool]:
    """{"ignored", "blocked", "caught"} for SIGINT in the process (or thread) of ``status``;
    "blocked" is the mask of that thread (the main one for /proc/<pid>/status)."""
    fields = dict(line.split(":\t", 1) for line in Path(status).read_text().splitlines() if ":\t" in line)
    return {what: bool(int(fields[key], 16) & _BIT)
            for what, key in (("ignored", "SigIgn"), ("blocked", "SigBlk"), ("caught", "SigCgt"))}


def sigint_unheard(pid: int) -> str:
    """Why a Ctrl-C sent to process ``pid`` would not reach its Python handler; '' when it would."""
    state = sigint_state(f"/proc/{pid}/status")
    return ", ".join([w for w in ("ignored", "blocked") if state[w]] + ["not caught"] * (not state["caught"]))


def assert_hears_ctrl_c(pid: int, what: str) -> None:
    """Fail, saying why, unless a Ctrl-C sent to ``pid`` (``what``: "the regrade") would reach
    its Python handler: a test that presses Ctrl-C in a command that cannot hear it is void."""
    unheard = sigint_unheard(pid)
    assert not unheard, f"{what} would not hear Ctrl-C: {unheard}; this test's process: " \
        f"{sigint_unheard(os.getpid()) or 'hears it'}"


def sigint_now() -> tuple:
    """(the SIGINT handler, ``sigint_state()``) of this thread, for ``put_back``."""
    return signal.getsignal(signal.SIGINT), sigint_state()


def put_back(before: tuple) -> str:
    """SIGINT as ``sigint_now()`` found it (``before``), as far as Python can put it back; ''
    or what it could not: a handler set outside Python (``getsignal`` says None) cannot be set
    again from Python, so the one there now stays."""
    handler, state = before
    if handler is not None:
        signal.signal(signal.SIGINT, handler)
    signal.pthread_sigmask(signal.SIG_BLOCK if state["blocked"] else signal.SIG_UNBLOCK, {signal.SIGINT})
    return "" if handler is not None else "the handler was set outside Python and stays as it is now"


@contextmanager
def pythons_ctrl_c():
    """Within the block this process takes SIGINT as a Python started from a terminal does
    (``signal.default_int_handler``: KeyboardInterrupt), unblocked; as before after it."""
    before = sigint_now()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        put_back(before)


def terminal_ctrl_c() -> None:
    """``Popen(preexec_fn=terminal_ctrl_c)``: the child takes Ctrl-C as from a terminal (SIGINT
    not ignored, not blocked), whatever this process inherited."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
