"""Exercises of notebook 05 (encoder-decoder Transformer) [trusted; also the check cell]

In the notebook's order: byte-pair encoding (learn merges, encode a chunk), teacher forcing
(decoder input and target), the three attention masks, the scaled embedding, the encoder
and decoder blocks, greedy decoding and beam search. Ids are int64, every float is float64.

Greedy and beam search take a function ``next_log_probs``, which cannot travel to the
kernel: their cases hold a table ``logp`` (max_len + 1, V, V) of log p(next | step, last
token) instead, and ``calls.markov_decoder`` turns it into that function there. The
references below run on the same ``calls.table_model``.
"""
from __future__ import annotations

import numpy as np

from autograder.judge.exercise import Exercise, Mistake, any_of, switchable
from autograder.judge.features import shape_features
from autograder.kernel.calls import table_model
from autograder.kernel.transport import as_outputs
from course_lib.attention import causal_mask, mha_forward
from course_lib.decoding import beam_search, greedy_decode
from course_lib.layernorm import ffn_forward, layernorm_forward
from course_lib.positional import sinusoidal_encoding
from course_lib.tokenize import BYTE_OFFSET, FIRST_MERGE_ID, learn_merges_naive, merge_pair
from course_lib.transformer import attention_masks, decoder_block, encoder_block, padding_keys

FORBIDDEN = ("course_lib.tokenize", "course_lib.transformer", "course_lib.generate",
             "course_lib.decoding", "course_lib.translation")


# ============================================================================ shared
# Mutants that no legitimate input tells from the reference (autograder.exercises.adequacy). The swaps of
# np.swapaxes's two axes (symmetric) are left out on purpose: a mutant the engine should not make.
_PY_INTS = "numpy makes an int64 array of a list of Python ints without dtype= too; only an empty list "


# ============================================================================ byte-pair encoding
def _letters(n):
    """Byte ids of the first n lower-case letters: 'a' is 3 + 97."""
    return BYTE_OFFSET + ord("a") + np.arange(n)


def _corpus(rng, n_words, n_letters, longest=6):
    """Distinct chunks (1-D arrays of byte ids, some runs like 'aaaa') and their counts."""
    alphabet, words = _letters(n_letters), []
    while len(words) < n_words:
        length = int(rng.integers(1, longest + 1))
        word = np.repeat(rng.choice(alphabet), length) if rng.random() < 0.2 else \
            rng.choice(alphabet, size=length)
        if not any(np.array_equal(word, w) for w in words):
            words.append(word.astype(np.int64))
    return words, rng.integers(1, 7, size=n_words)


def _merge_case(rng, n_words, n_letters, n_merges, first_id=FIRST_MERGE_ID):
    words, counts = _corpus(rng, n_words, n_letters)
    return {"words": words, "counts": counts, "n_merges": n_merges, "first_id": first_id}


def _singles_case(rng):
    """Every chunk one token long: no pair to merge at all, merges of shape (0, 2)."""
    letters = rng.permutation(_letters(6))[:4]
    return {"words": [np.array([t], dtype=np.int64) for t in letters], "counts": rng.integers(1, 7, size=4),
            "n_merges": 3, "first_id": FIRST_MERGE_ID}


def _runs_case(rng):
    """Odd runs ('aaa', 'baaa') weigh most: merging (a, a) from the left gives (X, a), from
    the right (a, X), and the next merges differ (the text's rule: left to right)."""
    a, b = _letters(2)
    words = [np.full(3, a), np.full(5, a), np.array([a, a, b]), np.array([b, a, a, a])]
    return {"words": words, "counts": rng.integers(3, 7, size=4), "n_merges": 4,
            "first_id": FIRST_MERGE_ID}


def _merge_cases(rng, hidden):
    if not hidden:
        return [_merge_case(rng, 6, 3, 4), _merge_case(rng, 10, 4, 6),
                _merge_case(rng, 2, 2, 12, first_id=300),  # runs out of pairs: stops early
                _runs_case(rng), _singles_case(rng)]
    return [_merge_case(rng, 12, 3, 8), _merge_case(rng, 20, 5, 12),
            _merge_case(rng, 3, 2, 15, first_id=int(rng.integers(260, 400))),
            _merge_case(rng, 8, 4, 1), _merge_case(rng, 15, 3, 10, first_id=1000), _singles_case(rng)]


def _as_dict(words, counts):
    return {tuple(int(t) for t in w): int(c) for w, c in zip(words, counts)}


def _as_merges(pairs):
    return np.array(pairs, dtype=np.int64).reshape(-1, 2)


def learn_merges(words, counts, n_merges, first_id=FIRST_MERGE_ID):
    """words: list of 1-D int arrays (distinct chunks), counts (len(words),) -> merges (n_pairs, 2).

    The most frequent adjacent pair (each chunk weighted by its count; 'aaa' holds (a, a)
    twice), ties to the smallest pair, is merged left to right into id first_id + i; stops
    early when no chunk has two tokens left."""
    return _as_merges(learn_merges_naive(_as_dict(words, counts), n_merges, first_id))


def _learn_with(pick, weighted=True, distinct=False, merge=merge_pair):
    """The BPE loop with one step changed: ``pick(pair_counts)`` chooses the pair,
    ``merge(word, pair, new_id)`` merges it."""
    def wrong(words, counts, n_merges, first_id=FIRST_MERGE_ID):
        vocab, merges = _as_dict(words, counts if weighted else np.ones(len(words))), []
        for new_id in range(first_id, first_id + n_merges):
            pairs = {}
            for word, n in vocab.items():
                adjacent = list(zip(word, word[1:]))
                for pair in dict.fromkeys(adjacent) if distinct else adjacent:
                    pairs[pair] = pairs.get(pair, 0) + n
            if not pairs:
                break
            best = pick(pairs)
            merges.append(best)
            vocab = {merge(word, best, new_id): n for word, n in vocab.items()}
        return _as_merges(merges)
    return wrong


def _smallest(pairs):
    return min(pairs, key=lambda p: (-pairs[p], p))


def _merge_from_the_right(word, pair, new_id):
    """``merge_pair`` scanning right to left: 'aaa' with (a, a) gives (a, X)."""
    return tuple(reversed(merge_pair(tuple(reversed(word)), pair[::-1], new_id)))


MERGE_MISTAKES = (
    Mistake(name="BPE ties broken the other way (largest pair)",
            hint="when several pairs are equally frequent, take the smallest: "
                 "min(counts, key=lambda pair: (-counts[pair], pair)).",
            wrong=_learn_with(lambda pairs: max(pairs, key=lambda p: (pairs[p], p)))),
    Mistake(name="BPE ties broken by first occurrence",
            hint="max(counts, key=counts.get) keeps the pair seen first; the rule is the smallest "
                 "pair among the most frequent: min(counts, key=lambda pair: (-counts[pair], pair)).",
            wrong=_learn_with(lambda pairs: max(pairs, key=pairs.get))),
    Mistake(name="BPE counts ignored (each chunk counted once)",
            hint="a chunk that occurs n times contributes n to each of its pairs: weight by counts[i].",
            wrong=_learn_with(_smallest, weighted=False)),
    Mistake(name="a repeated pair counted once per chunk",
            hint="count every adjacent position: 'aaa' holds the pair (a, a) twice.",
            wrong=_learn_with(_smallest, distinct=True)),
    Mistake(name="chunks merged from the right",
            hint="scan each chunk left to right, merging a pair where it starts: 'aaa' with (a, a) "
                 "becomes (X, a), not (a, X).", wrong=_learn_with(_smallest, merge=_merge_from_the_right)),
)


_NP_INT = "numpy int64 ids and counts hash, compare and add as Python ints do: same merges, same ids"
MERGE_EQUIVALENT = {"_as_dict: int(c) -> c": _NP_INT, "_as_dict: int(t) -> t": _NP_INT}

