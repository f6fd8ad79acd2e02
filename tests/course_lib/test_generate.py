"""course_lib.generate: greedy decoding and beam search for an encoder-decoder model."""
import math

import pytest
import torch

from course_lib import generate as gen
from course_lib import transformer as tf
from course_lib.tokenize import BOS, EOS, PAD

A, B_, C = 3, 4, 5  # the three ordinary tokens of the hand-made model; vocabulary of 6


class TableModel(torch.nn.Module):
    """A hand-made "translator" whose next-token probabilities depend on the prefix only.

    After <s>: a 0.5, b 0.4, c 0.1. After a: a 0.35, b 0.35, c 0.3 (greedy is
    stuck with a poor continuation). After b: </s> 0.9. After anything else: </s> 1.
    Greedy: a a </s>, probability 0.5 * 0.35 * 1 = 0.175; the best: b </s>, 0.36.
    """
    TABLE = {(): {A: 0.5, B_: 0.4, C: 0.1}, (A,): {A: 0.35, B_: 0.35, C: 0.3},
             (B_,): {EOS: 0.9, A: 0.1}}

    def __init__(self):
        super().__init__()
        self.calls = 0

    def encode(self, src):
        return torch.zeros(src.shape[0], 1, 1)

    def decode(self, tgt_in, memory, src):
        self.calls += 1
        probs = torch.full((tgt_in.shape[0], tgt_in.shape[1], 6), 1e-12)
        for i, row in enumerate(tgt_in.tolist()):
            prefix = tuple(t for t in row[1:] if t != PAD)
            for token, p in self.TABLE.get(prefix, {EOS: 1.0}).items():
                probs[i, -1, token] = p
        return probs.log()


def test_greedy_is_myopic_and_beam_search_is_not():
    model, src = TableModel(), torch.zeros(2, 3, dtype=torch.long)
    greedy = gen.greedy_decode(model, src)
    assert greedy.tolist() == [[A, A, EOS]] * 2
    tokens, scores = gen.beam_search(model, src, beam_size=2, alpha=0.0)
    assert tokens[0].tolist()[:2] == [B_, EOS]
    assert scores[0].item() == pytest.approx(math.log(0.36), abs=1e-6)
    # with length normalisation (alpha = 1) b </s> still wins: log(0.36)/2 > log(0.175)/3
    tokens, scores = gen.beam_search(model, src, beam_size=2, alpha=1.0)
    assert tokens[1].tolist()[:2] == [B_, EOS]
    assert scores[1].item() == pytest.approx(math.log(0.36) / 2, abs=1e-6)


def test_finished_beams_are_not_extended():
    model = TableModel()
    tokens, _ = gen.beam_search(model, torch.zeros(1, 3, dtype=torch.long), beam_size=3,
                                alpha=0.0)
    row = tokens[0].tolist()
    assert row[:2] == [B_, EOS] and all(t == PAD for t in row[2:])


def test_greedy_stops_at_the_end_token_and_pads_finished_rows():
    model = TableModel()
    out = gen.greedy_decode(model, torch.zeros(1, 3, dtype=torch.long), max_len=50)
    assert out.shape == (1, 3) and model.calls == 3  # stopped after </s>, not at max_len


def _trained_like_model():
    torch.manual_seed(0)
    cfg = tf.TransformerConfig(vocab_size=12, d_model=16, n_heads=2, d_ff=32, n_layers=2)
    model = tf.Transformer(cfg)
    g = torch.Generator().manual_seed(1)
    src = torch.randint(3, 12, (6, 5), generator=g)
    src[3:, 3:] = PAD
    return model, src


