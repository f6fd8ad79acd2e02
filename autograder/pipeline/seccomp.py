"""The seccomp filter bubblewrap loads before the learner's kernel starts: no new user namespace. [trusted]

Inside a user namespace of its own, any process may mount a tmpfs, of any size: the kernel's
writes would escape the size of the sandbox's ``/tmp`` (measured: 300 MB written in a fresh
tmpfs inside a sandbox whose ``/tmp`` holds 256 MB). Unprivileged user namespaces are
allowed on most Linux systems, and bubblewrap's own ``--disable-userns`` needs bubblewrap 0.8
and a user namespace of the sandbox's, which a root grader does not make (its kernel has a uid
of its own instead). So the filter refuses the two calls that make one, ``unshare`` and
``clone`` with ``CLONE_NEWUSER`` (EPERM), and ``clone3``, whose flags a filter cannot read
(ENOSYS: the C library then falls back to ``clone``, as under Docker's and Flatpak's filters).

The program is classic BPF over ``struct seccomp_data`` (``nr`` at byte 0, ``arch`` at 4, the
first argument's low 32 bits at 16, little-endian), for x86-64 and arm64; a system call of
another ABI (32-bit x86 on x86-64) is refused whole.
"""
from __future__ import annotations

import platform
import struct

CLONE_NEWUSER = 0x10000000
EPERM, ENOSYS = 1, 38
# machine -> (AUDIT_ARCH_*, clone, unshare, clone3)
SYSCALLS = {"x86_64": (0xC000003E, 56, 272, 435), "aarch64": (0xC00000B7, 220, 97, 435)}
X32_BIT = 0x40000000  # x86-64's x32 ABI: the same numbers with this bit set

LD_ABS, AND, JEQ, JSET, RET = 0x20, 0x54, 0x15, 0x45, 0x06  # BPF_LD|W|ABS, ALU|AND|K, JMP|..|K
ALLOW, ERRNO = 0x7FFF0000, 0x00050000


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def no_new_user_namespaces() -> bytes | None:
    """The filter for this machine (``platform.machine()``), or None where it is not written."""
    known = SYSCALLS.get(platform.machine())
    if known is None:
        return None
    arch, clone, unshare, clone3 = known
    return b"".join([                        # a jump skips jt (true) or jf (false) instructions
        _op(LD_ABS, 4),                      # 0  A = arch
        _op(JEQ, arch, 0, 8),                # 1  another ABI -> 10
        _op(LD_ABS, 0),                      # 2  A = nr
        _op(AND, ~X32_BIT & 0xFFFFFFFF),     # 3
        _op(JEQ, clone3, 6, 0),              # 4  -> 11
        _op(JEQ, unshare, 1, 0),             # 5  -> 7
        _op(JEQ, clone, 0, 2),               # 6  neither -> 9
        _op(LD_ABS, 16),                     # 7  A = flags (their low 32 bits)
        _op(JSET, CLONE_NEWUSER, 1, 0),      # 8  -> 10
        _op(RET, ALLOW),                     # 9
        _op(RET, ERRNO | EPERM),             # 10
        _op(RET, ERRNO | ENOSYS),            # 11
    ])
