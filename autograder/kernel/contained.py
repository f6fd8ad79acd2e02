"""Searches that run code which may loop or allocate without end, kept in a forked child. [sandbox]

Two searches run many changed versions of a function: the judge's search among the mutants
of the reference (``explain``) and the kernel's search for one edit that fixes the learner's
code (``repair``, in the learner's kernel and in the grading sandbox). A changed loop bound
can loop for ever and a changed shape can allocate gigabytes, so ``in_child`` runs the search
in a forked child with a memory limit, a deadline in CPU time for the whole search, one per
call (``call_within``) and a bound on the clock, after which the parent kills the child and
the search has no answer. Where there is no ``fork`` (Windows) it runs in-process with the
deadlines only.

This module runs in the grading sandbox: it imports nothing of the grader's.
"""
from __future__ import annotations

import os
import select
import signal
import sys
import time
from typing import Any, Callable

from autograder.kernel import wire

CALL_SECONDS = 0.5      # CPU seconds for one call (an exercise's code takes milliseconds)
MEMORY_BYTES = 2 << 30  # what the search may allocate beyond the process's size
WALL_FACTOR = 4         # the parent gives up on the child after this many times its CPU budget


class Overtime(BaseException):  # not an Exception: the code searched cannot catch it
    """A call or the whole search ran past its deadline."""


def _alarm(signum, frame):
    raise Overtime()


def call_within(fn: Callable[[], Any], seconds: float = CALL_SECONDS):
    """``fn()``, stopped by ``Overtime`` after ``seconds`` of CPU time where ``in_child`` has
    armed the deadlines (elsewhere plainly)."""
    timed = signal.getsignal(signal.SIGPROF) is _alarm
    if timed:
        signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        return fn()
    finally:
        if timed:
            signal.setitimer(signal.ITIMER_PROF, 0)


def _vm_size() -> int:
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    except (OSError, StopIteration):
        return 0


def _armed(work: Callable[[float], Any], budget: float):
    """``work(deadline)`` with the per-call deadlines armed where signals can be had."""
    try:
        old = signal.signal(signal.SIGPROF, _alarm)
    except (AttributeError, ValueError):  # no SIGPROF, or not the main thread
        old = None
    try:
        return work(time.process_time() + budget)
    finally:
        if old is not None:
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.signal(signal.SIGPROF, old)


def in_child(work: Callable[[float], Any], budget: float, wall: float | None = None):
    """``work(deadline)``'s result (JSON data) computed in a forked child, or None when the
    work raised, ran past ``budget`` CPU seconds (``deadline`` is in ``time.process_time``),
    past ``wall`` seconds on the clock (default ``WALL_FACTOR`` x budget + 1 s), or past the
    memory limit."""
    wall = WALL_FACTOR * budget + 1.0 if wall is None else wall
    if not (hasattr(os, "fork") and sys.platform.startswith("linux")):
        try:
            return _armed(work, budget)
        except (Exception, Overtime):
            return None
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: work, write the answer, leave without clean-up
        status = 1
        try:
            os.close(read)
            import resource  # here, not at the top: Unix only, and this module also runs on Windows
            size = _vm_size()
            if size:  # within the limit the process already has (the grading sandbox sets one)
                _, hard = resource.getrlimit(resource.RLIMIT_AS)
                limit = size + MEMORY_BYTES if hard == resource.RLIM_INFINITY else min(size + MEMORY_BYTES, hard)
                resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
            os.write(write, wire.dumps(_armed(work, budget)).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write)
    chunks, size, end = [], 0, time.monotonic() + wall
    try:
        while True:
            left = end - time.monotonic()
            if left <= 0 or not select.select([read], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                return None
            chunk = os.read(read, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > wire.MAX_BYTES:  # more than any answer of a search: read no further
                os.kill(pid, signal.SIGKILL)
                return None
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    try:
        return wire.loads(b"".join(chunks))
    except wire.Unreadable:  # the child failed, or what ran there wrote what no search answers
        return None
