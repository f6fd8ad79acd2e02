"""One grading worker: a long-lived process that grades submissions one at a time [trusted]

``autograder grade`` keeps one worker per job (``--jobs``) or one per Dask worker
(``pools.py``). A worker pays once for what every submission would otherwise pay again:
starting Python, importing nbgrader, the exercise registry and its references (torch),
generating the assignment into a scratch course (``pipeline.course``), compiling the feedback
template. Each ``Task`` brings a notebook the instructor's process has already prepared
(``submission.prepare``) and the key of its cases; the worker grades it in that scratch course
(nbgrader's ``autograde``, the sandboxed execution and the judge included, and
``generate_feedback``) and answers with an ``Outcome``: the scores and comments nbgrader saved,
the autograded notebook and the feedback HTML. It never touches the instructor's gradebook;
the parent writes that (``journal.py``).

The worker runs as ``python -m autograder.classroom.worker [ASSIGNMENT]`` (getting ready for that
assignment at once) and talks over its stdin and stdout (length-prefixed pickles of
``Task`` and ``Outcome``). ``GradingProcess`` is the parent's handle: it enforces the time
limit per submission by killing the worker and everything it started, and starts a fresh
one for the next task. A worker whose parent dies kills itself.
"""
from __future__ import annotations

import atexit
import os
import pickle
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

import psutil

from autograder.classroom.jobs import Outcome, Task
from autograder.pipeline.sandbox import SANDBOX_PREFIX, private_dir
from autograder.startup import quiet, skip_slow_imports


# --- inside the worker ------------------------------------------------------------------------

SCRATCH_PREFIX = "ag-worker-"  # + pid: the parent removes what a killed worker left


def scratch_dirs(pid: int) -> list[Path]:
    """The folders a worker ``pid`` made: its scratch course and its kernels' sandboxes."""
    return [p for base, prefix in (("/dev/shm", SCRATCH_PREFIX), (tempfile.gettempdir(), SCRATCH_PREFIX),
                                   ("/tmp", SANDBOX_PREFIX))
            for p in Path(base).glob(f"{prefix}{pid}-*")]


_courses: dict[str, object] = {}  # assignment -> its pipeline.course.ScratchCourse


