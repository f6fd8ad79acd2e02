"""BPE learning: the course's two learners against Hugging Face's ``tokenizers``, side by side in
one process, on the same corpus.

- naive: ``course_lib.tokenize.learn_merges_naive``, the plain loop (recount every pair after
  each merge); incremental: ``learn_merges`` (notebook 05's library version: only the chunks that
  held the merged pair are counted again). Both learn from the chunk counts (``word_counts``),
  whose time is printed apart; they must learn the same merges.
- tokenizers, the baseline (what a user would call to learn a BPE vocabulary): its Rust
  ``BpeTrainer`` on the same texts, cut into chunks by the course's own pattern
  (``tokenize.pretokenize``) and starting from the 256 bytes (``ByteLevel``), asked for as
  many merges as the course learned. It counts the chunks itself, so it is compared with
  counting + incremental; it runs on every core, the course's learners on one.

Prints the best time of each, naive / incremental, course (counting + incremental) / tokenizers
(above 1: tokenizers is faster), and how many of the merges tokenizers learned the course learned
too: the same pairs while one pair is the most frequent, but each breaks a tie between equally
frequent pairs its own way, and a tie taken otherwise can change the merges after it.

    python benchmarks/bpe.py [--merges 300] [--corpus dates|shakespeare] [--repeats 3]

"dates" is the training split of notebook 05's task (sources and targets); "shakespeare"
is ../shared/data/tinyshakespeare.txt if present, else the cached course corpus.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from course_lib.tokenize import (BYTE_OFFSET, CHUNK_PATTERN, FIRST_MERGE_ID, learn_merges,
                                 learn_merges_naive, word_counts)

TINY = Path(__file__).resolve().parents[2] / "shared" / "data" / "tinyshakespeare.txt"


def corpus(name: str) -> list[str]:
    if name == "dates":
        from course_lib.translation import make_splits
        return [text for pair in make_splits().train for text in pair]
    if TINY.exists():
        return TINY.read_text(encoding="utf-8").splitlines()
    from course_lib.data import load_text
    return load_text(fallback=True)[0].splitlines()


def best_time(fn, repeats: int) -> tuple[float, list]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def course_pairs(merges) -> list[tuple[bytes, bytes]]:
    """The course's merges (pairs of ids) as pairs of byte strings."""
    spelled = {BYTE_OFFSET + b: bytes([b]) for b in range(256)}
    for i, (a, b) in enumerate(merges):
        spelled[FIRST_MERGE_ID + i] = spelled[a] + spelled[b]
    return [(spelled[a], spelled[b]) for a, b in merges]


def _byte_of_symbol() -> dict[str, int]:
    """ByteLevel's alphabet: GPT-2 writes each byte as a printable character, the printable ASCII
    and Latin-1 bytes as themselves, the 68 others as 256, 257, ... in byte order."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
            *range(ord("®"), ord("ÿ") + 1)]
    moved = [b for b in range(256) if b not in kept]
    return {**{chr(b): b for b in kept}, **{chr(256 + i): b for i, b in enumerate(moved)}}


def tokenizers_merges(texts, n_merges: int) -> list[tuple[bytes, bytes]]:
    """Hugging Face's BPE trainer on ``texts``: the course's chunks, bytes as the alphabet,
    ``n_merges`` merges; returns them as pairs of byte strings."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(CHUNK_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    tok.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=len(alphabet) + n_merges, initial_alphabet=alphabet, show_progress=False))
    byte = _byte_of_symbol()
    merges = json.loads(tok.to_str())["model"]["merges"]
    return [tuple(bytes(byte[ch] for ch in part) for part in
                  (pair.split(" ") if isinstance(pair, str) else pair)) for pair in merges]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--merges", type=int, default=300)
    parser.add_argument("--corpus", choices=("dates", "shakespeare"), default="dates")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    texts = corpus(args.corpus)
    counting, words = best_time(lambda: word_counts(texts), args.repeats)
    print(f"corpus={args.corpus}: {len(words):,} distinct chunks, "
          f"{sum(words.values()):,} in all; {args.merges} merges, best of {args.repeats}; "
          f"baseline: Hugging Face tokenizers' BpeTrainer (Rust, {os.cpu_count()} cores)")
    naive, naive_merges = best_time(lambda: learn_merges_naive(words, args.merges), args.repeats)
    fast, fast_merges = best_time(lambda: learn_merges(words, args.merges), args.repeats)
    if naive_merges != fast_merges:
        raise SystemExit("the two learners disagree: this is a bug")
    print(f"learned {len(fast_merges)} merges (fewer if every chunk became one token)")
    print(f"{'counting s':>11} {'naive s':>8} {'incremental s':>14} {'naive/incremental':>18}")
    print(f"{counting:>11.3f} {naive:>8.3f} {fast:>14.3f} {naive / fast:>18.1f}")
    try:
        import tokenizers  # noqa: F401 (the dev extra installs it)
    except ImportError:
        print("no baseline: the tokenizers package is missing (pip install -e '.[dev]')")
        return
    library, theirs = best_time(lambda: tokenizers_merges(texts, len(fast_merges)), args.repeats)
    ours = course_pairs(fast_merges)
    print(f"{'tokenizers s':>13} {'course (counting + incremental) / tokenizers':>45}")
    print(f"{library:>13.3f} {(counting + fast) / library:>45.1f}")
    print(f"merges: tokenizers learned {len(theirs)}, {len(set(theirs) & set(ours))} of them the "
          f"course's too, {sum(a == b for a, b in zip(theirs, ours))} in the same place")


if __name__ == "__main__":
    main()
