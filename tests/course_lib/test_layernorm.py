"""course_lib.layernorm (numpy reference, torch path) and the exercises of notebook 04."""
import numpy as np
import pytest
import torch
from torch.nn import functional as F

from autograder.exercises import layernorm as exercises
from course_lib import layernorm as ln
from course_lib.gradcheck import numerical_gradient, rel_error
from exercise_bank import mistake_verdicts


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def _params(rng, d):
    return rng.normal(1.0, 0.5, size=d), rng.normal(size=d)


def test_layernorm_normalises_each_vector(rng):
    x = rng.normal(size=(3, 4, 10)) * 5 + 2
    out, _ = ln.layernorm_forward(x, np.ones(10), np.zeros(10))
    np.testing.assert_allclose(out.mean(-1), 0, atol=1e-12)
    np.testing.assert_allclose(out.var(-1), 1, rtol=1e-5)


def test_layernorm_matches_torch(rng):
    x, (gamma, beta) = rng.normal(size=(2, 5, 8)), _params(rng, 8)
    want = F.layer_norm(torch.tensor(x), (8,), torch.tensor(gamma), torch.tensor(beta), eps=ln.EPS)
    np.testing.assert_allclose(ln.layernorm_forward(x, gamma, beta)[0], want.numpy(), atol=1e-12)


@pytest.mark.parametrize("shape", [(4, 6), (2, 3, 5), (1, 1)])
def test_layernorm_backward_matches_finite_differences(rng, shape):
    x, (gamma, beta), dout = rng.normal(size=shape), _params(rng, shape[-1]), rng.normal(size=shape)
    dx, dgamma, dbeta = ln.layernorm_backward(dout, ln.layernorm_forward(x, gamma, beta)[1])
    loss = lambda: np.sum(ln.layernorm_forward(x, gamma, beta)[0] * dout)
    for analytic, wrt in ((dx, x), (dgamma, gamma), (dbeta, beta)):
        assert rel_error(analytic, numerical_gradient(lambda _: loss(), wrt)) < 1e-7


@pytest.mark.parametrize("shape", [(3, 4, 6), (6,)])  # (6,): one vector, no leading axis to sum
def test_torch_layer_norm_backward_matches_autograd_and_numpy(rng, shape):
    x, (gamma, beta), dout = rng.normal(size=shape), _params(rng, 6), rng.normal(size=shape)
    leaves = [torch.tensor(a, requires_grad=True) for a in (x, gamma, beta)]
    ln.layer_norm_torch(*leaves).backward(torch.tensor(dout))
    ours = [t.grad.clone() for t in leaves]
    for t in leaves:
        t.grad = None
    F.layer_norm(leaves[0], (6,), leaves[1], leaves[2], eps=ln.EPS).backward(torch.tensor(dout))
    for mine, theirs in zip(ours, leaves):
        torch.testing.assert_close(mine, theirs.grad)
    numpy_grads = ln.layernorm_backward(dout, ln.layernorm_forward(x, gamma, beta)[1])
    for mine, want in zip(ours, numpy_grads):
        np.testing.assert_allclose(mine.numpy(), want, atol=1e-12)
    assert torch.autograd.gradcheck(ln.layer_norm_torch, [t.detach().requires_grad_() for t in leaves])


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device"))])
def test_torch_layer_norm_takes_bfloat16_activations_with_float32_gains(rng, device):
    """A bfloat16 x with float32 gamma and beta, outside autocast (a model cast in part, or
    activations kept in bfloat16): native_layer_norm mixes them, and the torch backward, which
    works in float32 there, hands back each gradient in its input's dtype, each within
    bfloat16's rounding of the float64 numbers."""
    x, (gamma, beta), dout = rng.normal(size=(4, 8, 32)), _params(rng, 32), rng.normal(size=(4, 8, 32))
    leaves = [torch.tensor(a, dtype=dtype, device=device, requires_grad=True)
              for a, dtype in ((x, torch.bfloat16), (gamma, torch.float32), (beta, torch.float32))]
    out = ln.layer_norm_torch(*leaves)
    out.backward(torch.tensor(dout, dtype=out.dtype, device=device))
    assert out.grad_fn.name() == "_LayerNormFunctionBackward"
    assert [t.grad.dtype for t in leaves] == [torch.bfloat16, torch.float32, torch.float32]
    x64 = leaves[0].detach().double().cpu().numpy()  # the bfloat16 numbers the model saw
    want_out, cache = ln.layernorm_forward(x64, gamma, beta)
    dout64 = torch.tensor(dout, dtype=out.dtype).double().numpy()
    for got, want in zip((out, *(t.grad for t in leaves)), (want_out, *ln.layernorm_backward(dout64, cache))):
        np.testing.assert_allclose(got.detach().double().cpu().numpy(), want, rtol=0.02, atol=0.05)


