"""The step of ``nbgrader autograde`` that runs the learner's notebook in the sandbox [trusted]

``SandboxedExecute`` takes the place of nbgrader's ``Execute``. It

1. draws each graded exercise's cases (from the grader's secret, ``plan``), once: it writes
   them where the sandbox can read them and hands them to ``JudgeOutputs`` in nbgrader's
   ``resources``; it stages the sandbox without the modules those exercises forbid;
2. runs, in a kernel inside the sandbox, the notebook's course set-up cells, graded cells and
   every cell the learner wrote or changed; the course's teaching cells (unchanged from the
   assignment's source) are not run, since they use the very modules the sandbox leaves out;
3. survives every fault: a cell that runs past ``cell_timeout``, a kernel that dies
   (``os._exit``, a crash, the memory limit) is stopped and marked with a ``GradingFault``
   error naming the cause; the kernel is started again and the cells before it are run
   again, without the faulty ones, so the others are still graded (a kernel that does not
   start again fails the grading: the notebook's code ran in that sandbox). Output past
   ``output_limit`` characters in a cell, or past ``notebook_limit`` in all cells but the
   graded ones together, is dropped: the grader holds the outputs, whatever the code prints.
   The whole run stops after ``time_budget`` seconds; cells not reached are marked. Every
   message of the kernel is read as untrusted data (``messages``): one the grader cannot read
   is dropped, with a line in its cell saying so.

4. runs again, alone in a fresh process of the sandbox, the cases whose promise the kernel
   cannot keep (a memory limit, a decoder's one call of its model per step) and that the
   kernel got right (``rerun``).

The verdict is ``JudgeOutputs``'s, in the next step.
"""
from __future__ import annotations

import asyncio
import os
import threading
from contextlib import contextmanager
from subprocess import DEVNULL
from time import monotonic
from typing import Iterator

from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionComplete, CellTimeoutError, DeadKernelError
from nbformat.v4 import new_output
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Any, Bool, Integer, Unicode

from autograder.pipeline import plan, rerun
from autograder.pipeline.messages import DATA_LIMIT, UNREAD, KernelSession, why
from autograder.pipeline.assignment import source
from autograder.pipeline.pictures import shown_cases
from autograder.pipeline.sandbox import KERNEL_NAME, Sandbox, SandboxUnavailable, isolation
from autograder.kernel.cases import PICKLE
from autograder.kernel.transport import MIME, encode_cases, encode_probes

FAULT = "GradingFault"
# where the grader records a cell's fault: the cell's metadata, which the kernel cannot write
# (an error output named GradingFault can be raised by the learner's own code)
FAULT_KEY = "autograder_fault"

_unavailable = threading.local()  # .reasons: the list ``watch_sandbox`` hands out, while it watches


@contextmanager
def watch_sandbox() -> Iterator[list[str]]:
    """Within the block, why ``SandboxedExecute`` (in this thread) could not run a notebook in
    the sandbox: one line per ``SandboxUnavailable`` it raised, recorded by the grader itself.

    nbgrader answers a failed step with text (its log, a traceback) that the learner's kernel
    can write into (a message type nbclient logs as unhandled, say), so that text cannot tell
    the sandbox's failure from the notebook's; a ``SandboxError`` makes the one-notebook grader
    grade again without the sandbox (``grading.grade_notebook``).
    """
    outer = getattr(_unavailable, "reasons", None)
    _unavailable.reasons = reasons = []
    try:
        yield reasons
    finally:
        _unavailable.reasons = outer


