"""Read the cells of a notebook file, however large, without reading its outputs [trusted]

``skim`` goes through the file once, a window of at most 1 MB at a time, and keeps of each
cell only what ``submission.prepare`` rebuilds it from: its type, its source and its nbgrader
metadata, and of the notebook's own metadata the name of the kernel it asks for. Everything
else (outputs, attachments, other metadata) is stepped over without being decoded: a string by finding its closing quote, an array or
object by counting its brackets with numpy. Memory stays bounded and time grows with the
file's size alone, whatever it holds: huge strings, deep nesting, millions of tiny values.

What is kept is bounded too (``Limits``): one cell's source, all sources together and a
cell's nbgrader metadata (a value past its limit is kept as a ``Cut``: its size); and how
much is looked at: the cells and the keys and list items (past either, reading stops and the
rest of the file is left unread). ``Skimmed`` says which limits were reached, so the caller
can tell the learner. Parts stepped over are checked for their quotes and brackets only:
outputs are not the learner's answer, so a file broken only there is still read.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

WINDOW = 1 << 20          # bytes looked at at once when stepping over a value
SMALL = 4096              # a value this short is first tried with the json module's C parser
WS = re.compile(rb"[ \t\n\r]*")
NUMBER = re.compile(rb"-?[0-9][0-9.eE+-]*")
LITERALS = (b"true", b"false", b"null", b"NaN", b"Infinity", b"-Infinity")  # the json module's
DECODER = json.JSONDecoder()


class Unreadable(ValueError):
    """The file cannot be read as a notebook; the message says why (``"is empty"``...)."""


@dataclass(frozen=True)
class Cut:
    """A value stepped over rather than kept: ``size`` bytes in the file, past ``limit`` (``total``:
    past what the cells' sources may hold together)."""
    size: int
    limit: int
    total: bool = False


@dataclass(frozen=True)
class Limits:
    """How much of a file the grader reads; sizes are bytes of the file's JSON. The course's
    largest cell is 5 KB and its largest notebook 80 KB, nbgrader's metadata 150 bytes."""
    cells: int                   # cells read; reading stops at the next one
    source: int = 100 << 10      # one cell's source: past it, a ``Cut``
    sources: int = 1 << 20       # all cells' sources together: past it, each further one a ``Cut``
    nbgrader: int = 4 << 10      # one cell's nbgrader metadata: past it, a ``Cut``
    entries: int = 100_000       # keys and list items looked through (a cell has about 10): then stop
    file: int = 1 << 30          # the file: past it, nothing is read (reading takes time too)


@dataclass
class Skimmed:
    """The cells read, as dicts holding only ``cell_type``, ``source``/``input``, ``level`` and
    ``metadata.nbgrader`` (each a ``Cut`` where too large; None for an item that is not a cell),
    and why reading stopped before the end, if it did."""
    cells: list
    more_cells: bool = False     # there were cells past ``Limits.cells``
    crowded: bool = False        # there were entries past ``Limits.entries``
    kernel: object = None        # ``metadata.kernelspec.name`` (a value of at most 256 bytes, or a ``Cut``)
    worksheets: bool = False     # the cells were read from ``worksheets``: nbformat 3 or older


class _Stream:
    """A file read forward a window at a time: ``buf[pos:]`` is what comes next."""

    def __init__(self, f):
        self.f, self.buf, self.pos, self.base, self.eof = f, b"", 0, 0, False

    @property
    def offset(self) -> int:
        """Where ``pos`` is in the file."""
        return self.base + self.pos

    def fill(self, n: int) -> int:
        """Hold at least ``n`` bytes from ``pos`` (fewer only at the end); how many are held."""
        held = len(self.buf) - self.pos
        if held < n and not self.eof:
            want = max(n - held, WINDOW)
            more = self.f.read(want)
            self.eof = len(more) < want
            self.buf, self.base, self.pos = self.buf[self.pos:] + more, self.offset, 0
        return len(self.buf) - self.pos

    def peek(self) -> bytes:
        """The next byte that is not white space (``b""`` at the end); ``pos`` is on it."""
        while True:
            self.pos = WS.match(self.buf, self.pos).end()
            if self.pos < len(self.buf) or not self.fill(1):
                return self.buf[self.pos:self.pos + 1]

    def expect(self, byte: bytes) -> None:
        if self.peek() != byte:
            raise _broken(f"expected {byte.decode()!r} at byte {self.offset}")
        self.pos += 1


def _broken(why: str) -> Unreadable:
    return Unreadable(f"is not a notebook nbformat can read (not JSON: {why})")


def _items(stream: _Stream, close: bytes):
    """Each item of the array or object at ``pos``, ``pos`` on it: the caller reads it (or
    steps over it) before asking for the next; stop asking to leave the rest unread."""
    stream.expect(b"[" if close == b"]" else b"{")
    first = True
    while True:
        if stream.peek() == close:
            stream.pos += 1
            return
        if not first:
            stream.expect(b",")
        first = False
        yield


def _quotes(a):
    """The positions of the quotes in the bytes ``a`` that no backslash escapes."""
    quotes = np.flatnonzero(a == 0x22)
    slashes = np.flatnonzero(a == 0x5C)
    if not quotes.size or not slashes.size:
        return quotes
    new_run = np.diff(slashes) != 1
    ends, starts = slashes[np.append(new_run, True)], slashes[np.insert(new_run, 0, True)]
    escaped = np.zeros(a.size + 1, bool)
    escaped[ends[(ends - starts) % 2 == 0] + 1] = True  # the byte after an odd run of backslashes
    return quotes[~escaped[quotes]]


def _step_over(stream: _Stream, depth: int, in_string: bool) -> None:
    """Move ``pos`` past the end of the string it is in (``depth`` 0) or of the ``depth``
    arrays and objects it is in, counting quotes and brackets with numpy, window by window."""
    size = SMALL
    while True:
        held = stream.fill(size)
        if not held:
            raise _broken("the file ends inside a value")
        buf, start = stream.buf, stream.pos
        stop = start + min(held, size)
        size = min(size * 4, WINDOW)
        if buf[stop - 1] == 0x5C and (stop < len(buf) or not stream.eof):
            run = stop - start - len(buf[start:stop].rstrip(b"\\"))
            stop -= run % 2  # an odd run's last backslash escapes the next window's first byte
        if in_string and buf.find(b'"', start, stop) < 0:
            stream.pos = stop  # the middle of a long string: nothing to count
            continue
        a = np.frombuffer(buf, np.uint8, count=stop - start, offset=start)
        quotes = _quotes(a)
        if depth == 0:  # a string: it ends at its first quote
            if quotes.size:
                stream.pos = start + int(quotes[0]) + 1
                return
            stream.pos = stop
            continue
        folded = a | 0x20  # "[" and "]" become "{" and "}"
        brackets = np.flatnonzero((folded == 0x7B) | (folded == 0x7D))
        if quotes.size or in_string:
            brackets = brackets[(np.searchsorted(quotes, brackets) & 1) == in_string]  # not in strings
        steps = np.subtract(0x7C, folded[brackets], dtype=np.int32)  # "{" +1, "}" -1
        depths = np.cumsum(steps, dtype=np.int32)
        closed = np.flatnonzero(depths == -depth)
        if closed.size:
            stream.pos = start + int(brackets[closed[0]]) + 1
            return
        depth += int(depths[-1]) if depths.size else 0
        in_string ^= bool(quotes.size % 2)
        stream.pos = stop


def _skip(stream: _Stream) -> int:
    """Step over the next value without decoding it; its size in bytes."""
    first, begin = stream.peek(), stream.offset
    if first == b'"':
        end = stream.buf.find(b'"', stream.pos + 1)
        if end > 0 and stream.buf[end - 1] != 0x5C:  # a string without escaped quotes, held whole
            stream.pos = end + 1
        else:
            stream.pos += 1
            _step_over(stream, 0, True)
    elif first in (b"[", b"{"):
        held = stream.fill(SMALL)
        try:  # most values are small: the json module's C parser is quicker on them
            text = stream.buf[stream.pos:stream.pos + min(held, SMALL)].decode("latin-1")
            stream.pos += DECODER.raw_decode(text)[1]  # JSON's syntax is ASCII: offsets are bytes
        except (ValueError, RecursionError):
            stream.pos += 1
            _step_over(stream, 1, False)
    else:
        _scalar(stream)
    return stream.offset - begin


def _scalar(stream: _Stream) -> None:
    """Step over a number, ``true``, ``false`` or ``null``."""
    held = stream.fill(SMALL)
    for literal in LITERALS:
        if stream.buf.startswith(literal, stream.pos):
            stream.pos += len(literal)
            return
    number = NUMBER.match(stream.buf, stream.pos)
    if not number:
        raise _broken(f"expected a value at byte {stream.offset}")
    if number.end() - stream.pos == held and not stream.eof:
        raise _broken(f"a number longer than {SMALL} digits at byte {stream.offset}")
    stream.pos = number.end()


def _take(stream: _Stream, limit: int):
    """The next value decoded, if it is at most ``limit`` bytes; else a ``Cut``, stepped over."""
    stream.peek()
    begin, held = stream.offset, stream.fill(limit + 1)
    failed = None
    for size in sorted({min(held, SMALL, limit + 1), min(held, limit + 1)}):  # most values are short
        text = stream.buf[stream.pos:stream.pos + size]
        try:
            end = DECODER.raw_decode(text.decode("latin-1"))[1]  # JSON's syntax is ASCII: offsets are bytes
        except (ValueError, RecursionError) as err:
            failed = err
            continue
        if end < size or size == held:  # not a number the window cut short
            stream.pos += end
            return json.loads(text[:end].decode("utf-8", errors="replace"))
    size = _skip(stream)
    if size > limit:
        return Cut(size, limit)
    why = "nested too deep" if isinstance(failed, RecursionError) else getattr(failed, "msg", str(failed))
    raise _broken(f"{why} at byte {begin}")


def _key(stream: _Stream) -> str | None:
    """An object's key (``None`` for one too long to be a key the grader reads)."""
    if stream.peek() != b'"':
        raise _broken(f"expected a key at byte {stream.offset}")
    key = _take(stream, 256)
    stream.expect(b":")
    return key if isinstance(key, str) else None


class _Enough(Exception):
    """The grader has read all it reads of this file: the rest is left unread."""


class _Skimmer:
    """One reading of one file: the cells found so far and what the limits have left.

    The lists of cells are filled as they are read, so that when reading stops at a limit
    (``_Enough``) the cells read until then are there.
    """

    def __init__(self, stream: _Stream, limits: Limits):
        self.stream, self.limits, self.out = stream, limits, Skimmed([])
        self.cells = self.worksheets = None  # the lists of cells found (worksheets: nbformat 3)
        self.entries_left, self.sources_left, self.read = limits.entries, limits.sources, 0

    def items(self, close: bytes):
        """``_items``, each one counted against ``Limits.entries``."""
        for _ in _items(self.stream, close):
            self.entries_left -= 1
            if self.entries_left < 0:
                self.out.crowded = True
                raise _Enough
            yield

    def keys(self):
        """The keys of the object at ``pos``, ``pos`` on each one's value when it is given."""
        for _ in self.items(b"}"):
            yield _key(self.stream)

    def notebook(self) -> None:
        for key in self.keys():
            if key == "cells":
                self.cells = self.new_list()
                if isinstance(self.cells, list):
                    self.read_cells(self.cells)
            elif key == "worksheets":  # nbformat 3
                self.worksheets = self.new_list()
                if isinstance(self.worksheets, list):
                    self.read_worksheets(self.worksheets)
            elif key == "metadata" and self.stream.peek() == b"{":
                self.kernel()
            else:
                _skip(self.stream)

    def kernel(self) -> None:
        """The notebook's ``metadata``: its ``kernelspec.name`` into ``Skimmed.kernel``."""
        for key in self.keys():
            if key == "kernelspec" and self.stream.peek() == b"{":
                for inner in self.keys():
                    if inner == "name":
                        self.out.kernel = _take(self.stream, 256)
                    else:
                        _skip(self.stream)
            else:
                _skip(self.stream)

    def new_list(self) -> list | bool | None:
        """A list to fill when one comes next; else, the value stepped over, ``None`` for ``null``
        (as if absent, as the json module reads it) and ``False`` for anything else."""
        if self.stream.peek() == b"[":
            return []
        null = self.stream.peek() == b"n"
        _skip(self.stream)
        return None if null else False

    def found(self) -> list:
        """The notebook's cells, as nbformat reads them: ``cells``, else the worksheets' cells."""
        self.out.worksheets = self.cells is None and isinstance(self.worksheets, list)
        cells = self.worksheets if self.out.worksheets else self.cells
        if not isinstance(cells, list):
            where = f" in its first {self.limits.entries:,} entries" if self.out.crowded else ""
            raise Unreadable(f"is not a notebook nbformat can read (no list of cells{where})")
        return cells

    def read_worksheets(self, into: list) -> None:
        for _ in self.items(b"]"):
            if self.stream.peek() != b"{":
                _skip(self.stream)
                continue
            for key in self.keys():
                if key == "cells" and self.stream.peek() == b"[":
                    self.read_cells(into)
                else:
                    _skip(self.stream)

    def read_cells(self, into: list) -> None:
        """Append the cells of the list at ``pos`` to ``into``, up to ``Limits.cells`` read."""
        for _ in self.items(b"]"):
            if self.read == self.limits.cells:
                self.out.more_cells = True
                raise _Enough
            self.read += 1
            into.append(self.cell(len(into) + 1))

    def cell(self, number: int) -> dict | None:
        if self.stream.peek() != b"{":
            _skip(self.stream)
            return None  # not a cell: dropped
        raw = {}
        for key in self.keys():
            if key in ("cell_type", "level"):
                raw[key] = _take(self.stream, 64)
            elif key in ("source", "input"):
                raw[key] = self.source()
            elif key == "metadata" and self.stream.peek() == b"{":
                raw[key] = self.metadata()
            else:
                _skip(self.stream)
        return raw

    def source(self):
        """A cell's source, or a ``Cut`` past the cell's limit or what the cells have left."""
        limit = min(self.limits.source, self.sources_left)
        begin = self.stream.offset
        value = _take(self.stream, limit)
        if isinstance(value, Cut):
            return value if value.size > self.limits.source else Cut(value.size, self.limits.sources, True)
        self.sources_left -= self.stream.offset - begin
        return value

    def metadata(self) -> dict:
        meta = {}
        for key in self.keys():
            if key == "nbgrader":
                meta[key] = _take(self.stream, self.limits.nbgrader)
            else:
                _skip(self.stream)
        return meta


def size_text(n: int) -> str:
    """``n`` bytes for a reader: ``"812 bytes"``, ``"100 KB"``, ``"52.4 MB"``, ``"1 GB"``."""
    for unit, shift in (("GB", 30), ("MB", 20), ("KB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f}".removesuffix(".0") + f" {unit}"
    return f"{n} bytes"


def skim(path: Path, limits: Limits) -> Skimmed:
    """The cells of the notebook file at ``path``; ``Unreadable`` says why there are none."""
    try:
        size = path.stat().st_size
    except OSError as err:
        raise Unreadable(f"could not be opened ({err.strerror})") from None
    if size == 0:
        raise Unreadable("is empty")
    if size > limits.file:
        raise Unreadable(f"is {size_text(size)}, more than the {size_text(limits.file)} the grader reads")
    try:
        f = path.open("rb")
    except OSError as err:
        raise Unreadable(f"could not be opened ({err.strerror})") from None
    with f:
        stream = _Stream(f)
        if stream.peek() != b"{":
            _skip(stream)
            if stream.peek():
                raise _broken(f"extra data at byte {stream.offset}")
            raise Unreadable("is not a notebook nbformat can read (not a JSON object)")
        skimmer = _Skimmer(stream, limits)
        try:
            skimmer.notebook()
            if stream.peek():
                raise _broken(f"extra data at byte {stream.offset}")
        except _Enough:
            pass  # the rest of the file is left unread
    skimmer.out.cells = skimmer.found()
    return skimmer.out