class RandomModel(torch.nn.Module):
    """Random but fixed next-token logits from (source, last token, position), with </s>
    growing likelier with length, so that outputs end at different lengths."""

    def __init__(self, V=9, seed=0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.by_token = torch.randn(V, V, generator=g)
        self.by_source = torch.randn(V, V, generator=g)

    def encode(self, src):
        return self.by_source[src].sum(1, keepdim=True)  # (B, 1, V)

    def decode(self, tgt_in, memory, src):
        logits = 2 * self.by_token[tgt_in] + memory  # (B, t, V)
        logits[..., EOS] += torch.arange(tgt_in.shape[1]) - 3.0
        return logits


def test_beam_width_one_equals_greedy():
    src = torch.randint(3, 9, (40, 4), generator=torch.Generator().manual_seed(0))
    model = RandomModel()
    greedy = gen.greedy_decode(model, src, max_len=10)
    beam, scores = gen.beam_search(model, src, beam_size=1, max_len=10)
    torch.testing.assert_close(beam, greedy)
    lengths = {row.index(EOS) if EOS in row else None for row in greedy.tolist()}
    assert len(lengths) > 2  # the outputs end at different steps
    assert torch.isfinite(scores).all()


def test_beam_width_one_equals_greedy_for_the_transformer():
    model, src = _trained_like_model()
    greedy = gen.greedy_decode(model, src, max_len=8)
    torch.testing.assert_close(gen.beam_search(model, src, beam_size=1, max_len=8)[0], greedy)


def test_wider_beams_mostly_find_sequences_that_score_better():
    """Not on every source: a finished beam leaves the beam, so the greedy path can be pushed
    out and a wider beam can end worse. On most sources it ends better, and on average."""
    src = torch.randint(3, 9, (40, 4), generator=torch.Generator().manual_seed(0))
    model = RandomModel()
    _, one = gen.beam_search(model, src, beam_size=1, max_len=10, alpha=0.0)
    _, four = gen.beam_search(model, src, beam_size=4, max_len=10, alpha=0.0)
    better, worse = (four > one + 1e-3).sum().item(), (four < one - 1e-3).sum().item()
    assert better >= 5 * worse and better >= 10 and four.mean() > one.mean()


@pytest.mark.parametrize("make", [_trained_like_model, lambda: (
    RandomModel(), torch.randint(3, 9, (8, 4), generator=torch.Generator().manual_seed(2)))])
def test_beam_scores_are_length_normalised_log_probabilities(make):
    model, src = make()
    tokens, scores = gen.beam_search(model, src, beam_size=3, max_len=8, alpha=1.0)
    memory = model.encode(src)
    for b in range(len(src)):
        row = tokens[b].tolist()
        seq = row[: row.index(EOS) + 1] if EOS in row else row
        tgt_in = torch.tensor([[BOS] + seq[:-1]])
        logp = gen.next_log_probs  # the same renormalisation as the search
        total = sum(logp(model, tgt_in[:, :t + 1], memory[b:b + 1], src[b:b + 1])[0, tok]
                    for t, tok in enumerate(seq))
        assert scores[b].item() == pytest.approx(total.item() / len(seq), abs=1e-5)


def test_decoding_never_produces_pad_or_start():
    model, src = _trained_like_model()
    with torch.no_grad():  # make <pad> and <s> the likeliest tokens
        model.embed.weight[[PAD, BOS]] *= 50
    for out in (gen.greedy_decode(model, src, 6), gen.beam_search(model, src, 3, 6)[0]):
        for row in out.tolist():
            live = row[: row.index(EOS)] if EOS in row else row
            assert PAD not in live and BOS not in live


class MarkovTables(torch.nn.Module):
    """Source b decodes with its own table: log p(next | t tokens so far, last token) =
    tables[b, t - 1, last]. <pad> and <s> get almost no mass, as course_lib never emits them."""

    def __init__(self, tables):
        super().__init__()
        self.tables = torch.as_tensor(tables, dtype=torch.float32)  # (B, max_len, V, V)

    def encode(self, src):
        return src[:, :1, None].float()  # (B, 1, 1): which table

    def decode(self, tgt_in, memory, src):
        which = memory[:, 0, 0].long()  # (n,)
        t = tgt_in.shape[1]
        last = self.tables[which, t - 1, tgt_in[:, -1]]  # (n, V)
        return last[:, None, :].expand(-1, t, -1)


@pytest.mark.parametrize("seed", range(4))
def test_batched_beam_search_follows_the_exercise_rule(seed):
    """The library's batched beam search returns, source by source, what notebook 05's
    reference (one source, finished beams leave the beam) returns on the same table."""
    import numpy as np

    from autograder.kernel.calls import table_model
    from autograder.exercises.encdec import beam_search as reference

    rng = np.random.default_rng(seed)
    n_sources, max_len, V = 6, 7, 7
    logits = rng.normal(size=(n_sources, max_len, V, V)) * 2.0
    logits[..., EOS] += rng.uniform(-2, 2, size=(n_sources, max_len, V))  # eos early or late
    logits[..., [PAD, BOS]] = -60.0
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    model = MarkovTables(logp)
    src = torch.arange(n_sources)[:, None]
    for beam_size, alpha in ((1, 1.0), (3, 1.0), (4, 0.0), (5, 0.6)):
        tokens, scores = gen.beam_search(model, src, beam_size, max_len, alpha)
        for b in range(n_sources):
            want, want_score = reference(table_model(logp[b]), BOS, EOS, beam_size, max_len, alpha)
            got = tokens[b][tokens[b] != PAD].numpy()
            np.testing.assert_array_equal(got, want, err_msg=f"source {b}, beam {beam_size}")
            assert scores[b].item() == pytest.approx(want_score, abs=1e-4)
