"""course_lib.rnn: BPTT and the LSTM cell against finite differences, numpy against torch."""
import numpy as np
import pytest
import torch

from course_lib import rnn
from course_lib.gradcheck import numerical_gradient, rel_error


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def _rnn_params(rng, B=2, T=4, D=3, H=5):
    return dict(x=rng.normal(size=(B, T, D)), h0=rng.normal(size=(B, H)),
                Wxh=rng.normal(size=(D, H)) * 0.5, Whh=rng.normal(size=(H, H)) * 0.5,
                b=rng.normal(size=H))


def test_bptt_matches_finite_differences(rng):
    p = _rnn_params(rng)
    h, cache = rnn.rnn_forward(**p)
    dh = rng.normal(size=h.shape)
    grads = dict(zip(("x", "h0", "Wxh", "Whh", "b"), rnn.rnn_backward(dh, cache)))
    for name, analytic in grads.items():
        numeric = numerical_gradient(lambda _: np.sum(rnn.rnn_forward(**p)[0] * dh), p[name])
        assert rel_error(analytic, numeric) < 1e-7, name


def test_rnn_lm_loss_gradients(rng):
    V, H = 4, 3
    params = dict(Wxh=rng.normal(size=(V, H)), Whh=rng.normal(size=(H, H)) * 0.5,
                  b=rng.normal(size=H), Why=rng.normal(size=(H, V)), by=rng.normal(size=V))
    idx, targets = rng.integers(0, V, size=(2, 5)), rng.integers(0, V, size=(2, 5))
    _, grads = rnn.rnn_lm_loss(params, idx, targets)
    for name in params:
        numeric = numerical_gradient(lambda _: rnn.rnn_lm_loss(params, idx, targets)[0], params[name])
        assert rel_error(grads[name], numeric) < 1e-7, name


def test_lstm_cell_backward_matches_finite_differences(rng):
    B, D, H = 3, 2, 4
    p = dict(x=rng.normal(size=(B, D)), h_prev=rng.normal(size=(B, H)),
             c_prev=rng.normal(size=(B, H)), W=rng.normal(size=(H + D, 4 * H)) * 0.5,
             b=rng.normal(size=4 * H))
    h, c, cache = rnn.lstm_cell_forward(**p)
    dh, dc = rng.normal(size=h.shape), rng.normal(size=c.shape)
    grads = dict(zip(("x", "h_prev", "c_prev", "W", "b"), rnn.lstm_cell_backward(dh, dc, cache)))

    def loss(_):
        h, c, _ = rnn.lstm_cell_forward(**p)
        return np.sum(h * dh) + np.sum(c * dc)

    for name, analytic in grads.items():
        assert rel_error(analytic, numerical_gradient(loss, p[name])) < 1e-7, name


def test_numpy_rnn_matches_torch_rnn(rng):
    p = _rnn_params(rng)
    layer = torch.nn.RNN(3, 5, batch_first=True).double()
    with torch.no_grad():
        layer.weight_ih_l0.copy_(torch.from_numpy(p["Wxh"].T))
        layer.weight_hh_l0.copy_(torch.from_numpy(p["Whh"].T))
        layer.bias_ih_l0.copy_(torch.from_numpy(p["b"]))
        layer.bias_hh_l0.zero_()
    want, _ = layer(torch.from_numpy(p["x"]), torch.from_numpy(p["h0"])[None])
    np.testing.assert_allclose(rnn.rnn_forward(**p)[0], want.detach().numpy(), atol=1e-12)


def test_numpy_lstm_matches_torch_lstm(rng):
    B, T, D, H = 2, 5, 3, 4
    x, h0, c0 = rng.normal(size=(B, T, D)), rng.normal(size=(B, H)), rng.normal(size=(B, H))
    W, b = rng.normal(size=(H + D, 4 * H)) * 0.5, rng.normal(size=4 * H)
    i, f, o, g = np.split(np.arange(4 * H), 4)
    torch_order = np.concatenate([i, f, g, o])  # torch stacks its gates as i, f, g, o
    layer = torch.nn.LSTM(D, H, batch_first=True).double()
    with torch.no_grad():
        layer.weight_hh_l0.copy_(torch.from_numpy(W[:H, torch_order].T))
        layer.weight_ih_l0.copy_(torch.from_numpy(W[H:, torch_order].T))
        layer.bias_ih_l0.copy_(torch.from_numpy(b[torch_order]))
        layer.bias_hh_l0.zero_()
    want, _ = layer(torch.from_numpy(x), (torch.from_numpy(h0)[None], torch.from_numpy(c0)[None]))
    np.testing.assert_allclose(rnn.lstm_forward(x, h0, c0, W, b), want.detach().numpy(), atol=1e-12)


@pytest.mark.parametrize("cell", ["rnn", "lstm"])
def test_char_rnn_interface(cell):
    torch.manual_seed(0)
    model = rnn.CharRNN(rnn.RNNConfig(vocab_size=11, cell=cell, d_hidden=16, d_embed=8))
    idx = torch.randint(0, 11, (3, 7))
    logits, loss = model(idx, idx)
    assert logits.shape == (3, 7, 11) and model(idx)[1] is None
    assert abs(loss.item() - np.log(11)) < 0.5  # near a fair die before training


def test_elman_function_backward_is_the_numpy_bptt_and_agrees_with_autograd(rng):
    p = _rnn_params(rng)
    dh = rng.normal(size=(2, 4, 5))
    leaves = {k: torch.tensor(v, requires_grad=True) for k, v in p.items()}
    h = rnn.ElmanFunction.apply(*leaves.values())
    h.backward(torch.from_numpy(dh))
    want_h, cache = rnn.rnn_forward(**p)
    np.testing.assert_allclose(h.detach().numpy(), want_h, atol=1e-12)
    for name, want in zip(("x", "h0", "Wxh", "Whh", "b"), rnn.rnn_backward(dh, cache)):
        np.testing.assert_allclose(leaves[name].grad.numpy(), want, atol=1e-12, err_msg=name)
    assert torch.autograd.gradcheck(rnn.ElmanFunction.apply, tuple(
        torch.tensor(v, requires_grad=True) for v in p.values()))