def prepare_course(assignment: str) -> None:
    """Make this worker ready for ``assignment`` (once: a few seconds, not counted per submission).

    Its scratch course lives in memory (``/dev/shm`` where there is one): nbgrader commits its
    gradebook once per cell, and a disk would make every commit wait for a sync. The
    assignment's exercises (and torch, which their references use) are imported now too.
    """
    if assignment in _courses:
        return
    # lazy, as every import of the grading machinery here: this module is imported by the
    # instructor's process too, which must not pay for nbgrader before its workers start
    from autograder.exercises import get
    from autograder.pipeline.assignment import source
    from autograder.pipeline.course import ScratchCourse

    root = private_dir(SCRATCH_PREFIX, "/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
    atexit.register(shutil.rmtree, root, True)
    _courses[assignment] = ScratchCourse(assignment, root)
    for ex_id in source(assignment).exercises:
        get(ex_id)


def grade_task(task: Task) -> Outcome:
    """Grade one task in this process; any error becomes a failed ``Outcome`` saying why."""
    start = time.monotonic()
    try:
        import nbformat  # lazy: see prepare_course

        prepare_course(task.assignment)
        graded = _courses[task.assignment].grade(nbformat.reads(task.prepared, as_version=4),
                                                 task.student, task.notebook, task.key, task.timestamp)
        outcome = Outcome(task.student, task.digest, True, scores=graded.scores,
                          comments=graded.comments, autograded=graded.autograded,
                          feedback=graded.feedback, notes=task.notes, timestamp=task.timestamp)
    except Exception as err:  # a worker's bug must cost one submission, not the class
        detail = traceback.format_exception_only(type(err), err)[-1].strip()
        outcome = Outcome(task.student, task.digest, False, reason=f"grading failed: {detail[:1500]}")
    outcome.seconds = time.monotonic() - start
    outcome.worker = f"{socket.gethostname()}:{os.getppid()}>{os.getpid()}"  # parent>grader
    return outcome


def _watch_parent(parent: int) -> None:
    """Die, with everything started here, as soon as the parent is gone (even by SIGKILL)."""
    while os.getppid() == parent:
        time.sleep(0.5)
    for folder in scratch_dirs(os.getpid()):
        shutil.rmtree(folder, ignore_errors=True)
    kill_tree(os.getpid())


def kill_tree(pid: int) -> None:
    """SIGKILL a process and all its descendants (kernels and sandboxes included)."""
    try:
        proc = psutil.Process(pid)
        family = proc.children(recursive=True) + [proc]
    except psutil.NoSuchProcess:
        return
    for p in family:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass


def _serve() -> None:
    """The worker's loop: read a task from stdin, answer on stdout, until stdin closes."""
    skip_slow_imports()
    quiet()
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # whatever nbgrader or a library prints must not corrupt the answers
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    for assignment in sys.argv[1:]:
        try:
            prepare_course(assignment)
        except Exception:  # said again, with the reason, by the first task
            pass
    requests = sys.stdin.buffer
    while True:
        task = _read(requests)
        if task is None:
            return
        try:
            prepare_course(task.assignment)
        except Exception:  # grade_task reports it
            pass
        _write(answers, "ready")  # the time limit starts now
        _write(answers, grade_task(task))


def _read(stream):
    """One message, or None at the end of the stream."""
    header = _read_exactly(stream, 8)
    if header is None:
        return None
    body = _read_exactly(stream, struct.unpack("!Q", header)[0])
    return None if body is None else pickle.loads(body)


def _read_exactly(stream, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = stream.read(left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _write(stream, obj) -> None:
    data = pickle.dumps(obj)
    view = memoryview(struct.pack("!Q", len(data)) + data)
    while view:
        view = view[stream.write(view):]
    stream.flush()


# --- the parent's handle ----------------------------------------------------------------------

class GradingProcess:
    """A worker process, started on first use and again after it was killed or died.

    ``assignment``: start now and get ready for it while the parent does other things.
    """

    def __init__(self, time_limit: float, log: Path | None = None, assignment: str | None = None):
        self.time_limit, self.log, self.assignment = time_limit, log, assignment
        self.proc: subprocess.Popen | None = self._start() if assignment else None

    def _start(self) -> subprocess.Popen:
        stderr = open(self.log, "ab") if self.log else subprocess.DEVNULL
        ready_for = [self.assignment] if self.assignment else []
        try:
            # unbuffered: select() must see every answer that has arrived
            return subprocess.Popen([sys.executable, "-m", "autograder.classroom.worker", *ready_for],
                                    stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=stderr, start_new_session=True,
                                    bufsize=0)
        finally:
            if self.log:
                stderr.close()

    def grade(self, task: Task) -> Outcome:
        """The worker's outcome, or a failed one when it ran past the limit or died."""
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        proc = self.proc
        try:
            _write(proc.stdin, task)
            ready = _read(proc.stdout) == "ready"  # started and prepared, however long it took
            start = time.monotonic()
            answered, _, _ = select.select([proc.stdout], [], [], self.time_limit) if ready else ((), 0, 0)
            outcome = _read(proc.stdout) if answered else None
        except (OSError, ValueError, EOFError, pickle.UnpicklingError):  # it died, or was stopped
            outcome, start = None, time.monotonic()
        if outcome is not None:
            return outcome
        timed_out = time.monotonic() - start >= self.time_limit
        self.close()
        reason = (f"stopped: grading ran past the time limit of {self.time_limit:g} s" if timed_out
                  else "the grading process died (out of memory, or killed)")
        return Outcome(task.student, task.digest, False, reason=reason,
                       seconds=time.monotonic() - start)

    def close(self, kill: bool = True) -> None:
        """Stop the worker: at once (``kill``), or let an idle one finish and clean up."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if not kill:  # idle: end of input, and it exits by itself (the parent need not wait)
            try:
                proc.stdin.close()
                proc.stdout.close()
            except (OSError, ValueError):
                pass
            return
        kill_tree(proc.pid)
        proc.wait()
        for folder in scratch_dirs(proc.pid):
            shutil.rmtree(folder, ignore_errors=True)
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except (OSError, ValueError):
                pass


if __name__ == "__main__":  # run as the module itself: answers unpickle as this module's
    from autograder.classroom import worker

    worker._serve()
