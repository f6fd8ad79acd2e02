"""The exercises of notebook 05 (encoder-decoder): references, the table model, mistakes.

The references of ``autograder.exercises.encdec`` agree with ``course_lib`` where both
exist; greedy and beam search (numpy, on a table of log-probabilities) agree with each other
and with brute force; every registered mistake is named; and learner code, right or with
one realistic bug, goes through the same path as a graded cell (``kernel.run_cases``, then
``judge``).
"""
import itertools

import numpy as np
import pytest
import torch

from autograder.kernel.calls import once_per_step, table_model
from autograder.exercises import encdec
from course_lib import decoding, tokenize, translation
from course_lib.attention import mha_forward
from course_lib.generate import greedy_decode as torch_greedy
from course_lib.layernorm import ffn_forward, layernorm_forward
from course_lib.positional import sinusoidal_encoding
from course_lib.transformer import Transformer, TransformerConfig
from exercise_bank import TEST_KEY, learner_verdict, mistake_verdicts

KEYS = (TEST_KEY, b"another key", b"a third key")


# ------------------------------------------------------------------------ references
@pytest.fixture(scope="module")
def date_chunks():
    pairs = translation.make_splits(n_train=300, n_val=10, n_test=10).train
    return tokenize.word_counts([text for pair in pairs for text in pair])


def test_learn_merges_reference_is_the_library_loop(date_chunks):
    words = [np.array(w) for w in date_chunks]
    counts = np.array(list(date_chunks.values()))
    got = encdec.learn_merges(words, counts, 40)
    assert got.shape == (40, 2)
    np.testing.assert_array_equal(got, tokenize.learn_merges_naive(date_chunks, 40))
    np.testing.assert_array_equal(got, tokenize.learn_merges(date_chunks, 40))


def test_bpe_encode_reference_is_the_tokenizers_encoding(date_chunks):
    merges = encdec.learn_merges([np.array(w) for w in date_chunks],
                                 np.array(list(date_chunks.values())), 60)
    tok = tokenize.BPETokenizer(tuple(map(tuple, merges)))
    for chunk in ["Monday", " 1", "st", " Sept", "é", " aaaa", *tokenize.pretokenize("3rd May")]:
        ids = np.array([tokenize.BYTE_OFFSET + b for b in chunk.encode()])
        np.testing.assert_array_equal(encdec.bpe_encode(ids, merges), tok.encode_chunk(chunk))


def test_shift_reference_is_the_librarys():
    target = np.array([7, 8, 9])
    tgt_in, tgt_out = encdec._shift_reference(target)
    assert (tgt_in.tolist(), tgt_out.tolist()) == translation.decoder_input_and_target([7, 8, 9])


def test_embed_reference_is_the_models_embedding():
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(vocab_size=11, d_model=8)).double()
    ids = np.array([[1, 5, 7, 0], [3, 3, 2, 10]])
    W_E = model.embed.weight.detach().numpy()
    want = model.embed_tokens(torch.tensor(ids)).detach().numpy()
    np.testing.assert_allclose(encdec.embed(ids, W_E, sinusoidal_encoding(np.arange(9), 8)), want,
                               atol=1e-6)


# ------------------------------------------------------------------------ the table model
def test_table_model_reads_the_step_and_the_last_token():
    logp = np.random.default_rng(0).normal(size=(4, 5, 5))
    f = table_model(logp)
    np.testing.assert_array_equal(f(np.array([[1, 3], [1, 4]])), logp[1, [3, 4]])
    np.testing.assert_array_equal(f([[1, 2, 0]]), logp[2, [0]])  # one prefix, as a list
    with pytest.raises(ValueError, match="1 <= t <= 4"):
        f(np.ones((1, 5), dtype=int))
    with pytest.raises(ValueError, match=r"np.array\(\[tokens\]\)"):  # a 1-D prefix, as no real model takes
        f(np.array([1, 2]))


def test_the_graded_decoders_call_the_model_once_per_step():
    logp = np.random.default_rng(0).normal(size=(4, 5, 5))
    f = once_per_step(table_model(logp))
    f(np.array([[1], [1]]))
    f(np.array([[1, 3]]))
    with pytest.raises(ValueError, match="one call per step"):  # a second call at t = 2: one per beam
        f(np.array([[1, 4]]))


