"""One race process in a fresh sandbox: started, answered, its CPU time read, ended. [trusted]

``verify`` runs three per seed of an entry (``autograder/kernel/race.py``: ``train``, then
``score`` twice). The process asks for its spec (the entry's source and data) once it is up,
before any of the entry's code has run, so what goes wrong is told apart by whose doing it is:

- **the entry's**, from the moment the spec is sent (it raised, crashed, ran out of time, sent
  what cannot be read): ``Refused``, and the run counts for nothing;
- **the grader's**, before that: the sandbox did not start (an ``OSError`` of bubblewrap, of
  ``Popen``, of a pipe; a file descriptor limit, ENOMEM), or the process ended or hung before it
  asked (bubblewrap refused to run it, ``prlimit`` or ``setpriv`` failed, Python did not start):
  ``Fault``, a ``Refused`` that says so, whose run the next race runs again;
- **the grader's for everyone**: where the sandbox has failed to start ``STOP_AFTER`` times in
  a race and never once started, ``Starts`` raises ``SandboxUnavailable`` and the race stops
  with that one message, as ``autograder grade`` stops where isolation cannot run, rather than
  rank every entry nowhere for a fault of the machine's.

An ``OSError`` that escapes the sandbox's code is the grader's too: ``converse`` answers every
error of the pipes to the process (which the entry can close) with "no result".
"""
from __future__ import annotations

import math
import sys
import threading

from autograder.kernel import wire
from autograder.pipeline.rerun import converse
from autograder.pipeline.sandbox import Limits, Sandbox, SandboxUnavailable, tree_cpu

LINE = 64 << 20      # bytes of one line from a race process: the weights at the parameter cap
SAMPLE = 0.25        # seconds between readings of a race process's CPU time
STOP_AFTER = 3       # failed starts, with none started, that stop a race


class Refused(Exception):
    """Why a run counts for nothing, in a sentence for the learner."""


class Fault(Refused):
    """A run that counts for nothing through no doing of the entry's (its sandbox did not
    start): the sentence says so, and the next race runs it again."""


class Starts:
    """The sandbox starts of one race, from every thread: ``SandboxUnavailable`` once
    ``STOP_AFTER`` have failed and none has started."""

    def __init__(self):
        self._lock = threading.Lock()
        self.started, self.failed = 0, []

    def _stopped(self) -> bool:
        return not self.started and len(self.failed) >= STOP_AFTER

    def _unavailable(self) -> SandboxUnavailable:
        return SandboxUnavailable(
            f"the race stopped: its sandbox failed to start {len(self.failed)} times and never "
            f"started ({self.failed[0]}). Check that bubblewrap runs here (autograder grade needs "
            "the same); what ran is kept, so the same command continues from there.")

    def check(self) -> None:
        """Before a start: ``SandboxUnavailable`` if the race has stopped."""
        with self._lock:
            if self._stopped():
                raise self._unavailable()

    def up(self) -> None:
        """A process started and asked for its spec: the sandbox works here."""
        with self._lock:
            self.started += 1

    def fault(self, why: str) -> Fault:
        """The ``Fault`` of a failed start (``why``), or ``SandboxUnavailable`` if it stops the race."""
        with self._lock:
            self.failed.append(why)
            if self._stopped():
                raise self._unavailable()
        return Fault(f"{why}: not the entry's doing; the next race runs it again")


def run(mode: str, spec: dict, answer, cpu: float, wall: float, memory: int, starts: Starts,
        isolate: bool = True):
    """Run ``race.py mode`` in a fresh sandbox, killed past ``cpu`` CPU or ``wall`` seconds, its
    memory held to ``memory`` bytes beyond torch's: send ``spec`` when it asks, then answer
    its requests with ``answer`` (None: it makes none). (Its results, or None where it stopped
    without them or a ``wire.Unreadable``; the CPU seconds the system counted for it, read as
    its results came, or else the last reading while it ran, every ``SAMPLE`` seconds.)
    ``Fault`` where it did not start (see the module's text)."""
    starts.check()
    limits = Limits(address_space=64 << 30, cpu_seconds=math.ceil(cpu), processes=64, scratch=16 << 20)
    used, ended, asked = [], threading.Event(), []

    def reply(message: dict) -> dict:
        if not asked:  # its first request: it is up, and the entry comes now
            asked.append(True)
            starts.up()
            return spec
        if answer is None:
            raise wire.Unreadable("a line that is neither a request nor results")
        return answer(message)
    try:
        with Sandbox(isolate=isolate, limits=limits) as box:
            argv = [sys.executable, str(box.site / "autograder" / "kernel" / "race.py"), mode, str(memory)]
            with box.alone(argv) as (process, stop):
                started = hasattr(process, "sandbox_pid")  # bubblewrap said which process it started
                pid = getattr(process, "sandbox_pid", process.pid)

                def sample():
                    while not ended.wait(SAMPLE):
                        seen = tree_cpu(pid)
                        if seen is not None:
                            used.append(seen)
                watcher = threading.Thread(target=sample, daemon=True)
                watcher.start()

                def count():  # while it waits, alive, for the word to end
                    ended.set()
                    watcher.join()
                    used.append(tree_cpu(pid))
                try:
                    results = converse(process, stop, None, reply, wall, line=LINE, on_results=count)
                finally:
                    ended.set()
                    watcher.join()
    except OSError as err:
        raise starts.fault(f"the grader could not run the {mode} process ({type(err).__name__}: {err})"[:400]) from None
    if not asked:
        said = ("the sandboxed process ended or stopped before it asked for the entry" if started else
                "bubblewrap did not start the sandbox")
        raise starts.fault(f"the {mode} process did not start ({said})")
    if results is not None and not isinstance(results, wire.Unreadable) and (not used or used[-1] is None):
        raise Refused(f"the {mode} process ended before its CPU time could be read")
    return results, max([u for u in used if u is not None], default=0.0)