BPE_FEATURES = shape_features(**{
    "first_id other than 259": lambda c: c["first_id"] != FIRST_MERGE_ID,
    "no pair at all (every chunk one token)":
        lambda c: "words" in c and all(len(w) == 1 for w in c["words"]),
    "more merges asked than pairs left (stops early)":
        lambda c: "n_merges" in c and len(learn_merges(**c)) < c["n_merges"],
    "a byte never seen in training": lambda c: "ids" in c and (c["ids"] > BYTE_OFFSET + 127).any(),
    "a single byte": lambda c: "ids" in c and len(c["ids"]) == 1})

BPE_MERGES = Exercise(
    id="encdec.bpe_merges",
    search_sites=3600,  # benchmarks/repair_search.py: about 3 s of edits
    function="learn_merges",
    signature="learn_merges(words, counts, n_merges, first_id=259) -> merges (n_pairs, 2) int",
    cases=_merge_cases,
    reference=learn_merges,
    points=2,
    output_names=("merges",),
    axes={"merges": ("merge i (new id first_id + i)", "the pair (left, right)")},
    forbidden=FORBIDDEN,
    features=BPE_FEATURES,
    equivalent=MERGE_EQUIVALENT,
    mistakes=MERGE_MISTAKES,
)


def _encode_cases(rng, hidden):
    cases = []
    for n_letters, n_merges in ((3, 6), (4, 8)) if not hidden else ((3, 10), (5, 12), (2, 5)):
        words, counts = _corpus(rng, 3 * n_letters, n_letters)
        merges = learn_merges(words, counts, n_merges)
        frequent = words[int(np.argmax(counts * np.array([len(w) for w in words])))]
        unseen = BYTE_OFFSET + np.array([0xC3, 0xA9])  # 'é', two bytes no chunk holds
        cases += [{"ids": np.concatenate([frequent, frequent]), "merges": merges},
                  {"ids": np.concatenate([rng.choice(_letters(n_letters), 5), unseen,
                                          words[int(rng.integers(len(words)))]]), "merges": merges}]
    cases.append({"ids": _letters(1), "merges": cases[0]["merges"]})  # one byte: nothing to merge
    if not hidden:
        words, counts = _corpus(rng, 6, 3)
        cases.append({"ids": np.concatenate(words[:3]),
                      "merges": learn_merges(words, counts, 5, first_id=400), "first_id": 400})
    return [{"first_id": FIRST_MERGE_ID, **c} for c in cases]


def bpe_encode(ids, merges, first_id=FIRST_MERGE_ID):
    """ids (L,) int, merges (n_pairs, 2) -> ids (L',): merge 0 everywhere (left to right), then
    merge 1, ..., as ``BPETokenizer.encode_chunk`` does."""
    word = tuple(int(t) for t in ids)
    for i, pair in enumerate(map(tuple, merges.tolist())):
        word = merge_pair(word, pair, first_id + i)
    return np.array(word, dtype=np.int64)


def _bpe_encode_with(ids, merges, first_id=FIRST_MERGE_ID, *, reverse=False, once=False):
    """``bpe_encode`` with a mistake: merges replayed last first, each merge applied at its
    first occurrence only (the reference is kept free of these switches, so that its mutants
    are the learner's)."""
    word, order = tuple(int(t) for t in ids), list(enumerate(map(tuple, merges.tolist())))
    for i, pair in order[::-1] if reverse else order:
        pairs = list(zip(word, word[1:]))
        if not once:
            word = merge_pair(word, pair, first_id + i)
        elif pair in pairs:
            at = pairs.index(pair)
            word = word[:at] + (first_id + i,) + word[at + 2:]
    return np.array(word, dtype=np.int64)


def _encode_with(**mistake):
    return lambda ids, merges, first_id=FIRST_MERGE_ID: _bpe_encode_with(
        ids, merges, first_id, **mistake)


ENCODE_MISTAKES = (
    Mistake(name="merges applied in the wrong order (reversed)",
            hint="replay the merges in the order they were learned, merge 0 first: a later merge "
                 "joins tokens that earlier merges create.", wrong=_encode_with(reverse=True)),
    Mistake(name="each merge applied only once per chunk",
            hint="replace *every* occurrence of the pair, scanning left to right, before moving to "
                 "the next merge.", wrong=_encode_with(once=True)),
)
ENCODE_EQUIVALENT = {"bpe_encode: int(t) -> t": _NP_INT,
                     "bpe_encode: np.array(word, dtype=np.int64) -> np.array(word)":
                         _PY_INTS + "would differ, and every case has at least one id"}

BPE_ENCODE = Exercise(
    id="encdec.bpe_encode",
    search_sites=2400,  # benchmarks/repair_search.py: about 3 s of edits
    function="bpe_encode",
    signature="bpe_encode(ids, merges, first_id=259) -> ids (1-D int)",
    cases=_encode_cases,
    reference=bpe_encode,
    points=1,
    output_names=("ids",),
    forbidden=FORBIDDEN,
    features=BPE_FEATURES,
    equivalent=ENCODE_EQUIVALENT,
    mistakes=ENCODE_MISTAKES,
)


# ============================================================================ teacher forcing
def _shift_cases(rng, hidden):
    lengths = (5, 1, 8, 0, 3) if hidden else (4, 0, 1, 6)
    cases = [{"target_ids": rng.integers(3, 60, size=n), "bos": 1, "eos": 2} for n in lengths]
    cases[-1].update(bos=int(rng.integers(60, 80)), eos=int(rng.integers(80, 99)))
    return cases


def _ids(*parts):
    return np.concatenate([np.atleast_1d(p) for p in parts]).astype(np.int64)


def _shift_reference(target_ids, bos=1, eos=2):
    """course_lib.translation.decoder_input_and_target with the start and end ids given."""
    return _ids(bos, target_ids), _ids(target_ids, eos)


SHIFT_MISTAKES = (
    Mistake(name="target not shifted", hint="the decoder input must not contain the token it is asked "
            "to predict: tgt_in = [bos] + target, tgt_out = target + [eos].",
            wrong=lambda target_ids, bos=1, eos=2: (_ids(target_ids, eos), _ids(target_ids, eos))),
    Mistake(name="decoder input and target swapped",
            hint="the decoder reads [bos] + target and predicts target + [eos].",
            wrong=lambda target_ids, bos=1, eos=2: (_ids(target_ids, eos), _ids(bos, target_ids))),
    Mistake(name="start token missing",
            hint="the decoder input begins with bos: tgt_in = [bos] + target.",
            wrong=lambda target_ids, bos=1, eos=2: (_ids(target_ids), _ids(target_ids, eos))),
    Mistake(name="end token missing", hint="the target ends with eos, so the model learns to stop: "
            "tgt_out = target + [eos].",
            wrong=lambda target_ids, bos=1, eos=2: (_ids(bos, target_ids), _ids(target_ids))),
    Mistake(name="start and end tokens swapped", hint="bos opens the decoder input, eos closes the target.",
            wrong=lambda target_ids, bos=1, eos=2: (_ids(eos, target_ids), _ids(target_ids, bos))),
    Mistake(name="start and end ids hard-coded",
            hint="use the arguments bos and eos, not the numbers 1 and 2.",
            wrong=lambda target_ids, bos=1, eos=2: _shift_reference(target_ids)),
    Mistake(name="shifted within the target's own length",
            hint="both sequences are one longer than the target: tgt_in = [bos] + target reads the "
                 "last target token too, and tgt_out = target + [eos] ends with eos.",
            wrong=lambda target_ids, bos=1, eos=2: (_ids(bos, np.asarray(target_ids)[:-1]),
                                                    _ids(target_ids))),
)
SHIFT_FEATURES = shape_features(**{
    "an empty target": lambda c: len(c["target_ids"]) == 0,
    "a one-token target": lambda c: len(c["target_ids"]) == 1,
    "bos and eos other than 1 and 2": lambda c: (c["bos"], c["eos"]) != (1, 2)})