class TableModel(torch.nn.Module):
    """course_lib.generate's model interface around a table: decode's last position reads
    logp[t - 1, last token]."""

    def __init__(self, logp):
        super().__init__()
        self.logp = torch.tensor(logp)

    def encode(self, src):
        return src

    def decode(self, tgt_in, memory, src):
        out = torch.zeros(tgt_in.shape + (self.logp.shape[-1],), dtype=self.logp.dtype)
        out[:, -1] = self.logp[tgt_in.shape[1] - 1, tgt_in[:, -1]]
        return out


def _tables(n=30, V=6, max_len=7):
    rng = np.random.default_rng(1)
    for _ in range(n):
        case = encdec._decode_case(rng, V, max_len)
        yield case["logp"], max_len


def test_greedy_reference_is_the_librarys_on_a_table():
    for logp, max_len in _tables():
        logp[..., [tokenize.PAD, tokenize.BOS]] = -np.inf  # the library never produces them
        want = torch_greedy(TableModel(logp), torch.zeros((1, 1), dtype=torch.long), max_len)[0]
        got = decoding.greedy_decode(table_model(logp), max_len=max_len)
        np.testing.assert_array_equal(got, want.numpy())


def test_beam_of_width_one_is_greedy():
    for (logp, max_len), alpha in zip(_tables(), itertools.cycle([0.0, 0.7, 1.0])):
        f = table_model(logp)
        tokens, score = decoding.beam_search(f, beam_size=1, max_len=max_len, alpha=alpha)
        greedy = decoding.greedy_decode(f, max_len=max_len)
        np.testing.assert_array_equal(tokens, greedy)
        total = sum(logp[t, prev, nxt] for t, (prev, nxt) in enumerate(zip([1, *greedy], greedy)))
        np.testing.assert_allclose(score, total / len(greedy) ** alpha)


def _all_sequences(logp, eos, max_len, alpha):
    """Every sequence that ends at its first eos (or runs to max_len), with its normalised score."""
    V = logp.shape[-1]
    for n in range(1, max_len + 1):
        for seq in itertools.product(range(V), repeat=n):
            if eos in seq[:-1] or (seq[-1] != eos and n < max_len):
                continue
            score = sum(logp[t, prev, nxt] for t, (prev, nxt) in enumerate(zip((1,) + seq, seq)))
            yield seq, score / n ** alpha, seq[-1] == eos


def test_a_beam_wide_enough_finds_the_best_finished_sequence():
    for (logp, max_len), alpha in zip(_tables(n=6, V=4, max_len=4), [0.0, 0.5, 1.0] * 2):
        tokens, score = decoding.beam_search(table_model(logp), beam_size=4 ** 4, max_len=max_len,
                                           alpha=alpha)
        best = max((s, seq) for seq, s, done in _all_sequences(logp, 2, max_len, alpha) if done)
        np.testing.assert_allclose(score, best[0])
        assert tuple(tokens) == best[1]


def test_beam_finds_what_short_sighted_greedy_misses():
    """Greedy takes token 3 (p 0.5), after which nothing is likely; beam also keeps token 4
    (p 0.4), after which </s> has p 0.9."""
    V, max_len = 6, 5
    logp = np.log(np.full((max_len + 1, V, V), 1.0 / V))
    logp[0, 1] = np.log([0.02, 0.03, 0.02, 0.5, 0.4, 0.03])
    logp[1, 4] = np.log([0.01, 0.03, 0.9, 0.02, 0.02, 0.02])
    logp[:, :, 2] += 0.01  # </s> the likeliest of the flat rows
    logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
    f = table_model(logp)
    greedy = decoding.greedy_decode(f, max_len=max_len)
    tokens, score = decoding.beam_search(f, beam_size=2, max_len=max_len)
    assert greedy.tolist() == [3, 2] and tokens.tolist() == [4, 2]
    greedy_score = (logp[0, 1, 3] + logp[1, 3, 2]) / 2
    assert score > greedy_score + 0.5


def test_beam_ties_go_to_the_earlier_beam_and_token():
    """Every token equally likely: every comparison is a tie."""
    f = table_model(np.log(np.full((4, 5, 5), 0.2)))
    tokens, _ = decoding.beam_search(f, beam_size=2, max_len=3)
    assert tokens.tolist() == [0, 0, 0]  # tokens 0 and 1 of beam 0 kept each step, </s> (2) never
    tokens, score = decoding.beam_search(f, beam_size=3, max_len=3, alpha=1.0)
    assert tokens.tolist() == [2] and np.isclose(score, np.log(0.2))  # [2], [0, 2], [0, 0, 2]
    # finish with the same normalised score: the first to finish wins


