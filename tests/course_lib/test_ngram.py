"""course_lib.ngram (exercise references and the Witten-Bell NgramLM) and lm's mistake bank."""
import numpy as np
import pytest
import torch

from autograder.judge.exercise import as_outputs
from exercise_bank import TEST_KEY
from autograder.exercises import lm
from autograder.judge.verdict import judge
from course_lib import ngram
from course_lib.data import generated_text, split
from course_lib.generate import sample
from course_lib.tokenize import CharTokenizer
from exercise_bank import mistake_verdicts


def test_counts_of_a_known_sequence():
    counts = ngram.count_ngrams(np.array([0, 1, 0, 1, 1]), 2, 2)
    np.testing.assert_array_equal(counts, [[0, 2], [1, 1]])
    assert ngram.count_ngrams(np.arange(7) % 3, 3, 3).sum() == 5


def test_add_k_rows_are_distributions_and_unseen_contexts_uniform():
    counts = np.array([[2, 0, 2], [0, 0, 0], [1, 1, 0]])
    np.testing.assert_allclose(ngram.ngram_probs(counts)[0], [0.5, 0, 0.5])
    np.testing.assert_allclose(ngram.ngram_probs(counts)[1], [1 / 3] * 3)
    np.testing.assert_allclose(ngram.ngram_probs(counts, k=1.0)[2], [2 / 5, 2 / 5, 1 / 5])
    np.testing.assert_allclose(ngram.ngram_probs(counts, k=0.3).sum(-1), 1.0)


def test_the_die_follows_its_weights_and_never_shows_a_zero_face():
    rng = np.random.default_rng(0)
    weights = np.array([3.0, 0.0, 1.0])
    faces = ngram.roll_die(np.tile(weights, (20_000, 1)), rng.random(20_000))
    freq = np.bincount(faces, minlength=3) / len(faces)
    np.testing.assert_allclose(freq, weights / 4, atol=0.02)
    assert freq[1] == 0


def test_perplexity_of_a_fair_die_is_its_number_of_faces():
    ppl, bpc = ngram.perplexity(np.full((10, 8), 1 / 8), np.arange(10) % 8)
    assert ppl == pytest.approx(8) and bpc == pytest.approx(3)


def _data(n_chars=20_000):
    text = generated_text(n_chars)
    tok = CharTokenizer.from_text(text)
    train, val = split(text)
    return tok, tok.encode(train), tok.encode(val)


def test_bigram_lm_is_witten_bell_over_add_one_unigrams():
    tok, train, _ = _data(5_000)
    V = tok.vocab_size
    model = ngram.NgramLM(2, V).fit(train)
    c = ngram.count_ngrams(train, 2, V).astype(float)
    p1 = (np.bincount(train, minlength=V) + 1) / (len(train) + V)
    types = (c > 0).sum(1, keepdims=True)
    total = c.sum(1, keepdims=True)
    want = np.where(total > 0, (c + types * p1) / np.maximum(total + types, 1), p1)
    got = model.probs(np.arange(V)[:, None])
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_ngram_lm_interface_and_longer_contexts_help():
    tok, train, val = _data()
    x = torch.from_numpy(val[:-1][None, :])
    y = torch.from_numpy(val[1:][None, :])
    losses = []
    for n in (1, 2, 3):
        logits, loss = ngram.NgramLM(n, tok.vocab_size).fit(train)(x, y)
        assert logits.shape == (1, x.shape[1], tok.vocab_size)
        np.testing.assert_allclose(logits.exp().sum(-1).numpy(), 1.0, rtol=1e-5)
        losses.append(loss.item())
    assert losses[0] > losses[1] > losses[2]


def test_sampling_an_ngram_is_repeatable_with_a_seed():
    tok, train, _ = _data()
    model = ngram.NgramLM(3, tok.vocab_size).fit(train)
    start = torch.from_numpy(tok.encode("HAMLET.\n"))[None, :]
    runs = [sample(model, start, 40, generator=torch.Generator().manual_seed(1)) for _ in range(2)]
    assert torch.equal(runs[0], runs[1]) and runs[0].shape == (1, 48)


def test_lm_references_score_full_marks():
    for ex in lm.EXERCISES:
        cases = ex.graded_cases(TEST_KEY)
        results = [as_outputs(ex.reference(**c)) for c in cases]
        assert judge(ex, cases, results).full_marks, ex.id


@pytest.mark.parametrize("exercise_id, name, verdict",
                         list(mistake_verdicts(lm.EXERCISES)), ids=lambda v: str(v)[:40])
def test_every_lm_mistake_loses_points_and_is_named(exercise_id, name, verdict):
    assert verdict.points < verdict.max_points
    assert any(name in m for m in verdict.messages), verdict.messages
