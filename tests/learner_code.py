"""One record for every bank of learner code in ``tests/``, and the one topic -> notebook map.

The banks hold what a learner might type, each with what a right verdict says of it:

- ``learner_bugs.BUGS``: one edit of the instructor's solution cell, a bug nobody listed;
- ``mutant_bank.MUTANTS``: a learner's function alone (numpy as ``np``), a bug nobody listed;
- ``alternative_solutions.ALTERNATIVES``: a right cell written another way;
- ``two_mistake_bank.ANSWERS`` and ``CORRECT``: a whole cell with none, one or two mistakes;
- ``CELLS`` of ``autograder/exercises/test_learner_cells.py``: a whole cell once told something wrong.

Each bank keeps its short constructor (``_bug``, ``_mutant``, ...), which returns a
``LearnerCode``; the tests read the fields below, whatever the bank.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

from autograder.pipeline.assignment import assignments, source

KINDS = {0: "correct", 1: "single", 2: "two"}  # len(what) -> kind


@dataclass(frozen=True, kw_only=True)
class LearnerCode:
    """A learner's code for one exercise and what a right verdict on it says.

    The code is ``source`` (a whole solution cell, or for a mutant a function alone) or ``edit``
    (``(old, new)``: ``old`` occurs exactly once in the solution cell, ``solution_cells.edited``
    applies it). The words come in three kinds, and each test reads the ones its bank holds:
    ``names[i]`` are alternatives, any one of which a message naming mistake ``what[i]`` holds
    (compared ignoring case); every one of ``says`` is in the messages as written; none of
    ``never`` is."""
    exercise: str                             # exercise id, e.g. "attention.forward"
    what: tuple[str, ...]                     # the mistakes in words, one each where the bank tells
                                              # them apart (a learner cell has one phrase); () if right
    how: str = ""                             # a right cell: how it differs from the instructor's
    source: str = ""                          # the whole cell (or function) as the learner typed it
    edit: tuple[str, str] | None = None       # or: (old, new), one edit of the solution cell
    names: tuple[tuple[str, ...], ...] = ()   # per mistake: any of these words, ignoring case
    says: tuple[str, ...] = ()                # each is in the messages, as written
    never: tuple[str, ...] = ()               # none is in the messages
    public: bool = False                      # graded on the check cell's cases, not the graded ones
    full_marks: bool = False                  # the verdict gives every point

    def __post_init__(self):
        if bool(self.source) == (self.edit is not None):
            raise ValueError(f"{self.exercise}: {self.what or self.how}: exactly one of source and edit")
        if self.names and len(self.names) != len(self.what):
            raise ValueError(f"{self.exercise}: {self.what}: one tuple of names per mistake")

    @property
    def kind(self) -> str:
        """How many mistakes ``what`` tells apart, in words: "correct", "single" or "two"."""
        return KINDS[len(self.what)]

    @property
    def notebook(self) -> str:
        """The number of the notebook that holds the exercise, "00" .. "07"."""
        return notebook_of_topic()[self.exercise.split(".", 1)[0]]


@functools.cache
def notebook_of_topic() -> dict[str, str]:
    """Exercise topic -> the number of the notebook whose graded cells hold its exercises, read
    from ``solutions/`` (``{"warmup": "00", "lm": "01", ..., "gpt": "06", "scaling": "06", ...}``)."""
    found = {}
    for assignment in assignments():              # "06_gpt"
        number = assignment.split("_", 1)[0]      # "06"
        for exercise_id in source(assignment).exercises:
            topic = exercise_id.split(".", 1)[0]
            if found.setdefault(topic, number) != number:
                raise ValueError(f"topic {topic!r} is graded in notebooks {found[topic]} and {number}")
    return found


def notebooks() -> list[str]:
    """The notebooks' numbers, sorted: ["00", "01", ..., "07"]."""
    return sorted(set(notebook_of_topic().values()))