# ------------------------------------------------------------------------ mistakes
@pytest.mark.parametrize("key", KEYS)
def test_every_mistake_loses_points_and_is_named(monkeypatch, key):
    import exercise_bank
    monkeypatch.setattr(exercise_bank, "TEST_KEY", key)
    for exercise_id, name, verdict in mistake_verdicts(encdec.EXERCISES):
        assert verdict.points < verdict.max_points, (exercise_id, name)
        assert any(name in m for m in verdict.messages), (exercise_id, name, verdict.messages)


def test_every_exercise_is_declared_as_the_contract_says():
    points = {ex.id: ex.points for ex in encdec.EXERCISES}
    assert points == {"encdec.bpe_merges": 2, "encdec.bpe_encode": 1, "encdec.shift_right": 1,
                      "encdec.masks": 2, "encdec.embed": 1, "encdec.encoder_block": 2,
                      "encdec.decoder_block": 2, "encdec.greedy": 1, "encdec.beam_search": 3}
    assert all(set(ex.forbidden) == set(encdec.FORBIDDEN) for ex in encdec.EXERCISES)
    assert "torch" not in encdec.FORBIDDEN  # course_lib.attention and layernorm import it
    assert sum(len(ex.mistakes) for ex in encdec.EXERCISES) >= 25


# ------------------------------------------------------------------------ learner code
NAMESPACE = {"np": np, "mha_forward": mha_forward, "layernorm_forward": layernorm_forward,
             "ffn_forward": ffn_forward}

RIGHT = {
    "encdec.bpe_merges": """
        def learn_merges(words, counts, n_merges, first_id=259):
            vocab, merges = [[int(t) for t in w] for w in words], []
            for i in range(n_merges):
                pairs = {}
                for word, n in zip(vocab, counts):
                    for pair in zip(word, word[1:]):
                        pairs[pair] = pairs.get(pair, 0) + int(n)
                if not pairs:
                    break
                best = min(pairs, key=lambda p: (-pairs[p], p))
                merges.append(best)
                vocab = [merge(word, best, first_id + i) for word in vocab]
            return np.array(merges, dtype=np.int64).reshape(-1, 2)

        def merge(word, pair, new_id):
            out, j = [], 0
            while j < len(word):
                if j + 1 < len(word) and (word[j], word[j + 1]) == tuple(pair):
                    out.append(new_id)
                    j += 2
                else:
                    out.append(word[j])
                    j += 1
            return out
        """,
    "encdec.bpe_encode": """
        def bpe_encode(ids, merges, first_id=259):
            word = [int(t) for t in ids]
            for i, pair in enumerate(merges):
                word = merge(word, tuple(pair), first_id + i)
            return np.array(word, dtype=np.int64)
        """,
    "encdec.shift_right": """
        def decoder_input_and_target(target_ids, bos=1, eos=2):
            return np.concatenate([[bos], target_ids]), np.concatenate([target_ids, [eos]])
        """,
    "encdec.masks": """
        def attention_masks(src, tgt_in, pad_id=0):
            src_keys = (src != pad_id)[:, None, None, :]
            T = tgt_in.shape[1]
            causal = np.tril(np.ones((T, T), dtype=bool))
            return src_keys, src_keys, (tgt_in != pad_id)[:, None, None, :] & causal
        """,
    "encdec.embed": """
        def embed(ids, W_E, P):
            return W_E[ids] * np.sqrt(W_E.shape[1]) + P[:ids.shape[1]]
        """,
    "encdec.encoder_block": """
        def encoder_block(x, p, n_heads, mask=None):
            h = layernorm_forward(x + mha_forward(x, x, *p["self_attn"], n_heads, mask)[0],
                                  *p["norm1"])[0]
            return layernorm_forward(h + ffn_forward(h, *p["ffn"])[0], *p["norm2"])[0]
        """,
    "encdec.decoder_block": """
        def decoder_block(y, memory, p, n_heads, self_mask=None, cross_mask=None):
            h = layernorm_forward(y + mha_forward(y, y, *p["self_attn"], n_heads, self_mask)[0],
                                  *p["norm1"])[0]
            cross = mha_forward(h, memory, *p["cross_attn"], n_heads, cross_mask)[0]
            h = layernorm_forward(h + cross, *p["norm2"])[0]
            return layernorm_forward(h + ffn_forward(h, *p["ffn"])[0], *p["norm3"])[0]
        """,
    "encdec.greedy": """
        def greedy_decode(next_log_probs, bos=1, eos=2, max_len=10):
            seq = np.array([[bos]])
            for _ in range(max_len):
                nxt = int(np.argmax(next_log_probs(seq)[0]))
                seq = np.concatenate([seq, [[nxt]]], axis=1)
                if nxt == eos:
                    break
            return seq[0, 1:]
        """,
    "encdec.beam_search": """
        def beam_search(next_log_probs, bos=1, eos=2, beam_size=3, max_len=10, alpha=1.0):
            beams, finished = [([bos], 0.0)], []
            for _ in range(max_len):
                logp = next_log_probs(np.array([seq for seq, _ in beams]))
                cands = [(score + logp[b, v], b, v) for b, (seq, score) in enumerate(beams)
                         for v in range(logp.shape[1])]
                cands.sort(key=lambda c: -c[0])  # stable: ties keep (beam, token) order
                new = []
                for score, b, v in cands[:beam_size]:
                    (finished if v == eos else new).append((beams[b][0] + [v], score))
                beams = new
                if not beams:
                    break
            pool = finished or beams
            normalised = [score / (len(seq) - 1) ** alpha for seq, score in pool]
            best = int(np.argmax(normalised))
            return np.array(pool[best][0][1:]), normalised[best]
        """,
}


