"""A learner's file, read only if it is a regular file: never through a link, never waiting [trusted]

What a class hands in may hold any kind of file: a symbolic link (to a classmate's work, the
gradebook, the grader's secret), a hard link (another name of a file outside the submissions),
a named pipe, whose ``open`` waits for a writer forever and would stop the class there, a
device or a socket. The instructor's process reads a learner's file only through
``open_handed_in``: ``O_NOFOLLOW | O_NONBLOCK`` (a link is refused, a pipe opens without
waiting), then ``fstat`` of what was opened must be a regular file; anything else is
``NotHandedIn``, with a reason that says what it is.

    >>> kind(stat.S_IFIFO | 0o644)
    'a named pipe (FIFO)'
"""
from __future__ import annotations

import errno
import os
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Iterator

KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
         (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"),
         (stat.S_ISDIR, "a folder"))


class NotHandedIn(OSError):
    """A file of a submission the grader does not read: a link, not a regular file, or larger
    than it may be."""


def kind(mode: int) -> str:
    """What a file of ``mode`` (``st_mode``, or a zip member's) is, in words; "a file" if regular."""
    return next((words for test, words in KINDS if test(mode)), "a file" if stat.S_ISREG(mode)
                else "not a regular file")


@contextmanager
def open_handed_in(path: Path, alone: bool = False) -> Iterator[BinaryIO]:
    """``path`` opened for reading, never through a link and without waiting, if it is a regular
    file (``NotHandedIn`` otherwise); ``alone``: refuse one with another name too (a hard link)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise NotHandedIn(f"{_name(path)} is a symbolic link: the grader does not follow it") from None
        raise
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotHandedIn(f"{_name(path)} is not a regular file ({kind(st.st_mode)}): not read")
        if alone and st.st_nlink > 1:
            raise NotHandedIn(f"{_name(path)} is a hard link (the file has {st.st_nlink} names, "
                              "another may be outside the submission): not read")
        yield f


def read_handed_in(path: Path, limit: int) -> bytes:
    """The bytes of a learner's file (``open_handed_in``), at most ``limit`` of them
    (``NotHandedIn`` otherwise)."""
    with open_handed_in(path) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise NotHandedIn(f"{_name(path)} is larger than the {limit} bytes the grader reads of it")
    return data


def _name(path: Path) -> str:
    """``path``'s name as a message shows it: as it is, or as ``ascii`` writes it if it holds
    a character a terminal would act on."""
    return path.name if path.name.isprintable() else ascii(path.name)
