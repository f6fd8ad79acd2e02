"""The seccomp filter bubblewrap loads before the learner's kernel starts: no new user namespace. [trusted]

Inside a user namespace of its own, any process may mount a tmpfs, of any size: the kernel's
writes would escape the size of the sandbox's ``/tmp`` (measured: 300 MB written in a fresh
tmpfs inside a sandbox whose ``/tmp`` holds 256 MB). Unprivileged user namespaces are
allowed on most Linux systems, and bubblewrap's own ``--disable-userns`` needs bubblewrap 0.8
and a user namespace of the sandbox's, which a root grader does not make (its kernel has a uid
of its own instead). So the filter refuses the two calls that make one, ``unshare`` and
``clone`` with ``CLONE_NEWUSER`` (EPERM), and ``clone3``, whose flags a filter cannot read
(ENOSYS: the C library then falls back to ``clone``, as under Docker's and Flatpak's filters).

The program is classic BPF over ``struct seccomp_data``, for x86-64 and arm64, with the
instructions and system call numbers of ``kernel/confine.py`` (whose filter a process run alone
under a memory limit loads on top of this one); a system call of another ABI (32-bit x86 on
x86-64) is refused whole. On any other machine ``no_new_user_namespaces`` is None and the
kernel starts without a filter: every other limit of the sandbox holds, but a tmpfs the kernel
mounts in a user namespace of its own is bounded by the machine's memory alone.
"""
from __future__ import annotations

import platform

from autograder.kernel.confine import ALLOW, AND, ERRNO, JEQ, JSET, LD_ABS, RET, SYSCALLS, X32_BIT, arg, op

CLONE_NEWUSER = 0x10000000
EPERM, ENOSYS = 1, 38


def no_new_user_namespaces() -> bytes | None:
    """The filter for this machine (``platform.machine()``), or None where it is not written."""
    known = SYSCALLS.get(platform.machine())
    if known is None:
        return None
    arch, nr = known
    clone, unshare, clone3 = nr["clone"], nr["unshare"], nr["clone3"]
    return b"".join([                       # a jump skips jt (true) or jf (false) instructions
        op(LD_ABS, 4),                    # 0  A = arch
        op(JEQ, arch, 0, 8),              # 1  another ABI -> 10
        op(LD_ABS, 0),                    # 2  A = nr
        op(AND, ~X32_BIT & 0xFFFFFFFF),   # 3
        op(JEQ, clone3, 6, 0),            # 4  -> 11
        op(JEQ, unshare, 1, 0),           # 5  -> 7
        op(JEQ, clone, 0, 2),             # 6  neither -> 9
        op(LD_ABS, arg(0)),               # 7  A = flags (their low 32 bits)
        op(JSET, CLONE_NEWUSER, 1, 0),    # 8  -> 10
        op(RET, ALLOW),                   # 9
        op(RET, ERRNO | EPERM),           # 10
        op(RET, ERRNO | ENOSYS),          # 11
    ])