def _verdict(exercise_id, source, key=TEST_KEY):
    # RIGHT["encdec.bpe_merges"] first: its `merge` helper too
    return learner_verdict(exercise_id, [RIGHT["encdec.bpe_merges"], source], NAMESPACE, key)


@pytest.mark.parametrize("exercise_id", sorted(RIGHT))
@pytest.mark.parametrize("key", KEYS)
def test_right_learner_code_scores_full_marks(exercise_id, key):
    verdict = _verdict(exercise_id, RIGHT[exercise_id], key)
    assert verdict.full_marks, verdict.messages


def _mutant(exercise_id, old, new, *more):
    """The right code of ``exercise_id`` with ``old`` replaced by ``new`` (and more such pairs)."""
    source = RIGHT[exercise_id]
    for old, new in [(old, new), *zip(more[::2], more[1::2])]:
        assert old in source, old
        source = source.replace(old, new)
    return exercise_id, source


PRE_LN = ("""h = layernorm_forward(x + mha_forward(x, x, *p["self_attn"], n_heads, mask)[0],
                                  *p["norm1"])[0]
            return layernorm_forward(h + ffn_forward(h, *p["ffn"])[0], *p["norm2"])[0]""",
          """n = layernorm_forward(x, *p["norm1"])[0]
            h = x + mha_forward(n, n, *p["self_attn"], n_heads, mask)[0]
            return h + ffn_forward(layernorm_forward(h, *p["norm2"])[0], *p["ffn"])[0]""")