class _Tail:
    """A pipe for the kernel's stderr whose last few thousand bytes are kept in memory.

    Only to say why a kernel did not start; never written to disk, where a learner's code
    writing to file descriptor 2 would fill it, and always read, so that writing never blocks.
    """

    def __init__(self, keep: int = 4000):
        self.keep, self.text = keep, b""
        read, self.fd = os.pipe()
        self.reader = threading.Thread(target=self._drain, args=(read,), daemon=True)
        self.reader.start()

    def _drain(self, read: int) -> None:
        with os.fdopen(read, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                self.text = (self.text + chunk)[-self.keep:]

    def last_line(self) -> str:
        """The last line written, once the writers are gone (or after a second)."""
        self.reader.join(timeout=1)
        lines = [line.strip() for line in self.text.decode(errors="replace").splitlines()]
        return next((line for line in reversed(lines) if line), "")

    def __enter__(self) -> "_Tail":
        return self

    def __exit__(self, *exc) -> None:
        os.close(self.fd)  # the reader ends when the kernel, the other writer, has ended too


class _Restart(Exception):
    """The kernel was stopped; run the notebook again without the faulty cell."""


class SandboxKernelManager(AsyncKernelManager):
    """A kernel manager whose connection file the sandbox's uid can read, which reaches the
    sockets a sandboxed kernel makes in its own ``/tmp`` (``Sandbox.reach``), and whose clients
    read the kernel's messages as untrusted data (``messages.KernelSession``)."""

    sandbox = Any()

    def _session_default(self):
        return KernelSession(parent=self)

    def write_connection_file(self, **kwargs):
        super().write_connection_file(**kwargs)
        os.chmod(self.connection_file, 0o600)
        self.sandbox.share(self.connection_file)

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        if not self.sandbox.isolate:
            return await super()._async_launch_kernel(kernel_cmd, **kw)
        with self.sandbox.launch(kernel_cmd) as (argv, fds, info):
            await super()._async_launch_kernel(argv, pass_fds=fds, **kw)
        self.ip = self.sandbox.reach(info)  # the kernel's own path stays in its connection file


ALIVE_EVERY = 0.1  # seconds between two looks at a running cell's kernel (nbclient's own: 1)


class _Client(NotebookClient):
    """nbclient that keeps at most ``output_limit`` characters of a cell's output, and at most
    ``notebook_limit`` of all cells' but the graded ones, together.

    Printed text and displayed data (with its metadata) count separately (a graded cell displays
    its outputs as data, which may be large); past either limit the rest of the cell's output is
    dropped.
    The graded cells' outputs are what the judge reads: other cells' printing never cuts them.
    A message whose content nbclient or nbformat cannot make an output of is dropped, with a
    line on the cell's stderr saying so, and an execution count that is not a count is none
    (``process_message``).
    """

    output_limit = Integer(1_000_000)
    data_limit = Integer(DATA_LIMIT)
    notebook_limit = Integer(4_000_000)  # four cells' worth: plenty for the feedback to show

    def output(self, outs, msg, display_id, cell_index):
        sizes = self.__dict__.setdefault("_sizes", {})
        content = msg.get("content", {})
        text = len(str(content.get("text", ""))) + len(str(content.get("traceback", "")))
        data = len(str(content.get("data", ""))) + len(str(content.get("metadata", "")))
        used = sizes.setdefault(cell_index, [0, 0])
        used[0] += text
        used[1] += data
        cut = self.__dict__.setdefault("_cut", {})
        if used[0] > self.output_limit or used[1] > self.data_limit:
            cut[cell_index] = f"after {self.output_limit:,} characters"
            return None
        if not self.nb.cells[cell_index].metadata.get("nbgrader", {}).get("grade"):
            self.__dict__["_shown"] = self.__dict__.get("_shown", 0) + text + data
            if self.__dict__["_shown"] > self.notebook_limit:
                cut[cell_index] = f"after the notebook's cells printed {self.notebook_limit:,} characters"
                return None
        return super().output(outs, msg, display_id, cell_index)

    def process_message(self, msg, cell, cell_index):
        try:
            return super().process_message(msg, cell, cell_index)
        except CellExecutionComplete:
            raise
        except Exception as err:  # noqa: BLE001 (content of the kernel's making: a "data" that is a list)
            cell.outputs.append(new_output("stream", name="stderr",
                                           text=UNREAD.format(why(err))))
            return None
        finally:
            # nbclient copies any message's "execution_count" into the cell unchecked; text there
            # fails nbconvert's check of the notebook after this step (the grading), and the HTML
            # templates write it as it is (``In [<img onerror=...>]``)
            count = cell.get("execution_count")
            if count is not None and not (type(count) is int and 0 <= count < 1 << 31):
                cell["execution_count"] = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.on_cell_executed = self._note_exit

    def _note_exit(self, cell, cell_index, execute_reply) -> None:
        # IPython's exit() answers the cell as done, then the kernel shuts down, often while
        # the next cell runs: the reply's "ask_exit" payload says which cell asked for it
        payload = (execute_reply or {}).get("content", {}).get("payload", [])
        if any(isinstance(p, dict) and p.get("source") == "ask_exit" for p in payload):
            self.__dict__.setdefault("_exits", set()).add(cell_index)

    async def _async_poll_kernel_alive(self) -> None:
        """nbclient's watch on the kernel while a cell runs, every ``ALIVE_EVERY`` seconds where
        nbclient looks every second: a cell that kills its kernel (os._exit, a crash, the memory
        limit) is noticed sooner, and the notebook starts again sooner. A look is a ``poll`` of
        the kernel's process."""
        while True:
            await asyncio.sleep(ALIVE_EVERY)
            try:
                await self._async_check_alive()
            except DeadKernelError:
                self.task_poll_for_reply.cancel()
                return

    def asked_to_exit(self, cell_index: int) -> bool:
        return cell_index in self.__dict__.get("_exits", set())

    def cut(self, cell_index: int) -> str | None:
        """Why the cell's output was cut, if it was: ``"after 1,000,000 characters"``."""
        return self.__dict__.get("_cut", {}).get(cell_index)


def teaching_sources(assignment: str, notebook: str) -> set[str]:
    """The sources of the course's own unmarked code cells in the assignment's notebook."""
    return set(source(assignment, notebook).teaching)


def recorded_payload(cell, exercise_id: str) -> dict | None:
    """What the graded cell of ``exercise_id`` recorded: the one payload it displayed, or None."""
    payloads = [o["data"][MIME] for o in cell.get("outputs", []) if MIME in o.get("data", {})]
    if len(payloads) != 1 or not isinstance(payloads[0], dict) or payloads[0].get("exercise") != exercise_id:
        return None
    return payloads[0]


def fault_output(message: str):
    return new_output("error", ename=FAULT, evalue=message, traceback=[f"{FAULT}: {message}"])


class SandboxedExecute(NbGraderPreprocessor):
    """Run the notebook in the grading sandbox, one fault costing only the cell it hits."""

    cell_timeout = Integer(15, help="Seconds one cell may run before it is stopped.").tag(config=True)
    time_budget = Integer(75, help="Seconds for the whole notebook, restarts included.").tag(config=True)
    output_limit = Integer(1_000_000, help="Characters of output one cell may print.").tag(config=True)
    startup_timeout = Integer(60, help="Seconds for the kernel to start.").tag(config=True)
    isolate = Bool(True, help="Run the kernel in the sandbox, as AUTOGRADER_ISOLATION allows; "
                              "False: without it.").tag(config=True)
    submission_key = Unicode("", help="The submission's key (hex), which its cases are drawn from: "
                                      "plan.submission_key of the prepared notebook, computed once by "
                                      "whoever prepared it; empty: that of the notebook graded here.").tag(config=True)

    def preprocess(self, nb, resources):
        try:
            return self._preprocess(nb, resources)
        except SandboxUnavailable as err:  # raised by the grader's own code only (see watch_sandbox)
            reasons = getattr(_unavailable, "reasons", None)
            if reasons is not None:
                reasons.append(str(err))
            raise

    def _preprocess(self, nb, resources):
        info = resources.get("nbgrader", {})
        teaching = teaching_sources(info["assignment"], info["notebook"])
        to_run = [i for i, c in enumerate(nb.cells)
                  if c.cell_type == "code" and c.source.strip() and c.source.strip() not in teaching]
        # nbgrader's own `autograde` in a course directory gives no key: the notebook's own, then
        key = bytes.fromhex(self.submission_key) if self.submission_key else plan.submission_key(nb)
        graded = plan.graded_cases(nb, key)
        made = resources.setdefault("autograder", {})[plan.PLAN] = plan.Plan(key, graded)  # for the judge
        forbidden = {f for ex, _ in graded.values() for f in ex.forbidden}
        isolate = self.isolate and isolation()[0]
        for cell in nb.cells:
            cell.metadata.pop(FAULT_KEY, None)  # the submitted file's say is not the grader's
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
        again = {i: ex_cases for i, ex_cases in graded.items() if rerun.again(*ex_cases)}
        with Sandbox(forbidden, isolate) as box:
            for i, (ex, cases) in graded.items():
                probes = encode_probes(*ex.probes(graded=cases), ex.rtol, ex.atol, ex.search_sites)
                box.write_cases(ex.id, {**encode_cases(ex.id, ex.function, ex.call, cases, ex.signature, probes,
                                                       ex.memory_limits(cases)), PICKLE: i in again,
                                        **shown_cases(ex)})
            until = monotonic() + self.time_budget  # the reruns' share is kept from the cells
            faults = self._run(nb, box, to_run, self.time_budget - (rerun.SECONDS if again else 0))
            made.alone = {
                i: rerun.run_again(ex, cases, key, recorded_payload(nb.cells[i], ex.id), box.site, box.alone,
                                   max(until, monotonic() + 1))
                for i, (ex, cases) in again.items() if i not in faults}
        for i, message in faults.items():
            nb.cells[i].outputs.append(fault_output(message))
            nb.cells[i].metadata[FAULT_KEY] = message
        return nb, resources

    def _run(self, nb, box: Sandbox, to_run: list[int], budget: float) -> dict[int, str]:
        faults: dict[int, str] = {}
        deadline = monotonic() + budget
        again = False
        while True:
            try:
                self._run_once(nb, box, [i for i in to_run if i not in faults], faults, deadline, again)
                return faults
            except _Restart:
                again = True

    def _run_once(self, nb, box, cells, faults, deadline, again: bool = False) -> None:
        """Run ``cells`` in a new kernel; ``again``: one has run in this sandbox before, so a
        kernel that does not start may be the learner's doing (its sockets' paths taken in a
        /tmp that outlives the kernel), not the sandbox's."""
        km = SandboxKernelManager(kernel_name=KERNEL_NAME, sandbox=box, transport="ipc",
                                  ip=box.sockets,
                                  connection_file=str(box.comm / "kernel.json"),
                                  kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(box.kernel_spec_dir())]))
        client = _Client(nb, km=km, allow_errors=True, shutdown_kernel="immediate",
                         startup_timeout=self.startup_timeout, output_limit=self.output_limit,
                         iopub_timeout=5, raise_on_iopub_timeout=False,
                         resources={"metadata": {"path": str(box.root)}})
        said = _Tail()  # what bubblewrap or the kernel printed, should it not start
        started = False
        try:
            with said, client.setup_kernel(cleanup_kc=True, stdout=DEVNULL, stderr=said.fd):
                started = True
                self._run_cells(nb, client, cells, faults, deadline)
        except Exception as err:
            if started:
                raise
            why = f"{said.last_line() or err}"[:500]
            if again:
                raise RuntimeError(f"the kernel did not start again after a cell stopped it: {why}") from err
            raise SandboxUnavailable(f"the grading sandbox could not start a kernel: {why}"[:500]) from err

    def _run_cells(self, nb, client, cells, faults, deadline) -> None:
        """Run ``cells`` in the started kernel; a stopped cell restarts the notebook (``_Restart``)."""
        for n, i in enumerate(cells):
            left = deadline - monotonic()
            if left < 1:
                for j in cells[n:]:
                    faults[j] = (f"not run: grading stopped after {self.time_budget} s "
                                 "(cells above took too long)")
                return
            client.timeout = int(max(1, min(self.cell_timeout, left)))
            try:
                client.execute_cell(nb.cells[i], i)
            except CellTimeoutError:
                faults[i] = (f"stopped: this cell ran longer than {client.timeout} s "
                             "(an endless loop?)")
            except DeadKernelError:
                faults[i] = ("stopped: the kernel died while running this cell (os._exit, "
                             "exit(), a crash, or the memory limit)")
            else:
                if client.asked_to_exit(i):  # the kernel is on its way down: this cell, not the next
                    faults[i] = "stopped: this cell asked the kernel to exit (exit() or quit())"
                    raise _Restart()
                if client.cut(i):
                    nb.cells[i].outputs.append(new_output(
                        "stream", name="stderr",
                        text=f"[output cut by the grader {client.cut(i)}]\n"))
                continue
            raise _Restart()