SHIFT_RIGHT = Exercise(
    id="encdec.shift_right",
    function="decoder_input_and_target",
    signature="decoder_input_and_target(target_ids, bos=1, eos=2) -> (tgt_in, tgt_out)",
    cases=_shift_cases,
    reference=_shift_reference,
    points=1,
    output_names=("tgt_in", "tgt_out"),
    forbidden=FORBIDDEN,
    features=SHIFT_FEATURES,
    mistakes=SHIFT_MISTAKES,
)


# ============================================================================ masks
def _ids_with_padding(rng, B, T, pad_id, full_row=True):
    """(B, T) ids, row b padded with pad_id after a random length >= 1; row 0 unpadded
    (unless not ``full_row``), the last row padded when B > 1 and T > 1."""
    ids = rng.integers(0, 40, size=(B, T))
    ids[ids >= pad_id] += 1  # real tokens are never pad_id
    lengths = rng.integers(1, T + 1, size=B)
    lengths[0] = T if full_row else lengths[0]
    if B > 1 and T > 1:
        lengths[-1] = rng.integers(1, T)
    ids[np.arange(T)[None, :] >= lengths[:, None]] = pad_id
    return ids


def _mask_case(rng, B, S, T, pad_id=0, left=False):
    """``left``: the padding before the tokens, as some batchers put it (the masks must not
    assume it comes last: a padded query that still sees its real keys is then told apart)."""
    src, tgt = (_ids_with_padding(rng, B, n, pad_id) for n in (S, T))
    if left:
        src, tgt = src[:, ::-1].copy(), tgt[:, ::-1].copy()
    return {"src": src, "tgt_in": tgt, "pad_id": pad_id}


def _mask_cases(rng, hidden):
    if not hidden:
        return [_mask_case(rng, 2, 5, 4), _mask_case(rng, 3, 4, 4),
                _mask_case(rng, 2, 3, 6, pad_id=int(rng.integers(1, 30))), _mask_case(rng, 1, 1, 1),
                _mask_case(rng, 2, 4, 5, left=True)]
    return [_mask_case(rng, 3, 6, 6), _mask_case(rng, 2, 7, 3), _mask_case(rng, 1, 1, 1),
            _mask_case(rng, 4, 5, 5, pad_id=int(rng.integers(1, 30))), _mask_case(rng, 2, 3, 8),
            _mask_case(rng, 3, 5, 6, left=True)]


def _masks(src, tgt_in, pad_id=0):
    return tuple(np.asarray(m) for m in attention_masks(src, tgt_in, pad_id))


def _full(case, masks):
    """The masks broadcast to (B, 1, T_q, T_k): enc (T_src, T_src), cross (T, T_src), dec (T, T)."""
    (B, S), T = case["src"].shape, case["tgt_in"].shape[1]
    return tuple(np.broadcast_to(m, shape) for m, shape in
                 zip(masks, ((B, 1, S, S), (B, 1, T, S), (B, 1, T, T))))


def _same_masks(case, got, want):
    return len(got) == 3 and all(np.array_equal(g, w)
                                 for g, w in zip(_full(case, got), _full(case, want)))


def _mask_mistake(name, hint, wrong):
    """Recognised whatever the shape, as long as it broadcasts to the same masks."""
    return Mistake(name=name, hint=hint, wrong=wrong,
                   detect=lambda case, got, want: _same_masks(case, got, as_outputs(wrong(**case))))


def _keys(ids, pad_id):
    return padding_keys(ids, pad_id)  # (B, 1, 1, T), True for real tokens


def _dec_masks(dec):
    """A mistake in the decoder's mask only: dec(src, tgt_in, pad_id) -> (B, 1, T, T)."""
    def wrong(src, tgt_in, pad_id=0):
        enc, cross, _ = _masks(src, tgt_in, pad_id)
        B, T = tgt_in.shape
        return enc, cross, np.broadcast_to(dec(src, tgt_in, pad_id), (B, 1, T, T))
    return wrong


def _causal(ids):
    return causal_mask(ids.shape[1])


MASK_MISTAKES = (
    Mistake(name="masks right, shapes wrong",
            hint="return the shapes of the signature: enc_mask and cross_mask (B, 1, 1, T_src), "
                 "dec_mask (B, 1, T, T), so that they broadcast over heads (and over queries).",
            wrong=lambda **c: _full(c, _masks(**c)), detect=_same_masks),
    _mask_mistake("causal mask missing in the decoder",
                  "decoder position t must not see positions after t: combine the target's "
                  "padding mask with a lower-triangular (T, T) mask.",
                  _dec_masks(lambda s, t, pad: _keys(t, pad))),
    _mask_mistake("target padding ignored",
                  "the decoder's self-attention must not look at <pad> in tgt_in either: "
                  "combine (tgt_in != pad_id) with the causal mask.",
                  _dec_masks(lambda s, t, pad: _causal(t))),
    _mask_mistake("source padding mask applied to decoder self-attention",
                  "the decoder attends to itself over tgt_in: its padding comes from tgt_in, "
                  "not src.", _dec_masks(lambda s, t, pad: _keys(s, pad) & _causal(t))),
    _mask_mistake("causal mask transposed (upper triangle)",
                  "row t is query t and may see columns j <= t: np.tril, not np.triu.",
                  _dec_masks(lambda s, t, pad: _keys(t, pad) & _causal(t).T)),
    _mask_mistake("padding mask inverted",
                  "True means 'may attend': real tokens are ids != pad_id.",
                  lambda src, tgt_in, pad_id=0: (~_keys(src, pad_id), ~_keys(src, pad_id),
                                                 ~_keys(tgt_in, pad_id) & _causal(tgt_in))),
    _mask_mistake("padding masks the queries instead of the keys",
                  "padding hides *keys*, the last axis: (ids != pad_id)[:, None, None, :].",
                  lambda src, tgt_in, pad_id=0: (
                      _keys(src, pad_id).swapaxes(-1, -2), _keys(tgt_in, pad_id).swapaxes(-1, -2),
                      _keys(tgt_in, pad_id).swapaxes(-1, -2) & _causal(tgt_in))),
    _mask_mistake("pad_id ignored (0 used)", "compare the ids with the pad_id argument.",
                  lambda src, tgt_in, pad_id=0: _masks(src, tgt_in, 0)),
)
MASK_FEATURES = shape_features(**{
    "T_src ≠ T": lambda c: c["src"].shape[1] != c["tgt_in"].shape[1],
    "padding in the source": lambda c: (c["src"] == c["pad_id"]).any(),
    "padding in the target": lambda c: (c["tgt_in"] == c["pad_id"]).any(),
    "pad_id other than 0": lambda c: c["pad_id"] != 0,
    "padding before the tokens": lambda c: (c["tgt_in"][:, 0] == c["pad_id"]).any(),
    "a single sequence (B = 1)": lambda c: len(c["src"]) == 1,
    "T_src = T = 1": lambda c: c["src"].shape[1] == c["tgt_in"].shape[1] == 1})
_SQUARE = "the decoder's mask is causal_mask(T) with one argument: T_q and T_k are the same number"
MASK_EQUIVALENT = {
    "attention_masks: padding_keys(src, pad_id) -> padding_keys(pad_id, src)":
        "padding_keys computes ids != pad_id, and != is symmetric",
    "attention_masks: padding_keys(tgt_in, pad_id) -> padding_keys(pad_id, tgt_in)":
        "padding_keys computes ids != pad_id, and != is symmetric",
    **{f"causal_mask: {m}": _SQUARE for m in (
        "T_k - T_q -> T_q - T_k", "T_q -> T_k in `return …`", "T_k -> T_q in `return …`",
        "T_k -> T_q in `return …` #2", "T_q -> T_k in `return …` #2")}}

