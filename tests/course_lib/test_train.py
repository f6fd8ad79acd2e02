"""course_lib.train (batches, evaluator, trainer, results table) and course_lib.generate."""
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

from course_lib import generate, train
from course_lib.data import generated_text, split
from course_lib.ngram import NgramLM
from course_lib.rnn import CharRNN, RNNConfig
from course_lib.tokenize import CharTokenizer
from helpers import REPO


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


def test_the_training_plot_names_its_model(corpus):
    """Notebook 01 trains an RNN and an LSTM, one live plot each: each plot says which."""
    from IPython.core.interactiveshell import InteractiveShell
    from matplotlib.figure import Figure

    tok, ids, val = corpus
    shown = []  # every figure the notebook would display, as IPython hands it to a formatter
    shell = InteractiveShell.instance()
    try:
        shell.display_formatter.formatters["text/plain"].for_type(Figure, lambda fig, p, cycle: shown.append(fig))
        for cell, name in (("rnn", "RNN"), ("lstm", None)):
            model = CharRNN(RNNConfig(tok.vocab_size, cell=cell, d_embed=8, d_hidden=8, block_size=16))
            train.train(model, ids, steps=4, val_ids=val[:200], batch_size=4, eval_every=2, device="cpu",
                        plot=True, name=name)
    finally:
        InteractiveShell.clear_instance()
    titles = [fig.get_suptitle() for fig in shown]
    assert titles == ["RNN: loss while training"] * 2 + ["CharRNN: loss while training"] * 2, titles


def test_results_say_which_rows_an_earlier_run_saved(tmp_path, monkeypatch):
    """Notebook 01's table after its n-grams listed the RNN and LSTM of a run days before as if
    this run had trained them: each row now says which run saved it, and when."""
    import matplotlib.pyplot as plt

    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("COURSE_MODE", "ci")
    earlier = "from course_lib import train; train.save_result('LSTM', 1.0)"  # another kernel
    subprocess.run([sys.executable, "-c", earlier], check=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    results = train.save_result("5-gram", math.log(4))
    header, lstm, five, note = train.results_table(results).splitlines()
    assert header.endswith("saved by") and five.endswith("this run")
    assert re.search(r"earlier run, \d\d \w{3} \d\d:\d\d$", lstm), lstm
    assert str(train.results_path()) in note
    assert len(train.results_table({"5-gram": results["5-gram"]}).splitlines()) == 2  # no note
    fig = train.plot_results(results)
    assert [bar.get_hatch() for bar in fig.axes[0].patches] == ["//", None]
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["saved by an earlier run"]
    plt.close(fig)


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


# --- the options notebook 06 trains GPT with (nanoGPT's recipe) ------------------------------

def tiny_gpt(vocab_size, seed=0):
    from course_lib.transformer import GPT, GPTConfig

    torch.manual_seed(seed)
    return GPT(GPTConfig(vocab_size, block_size=16, d_model=16, n_heads=2, n_layers=1))


def test_learning_rate_warms_up_linearly_then_follows_a_half_cosine():
    lr = [train.lr_at(s, 1e-3, steps=110, warmup=10, min_lr=1e-4) for s in range(1, 111)]
    assert lr[:10] == pytest.approx([1e-4 * s for s in range(1, 11)])  # 1e-3 at step 10
    assert lr[59] == pytest.approx(5.5e-4)  # half-way through the decay: the mean of the two
    assert lr[-1] == pytest.approx(1e-4) and all(a >= b for a, b in zip(lr[9:], lr[10:]))
    assert train.lr_at(500, 1e-3, steps=110, warmup=10) == 1e-3  # no min_lr: constant


def test_weight_decay_shrinks_only_the_weight_matrices(corpus):
    tok = corpus[0]
    model = tiny_gpt(tok.vocab_size)
    with torch.no_grad():
        model.norm_f.gamma.fill_(2.0)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = train.make_optimizer(model, lr=0.1, weight_decay=0.5)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)  # Adam's step is 0: only the decay moves anything
    opt.step()
    for name, p in model.named_parameters():
        factor = 1 - 0.1 * 0.5 if p.dim() == 2 else 1.0  # W <- W - lr * wd * W
        assert torch.allclose(p, factor * before[name]), name


def test_default_optimizer_is_plain_adam(corpus):
    tok, ids, _ = corpus
    models = [tiny_gpt(tok.vocab_size), tiny_gpt(tok.vocab_size)]
    opts = [train.make_optimizer(models[0], 1e-2), torch.optim.Adam(models[1].parameters(), 1e-2)]
    x, y = train.get_batch(ids, 4, 16, np.random.default_rng(0), "cpu")
    for _ in range(3):
        for model, opt in zip(models, opts):
            opt.zero_grad()
            model(x, y)[1].backward()
            opt.step()
    for a, b in zip(*(m.parameters() for m in models)):
        assert torch.allclose(a, b, atol=1e-6)


def test_fused_step_matches_the_plain_one(corpus):
    tok, ids, _ = corpus
    runs = [list(train.train_steps(tiny_gpt(tok.vocab_size), ids, steps=5, batch_size=4,
                                   weight_decay=0.1, fused=fused, device="cpu"))
            for fused in (False, True)]
    assert [s for s, _, _ in runs[0]] == [1, 2, 3, 4, 5]
    assert [loss for *_, loss in runs[0]] == pytest.approx([loss for *_, loss in runs[1]], rel=1e-4)


def test_eval_batches_are_fixed_windows_and_their_mean_loss(corpus):
    tok, ids, val = corpus
    batches = train.val_batches(val, 3, 4, 16, "cpu", seed=5)
    again = train.val_batches(val, 3, 4, 16, "cpu", seed=5)
    assert all(torch.equal(a[0], b[0]) for a, b in zip(batches, again))
    model = tiny_gpt(tok.vocab_size)
    want = np.mean([model(x, y)[1].item() for x, y in batches])
    assert train.evaluate_batches(model, batches) == pytest.approx(want)


def test_train_with_the_gpt_recipe_records_lr_time_and_eval_batches(corpus):
    tok, ids, val = corpus
    model = tiny_gpt(tok.vocab_size)
    history = train.train(model, ids, steps=30, val_ids=val, batch_size=8, lr=1e-2, warmup=5,
                          min_lr=1e-3, weight_decay=0.1, betas=(0.9, 0.99), eval_every=10,
                          eval_batches=4, device="cpu")
    assert history["step"] == [10, 20, 30]
    assert history["lr"] == pytest.approx([train.lr_at(s, 1e-2, 30, 5, 1e-3) for s in (10, 20, 30)])
    assert history["lr"][-1] == pytest.approx(1e-3)
    assert 0 < history["seconds"][0] < history["seconds"][1] < history["seconds"][2]
    # a GPT whose context (16) is shorter than EVAL_BLOCK is scored on batches of its own size
    batches = train.val_batches(val, 4, 8, 16, "cpu")
    assert history["val"][-1] == pytest.approx(train.evaluate_batches(model, batches))
    assert history["val"][-1] < math.log(tok.vocab_size) - 0.5


def test_time_budget_stops_training_early(corpus):
    tok, ids, val = corpus
    history = train.train(tiny_gpt(tok.vocab_size), ids, steps=1000, val_ids=val, batch_size=4,
                          eval_every=500, eval_batches=1, minutes=1e-9, device="cpu")
    assert history["step"] == [1] and len(history["val"]) == 1
