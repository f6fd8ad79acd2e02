"""course_lib.scaling_runs: the mini scaling-law experiment of notebook 06, in tiny runs."""
import math

import numpy as np
import pytest

from course_lib import scaling_runs
from course_lib.data import generated_text, split
from course_lib.scaling import fit_power_law
from course_lib.tokenize import CharTokenizer


@pytest.fixture(scope="module")
def corpus():
    text = generated_text(30_000)
    tok = CharTokenizer.from_text(text)
    tr, va = split(text)
    return tok, tok.encode(tr), tok.encode(va)


@pytest.fixture(scope="module")
def tiny_runs(corpus):
    tok, train_ids, val_ids = corpus
    return scaling_runs.scaling_experiment(train_ids, val_ids, scaling_runs.TINY_SIZES, 60_000,
                                           vocab_size=tok.vocab_size, block_size=32,
                                           device="cpu")


def test_one_result_per_size_smallest_first(tiny_runs):
    assert len(tiny_runs) == 5
    n = [r["non_embedding_params"] for r in tiny_runs]
    assert n == sorted(n) and n[-1] / n[0] > 10
    for r in tiny_runs:
        assert set(r) == {"n_layers", "d_model", "n_heads", "non_embedding_params", "tokens",
                          "steps", "val_loss", "seconds"}
        assert r["tokens"] == r["steps"] * scaling_runs.FAST_RECIPE["batch_size"] * 32 <= 60_000
        assert r["seconds"] > 0


def test_every_model_learned_and_the_power_law_fits(corpus, tiny_runs):
    tok = corpus[0]
    loss = [r["val_loss"] for r in tiny_runs]
    assert max(loss) < math.log(tok.vocab_size) - 0.5  # well below a uniform guess
    assert loss[-1] < loss[0]  # the largest model beats the smallest
    n_c, alpha = fit_power_law([r["non_embedding_params"] for r in tiny_runs], loss)
    assert 0 < alpha < 1 and np.isfinite(n_c)
    assert "val loss" in scaling_runs.scaling_table(tiny_runs)


def test_cached_results_are_kept_per_mode(corpus, tiny_runs, tmp_path, monkeypatch):
    tok, train_ids, val_ids = corpus
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("COURSE_MODE", "ci")
    sizes = [(1, 8), (1, 16)]
    args = dict(vocab_size=tok.vocab_size, block_size=32, device="cpu", cached=True)
    first = scaling_runs.scaling_experiment(train_ids, val_ids, sizes, 2_000, **args)
    assert scaling_runs.results_path() == tmp_path / "scaling_runs_ci.json"
    assert scaling_runs.load_results()["runs"] == first

    def no_training(*a, **k):
        raise AssertionError("trained although the results were cached")

    monkeypatch.setattr(scaling_runs, "train_one", no_training)
    assert scaling_runs.scaling_experiment(train_ids, val_ids, sizes, 2_000, **args) == first
    with pytest.raises(AssertionError, match="trained although"):  # other tokens: not cached
        scaling_runs.scaling_experiment(train_ids, val_ids, sizes, 4_000, **args)
    monkeypatch.setenv("COURSE_MODE", "full")
    assert scaling_runs.load_results() is None


def test_mode_picks_tiny_sizes_outside_full_mode(monkeypatch):
    monkeypatch.setenv("COURSE_MODE", "ci")
    assert scaling_runs.default_sizes() == scaling_runs.TINY_SIZES
    monkeypatch.setenv("COURSE_MODE", "full")
    assert scaling_runs.default_sizes() == scaling_runs.FULL_SIZES
    assert scaling_runs.default_tokens() == scaling_runs.FULL_TOKENS
