"""Ctrl-C as this process received it, told apart from text that only says so. [trusted]

nbgrader's API runs each step under ``capture_log``, which catches whatever stops the step,
KeyboardInterrupt too, and answers with the traceback as text. A step that failed for another
reason can end its text the same way, so the text cannot say whether Ctrl-C was pressed.
``watch_ctrl_c`` records the signal itself while a step runs: its SIGINT handler does what
the handler it replaced does (``signal.default_int_handler`` in the ``autograder`` command, a
class worker or a Jupyter kernel's cell: KeyboardInterrupt), so Ctrl-C stops the step exactly
as before, and notes when that handler raised KeyboardInterrupt. It is installed for the step
only, by whoever runs the step, because a Jupyter kernel sets its own handler again for every
cell (a handler installed once, when the process starts, would be gone there).
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Callable, Iterator


@contextmanager
def watch_ctrl_c() -> Iterator[Callable[[], bool]]:
    """Within the block, a function that says whether SIGINT, since the block began, has
    raised KeyboardInterrupt (as Python's own handler does: Ctrl-C stopped what ran).

    Python runs signal handlers in the main thread only: elsewhere, and where SIGINT is
    ignored, left to the system or handled outside Python, no KeyboardInterrupt can come
    of it, so nothing is installed and the answer stays False.
    """
    pressed: list[bool] = []
    before = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(before):
        yield lambda: bool(pressed)
        return

    def heard(signum, frame):
        try:
            before(signum, frame)
        except KeyboardInterrupt:
            pressed.append(True)
            raise

    signal.signal(signal.SIGINT, heard)
    try:
        yield lambda: bool(pressed)
    finally:
        signal.signal(signal.SIGINT, before)
