"""Ctrl-C (SIGINT) as a process takes it, read from /proc: the tests that press Ctrl-C in a
command check that it would hear it, and every test that its process still does afterwards
(``conftest.ctrl_c_kept``). A Python started with SIGINT ignored keeps it ignored, so a test
run whose worker inherited that would test nothing."""
from __future__ import annotations

import signal
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


def terminal_ctrl_c() -> None:
    """``Popen(preexec_fn=terminal_ctrl_c)``: the child takes Ctrl-C as from a terminal (SIGINT
    not ignored, not blocked), whatever this process inherited."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