MASKS = Exercise(
    id="encdec.masks",
    function="attention_masks",
    signature="attention_masks(src, tgt_in, pad_id=0) -> (enc_mask (B, 1, 1, T_src), "
              "cross_mask (B, 1, 1, T_src), dec_mask (B, 1, T, T))",
    cases=_mask_cases,
    reference=_masks,
    points=2,
    output_names=("enc_mask", "cross_mask", "dec_mask"),
    axes={"enc_mask": ("1 (every query)", "T_src (keys)"),
          "cross_mask": ("1 (every query)", "T_src (keys)"),
          "dec_mask": ("T (queries)", "T (keys)")},
    forbidden=FORBIDDEN,
    features=MASK_FEATURES,
    equivalent=MASK_EQUIVALENT,
    mistakes=MASK_MISTAKES,
)


# ============================================================================ embedding
def _embed_case(rng, B, T, vocab_size, d_model):
    return {"ids": rng.integers(0, vocab_size, size=(B, T)),
            "W_E": rng.normal(size=(vocab_size, d_model)) / np.sqrt(d_model),
            "P": sinusoidal_encoding(np.arange(T + int(rng.integers(1, 6))), d_model)}


def _embed_cases(rng, hidden):
    shapes = ((2, 5, 7, 4), (1, 1, 3, 2), (3, 4, 11, 8)) if not hidden else \
        ((2, 6, 9, 6), (1, 1, 4, 2), (4, 3, 20, 16), (1, 8, 5, 4))
    return [_embed_case(rng, *s) for s in shapes]


def embed(ids, W_E, P):
    """ids (B, T), W_E (vocab_size, d_model), P (max_len, d_model) -> (B, T, d_model)."""
    return W_E[ids] * np.sqrt(W_E.shape[1]) + P[:ids.shape[1]]


@switchable
def _embed_with(scale, positions=True, scale_positions=False):
    def wrong(ids, W_E, P):
        x = W_E[ids] + (P[:ids.shape[1]] if scale_positions else 0.0)
        x = x * scale(W_E.shape[1])
        return x + (P[:ids.shape[1]] if positions and not scale_positions else 0.0)
    return wrong


EMBED_MISTAKES = (
    Mistake(name="embedding not scaled by sqrt(d_model)",
            hint="multiply W_E[ids] by sqrt(d_model) before adding the positions (Week 7, §7, "
                 "\"Decoder stack\").",
            wrong=_embed_with(lambda d: 1.0)),
    Mistake(name="embedding scaled by d_model instead of sqrt(d_model)",
            hint="the factor is the square root: np.sqrt(d_model).", wrong=_embed_with(lambda d: d)),
    Mistake(name="embedding divided by sqrt(d_model)",
            hint="multiply by sqrt(d_model), do not divide.", wrong=_embed_with(lambda d: d ** -0.5)),
    Mistake(name="positions not added", hint="add the positional encoding of the first T positions, P[:T].",
            wrong=_embed_with(np.sqrt, positions=False)),
    Mistake(name="positions scaled by sqrt(d_model) too",
            hint="only the token embedding is scaled: W_E[ids] * sqrt(d_model) + P[:T].",
            wrong=_embed_with(np.sqrt, scale_positions=True)),
    Mistake(name="positions scaled instead of the token embedding",
            hint="the factor sqrt(d_model) belongs to the token embedding: W_E[ids] * sqrt(d_model) + P[:T].",
            wrong=lambda ids, W_E, P: W_E[ids] + P[:ids.shape[1]] * np.sqrt(W_E.shape[1])),
)
EMBED_FEATURES = shape_features(**{"a single position (T = 1)": lambda c: c["ids"].shape[1] == 1,
                                   "d_model = 2": lambda c: c["W_E"].shape[1] == 2})
EMBED = Exercise(
    id="encdec.embed",
    function="embed",
    signature="embed(ids, W_E, P) -> x (B, T, d_model)",
    cases=_embed_cases,
    reference=embed,
    points=1,
    output_names=("x",),
    axes={"x": ("T", "d_model")},
    forbidden=FORBIDDEN,
    features=EMBED_FEATURES,
    dims=lambda c: {"d_model": c["W_E"].shape[1]},
    mistakes=EMBED_MISTAKES,
)


# ============================================================================ blocks
def _attn_weights(rng, d):
    return tuple(rng.normal(size=(d, d)) / np.sqrt(d) for _ in range(4))  # W_q, W_k, W_v, W_o


def _block_params(rng, d, d_ff, decoder):
    p = {"self_attn": _attn_weights(rng, d),
         "ffn": (rng.normal(size=(d, d_ff)) / np.sqrt(d), rng.normal(size=d_ff) * 0.5,
                 rng.normal(size=(d_ff, d)) / np.sqrt(d_ff), rng.normal(size=d) * 0.5)}
    if decoder:
        p["cross_attn"] = _attn_weights(rng, d)
    for i in range(1, 4 if decoder else 3):
        p[f"norm{i}"] = (rng.normal(1.0, 0.3, size=d), rng.normal(0.0, 0.3, size=d))
    return p


def _encoder_case(rng, B, S, d, n_heads, masked=True):
    mask = _keys(_ids_with_padding(rng, B, S, 0, full_row=False), 0) if masked else None
    return {"x": rng.normal(size=(B, S, d)), "p": _block_params(rng, d, 2 * d, False),
            "n_heads": n_heads, "mask": mask}


def _encoder_cases(rng, hidden):
    if not hidden:
        return [_encoder_case(rng, 2, 5, 4, 2), _encoder_case(rng, 1, 3, 6, 1, masked=False),
                _encoder_case(rng, 3, 4, 8, 4)]
    return [_encoder_case(rng, 2, 6, 8, 2), _encoder_case(rng, 1, 2, 4, 1),
            _encoder_case(rng, 4, 3, 6, 3), _encoder_case(rng, 2, 5, 4, 2, masked=False)]


def _ln(x, norm):
    return layernorm_forward(x, *norm)[0]


def _mha(x_q, x_kv, weights, n_heads, mask):
    return mha_forward(x_q, x_kv, *weights, n_heads, mask)[0]


def _ffn(x, p):
    return ffn_forward(x, *p["ffn"])[0]


def _encoder_reference(x, p, n_heads, mask=None):
    return encoder_block(x, p, n_heads, mask)


@switchable
def _encoder_wired(residual=True, skip_from_input=False):
    """Post-LN encoder with the residual paths changed."""
    def wrong(x, p, n_heads, mask=None):
        h = _ln((x if residual else 0.0) + _mha(x, x, p["self_attn"], n_heads, mask), p["norm1"])
        skip = x if skip_from_input else h
        return _ln((skip if residual else 0.0) + _ffn(h, p), p["norm2"])
    return wrong


ENCODER_MISTAKES = (
    Mistake(name="encoder in Pre-LN order", hint="this block is Post-LN, as in the paper: "
            "h = LN(x + attention(x)), out = LN(h + FFN(h)).",
            wrong=lambda x, p, n_heads, mask=None: encoder_block(x, p, n_heads, mask, order="pre")),
    Mistake(name="encoder mask ignored", hint="pass mask to the self-attention so no query looks at "
            "source padding.", wrong=lambda x, p, n_heads, mask=None: encoder_block(x, p, n_heads)),
    Mistake(name="encoder mask inverted", hint="True in the mask means 'may attend'; pass it as it is.",
            wrong=lambda x, p, n_heads, mask=None:
                encoder_block(x, p, n_heads, None if mask is None else ~mask)),
    Mistake(name="residual connection missing", hint="each sublayer's input is added back before the "
            "norm: LN(x + sublayer(x)).", wrong=_encoder_wired(residual=False)),
    Mistake(name="second residual adds the block's input",
            hint="the FFN's residual is its own input h = LN(x + attention(x)): out = LN(h + FFN(h)).",
            wrong=_encoder_wired(skip_from_input=True)),
    Mistake(name="layer norms swapped", hint="norm1 follows the attention, norm2 the FFN.",
            wrong=lambda x, p, n_heads, mask=None: encoder_block(
                x, {**p, "norm1": p["norm2"], "norm2": p["norm1"]}, n_heads, mask)),
)