def test_layer_norm_ignores_the_batch_and_batch_norm_does_not(rng):
    x, (gamma, beta) = rng.normal(size=(8, 6)), _params(rng, 6)
    other = x.copy()
    other[1:] = rng.normal(size=(7, 6)) * 3  # change every example except the first
    first = lambda f, a: f(a, gamma, beta)[0][0]
    np.testing.assert_allclose(first(ln.layernorm_forward, x), first(ln.layernorm_forward, other))
    assert not np.allclose(first(ln.batchnorm_forward, x), first(ln.batchnorm_forward, other))


def test_batchnorm_uses_running_statistics_at_test_time(rng):
    x, (gamma, beta) = rng.normal(size=(16, 4)) + 3, _params(rng, 4)
    train_out, (mean, var) = ln.batchnorm_forward(x, gamma, beta)
    np.testing.assert_allclose(((train_out - beta) / gamma).mean(0), 0, atol=1e-12)
    test_out, used = ln.batchnorm_forward(x[:1], gamma, beta, running=(mean, var))
    np.testing.assert_allclose(test_out, train_out[:1])
    assert used[0] is mean


def _ffn_params(rng, d, d_ff):
    return (rng.normal(size=(d, d_ff)) / np.sqrt(d), rng.normal(size=d_ff),
            rng.normal(size=(d_ff, d)) / np.sqrt(d_ff), rng.normal(size=d))


def test_ffn_backward_matches_finite_differences(rng):
    x, params, dout = rng.normal(size=(2, 3, 4)), _ffn_params(rng, 4, 8), rng.normal(size=(2, 3, 4))
    grads = ln.ffn_backward(dout, ln.ffn_forward(x, *params)[1])
    loss = lambda: np.sum(ln.ffn_forward(x, *params)[0] * dout)
    for analytic, wrt in zip(grads, (x,) + params):
        assert rel_error(analytic, numerical_gradient(lambda _: loss(), wrt)) < 1e-7


@pytest.mark.parametrize("order", ["post", "pre"])
def test_torch_residual_block_matches_numpy(rng, order):
    d, d_ff = 6, 12
    x, params, (gamma, beta) = rng.normal(size=(2, 3, d)), _ffn_params(rng, d, d_ff), _params(rng, d)
    block = ln.ResidualBlock(ln.FeedForward(d, d_ff), d, order).double()
    W1, b1, W2, b2 = (torch.tensor(p) for p in params)
    with torch.no_grad():
        block.sublayer.fc1.weight.copy_(W1.T), block.sublayer.fc1.bias.copy_(b1)
        block.sublayer.fc2.weight.copy_(W2.T), block.sublayer.fc2.bias.copy_(b2)
        block.norm.gamma.copy_(torch.tensor(gamma)), block.norm.beta.copy_(torch.tensor(beta))
        got = block(torch.tensor(x)).numpy()
    numpy_block = ln.post_ln_block if order == "post" else ln.pre_ln_block
    np.testing.assert_allclose(got, numpy_block(x, *params, gamma, beta), atol=1e-12)


def test_pre_ln_keeps_the_raw_input_on_the_residual_path(rng):
    x = rng.normal(size=(3, 4)) * 10 + 5
    zero = (np.zeros((4, 8)), np.zeros(8), np.zeros((8, 4)), np.zeros(4))
    np.testing.assert_allclose(ln.pre_ln_block(x, *zero, np.ones(4), np.zeros(4)), x)
    post = ln.post_ln_block(x, *zero, np.ones(4), np.zeros(4))
    np.testing.assert_allclose(post.std(-1), 1, rtol=1e-4)


@pytest.mark.parametrize("exercise_id, name, verdict", list(mistake_verdicts(exercises.EXERCISES)),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_every_mistake_loses_points_and_is_named(exercise_id, name, verdict):
    assert verdict.points < verdict.max_points
    assert any(name in message for message in verdict.messages)


def test_at_least_six_named_mistakes():
    assert sum(len(ex.mistakes) for ex in exercises.EXERCISES) >= 6


@pytest.mark.parametrize("order", ["post", "pre"])
def test_residual_stack_lm_interface_and_grad_norms(order):
    torch.manual_seed(0)
    model = ln.ResidualStackLM(vocab_size=11, d_model=8, n_layers=3, n_heads=2, order=order)
    idx = torch.randint(0, 11, (2, 5))
    logits, loss = model(idx, idx)
    assert logits.shape == (2, 5, 11) and model(idx)[1] is None
    loss.backward()
    norms = model.sublayer_grad_norms()
    assert len(norms["attention"]) == len(norms["ffn"]) == 3
    assert all(n > 0 for n in norms["attention"] + norms["ffn"])


def test_residual_stack_is_causal():
    torch.manual_seed(0)
    model = ln.ResidualStackLM(vocab_size=11, d_model=8, n_layers=2, n_heads=2, order="pre")
    a, b = model(torch.tensor([[1, 2, 3, 4]]))[0], model(torch.tensor([[1, 2, 3, 9]]))[0]
    torch.testing.assert_close(a[:, :3], b[:, :3])
