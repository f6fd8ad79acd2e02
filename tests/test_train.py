"""course_lib.train (batches, evaluator, trainer, results table) and course_lib.generate."""
import math

import numpy as np
import pytest
import torch

from course_lib import generate, train
from course_lib.data import generated_text, split
from course_lib.ngram import NgramLM
from course_lib.rnn import CharRNN, RNNConfig
from course_lib.tokenize import CharTokenizer


@pytest.fixture(scope="module")
def corpus():
    text = generated_text(20_000)
    tok = CharTokenizer.from_text(text)
    tr, va = split(text)
    return tok, tok.encode(tr), tok.encode(va)


def test_tokenizer_round_trip(corpus):
    tok = corpus[0]
    assert tok.decode(tok.encode("The king.")) == "The king."
    with pytest.raises(KeyError, match="'#'"):
        tok.encode("#")


def test_batches_are_windows_and_their_next_characters(corpus):
    _, ids, _ = corpus
    x, y = train.get_batch(ids, 4, 16, np.random.default_rng(0), "cpu")
    assert x.shape == y.shape == (4, 16)
    assert torch.equal(x[:, 1:], y[:, :-1])


def test_evaluator_is_the_mean_negative_log_probability(corpus):
    tok, ids, val = corpus
    model = NgramLM(2, tok.vocab_size).fit(ids)
    nll = train.evaluate(model, val, device="cpu", block_size=100)
    n = (len(val) - 1) // 100 * 100
    x, y = val[:n].reshape(-1, 100), val[1:n + 1].reshape(-1, 100)
    logp = torch.log_softmax(model(torch.from_numpy(x))[0], -1).numpy()
    want = -np.take_along_axis(logp, y[..., None], -1).mean()
    assert nll == pytest.approx(want, rel=1e-5)
    assert train.bits_per_char(nll) == pytest.approx(nll / math.log(2))


def test_training_lowers_the_validation_loss(corpus):
    tok, ids, val = corpus
    model = CharRNN(RNNConfig(tok.vocab_size, cell="lstm", d_embed=16, d_hidden=32, block_size=32))
    before = train.evaluate(model, val, device="cpu")
    history = train.train(model, ids, steps=40, val_ids=val, batch_size=16, eval_every=20,
                          device="cpu", lr=1e-2)
    assert history["step"] == [20, 40]
    assert history["val"][-1] < before - 0.5


def test_results_file_per_mode(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("COURSE_MODE", "ci")
    train.save_result("2-gram", math.log(8))
    results = train.save_result("LSTM", math.log(4))
    assert train.results_path().name == "lm_results_ci.json"
    assert list(train.load_results()) == ["2-gram", "LSTM"]
    assert results["2-gram"]["bpc"] == pytest.approx(3) and results["LSTM"]["ppl"] == pytest.approx(4)
    assert "LSTM" in train.results_table(results)


def test_temperature_zero_and_top_1_are_greedy(corpus):
    tok, ids, _ = corpus
    model = NgramLM(3, tok.vocab_size).fit(ids)
    greedy = generate.sample_text(model, tok, "The", 30, temperature=0)
    assert generate.sample_text(model, tok, "The", 30, top_k=1, seed=5) == greedy
    assert generate.sample_text(model, tok, "The", 30, seed=3) == \
        generate.sample_text(model, tok, "The", 30, seed=3)


def test_top_k_keeps_k_faces():
    probs = generate.next_token_probs(torch.tensor([[0.0, 3.0, 1.0, 2.0]]), top_k=2)
    assert (probs[0] > 0).tolist() == [False, True, False, True]


@pytest.mark.parametrize("mode, shown", [("full", True), ("ci", False), ("grade", False)])
def test_progress_bar_only_in_full_mode(monkeypatch, mode, shown):
    from course_lib.runmode import progress

    monkeypatch.setenv("COURSE_MODE", mode)
    bar = progress(range(3), desc="steps")
    assert bar.disable is not shown
    assert list(bar) == [0, 1, 2]
    bar.set_postfix(loss="1.0")  # accepted whether shown or not


def test_get_batch_draws_every_window_the_last_one_included():
    ids = np.arange(10)  # windows of 4 + 1 tokens start at 0 .. 5
    x, y = train.get_batch(ids, 400, 4, np.random.default_rng(0), "cpu")
    assert set(x[:, 0].tolist()) == set(range(6)) and int(y.max()) == 9
    assert (y == x + 1).all()
    with pytest.raises(ValueError, match="cannot hold a window"):
        train.get_batch(np.arange(4), 1, 4, np.random.default_rng(0), "cpu")