def _block_dims(c):
    x = c.get("x", c.get("y"))
    return {"d_model": x.shape[-1], "n_heads": c["n_heads"], "d_k": x.shape[-1] // c["n_heads"]}


BLOCK_FEATURES = shape_features(**{
    "one head": lambda c: c["n_heads"] == 1,
    "a single sequence (B = 1)": lambda c: len(c.get("x", c.get("y"))) == 1,
    "no mask": lambda c: "mask" in c and c["mask"] is None,
    "T_src ≠ T": lambda c: "memory" in c and c["memory"].shape[1] != c["y"].shape[1],
    "padding in the target": lambda c: "self_mask" in c and not c["self_mask"][:, :, -1].all()})

_FOUR_D = "the heads are 4-D here, (B, n_heads, T, d_k): axis 2 is axis -2, x.shape[:2] is x.shape[:-2]"
_SELF = "the encoder's self-attention: mha_forward gets the same h as x_q and as x_kv"
HEADS_EQUIVALENT = {m: _FOUR_D for m in ("attention_forward: -2 -> 2", "merge_heads: -2 -> 2 in `x = …`",
                                          "merge_heads: -2 -> 2 in `return …`", "split_heads: -2 -> 2")}
ENCODER_EQUIVALENT = {**{f"mha_forward: {m}": _SELF for m in ("x_q -> x_kv in `q = …`",
                                                              "x_kv -> x_q in `k = …`",
                                                              "x_kv -> x_q in `v = …`")},
                      **HEADS_EQUIVALENT}

ENCODER_BLOCK = Exercise(
    id="encdec.encoder_block",
    function="encoder_block",
    signature="encoder_block(x, p, n_heads, mask=None) -> out",
    cases=_encoder_cases,
    reference=_encoder_reference,
    points=2,
    output_names=("out",),
    axes={"out": ("T_src", "d_model")},
    forbidden=FORBIDDEN,
    features=BLOCK_FEATURES,
    dims=_block_dims,
    equivalent=ENCODER_EQUIVALENT,
    mistakes=ENCODER_MISTAKES,
)


def _decoder_case(rng, B, S, T, d, n_heads):
    _, cross_mask, self_mask = _masks(_ids_with_padding(rng, B, S, 0, full_row=False),
                                      _ids_with_padding(rng, B, T, 0), 0)
    return {"y": rng.normal(size=(B, T, d)), "memory": rng.normal(size=(B, S, d)),
            "p": _block_params(rng, d, 2 * d, True), "n_heads": n_heads,
            "self_mask": self_mask, "cross_mask": cross_mask}


def _decoder_cases(rng, hidden):
    if not hidden:
        return [_decoder_case(rng, 2, 5, 3, 4, 2), _decoder_case(rng, 2, 4, 4, 6, 3),
                _decoder_case(rng, 1, 3, 3, 4, 1)]
    return [_decoder_case(rng, 3, 6, 6, 8, 2), _decoder_case(rng, 2, 3, 5, 4, 1),
            _decoder_case(rng, 1, 4, 4, 6, 2), _decoder_case(rng, 2, 7, 2, 8, 4),
            _decoder_case(rng, 2, 5, 5, 4, 4)]


def _decoder_reference(y, memory, p, n_heads, self_mask=None, cross_mask=None):
    return decoder_block(y, memory, p, n_heads, self_mask, cross_mask)


@switchable
def _decoder_wired(cross_q="h", cross_kv="memory", cross_first=False, norm3=True, cross_masked=True,
                   self_masked=True, norms=("norm1", "norm2", "norm3"), second_reads="h"):
    """Post-LN decoder with the cross-attention's inputs (or the sublayers' order, or a mask)
    changed, its last norm left out, its norms' parameters taken in another order, or its
    second sublayer fed the block's input (``second_reads`` "y": the first one's result dropped)."""
    def wrong(y, memory, p, n_heads, self_mask=None, cross_mask=None):
        def self_attn(h):
            return _mha(h, h, p["self_attn"], n_heads, self_mask if self_masked else None)

        def cross_attn(h):
            inputs = {"h": h, "memory": memory}
            return _mha(inputs[cross_q], inputs[cross_kv], p["cross_attn"], n_heads,
                        cross_mask if cross_masked else None)
        first, second = (cross_attn, self_attn) if cross_first else (self_attn, cross_attn)
        h = _ln(y + first(y), p[norms[0]])
        h = y if second_reads == "y" else h
        h = _ln(h + second(h), p[norms[1]])
        return _ln(h + _ffn(h, p), p[norms[2]]) if norm3 else h + _ffn(h, p)
    return wrong


DECODER_MISTAKES = (
    Mistake(name="cross-attention keys/values taken from the decoder",
            hint="in encoder-decoder attention the queries come from the decoder and the keys and "
                 "values from memory, the encoder's output.", wrong=_decoder_wired(cross_kv="h"),
            detect=any_of(*(_decoder_wired(cross_kv="h", cross_masked=masked)  # the cross mask kept, or none
                            for masked in (True, False)))),
    Mistake(name="cross-attention queries taken from the encoder",
            hint="the queries come from the decoder (one per target position); keys and values "
                 "from memory.", wrong=_decoder_wired(cross_q="memory", cross_kv="h")),
    Mistake(name="self and cross masks swapped",
            hint="self_mask (padding and causality of the target) goes to the masked self-attention, "
                 "cross_mask (source padding) to the encoder-decoder attention.",
            wrong=lambda y, memory, p, n_heads, self_mask=None, cross_mask=None:
                decoder_block(y, memory, p, n_heads, cross_mask, self_mask)),
    Mistake(name="source padding mask applied to decoder self-attention",
            hint="the masked self-attention takes self_mask (the target's padding and causality); "
                 "cross_mask belongs to the encoder-decoder attention.",
            wrong=lambda y, memory, p, n_heads, self_mask=None, cross_mask=None:
                decoder_block(y, memory, p, n_heads, cross_mask, cross_mask)),
    Mistake(name="causal mask missing in the decoder",
            hint="pass self_mask to the decoder's self-attention, or position t sees the tokens it "
                 "must predict.", wrong=_decoder_wired(self_masked=False)),
    Mistake(name="cross mask ignored", hint="pass cross_mask to the encoder-decoder attention so no "
            "query looks at source padding.", wrong=_decoder_wired(cross_masked=False)),
    Mistake(name="the self-attention's result dropped (the cross-attention reads y)",
            hint="each sublayer reads the one before: h = LN(y + SelfAttn(y)), then "
                 "LN(h + CrossAttn(h, memory)). Feeding y (and adding y) to the cross-attention "
                 "throws the self-attention away.", wrong=_decoder_wired(second_reads="y")),
    Mistake(name="norm2 and norm3 swapped",
            hint="norm2 is the second sublayer's (after the encoder-decoder attention), norm3 the "
                 "third's (after the FFN).", wrong=_decoder_wired(norms=("norm1", "norm3", "norm2"))),
    Mistake(name="the third norm left out",
            hint="each of the three sublayers ends in its own norm: LN(h + FFN(h)) with norm3 too.",
            wrong=_decoder_wired(norm3=False)),
    Mistake(name="cross-attention before self-attention",
            hint="the order is masked self-attention, then encoder-decoder attention, then the FFN.",
            wrong=_decoder_wired(cross_first=True)),
    Mistake(name="decoder in Pre-LN order", hint="this block is Post-LN: LN(y + sublayer(y)) each time.",
            wrong=lambda y, memory, p, n_heads, self_mask=None, cross_mask=None:
                decoder_block(y, memory, p, n_heads, self_mask, cross_mask, order="pre")),
)

DECODER_BLOCK = Exercise(
    id="encdec.decoder_block",
    function="decoder_block",
    signature="decoder_block(y, memory, p, n_heads, self_mask=None, cross_mask=None) -> out",
    cases=_decoder_cases,
    reference=_decoder_reference,
    points=2,
    output_names=("out",),
    axes={"out": ("T", "d_model")},
    forbidden=FORBIDDEN,
    features=BLOCK_FEATURES,
    dims=_block_dims,
    equivalent=HEADS_EQUIVALENT,
    mistakes=DECODER_MISTAKES,
)


# ============================================================================ decoding
def _table(rng, vocab_size, max_len, eos, end=(-2.5, 2.5)):
    """logp (max_len + 1, V, V): random log p(next | step, last token); </s> likelier with
    the step, its logit shifted by ``end`` (first step, last step)."""
    logits = rng.normal(size=(max_len + 1, vocab_size, vocab_size)) * 1.5
    logits[..., eos] += np.linspace(*end, max_len + 1)[:, None] + rng.normal() * 0.5
    return logits - np.log(np.exp(logits).sum(-1, keepdims=True))


def _myopic(rng, logp, bos, eos):
    """Make greedy short-sighted: the likeliest first token leads nowhere in particular, the
    runner-up is almost surely followed by </s>."""
    V = logp.shape[-1]
    a, b = rng.choice([t for t in range(V) if t not in (bos, eos)], 2, replace=False)
    first = 0.1 * rng.dirichlet(np.ones(V))  # distinct values: no ties to break
    first[[a, b]] = 0.5, 0.4
    logp[0, bos] = np.log(first / first.sum())
    flat = np.exp(rng.normal(size=V) * 0.3)  # after a: nothing stands out
    logp[1, a] = np.log(flat / flat.sum())
    after_b = 0.1 * rng.dirichlet(np.ones(V))
    after_b[eos] = 0.9
    logp[1, b] = np.log(after_b / after_b.sum())
    return logp


def _decode_case(rng, V, max_len, bos=1, eos=2, how="random", **search):
    end = {"never": (-40.0, -40.0), "first": (40.0, -2.5)}.get(how, (-2.5, 2.5))
    logp = _table(rng, V, max_len, eos, end)
    if how == "myopic":
        logp = _myopic(rng, logp, bos, eos)
    if bos != 1:  # code that starts from 1 whatever bos is passed picks another first token
        logp[0, 1] = np.roll(logp[0, bos], 1)
    return {"logp": logp, "bos": bos, "eos": eos, "max_len": max_len, **search}


def _greedy_cases(rng, hidden):
    if not hidden:
        return [_decode_case(rng, 6, 8), _decode_case(rng, 5, 4, how="never"),
                _decode_case(rng, 7, 6, bos=0, eos=6), _decode_case(rng, 5, 5, how="first")]
    return [_decode_case(rng, 8, 10), _decode_case(rng, 6, 7, how="never"),
            _decode_case(rng, 9, 6, bos=4, eos=0), _decode_case(rng, 5, 3, how="first"),
            _decode_case(rng, 6, 12), _decode_case(rng, 4, 1, how="never")]


def _greedy_with(next_log_probs, bos=1, eos=2, max_len=10, *, stop_at_eos=True,
                 keep_bos=False, keep_eos=True, bos_counted=False):
    """``greedy_decode`` with a mistake: no stop at eos, bos returned, eos dropped, bos
    counted in max_len (the reference is kept free of these switches)."""
    tokens = [bos]
    for _ in range(max_len - bos_counted):
        tokens.append(int(np.argmax(next_log_probs(np.array([tokens]))[0])))  # prefixes (1, t)
        if stop_at_eos and tokens[-1] == eos:
            if not keep_eos:
                tokens.pop()
            break
    return np.array(tokens if keep_bos else tokens[1:], dtype=np.int64)


def _on_table(decode, **changed):
    """A decoder on ``table_model(logp)``, with some of its keyword arguments overridden."""
    return lambda logp, **kw: decode(table_model(logp), **{**kw, **changed})


_table_with = switchable(_on_table)  # its mistakes, two at once: ``verdict.identify_pair``


GREEDY_MISTAKES = (
    Mistake(name="greedy that never stops at eos",
            hint="stop as soon as the chosen token is eos (and keep that eos in the result).",
            wrong=_table_with(_greedy_with, stop_at_eos=False)),
    Mistake(name="greedy that returns bos too", hint="return only the generated tokens, after bos.",
            wrong=_table_with(_greedy_with, keep_bos=True)),
    Mistake(name="eos left out of the result", hint="the generated tokens end with the eos that stopped "
            "the loop.", wrong=_table_with(_greedy_with, keep_eos=False)),
    Mistake(name="one token short of max_len (bos counted)",
            hint="max_len counts the generated tokens, bos not included.",
            wrong=_table_with(_greedy_with, bos_counted=True)),
)


def _greedy_of(case):
    """Greedy's tokens on a greedy or beam case (beam_size and alpha left out)."""
    return _on_table(greedy_decode)(**{k: case[k] for k in ("logp", "bos", "eos", "max_len")})


DECODE_FEATURES = shape_features(**{
    "bos and eos other than 1 and 2": lambda c: (c["bos"], c["eos"]) != (1, 2),
    "eos never comes within max_len": lambda c: c["eos"] not in _greedy_of(c),
    "eos as the first token": lambda c: np.argmax(c["logp"][0, c["bos"]]) == c["eos"],
    "beam and greedy choose differently": lambda c: "beam_size" in c and not np.array_equal(
        _beam_reference(**c)[0], _greedy_of(c)),
    "alpha = 0": lambda c: c.get("alpha") == 0,
    "live beams at max_len, one normalising better than every finished output":
        lambda c: "beam_size" in c and _live_beats_finished(c),
    "the finished output with the best raw score loses after length normalisation":
        lambda c: "beam_size" in c and c["alpha"] != 0 and _normalisation_decides(c),
    "a tie between finished outputs (the first finished wins)":
        lambda c: "beam_size" in c and _finished_tie(c),
    "a tie between candidates at the beam's cut (the smaller (beam, token) is kept)":
        lambda c: "beam_size" in c and _cut_tie(c)})

GREEDY_EQUIVALENT = {
    "greedy_decode: int(np.argmax(next_log_probs(np.array([tokens]))[0])) -> "
    "np.argmax(next_log_probs(np.array([tokens]))[0])":
        "an np.int64 token in the list gives the same prefixes, comparison with eos and result",
    "greedy_decode: 0 -> -1": "greedy passes one prefix: next_log_probs returns one row, row 0 "
                              "is row -1",
    "greedy_decode: np.array(tokens[1:], dtype=np.int64) -> np.array(tokens[1:])":
        _PY_INTS + "would differ, and max_len >= 1 in every case, so a token always comes"}

GREEDY = Exercise(
    id="encdec.greedy",
    function="greedy_decode",
    signature="greedy_decode(next_log_probs, bos=1, eos=2, max_len=10) -> tokens (1-D int)",
    cases=_greedy_cases,
    reference=_on_table(greedy_decode),
    call="markov_decoder",
    points=1,
    output_names=("tokens",),
    forbidden=FORBIDDEN,
    features=DECODE_FEATURES,
    equivalent=GREEDY_EQUIVALENT,
    mistakes=GREEDY_MISTAKES,
)


_MOST_BEAMS = 20_000  # live beams the per-beam mistake's model keeps before it gives up


def _beam_with(next_log_probs, bos=1, eos=2, beam_size=3, max_len=10, alpha=1.0, *,
               probabilities=False, stop_at_eos=True, extra_length=0, raw_score=False, product=False,
               stop_at_first=False, per_beam=False):
    """``beam_search`` with a mistake: probabilities summed instead of log-probabilities, or
    multiplied (``product``: the same ranking while searching, another score to normalise),
    eos not finishing a beam, bos counted in the length, the score returned before
    normalisation, each beam's own best tokens all kept (``per_beam``: the beam grows; past
    ``_MOST_BEAMS`` the model raises, and so does not apply), or the first ``beam_size`` of
    them, beam by beam (``per_beam="first"``), or after the first step each beam's one best
    token (``per_beam="greedy"``: beam_size greedy searches side by side) (the reference is
    kept free of these switches, so that its mutants are the learner's).
    """
    beams = np.full((1, 1), bos, dtype=np.int64)  # (B, t) live prefixes, best first
    scores = np.ones(1) if product else np.zeros(1)  # (n,) their summed log-probabilities
    finished = []  # (tokens after bos, score), in the order they finished
    for step in range(max_len):
        logp = next_log_probs(beams)  # (B, vocab_size)
        cand = (scores[:, None] * np.exp(logp) if product else
                scores[:, None] + (np.exp(logp) if probabilities else logp)).ravel()  # (n*V,)
        kept = np.argsort(-cand, kind="stable")[:beam_size]  # best first; ties keep (beam, token)
        if per_beam:
            if len(beams) * beam_size > _MOST_BEAMS:
                raise RuntimeError("the beam grew past the model's bound")
            width = 1 if per_beam == "greedy" and step else beam_size
            top = np.argsort(-logp, axis=1, kind="stable")[:, :width]  # (B, width)
            kept = (np.arange(len(beams))[:, None] * logp.shape[1] + top).ravel()
            kept = kept[:beam_size] if per_beam == "first" else kept  # the first of them, beam by beam
        beam, token = np.divmod(kept, logp.shape[1])
        seqs = np.concatenate([beams[beam], token[:, None]], axis=1)  # (B, t+1)
        done = (token == eos) & stop_at_eos
        finished += list(zip(seqs[done, 1:], cand[kept][done]))
        beams, scores = seqs[~done], cand[kept][~done]
        if not len(beams) or stop_at_first and finished:
            break
    pool = finished or list(zip(beams[:, 1:], scores))
    normalised = [score / (len(tokens) + extra_length) ** alpha for tokens, score in pool]
    best = int(np.argmax(normalised))  # the first of equal ones
    return pool[best][0], np.float64(pool[best][1] if raw_score else normalised[best])


def _beam_kept_live(next_log_probs, bos=1, eos=2, beam_size=3, max_len=10, alpha=1.0, *, until="never",
                    pick="normalised"):
    """``beam_search`` with the beams that produced eos kept in the beam and extended as live
    ones, each cut after its first eos at the end: the search runs ``max_len`` steps
    (``until`` "never") or stops once the best beam ("best") or every beam ("all") ends with
    eos; it returns the best beam (``pick`` "best") or the one with the best normalised score
    ("normalised"), that score being its whole sum over its cut length ** alpha."""
    beams, scores = np.full((1, 1), bos, dtype=np.int64), np.zeros(1)  # (B, t), (B,)
    for _ in range(max_len):
        logp = next_log_probs(beams)  # (B, vocab_size)
        cand = (scores[:, None] + logp).ravel()
        kept = np.argsort(-cand, kind="stable")[:beam_size]
        beam, token = np.divmod(kept, logp.shape[1])
        beams, scores = np.concatenate([beams[beam], token[:, None]], axis=1), cand[kept]
        ended = beams[:, -1] == eos
        if until == "best" and ended[0] or until == "all" and ended.all():
            break
    outputs = []
    for seq, score in zip(beams[:, 1:], scores):
        at = np.flatnonzero(seq == eos)
        cut = seq[:at[0] + 1] if at.size else seq
        outputs.append((cut, score / len(cut) ** alpha))
    best = 0 if pick == "best" else int(np.argmax([score for _, score in outputs]))
    return outputs[best][0], np.float64(outputs[best][1])


_beam_reference = _on_table(beam_search)


def _beam_end(logp, bos, eos, beam_size, max_len, cuts=None, **_):
    """The finished outputs and the live beams when the search on ``logp`` stops: two lists
    of (tokens after bos, summed log-probability), in the reference's order. ``cuts``: a list
    to which each step appends whether two candidates tie at the cut (the last kept and the
    first left out)."""
    beams, scores, finished = np.full((1, 1), bos, dtype=np.int64), np.zeros(1), []
    for step in range(max_len):
        cand = (scores[:, None] + logp[step, beams[:, -1]]).ravel()
        kept = np.argsort(-cand, kind="stable")[:beam_size]
        if cuts is not None:
            ranked = np.sort(cand)[::-1]
            cuts.append(len(ranked) > beam_size and ranked[beam_size - 1] == ranked[beam_size])
        beam, token = np.divmod(kept, logp.shape[-1])
        seqs = np.concatenate([beams[beam], token[:, None]], axis=1)
        finished += list(zip(seqs[token == eos, 1:], cand[kept][token == eos]))
        beams, scores = seqs[token != eos], cand[kept][token != eos]
        if not len(beams):
            break
    return finished, list(zip(beams[:, 1:], scores))


def _normalised(pool, alpha):
    return [score / len(tokens) ** alpha for tokens, score in pool]


def _live_beats_finished(case):
    """Live beams are left at max_len beside finished outputs, and one of them has a better
    normalised score than every finished output (which still wins: live beams compete only
    when nothing finished)."""
    finished, live = _beam_end(**case)
    return bool(finished and live) and \
        max(_normalised(live, case["alpha"])) > max(_normalised(finished, case["alpha"]))


def _normalisation_decides(case):
    """The finished output with the best summed log-probability is not the one with the best
    normalised score: only length normalisation makes the right one win."""
    finished, _ = _beam_end(**case)
    return bool(finished) and int(np.argmax([s for _, s in finished])) != \
        int(np.argmax(_normalised(finished, case["alpha"])))


def _wider_differs(case):
    """A beam one wider would choose another output: every one of the beam_size kept
    candidates counts, and no more."""
    wider = dict(case, beam_size=case["beam_size"] + 1)
    return not np.array_equal(_beam_reference(**case)[0], _beam_reference(**wider)[0])


def _finished_tie(case):
    """Two finished outputs share the best normalised score: the text's rule, the one that
    finished first wins, decides."""
    finished, _ = _beam_end(**case)
    best = sorted(_normalised(finished, case["alpha"]), reverse=True)
    return len(best) > 1 and best[0] == best[1]


def _cut_tie(case):
    """Two candidates tie at a step's cut: the text's rule, the smaller (beam, token) is kept,
    decides which goes on."""
    cuts = []
    _beam_end(**case, cuts=cuts)
    return any(cuts)


def _far_table(rng, V, max_len):
    """A table of log-probabilities all below -20, for a case to set the few that matter."""
    return rng.uniform(-30.0, -20.0, size=(max_len + 1, V, V))


def _cut_tie_case(rng, V, max_len):
    """A beam of one on a table whose first step offers two tokens a < b at log p -0.1 each
    (every other token below -20); after a comes a, after b comes b, until eos at the end:
    keeping b for a gives another output with the same score."""
    bos, eos, logp = 1, 2, _far_table(rng, V, max_len)
    a, b = sorted(rng.choice([t for t in range(V) if t not in (bos, eos)], size=2, replace=False))
    logp[0, bos, a] = logp[0, bos, b] = -0.1
    for step in range(1, max_len - 1):
        logp[step, a, a] = logp[step, b, b] = -0.2
    logp[max_len - 1, a, eos] = logp[max_len - 1, b, eos] = -0.3
    return {"logp": logp, "bos": bos, "eos": eos, "max_len": max_len, "beam_size": 1, "alpha": 1.0}


def _tie_case(rng, V, max_len, beam_size=2):
    """A table on which eos right away (log p -1) and one token then eos (-0.5 - 0.5) tie
    exactly, with alpha = 0; every other continuation is far less likely (drawn below -20)."""
    bos, eos, logp = 1, 2, _far_table(rng, V, max_len)
    other = int(rng.choice([t for t in range(V) if t not in (bos, eos)]))
    logp[0, bos, eos], logp[0, bos, other], logp[1, other, eos] = -1.0, -0.5, -0.5
    return {"logp": logp, "bos": bos, "eos": eos, "max_len": max_len, "beam_size": beam_size,
            "alpha": 0.0}


def _drawn_until(rng, make, *wanted, tries=2000):
    """``make(rng)`` drawn again until every predicate of ``wanted`` holds (a situation the
    graded cases must always hold, under every key, not by luck of the draw)."""
    for _ in range(tries):
        case = make(rng)
        if all(w(case) for w in wanted):
            return case
    raise RuntimeError(f"no case with {[w.__name__ for w in wanted]} in {tries} draws")


def _beam_cases(rng, hidden):
    def case(*args, beam_size=3, alpha=1.0, **kw):
        return _decode_case(rng, *args, beam_size=beam_size, alpha=alpha, **kw)

    def mixed(V, max_len, beam_size, alpha, end):  # eos neither rare nor certain at any step
        return lambda rng: {**_decode_case(rng, V, max_len, beam_size=beam_size, alpha=alpha),
                            "logp": _table(rng, V, max_len, 2, end)}
    if not hidden:
        return [case(6, 6, how="myopic"), case(7, 8, beam_size=2, alpha=0.7),
                case(5, 4, how="never", beam_size=2), case(6, 6, bos=0, eos=5, alpha=0.0),
                case(6, 5, how="first", beam_size=4),
                _drawn_until(rng, mixed(6, 4, 3, 1.0, (-1.0, 1.0)), _live_beats_finished,
                             _normalisation_decides),
                _tie_case(rng, 5, 4), _cut_tie_case(rng, 6, 4)]
    return [case(8, 8, how="myopic", beam_size=4), case(6, 10, alpha=0.6),
            case(7, 5, how="never"), case(9, 7, bos=3, eos=0, beam_size=2, alpha=1.0),
            case(5, 6, how="myopic", beam_size=2, alpha=0.0), case(6, 9, beam_size=5),
            case(5, 4, how="first", beam_size=2, alpha=0.5),
            _drawn_until(rng, mixed(7, 5, 3, 0.8, (-0.5, 0.5)), _live_beats_finished,
                         _normalisation_decides),
            _drawn_until(rng, mixed(6, 5, 2, 1.0, (-1.0, 1.0)), _wider_differs),
            _tie_case(rng, 6, 5), _cut_tie_case(rng, 7, 5)]


BEAM_MISTAKES = (
    Mistake(name="beam scores summed as probabilities instead of log-probabilities",
            hint="a sequence's score is the sum of the log-probabilities of its tokens (the log of "
                 "the product of their probabilities), not the sum of the probabilities.",
            wrong=_table_with(_beam_with, probabilities=True)),
    Mistake(name="beam scores as products of probabilities",
            hint="keep each sequence's score as the sum of its tokens' log-probabilities: the product "
                 "of probabilities ranks the same while searching, but underflows on long outputs, "
                 "and the normalised score, sum / length ** alpha, is not that of a product.",
            wrong=_table_with(_beam_with, product=True)),
    Mistake(name="search stopped at the first finished output",
            hint="go on while live beams remain (up to max_len): a longer output found later can have "
                 "a better normalised score than the first one to finish.",
            wrong=_table_with(_beam_with, stop_at_first=True)),
    Mistake(name="each beam's own best tokens kept, not the best of all",
            hint="rank every candidate of every beam together (scores[:, None] + log_probs, "
                 "flattened) and keep only the beam_size best overall: a top-beam_size per beam, all "
                 "kept, makes the beam grow beam_size times at every step, and the first beam_size "
                 "of them are the first beam's, not the best.",
            wrong=_table_with(_beam_with, per_beam=True),
            detect=any_of(*(_table_with(_beam_with, per_beam=how) for how in (True, "first")))),
    Mistake(name="each beam extended by its own best token only",
            hint="after the first step, rank every candidate of every beam together "
                 "(scores[:, None] + log_probs, flattened) and keep the beam_size best overall: "
                 "extending each beam by its own best token runs beam_size greedy searches side by "
                 "side, and one beam's second-best token can beat another beam's best.",
            wrong=_table_with(_beam_with, per_beam="greedy")),
    Mistake(name="no length normalisation", hint="compare finished sequences by score / length ** alpha "
            "(length counts the tokens after bos, eos included) and return that score.",
            wrong=_table_with(beam_search, alpha=0.0)),
    Mistake(name="finished beams extended", hint="a beam that produced eos is finished: set it aside "
            "with its score and do not extend it.", wrong=_table_with(_beam_with, stop_at_eos=False),
            detect=any_of(_table_with(_beam_with, stop_at_eos=False),
                          *(_table_with(_beam_kept_live, until=until, pick=pick)
                            for until in ("never", "best", "all") for pick in ("best", "normalised")))),
    Mistake(name="beam of width 1 (greedy)", hint="keep the beam_size best candidates at each step, "
            "not only the best one.", wrong=_table_with(beam_search, beam_size=1)),
    Mistake(name="bos counted in the length", hint="the length in score / length ** alpha counts the "
            "generated tokens (eos included), not bos.", wrong=_table_with(_beam_with, extra_length=1)),
    Mistake(name="score returned before normalisation", hint="return the normalised score "
            "score / length ** alpha of the chosen sequence.",
            wrong=_table_with(_beam_with, raw_score=True)),
)

BEAM_EQUIVALENT = {
    "beam_search: np.full((1, 1), bos, dtype=np.int64) -> np.full((1, 1), bos)":
        "bos is a Python int, so np.full makes an int64 array without dtype= too",
    "beam_search: int(np.argmax(normalised)) -> np.argmax(normalised)":
        "an np.intp index picks the same entry of the pool list",
    "beam_search: np.concatenate([beams[beam], token[:, None]], axis=1) -> "
    "np.concatenate([beams[beam], token[:, None]], axis=-1)":
        "beams[beam] and token[:, None] are 2-D (B, t): axis -1 is axis 1",
    "beam_search: beams -> seqs in `pool = …`": "the live beams are read only when nothing finished: "
        "then no candidate of the last step ended with eos, and seqs is the live beams"}

BEAM_SEARCH = Exercise(
    id="encdec.beam_search",
    search_sites=4000,  # benchmarks/repair_search.py: about 3 s of edits
    function="beam_search",
    signature="beam_search(next_log_probs, bos=1, eos=2, beam_size=3, max_len=10, alpha=1.0) "
              "-> (tokens, score)",
    cases=_beam_cases,
    reference=_beam_reference,
    call="markov_decoder",
    points=3,
    output_names=("tokens", "score"),
    forbidden=FORBIDDEN,
    features=DECODE_FEATURES,
    equivalent=BEAM_EQUIVALENT,
    mistakes=BEAM_MISTAKES,
)


EXERCISES = [BPE_MERGES, BPE_ENCODE, SHIFT_RIGHT, MASKS, EMBED, ENCODER_BLOCK, DECODER_BLOCK,
             GREEDY, BEAM_SEARCH]
