"""course_lib.translation: the date task, its fixed split, and its ids for the model."""
import datetime as dt

import numpy as np
import pytest

from course_lib import translation as tr
from course_lib.tokenize import BOS, EOS, PAD


@pytest.fixture(scope="module")
def splits():
    return tr.make_splits(n_train=3000, n_val=300, n_test=300)


@pytest.fixture(scope="module")
def tokenizer(splits):
    return tr.train_tokenizer(splits.train)


def test_every_format_writes_the_same_date():
    d = dt.date(1994, 3, 21)
    forms = [tr.source_text(d, f) for f in range(len(tr.FORMATS))]
    assert "the twenty-first of March, 1994" in forms
    assert "03/21/1994" in forms and "21.03.94" in forms and "Mon 21 Mar 94" in forms
    assert len(set(forms)) == len(forms)
    assert tr.target_text(d) == "1994-03-21"


def test_ordinals():
    assert [tr.ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 31)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd", "31st"]
    assert [tr.ordinal_word(n) for n in (1, 12, 20, 22, 30, 31)] == [
        "first", "twelfth", "twentieth", "twenty-second", "thirtieth", "thirty-first"]


def test_two_digit_years_are_unambiguous_in_the_date_window():
    assert tr.source_text(dt.date(2049, 1, 2), 11) == "02.01.49"
    assert tr.source_text(dt.date(1950, 1, 2), 11) == "02.01.50"
    assert len(tr.all_dates()) == 36525


def test_splits_are_deterministic(splits):
    again = tr.make_splits(n_train=3000, n_val=300, n_test=300)
    assert again == splits
    assert tr.make_splits(n_train=3000, n_val=300, n_test=300, seed=1).test != splits.test
    assert (len(splits.train), len(splits.val), len(splits.test)) == (3000, 300, 300)


def test_splits_share_no_date(splits):
    dates = {name: {t for _, t in getattr(splits, name)} for name in ("train", "val", "test")}
    assert not dates["train"] & dates["val"]
    assert not dates["train"] & dates["test"]
    assert not dates["val"] & dates["test"]
    assert len(set(splits.train)) == len(splits.train)  # no pair twice


def test_all_formats_occur_in_training(splits):
    d = {}
    for s, t in splits.train:
        d.setdefault(t, []).append(s)
    assert len(splits.train) > len(d)  # some dates appear in several forms
    lengths = {len(s) for s, _ in splits.train}
    assert min(lengths) < 10 < max(lengths)  # sources shorter and longer than targets


def test_pairs_round_trip_through_the_tokenizer(splits, tokenizer):
    for s, t in splits.train[:200] + splits.test[:200]:
        assert tokenizer.decode(tokenizer.encode(s)) == s
        assert tokenizer.decode(tokenizer.encode(t)) == t
    assert len(tokenizer.encode("1994-03-21")) == 10  # digits stay single tokens


def test_decoder_input_and_target_shift_by_one():
    tgt_in, tgt_out = tr.decoder_input_and_target([7, 8, 9])
    assert tgt_in == [BOS, 7, 8, 9]
    assert tgt_out == [7, 8, 9, EOS]


def test_encode_pairs_pads_with_pad(tokenizer):
    pairs = [("3 March 1994", "1994-03-03"), ("the twenty-first of March, 1994", "1994-03-21")]
    src, tgt_in, tgt_out = tr.encode_pairs(tokenizer, pairs)
    assert src.dtype == np.int64 and src.shape[0] == 2
    assert src[0, -1] == PAD and (src[1] != PAD).all()
    assert tgt_in.shape == tgt_out.shape == (2, 11)
    assert (tgt_in[:, 0] == BOS).all() and (tgt_out[:, -1] == EOS).all()
    np.testing.assert_array_equal(tgt_in[:, 1:], tgt_out[:, :-1])
    assert tokenizer.decode(src[1]) == pairs[1][0]


def test_a_few_training_steps_lower_the_loss(splits, tokenizer):
    cfg = tr.TransformerConfig(tokenizer.vocab_size, d_model=32, n_heads=2, d_ff=64, n_layers=1)
    model, _, history = tr.train_translation(splits, tokenizer, cfg, steps=60, batch_size=32,
                                             warmup=20, eval_every=30)
    assert history["step"] == [30, 60]
    assert history["train_loss"][-1] < history["train_loss"][0] < np.log(tokenizer.vocab_size)
    assert 0 <= history["val_token_acc"][-1] <= 1
    scores = tr.evaluate(model, tokenizer, splits.test[:20], method="greedy")
    assert len(scores["predictions"]) == 20 and 0 <= scores["exact"] <= scores["token_acc"] + 1
    beam = tr.evaluate(model, tokenizer, splits.test[:20], method="beam", beam_size=2)
    assert len(beam["predictions"]) == 20
    assert not model.training
    assert next(model.parameters()).device.type == tr.default_device()
