"""A process run alone held to its memory limit in every way it could hold memory. [sandbox]

``fresh`` runs a learner's call alone under the limit of its case. ``RLIMIT_DATA``, which it
once set alone, counts only private writable mappings that are not a stack: measured on flash
attention's long forward, a whole score matrix held in ``mmap.mmap(-1, n)``, an ``np.memmap``
of a file in ``/tmp``, a file of ``/dev/shm``, a ``memfd``, ``multiprocessing.shared_memory``
or a ``MAP_GROWSDOWN`` mapping passed under it, as did sixteen forked children holding a
sixteenth of its rows each, all at once. And no limit counts what a process holds outside its
address space: a file of a tmpfs (``/tmp``, ``/dev/shm``: memory), a shared object written a
window at a time (unmapped, it keeps its pages), a pipe's buffer (up to 1 MiB each). So
``confine``, before anything of the learner's is loaded, sets

- ``RLIMIT_AS`` to the address space's present size plus the case's limit plus the slack: every
  mapping counts, shared or private, of a file or not, a stack too, by its size, not by what a
  busy machine keeps resident (the honest tiled passes grow it by under 5 MiB: 1 MiB for the
  backward's tiles beyond the slack; the cap is 12 MiB and more above);
- ``RLIMIT_FSIZE`` to 0: no byte written to any file (nor a memfd, nor ``shm_open``'s); the
  write fails (``EFBIG``) and its ``SIGXFSZ``, caught rather than killing the process, says
  so whatever the learner's code (or ``tempfile``, which then finds "no usable temporary
  directory") makes of the error;
- a seccomp filter (``rules``) that refuses, with ``ENOMEM``, what makes memory outside the
  address space or a second one: a shared mapping, ``memfd_create``, System V shared memory,
  message queues (System V's and POSIX's), pipes and sockets, io_uring, kernel keys, BPF
  maps, and a child process (``fork``, ``vfork``, ``clone`` without ``CLONE_THREAD``: threads
  share the address space and its limit); ``clone3``, whose flags a filter cannot read, gets
  ``ENOSYS``, and the C library falls back to ``clone``.

Both limits hard too: an unprivileged process can lower a hard limit, never raise it, and a
filter cannot be taken off. The program is classic BPF over ``struct seccomp_data`` (``nr`` at
byte 0, ``arch`` at 4, argument i's low 32 bits at 16 + 8 i, little-endian), for x86-64 and
arm64; a system call of another ABI (32-bit x86 on x86-64) is refused whole.
``pipeline/seccomp.py`` builds the sandbox's own filter with the same instructions.

Not held: on another machine (no filter), children, pipes and sockets; a process with
``CAP_SYS_RESOURCE`` (root without the sandbox) can raise its limits again; and what the
kernel keeps per open file or empty file (bounded by the sandbox's open files and inodes).
"""
from __future__ import annotations

import ctypes
import errno
import platform
import resource
import signal
import struct
from typing import Callable

# machine -> (AUDIT_ARCH_*, {system call: number}); arm64 has no fork, vfork nor pipe (clone, pipe2)
SYSCALLS = {
    "x86_64": (0xC000003E, {"clone": 56, "unshare": 272, "clone3": 435, "mmap": 9, "fork": 57,
                            "vfork": 58, "memfd_create": 319, "shmget": 29, "shmat": 30, "msgget": 68,
                            "pipe": 22, "pipe2": 293, "socket": 41, "socketpair": 53,
                            "io_uring_setup": 425, "add_key": 248, "mq_open": 240, "bpf": 321}),
    "aarch64": (0xC00000B7, {"clone": 220, "unshare": 97, "clone3": 435, "mmap": 222,
                             "memfd_create": 279, "shmget": 194, "shmat": 196, "msgget": 186,
                             "pipe2": 59, "socket": 198, "socketpair": 199, "io_uring_setup": 425,
                             "add_key": 217, "mq_open": 180, "bpf": 280}),
}
X32_BIT = 0x40000000  # x86-64's x32 ABI: the same numbers with this bit set
REFUSED = ("fork", "vfork", "memfd_create", "shmget", "shmat", "msgget", "pipe", "pipe2", "socket",
           "socketpair", "io_uring_setup", "add_key", "mq_open", "bpf")
