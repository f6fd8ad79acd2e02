"""Text to integer ids and back: the course's character-level tokenizer (notebooks 01, 06)
and byte-pair encoding with one vocabulary for source and target (notebook 05).

Every character that occurs in the text gets an id, in sorted order, so the vocabulary is a
deterministic function of the text. Build it from the *whole* corpus (train and validation)
so the validation split has no unknown characters; the ids carry no information about
which split a character came from.

Byte-pair encoding (``BPETokenizer``, below the character tokenizer) starts from the 256
byte values and learns merges of frequent neighbours; its ids are laid out in the comment
above ``SPECIAL_TOKENS``.
"""
from __future__ import annotations

import heapq
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

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


# ------------------------------------------------------------------ byte-pair encoding
# Week 7, §3 "Input and output embeddings": the Transformer tokenises with byte-pair encoding
# (Sennrich et al. 2015), learned on the source and the target text together, so both
# languages share one vocabulary (and one embedding matrix).
#
# Ids, in this order:
#   0, 1, 2            the special tokens <pad>, <s> (start) and </s> (end);
#   3 .. 258           the 256 byte values (byte b has id 3 + b), so every string has an
#                      encoding, including characters never seen in training (byte fallback);
#   259, 260, ...      one id per learned merge, in the order the merges were learned.
#
# Text is first cut into chunks (``pretokenize``): a run of letters with the space before it,
# one digit, a run of punctuation, or whitespace. Merges never cross a chunk boundary, and
# digits stay single tokens, so a number is always spelled out digit by digit.
#
# Learning: count every adjacent pair of tokens in the corpus, merge the most frequent pair
# into a new token everywhere, repeat. Ties go to the smallest pair (compare the first ids,
# then the second): ``min(counts, key=lambda pair: (-counts[pair], pair))``.
SPECIAL_TOKENS = ("<pad>", "<s>", "</s>")
PAD, BOS, EOS = 0, 1, 2
BYTE_OFFSET = len(SPECIAL_TOKENS)  # id of byte 0
FIRST_MERGE_ID = BYTE_OFFSET + 256  # id of the first learned merge

# a run of letters, one digit, a run of other symbols, of underscores (each with the space before
# it), or whitespace (the regular expression is public for tools that cut text the course's way)
CHUNK_PATTERN = r" ?[^\W\d_]+| ?\d| ?[^\w\s]+| ?_+|\s+"
_CHUNK = re.compile(CHUNK_PATTERN)


def pretokenize(text: str) -> list[str]:
    """Cut ``text`` into the chunks that BPE works inside; ``"".join(chunks) == text``.

    >>> pretokenize("3rd of March, 1994")
    ['3', 'rd', ' of', ' March', ',', ' 1', '9', '9', '4']
    """
    return _CHUNK.findall(text)


def word_counts(texts) -> dict[tuple[int, ...], int]:
    """How often each chunk occurs in ``texts``, as a tuple of byte ids -> count.

    BPE only needs these counts: a chunk that occurs 1000 times is merged the same way
    every time, so it is stored once with its count.
    """
    counts = Counter(chunk for text in texts for chunk in pretokenize(text))
    return {tuple(BYTE_OFFSET + b for b in chunk.encode("utf-8")): n for chunk, n in counts.items()}


def merge_pair(word: tuple[int, ...], pair: tuple[int, int], new_id: int) -> tuple[int, ...]:
    """``word`` with every occurrence of ``pair``, scanned left to right, replaced by ``new_id``."""
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def pair_counts(words: dict[tuple[int, ...], int]) -> Counter:
    """How often each adjacent pair of ids occurs, each word weighted by its count."""
    counts = Counter()
    for word, n in words.items():
        for pair in zip(word, word[1:]):
            counts[pair] += n
    return counts


def learn_merges_naive(words: dict[tuple[int, ...], int], n_merges: int,
                       first_id: int = FIRST_MERGE_ID) -> list[tuple[int, int]]:
    """The plain BPE loop: recount every pair, merge the winner, repeat ``n_merges`` times.

    words: chunk (tuple of ids) -> count, as from ``word_counts``. Merge i creates the id
    ``first_id + i``. Stops early when no word has two tokens left. Returns the merged
    pairs in the order they were learned. Each merge costs a pass over the whole corpus.
    """
    merges = []
    for new_id in range(first_id, first_id + n_merges):
        counts = pair_counts(words)
        if not counts:
            break
        best = min(counts, key=lambda pair: (-counts[pair], pair))  # ties: smallest pair
        merges.append(best)
        words = {merge_pair(word, best, new_id): n for word, n in words.items()}
    return merges


