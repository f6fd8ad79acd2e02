"""Characters to integer ids and back: the course's character-level tokenizer.

Every character that occurs in the text gets an id, in sorted order, so the vocabulary is a
deterministic function of the text. Build it from the *whole* corpus (train and validation)
so the validation split has no unknown characters; the ids carry no information about
which split a character came from.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CharTokenizer:
    """``chars[i]`` is the character with id ``i``; ``vocab_size = len(chars)``."""

    chars: str

    @classmethod
    def from_text(cls, text: str) -> "CharTokenizer":
        return cls("".join(sorted(set(text))))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> np.ndarray:
        """``text`` (T characters) -> ids, shape (T,), int64. KeyError on an unknown character."""
        table = {c: i for i, c in enumerate(self.chars)}
        try:
            return np.fromiter((table[c] for c in text), dtype=np.int64, count=len(text))
        except KeyError as err:
            raise KeyError(f"character {err.args[0]!r} is not in the vocabulary") from None

    def decode(self, ids) -> str:
        """ids, shape (T,) (a list, numpy array or torch tensor) -> a string of T characters."""
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        return "".join(self.chars[int(i)] for i in ids)