# (exercise, learner code with one bug, the name the feedback must contain)
WRONG = [
    (*_mutant("encdec.bpe_merges", "min(pairs, key=lambda p: (-pairs[p], p))",
              "max(pairs, key=pairs.get)"), "BPE ties broken by first occurrence"),
    (*_mutant("encdec.bpe_merges", "+ int(n)", "+ 1"), "BPE counts ignored"),
    (*_mutant("encdec.bpe_merges", "min(pairs, key=lambda p: (-pairs[p], p))",
              "max(pairs, key=lambda p: (pairs[p], p))"), "ties broken the other way"),
    (*_mutant("encdec.bpe_encode", "enumerate(merges)", "reversed(list(enumerate(merges)))"),
     "merges applied in the wrong order"),
    (*_mutant("encdec.bpe_encode", "word = merge(word, tuple(pair), first_id + i)",
              "pairs = list(zip(word, word[1:]))\n"
              "                if tuple(pair) in pairs:\n"
              "                    j = pairs.index(tuple(pair))\n"
              "                    word = word[:j] + [first_id + i] + word[j + 2:]"),
     "each merge applied only once per chunk"),
    (*_mutant("encdec.shift_right", "np.concatenate([[bos], target_ids])",
              "np.concatenate([target_ids, [eos]])"), "target not shifted"),
    (*_mutant("encdec.shift_right", "np.concatenate([[bos], target_ids])", "np.array(target_ids)"),
     "start token missing"),
    (*_mutant("encdec.shift_right", "np.concatenate([target_ids, [eos]])", "np.array(target_ids)"),
     "end token missing"),
    (*_mutant("encdec.shift_right", "[[bos], target_ids]), np.concatenate([target_ids, [eos]])",
              "[[1], target_ids]), np.concatenate([target_ids, [2]])"), "hard-coded"),
    (*_mutant("encdec.masks", " & causal", ""), "causal mask missing in the decoder"),
    (*_mutant("encdec.masks", "(tgt_in != pad_id)[:, None, None, :] & causal", "src_keys & causal"),
     "source padding mask applied to decoder self-attention"),
    (*_mutant("encdec.masks", "(tgt_in != pad_id)[:, None, None, :] & causal",
              "np.broadcast_to(causal, (len(tgt_in), 1, T, T))"), "target padding ignored"),
    (*_mutant("encdec.masks", "(src != pad_id)", "(src == pad_id)", "(tgt_in != pad_id)",
              "(tgt_in == pad_id)"), "padding mask inverted"),
    (*_mutant("encdec.masks", "np.tril", "np.triu"), "causal mask transposed"),
    (*_mutant("encdec.embed", " * np.sqrt(W_E.shape[1])", ""),
     "embedding not scaled by sqrt(d_model)"),
    (*_mutant("encdec.embed", "np.sqrt(W_E.shape[1])", "W_E.shape[1]"),
     "embedding scaled by d_model instead of sqrt(d_model)"),
    (*_mutant("encdec.embed", " + P[:ids.shape[1]]", ""), "positions not added"),
    (*_mutant("encdec.encoder_block", "n_heads, mask)", "n_heads)"), "encoder mask ignored"),
    (*_mutant("encdec.encoder_block", PRE_LN[0], PRE_LN[1]), "encoder in Pre-LN order"),
    (*_mutant("encdec.decoder_block", "mha_forward(h, memory,", "mha_forward(h, h,"),
     "cross-attention keys/values taken from the decoder"),
    (*_mutant("encdec.decoder_block", "n_heads, self_mask)", "n_heads, cross_mask)"),
     "source padding mask applied to decoder self-attention"),
    (*_mutant("encdec.decoder_block", "n_heads, self_mask)", "n_heads, MASK)",
              "n_heads, cross_mask)", "n_heads, self_mask)", "MASK", "cross_mask"),
     "self and cross masks swapped"),
    (*_mutant("encdec.decoder_block", "n_heads, self_mask)", "n_heads)"),
     "causal mask missing in the decoder"),
    (*_mutant("encdec.greedy", "                if nxt == eos:\n                    break\n", ""),
     "greedy that never stops at eos"),
    (*_mutant("encdec.greedy", "seq[0, 1:]", "seq[0]"), "greedy that returns bos too"),
    (*_mutant("encdec.beam_search", "score + logp[b, v]", "score + np.exp(logp[b, v])"),
     "summed as probabilities instead of log-probabilities"),
    (*_mutant("encdec.beam_search", "score / (len(seq) - 1) ** alpha", "score"),
     "no length normalisation"),
    (*_mutant("encdec.beam_search", "(finished if v == eos else new)", "new"),
     "finished beams extended"),
    (*_mutant("encdec.beam_search", "cands[:beam_size]", "cands[:1]"), "beam of width 1 (greedy)"),
    (*_mutant("encdec.beam_search", "(len(seq) - 1) ** alpha", "len(seq) ** alpha"),
     "bos counted in the length"),
]


@pytest.mark.parametrize("exercise_id, source, name", WRONG, ids=[w[2] for w in WRONG])
def test_realistic_wrong_learner_code_loses_points_and_is_named(exercise_id, source, name):
    verdict = _verdict(exercise_id, source)
    assert verdict.points < verdict.max_points, f"{name} scores full marks"
    assert any(name in m for m in verdict.messages), (name, verdict.messages)


def test_at_least_ten_realistic_wrong_implementations():
    assert len(WRONG) >= 10 and len({w[0] for w in WRONG}) == len(encdec.EXERCISES)
