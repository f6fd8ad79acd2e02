"""pipeline/interrupt.py: a real Ctrl-C is recorded and still stops the step; nothing else counts.
And the tests' own putting back of SIGINT (``ctrl_c.put_back``, ``conftest.ctrl_c_kept``)."""
import signal
import threading

import pytest

from autograder.pipeline.interrupt import watch_ctrl_c
from ctrl_c import put_back, pythons_ctrl_c, sigint_now


def test_ctrl_c_is_recorded_and_stops_the_block_as_before():
    with pythons_ctrl_c():
        with pytest.raises(KeyboardInterrupt), watch_ctrl_c() as pressed:
            assert not pressed()
            signal.raise_signal(signal.SIGINT)
        assert pressed()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back


def test_a_keyboardinterrupt_without_the_signal_is_not_ctrl_c():
    with pythons_ctrl_c():
        with pytest.raises(KeyboardInterrupt), watch_ctrl_c() as pressed:
            raise KeyboardInterrupt
        assert not pressed()


def test_ctrl_c_that_a_handler_of_its_own_takes_stops_nothing_and_is_not_counted():
    """A Jupyter server's handler asks whether to shut down; the step goes on."""
    asked = []
    with pythons_ctrl_c():
        signal.signal(signal.SIGINT, lambda signum, frame: asked.append(signum))
        with watch_ctrl_c() as pressed:
            signal.raise_signal(signal.SIGINT)
        assert asked == [signal.SIGINT] and not pressed()


def test_where_python_would_not_hear_ctrl_c_nothing_is_installed():
    """SIGINT ignored: no KeyboardInterrupt can come of it, and it stays ignored."""
    with pythons_ctrl_c():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        with watch_ctrl_c() as pressed:
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            signal.raise_signal(signal.SIGINT)
        assert not pressed()
    seen = []

    def elsewhere():  # only the main thread may set handlers, and only it runs them
        with watch_ctrl_c() as pressed:
            seen.append((signal.getsignal(signal.SIGINT), pressed()))
    before = signal.getsignal(signal.SIGINT)
    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join()
    assert seen == [(before, False)]


def test_a_handler_set_outside_python_is_left_as_it_is_and_said():
    """``signal.getsignal`` answers None for a handler not set from Python, which
    ``signal.signal`` refuses (TypeError): ``put_back`` leaves the one there and says so."""
    now = sigint_now()
    said = put_back((None, now[1]))
    assert sigint_now() == now and "outside Python" in said
