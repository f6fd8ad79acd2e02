"""A process confined as ``fresh`` confines a case run alone: what it may still do, what it may not.

``tests/autograder/pipeline/test_memory_alone.py`` holds flash attention's whole matrix in each
place a learner would; here the other ways to hold memory outside the address space (a pipe's
buffer, a socket's, System V's and POSIX's queues and segments) are refused too, and what an
honest pass uses (a thread, an array under the cap, reading a file) is not.
"""
import json
import subprocess
import sys

from autograder.paths import REPO

TRIES = r'''
import ctypes, json, mmap, os, socket, sys, threading
import numpy as np
from autograder.kernel.confine import confine
notes = []
confine(8 << 20, 4 << 20, lambda: notes.append("SIGXFSZ"))
libc = ctypes.CDLL(None, use_errno=True)
def checked(result):
    if result < 0:
        raise OSError(ctypes.get_errno(), "refused")
def thread():
    t = threading.Thread(target=np.ones(1 << 18).sum)
    t.start(); t.join()
def child():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
def file_written():
    with open(sys.argv[1], "wb") as f:
        f.write(b"x")
TRIES = {
    "a thread": thread,
    "an array under the cap": lambda: np.ones(1 << 17).sum(),
    "a file read": lambda: open(os.__file__, "rb").read(),
    "an array past the cap": lambda: np.ones(4 << 20).sum(),
    "a pipe": os.pipe,
    "a socket pair": socket.socketpair,
    "a System V segment": lambda: checked(libc.shmget(0, 1 << 20, 0o1600)),
    "a System V queue": lambda: checked(libc.msgget(0, 0o1600)),
    "a POSIX queue": lambda: checked(libc.mq_open(b"/confined", os.O_CREAT | os.O_RDWR, 0o600, None)),
    "a shared mapping of one page": lambda: mmap.mmap(-1, 4096),
    "a memfd": lambda: os.memfd_create("x"),
    "a child": child,
    "a byte written to a file": file_written,
}
got = {}
for name, try_it in TRIES.items():
    del notes[:]
    try:
        try_it()
        got[name] = "done"
    except MemoryError:
        got[name] = "MemoryError"
    except OSError as err:
        got[name] = os.strerror(err.errno) + (" (noted)" if notes else "")
print(json.dumps(got))
'''


def test_a_confined_process_holds_nothing_outside_its_address_space(tmp_path):
    done = subprocess.run([sys.executable, "-c", TRIES, str(tmp_path / "written")], capture_output=True,
                          text=True, timeout=60, env={"PYTHONPATH": str(REPO), "OPENBLAS_NUM_THREADS": "1"})
    got = json.loads(done.stdout.splitlines()[-1])
    assert got.pop("a thread") == got.pop("an array under the cap") == got.pop("a file read") == "done"
    assert got.pop("an array past the cap") == "MemoryError"
    assert got.pop("a byte written to a file") == "File too large (noted)"
    assert got == dict.fromkeys(got, "Cannot allocate memory"), got