def learn_merges(words: dict[tuple[int, ...], int], n_merges: int,
                 first_id: int = FIRST_MERGE_ID) -> list[tuple[int, int]]:
    """The same merges as ``learn_merges_naive``, with pair counts updated incrementally.

    Only the words that contain the merged pair change, so only their pairs are recounted:
    ``where[pair]`` remembers which words hold a pair, and a heap of (-count, pair) finds
    the winner (entries whose count has changed since they were pushed are skipped).
    """
    vocab = [list(w) for w in words]  # word index -> its current tokens
    freq = list(words.values())
    counts, where = Counter(), defaultdict(set)
    for i, word in enumerate(vocab):
        for pair in zip(word, word[1:]):
            counts[pair] += freq[i]
            where[pair].add(i)
    heap = [(-n, pair) for pair, n in counts.items()]
    heapq.heapify(heap)
    merges = []
    for new_id in range(first_id, first_id + n_merges):
        while heap and heap[0][0] != -counts.get(heap[0][1], 0):
            heapq.heappop(heap)  # stale entry: its count changed after it was pushed
        if not heap:
            break
        best = heapq.heappop(heap)[1]
        merges.append(best)
        changed = set()
        for i in where.pop(best):
            word = vocab[i]
            for pair in zip(word, word[1:]):  # take the old pairs out ...
                counts[pair] -= freq[i]
                changed.add(pair)
            vocab[i] = word = list(merge_pair(tuple(word), best, new_id))
            for pair in zip(word, word[1:]):  # ... and put the new ones in
                counts[pair] += freq[i]
                where[pair].add(i)
                changed.add(pair)
        for pair in changed:
            if counts[pair] > 0:
                heapq.heappush(heap, (-counts[pair], pair))
            else:
                del counts[pair]
    return merges


@dataclass
class BPETokenizer:
    """Byte-level BPE with the special tokens <pad> <s> </s>; one vocabulary for all text.

    ``merges[i]`` is the pair of ids that id ``FIRST_MERGE_ID + i`` stands for.
    ``decode(encode(s)) == s`` for every string ``s`` (any character, seen or not).
    """

    merges: tuple[tuple[int, int], ...]
    _rank: dict = field(init=False, repr=False, compare=False)
    _bytes: list = field(init=False, repr=False, compare=False)
    _cache: dict = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        self.merges = tuple((int(a), int(b)) for a, b in self.merges)
        self._rank = {pair: i for i, pair in enumerate(self.merges)}
        self._bytes = [b""] * BYTE_OFFSET + [bytes([b]) for b in range(256)]
        for a, b in self.merges:
            self._bytes.append(self._bytes[a] + self._bytes[b])
        self._cache = {}  # chunk -> ids: a corpus repeats its chunks many times

    @classmethod
    def train(cls, texts, vocab_size: int) -> "BPETokenizer":
        """Learn ``vocab_size - FIRST_MERGE_ID`` merges from ``texts`` (source and target)."""
        n_merges = vocab_size - FIRST_MERGE_ID
        if n_merges < 0:
            raise ValueError(f"vocab_size must be at least {FIRST_MERGE_ID} (specials + bytes)")
        return cls(tuple(learn_merges(word_counts(texts), n_merges)))

    @property
    def vocab_size(self) -> int:
        return FIRST_MERGE_ID + len(self.merges)

    def token_bytes(self, token: int) -> bytes:
        """The bytes that ``token`` stands for (b"" for a special token)."""
        return self._bytes[token]

    def encode_chunk(self, chunk: str) -> tuple[int, ...]:
        """One chunk -> ids: apply the merges in the order they were learned.

        Repeatedly merge the adjacent pair that was learned *earliest*, until no learned
        pair is left; the result is the same as replaying every merge in order.
        """
        if chunk not in self._cache:
            rank, never = self._rank, len(self._rank)
            word = tuple(BYTE_OFFSET + b for b in chunk.encode("utf-8"))
            while len(word) > 1:
                pair = min(zip(word, word[1:]), key=lambda p: rank.get(p, never))
                if pair not in rank:
                    break
                word = merge_pair(word, pair, FIRST_MERGE_ID + rank[pair])
            self._cache[chunk] = word
        return self._cache[chunk]

    def encode(self, text: str) -> list[int]:
        """``text`` -> token ids (no start or end token; add them where they are needed)."""
        return [t for chunk in pretokenize(text) for t in self.encode_chunk(chunk)]

    def decode(self, ids) -> str:
        """Token ids (list, numpy array or tensor) -> text; special tokens are left out.

        Invalid UTF-8 (possible when a model emits bytes in a bad order) becomes U+FFFD.
        """
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        return b"".join(self._bytes[int(i)] for i in ids).decode("utf-8", errors="replace")

    def tokens(self, text: str) -> list[str]:
        """The pieces ``text`` is cut into, as strings, for display."""
        return [self.token_bytes(t).decode("utf-8", errors="replace") for t in self.encode(text)]