MAP_SHARED = 0x01      # MAP_SHARED_VALIDATE (0x03) has it too
CLONE_THREAD = 0x00010000

LD_ABS, AND, JEQ, JSET, RET = 0x20, 0x54, 0x15, 0x45, 0x06  # BPF_LD|W|ABS, ALU|AND|K, JMP|..|K
ALLOW, ERRNO = 0x7FFF0000, 0x00050000
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2


def op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    """One BPF instruction; a jump skips ``jt`` instructions when true, ``jf`` when false."""
    return struct.pack("=HBBI", code, jt, jf, k)


def arg(i: int) -> int:
    """The offset in ``struct seccomp_data`` of system call argument ``i`` (its low 32 bits)."""
    return 16 + 8 * i


def rules() -> bytes | None:
    """The filter for this machine (``platform.machine()``), or None where it is not written."""
    known = SYSCALLS.get(platform.machine())
    if known is None:
        return None
    arch, nr = known
    refused = [nr[name] for name in REFUSED if name in nr]
    tests = [nr["clone3"], nr["mmap"], nr["clone"], *refused]  # one JEQ each, then the tail
    at = 4 + len(tests)  # the tail's first instruction; every jump goes forward
    enomem, enosys, mmap, clone = at + 1, at + 2, at + 3, at + 7
    targets = [enosys, mmap, clone] + [enomem] * len(refused)
    return b"".join([
        op(LD_ABS, 4),                           # A = arch
        op(JEQ, arch, 0, enomem - 2),            # another ABI: refused
        op(LD_ABS, 0),                           # A = nr
        op(AND, ~X32_BIT & 0xFFFFFFFF),
        *(op(JEQ, n, to - (4 + i) - 1, 0) for i, (n, to) in enumerate(zip(tests, targets))),
        op(RET, ALLOW),                          # at: none of those
        op(RET, ERRNO | errno.ENOMEM),           # enomem
        op(RET, ERRNO | errno.ENOSYS),           # enosys
        op(LD_ABS, arg(3)),                      # mmap: A = flags
        op(JSET, MAP_SHARED, 0, 1),
        op(RET, ERRNO | errno.ENOMEM),           #   shared
        op(RET, ALLOW),                          #   private
        op(LD_ABS, arg(0)),                      # clone: A = flags
        op(JSET, CLONE_THREAD, 0, 1),
        op(RET, ALLOW),                          #   a thread
        op(RET, ERRNO | errno.ENOMEM),           #   a child process
    ])


def confine(limit: int, slack: int, refused: Callable[[], None]) -> None:
    """Hold this process, from now on, to its address space's present size plus ``limit`` plus
    ``slack`` bytes, with nothing held outside it (see above); ``refused`` is called on each
    write to a file refused. Where the filter is not written for this machine, the limits alone."""
    cap = _status("VmSize") + limit + slack
    for what, value in ((resource.RLIMIT_AS, cap), (resource.RLIMIT_FSIZE, 0)):
        resource.setrlimit(what, (value, value))
    signal.signal(signal.SIGXFSZ, lambda signum, frame: refused())
    program = rules()
    if program is None:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    code = ctypes.create_string_buffer(program, len(program))

    class Program(ctypes.Structure):  # struct sock_fprog
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
    fprog = Program(len(program) // 8, ctypes.cast(code, ctypes.c_void_p))
    if (libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or
            libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0):
        raise OSError(ctypes.get_errno(), "the seccomp filter of a process run alone could not be loaded")


def _status(field: str) -> int:
    """A size of this process from ``/proc/self/status`` (``VmSize``: its address space), in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")
