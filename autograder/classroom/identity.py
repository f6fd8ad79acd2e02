"""When two learner ids are the same learner: one normalisation, and its collisions [trusted]

A learner id reaches the grader from several hands: the file and folder names of a class's
submissions (``intake.py``), the gradebook's students, and a school's roster and e-mails
(``export.py``). They are compared in one way only, ``id_key``: Unicode NFKC, then case folding
(NFKC again, as Unicode's ``NFKC_Casefold`` does), so ``Ada``, ``ADA`` and ``ａｄａ`` (full
width), or ``Kim`` and ``\\u212aim`` (the Kelvin sign), are one id, as a school's systems and
a case-insensitive file system take them. Letters of other scripts that merely look alike
(Cyrillic ``а`` for Latin ``a``) are other letters: such ids are other learners.

Where two different ids have one key (``collisions``), the grader never guesses which is meant:
neither is taken in or exported, and the message names both (``shown_ids``, escaped so that a
look-alike shows as what it is), for the instructor to rename one.

    >>> id_key("\\u212aim"), id_key("ＫＩＭ")
    ('kim', 'kim')
    >>> print(shown_ids(collisions(["kim", "Kim", "bo", "\\u212aim"])["kim"]))
    'Kim' and 'kim' and '\\u212aim'
"""
from __future__ import annotations

import unicodedata
from collections.abc import Iterable


def id_key(learner: str) -> str:
    """The form in which two ids are compared: NFKC, case folded, NFKC again (see the module doc)."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", learner).casefold())


def collisions(ids: Iterable[str]) -> dict[str, list[str]]:
    """key -> the different ids (sorted, two or more) that have it, for every key shared."""
    by_key: dict[str, set[str]] = {}
    for learner in ids:
        by_key.setdefault(id_key(learner), set()).add(learner)
    return {key: sorted(same) for key, same in sorted(by_key.items()) if len(same) > 1}


def shown_ids(ids: Iterable[str]) -> str:
    """``ids`` as a message names them: each as ``ascii`` writes it, so ``'\\u212aim'`` and
    ``'Kim'`` differ on the screen as they do in the file."""
    return " and ".join(ascii(learner) for learner in ids)
