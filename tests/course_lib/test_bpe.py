"""Byte-pair encoding in course_lib.tokenize: round trip, tie rule, incremental == naive."""
import random
import sys

import pytest

from course_lib import tokenize as tk
from course_lib.data import generated_text
from course_lib.translation import make_splits
from helpers import REPO


def _random_text(rng: random.Random, n: int) -> str:
    """n characters from all of Unicode (no surrogates), with ASCII, spaces and digits
    over-represented so that chunks of every kind occur."""
    pools = [lambda: rng.choice("abcdefghij XYZ,.-'_0123456789\n\t"),
             lambda: chr(rng.randrange(0x80, 0x800)),
             lambda: chr(rng.choice([rng.randrange(0x800, 0xD800),
                                     rng.randrange(0xE000, 0x110000)]))]
    return "".join(rng.choice(pools)() for _ in range(n))


@pytest.fixture(scope="module")
def tokenizer():
    texts = [t for pair in make_splits(n_train=2000, n_val=10, n_test=10).train for t in pair]
    return tk.BPETokenizer.train(texts + ["Grüße aus Köln, 東京 2024"], vocab_size=400)


def test_pretokenize_cuts_into_chunks_that_join_back():
    rng = random.Random(1)
    for _ in range(200):
        s = _random_text(rng, rng.randrange(0, 40))
        assert "".join(tk.pretokenize(s)) == s
    assert tk.pretokenize("3rd of March, 1994") == [
        "3", "rd", " of", " March", ",", " 1", "9", "9", "4"]


def test_round_trip_on_random_unicode_strings(tokenizer):
    rng = random.Random(0)
    for _ in range(300):
        s = _random_text(rng, rng.randrange(0, 60))
        ids = tokenizer.encode(s)
        assert all(0 <= i < tokenizer.vocab_size for i in ids)
        assert tokenizer.decode(ids) == s


def test_unseen_characters_fall_back_to_bytes(tokenizer):
    ids = tokenizer.encode("🦜")
    assert ids == [tk.BYTE_OFFSET + b for b in "🦜".encode("utf-8")]
    assert tokenizer.decode(ids) == "🦜"


def test_special_tokens_decode_to_nothing(tokenizer):
    ids = [tk.BOS] + tokenizer.encode("March 3, 1994") + [tk.EOS, tk.PAD, tk.PAD]
    assert tokenizer.decode(ids) == "March 3, 1994"
    assert (tk.PAD, tk.BOS, tk.EOS) == (0, 1, 2)


def test_merges_compress_the_training_text(tokenizer):
    assert tokenizer.tokens(" March") == [" March"]
    assert len(tokenizer.encode("the twenty-first of November, 2004")) < 20


def test_encoding_replays_the_merges_in_order():
    # merges: (a, b) -> x, then (b, c) -> y. "abc": a+b merges first, so c stays alone;
    # applying (b, c) first would give a, y: the order of the merges matters
    a, b, c = (tk.BYTE_OFFSET + ord(ch) for ch in "abc")
    x = tk.FIRST_MERGE_ID
    tok = tk.BPETokenizer(((a, b), (b, c)))
    assert tok.encode("abc") == [x, c]
    assert tk.BPETokenizer(((b, c), (a, b))).encode("abc") == [a, x]


def test_ties_go_to_the_smallest_pair():
    a, b, c, d = (tk.BYTE_OFFSET + ord(ch) for ch in "abcd")
    # (c, d) and (a, b) occur 3 times each: (a, b) is the smaller pair, so it merges first
    words = {(c, d): 3, (a, b): 2, (b, a, b): 1}
    for learn in (tk.learn_merges_naive, tk.learn_merges):
        merges = learn(words, 2)
        assert merges[0] == (a, b)
        assert merges[1] == (c, d)
    # (b, a) and (a, b) both occur twice in "abab": (a, b) < (b, a)
    assert tk.learn_merges_naive({(a, b, a, b): 1}, 1) == [(a, b)]


def test_a_run_of_one_token_is_merged_left_to_right():
    a = tk.BYTE_OFFSET + ord("a")
    assert tk.merge_pair((a, a, a), (a, a), 999) == (999, a)
    words = {(a,) * 5: 1}
    assert tk.learn_merges(words, 4) == tk.learn_merges_naive(words, 4)


def _corpora():
    splits = make_splits(n_train=3000, n_val=10, n_test=10, seed=3)
    rng = random.Random(5)
    return {
        "dates": [t for pair in splits.train for t in pair],
        "play": generated_text(30_000, seed=2).split("\n"),
        "random unicode": [_random_text(rng, 30) for _ in range(300)],
        "repeats": ["aaaa aaa bbbbbb abab ababab " * 3, "aa bb aabb"],
    }


@pytest.mark.parametrize("name", list(_corpora()))
def test_incremental_merges_equal_naive_merges(name):
    words = tk.word_counts(_corpora()[name])
    assert tk.learn_merges(words, 150) == tk.learn_merges_naive(words, 150)


def test_learning_stops_when_every_word_is_one_token():
    words = tk.word_counts(["ab ab"])  # chunks "ab" and " ab": merge a+b, then " "+ab
    assert len(tk.learn_merges(words, 50)) == len(tk.learn_merges_naive(words, 50)) == 2


def test_vocab_size_counts_specials_bytes_and_merges(tokenizer):
    assert tokenizer.vocab_size == tk.FIRST_MERGE_ID + len(tokenizer.merges) <= 400
    assert tk.BPETokenizer.train(["abc"], tk.FIRST_MERGE_ID).merges == ()
    with pytest.raises(ValueError):
        tk.BPETokenizer.train(["abc"], 10)


def test_the_benchmarks_baseline_learns_byte_pairs_the_course_can_read():
    """``benchmarks/bpe.py`` times Hugging Face's BPE trainer against the course's learner: its
    merges, written in GPT-2's byte-level alphabet, come back as the bytes they stand for, and
    while one pair is more frequent than all others, both learn the same one (ties, the count-2
    pairs here, each breaks its own way)."""
    pytest.importorskip("tokenizers", reason="the dev extra installs tokenizers")
    from tokenizers.pre_tokenizers import ByteLevel

    sys.path.insert(0, str(REPO / "benchmarks"))
    import bpe as benchmark

    byte_of = benchmark._byte_of_symbol()
    assert set(byte_of) == set(ByteLevel.alphabet()) and sorted(byte_of.values()) == list(range(256))
    texts = ["ééé"] * 9 + ["ab"] * 4 + ["☀ x"] * 2
    ours = benchmark.course_pairs(tk.learn_merges(tk.word_counts(texts), 6))
    theirs = benchmark.tokenizers_merges(texts, len(ours))
    e_acute = "é".encode()  # two bytes
    assert ours[:4] == theirs[:4] == [(e_acute[:1], e_acute[1:]), (e_acute, e_acute),
                                      (2 * e_acute, e_acute), (b"a", b"b")]
    assert len(theirs) == len(ours) == 6
