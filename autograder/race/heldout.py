"""The race's texts: what entries train on, and the held-out text they are scored on. [trusted]

Entries train on the course's training split (``course_lib.data``), with its characters as
the vocabulary, and are scored on a text none of them has seen: by default a tragedy that set-up
keeps beside the data cache (``course_lib.data.heldout_path``), or a file the instructor names
(``--heldout``: a play, or any text the class has never had). It must lie where the grading
sandbox cannot read it (``Unseen``): outside every tree the sandbox binds. Characters the
training text never had are left out of it, and counted.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from autograder.pipeline.sandbox import readable_trees
from course_lib.data import heldout_path, load_text, split
from course_lib.tokenize import CharTokenizer


class Unseen(ValueError):
    """The held-out text cannot be used: missing, empty, or where the sandbox could read it."""


@dataclass(frozen=True)
class Texts:
    """The race's data as ids of one vocabulary: ``train`` (N,), ``heldout`` (M,)."""
    tokenizer: CharTokenizer
    train: np.ndarray
    heldout: np.ndarray
    heldout_name: str
    dropped: int  # held-out characters the vocabulary lacks, left out


def seen_by_sandbox(path: Path) -> Path | None:
    """The tree of the sandbox's file system that holds ``path``, if one does."""
    path = path.resolve()
    return next((tree for tree in readable_trees() if path.is_relative_to(tree)), None)


def texts(heldout: Path | None = None, train_text: str | None = None) -> Texts:
    """The training split (or ``train_text``) and the held-out text (default: set-up's play)."""
    path = Path(heldout) if heldout is not None else heldout_path()
    if not path.is_file():
        raise Unseen(f"no held-out text at {path}: run the set-up command (python -m course_lib.data) "
                     "or name a file with --heldout")
    tree = seen_by_sandbox(path)
    if tree is not None:
        raise Unseen(f"the held-out text {path} lies in {tree}, which the grading sandbox can read: "
                     "keep it elsewhere")
    if train_text is None:
        train_text = split(load_text()[0])[0]
    tokenizer = CharTokenizer.from_text(train_text)
    text = path.read_text(encoding="utf-8", errors="replace")
    known = set(tokenizer.chars)
    kept = "".join(c for c in text if c in known)
    if len(kept) < 4096:
        raise Unseen(f"the held-out text {path} has {len(kept)} usable characters; the race needs 4096 or more")
    return Texts(tokenizer, tokenizer.encode(train_text), tokenizer.encode(kept), path.stem, len(text) - len(kept))
