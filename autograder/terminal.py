"""Learner text on a terminal: shown as it is written, never obeyed [trusted]

A terminal acts on the control characters it is sent: ``ESC ] 0 ; ... BEL`` retitles the
window, ``ESC [ 2 J`` clears the screen, ``ESC ] 52`` writes to the clipboard on some, ``\\r``
writes over a line, and a bidi override reorders what follows. A learner controls some of the
text every command prints: an exception's message, a notebook's file name, a roster's names,
a reason that quotes them. Every command (``cli.py``) prints such text through ``shown``,
which writes each such character as Python writes it in a string (``\\x1b``, ``\\x07``,
``\\u202e``), so the instructor and the learner see what was sent, and nothing happens.

    >>> shown("raised ValueError: \\x1b]0;pwned\\x07\\x1b[2J")
    'raised ValueError: \\\\x1b]0;pwned\\\\x07\\\\x1b[2J'
    >>> shown("line one\\nline two"), shown("a\\nb", layout=False)
    ('line one\\nline two', 'a\\\\nb')
"""
from __future__ import annotations

# C0 controls, DEL and C1 controls; the bidi embeddings, overrides and isolates, the line and
# paragraph separators (a line break to some terminals): all written as escapes
CONTROLS = [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), 0x061C, 0x200E, 0x200F,
            *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x2028, 0x2029]
ESCAPED = {c: ascii(chr(c))[1:-1] for c in CONTROLS}
LAYOUT = {c: escape for c, escape in ESCAPED.items() if chr(c) not in "\n\t"}  # a message's lines


def shown(text: object, layout: bool = True) -> str:
    """``str(text)`` with every control character written as an escape (the module doc).

    ``layout``: keep newlines and tabs, the lines of a message the grader composed; without it
    (a file name, an id, one line of a report) they are escaped too.
    """
    return str(text).translate(LAYOUT if layout else ESCAPED)
