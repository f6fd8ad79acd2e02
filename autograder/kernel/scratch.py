"""The sandbox's first step where the grader has no root: cap /tmp's files, then run the rest. [sandbox]

bubblewrap's ``--size --tmpfs /tmp`` bounds the bytes of the kernel's scratch, not its files:
each file, however empty, is an inode of the host's memory, and a loop makes millions. A grader
with root mounts a tmpfs with both limits on the host (``pipeline.sandbox._scratch_tmpfs``).
Without root, bubblewrap lends this step two capabilities in the sandbox's own user namespace
(``--cap-add CAP_SYS_ADMIN --cap-add CAP_SETPCAP``); it remounts the sandbox's ``/tmp`` with a
number of inodes, then runs the rest of the command, whose ``setpriv`` drops every capability
for good before the kernel starts (``Sandbox.kernel_argv``)::

    python -I -S scratch.py BYTES FILES -- COMMAND ...

Nothing of the learner's has run yet; this uses the standard library only.
"""
import ctypes
import os
import sys

MS_NOSUID, MS_NODEV, MS_REMOUNT = 2, 4, 32  # <sys/mount.h>; bubblewrap mounts /tmp nosuid, nodev


def limit_tmp(size: int, files: int) -> None:
    """Remount ``/tmp`` (a tmpfs) to hold at most ``size`` bytes and ``files`` inodes."""
    libc = ctypes.CDLL(None, use_errno=True)
    options = f"size={size},nr_inodes={files}".encode()
    if libc.mount(b"tmpfs", b"/tmp", None, MS_REMOUNT | MS_NOSUID | MS_NODEV, options) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


def main(argv: list[str]) -> None:
    size, files, separator, *command = argv
    if separator != "--" or not command:
        sys.exit("usage: scratch.py BYTES FILES -- COMMAND ...")
    try:
        limit_tmp(int(size), int(files))
    except OSError as err:
        sys.exit(f"the sandbox could not limit the files of its /tmp: {err.strerror}")
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
