"""course_lib.attention: numpy reference vs finite differences (float64), the column and row
forms against each other, masks, and the torch fast path vs numpy and vs torch autograd."""
import numpy as np
import pytest
import torch

from course_lib import attention as att
from course_lib import timing
from course_lib.gradcheck import numerical_gradient, rel_error

TOL = 1e-7  # central differences in float64 agree to about 1e-9


def _fd_check(forward, backward, inputs, seed=0):
    """Relative errors of ``backward(dout)`` against central differences, one per input."""
    dout = np.random.default_rng(seed).standard_normal(forward(**inputs)[0].shape)
    analytic = backward(dout, forward(**inputs)[1])
    errors = {}
    for (name, x), grad in zip(inputs.items(), analytic):
        numeric = numerical_gradient(lambda _: np.sum(forward(**inputs)[0] * dout), x)
        errors[name] = rel_error(grad, numeric)
    return errors


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.mark.parametrize("lead,T_q,T_k,d_k,d_v,mask_kind", [
    ((), 4, 4, 3, 3, None),
    ((2,), 3, 5, 4, 2, "random"),
    ((2, 3), 5, 5, 2, 3, "causal"),
    ((3,), 4, 6, 3, 2, "padding"),  # one sequence of length 0: fully masked rows
])
def test_attention_backward_matches_finite_differences(rng, lead, T_q, T_k, d_k, d_v, mask_kind):
    mask = {None: None,
            "random": rng.random((*lead, T_q, T_k)) < 0.7,
            "causal": att.causal_mask(T_q, T_k),
            "padding": att.padding_mask([6, 2, 0], T_k)}[mask_kind]
    inputs = {"Q": rng.standard_normal((*lead, T_q, d_k)), "K": rng.standard_normal((*lead, T_k, d_k)),
              "V": rng.standard_normal((*lead, T_k, d_v))}
    errors = _fd_check(lambda Q, K, V: att.attention_forward(Q, K, V, mask),
                       att.attention_backward, inputs)
    assert max(errors.values()) < TOL, errors


def test_weights_are_a_distribution_over_allowed_keys(rng):
    Q, K, V = rng.standard_normal((5, 4)), rng.standard_normal((7, 4)), rng.standard_normal((7, 3))
    mask = rng.random((5, 7)) < 0.5
    mask[:, 0] = True
    out, cache = att.attention_forward(Q, K, V, mask)
    assert np.allclose(cache.A.sum(-1), 1.0)
    assert np.all(cache.A[~mask] == 0.0)
    assert np.allclose(out, cache.A @ V)


def test_fully_masked_rows_give_zeros_not_nan(rng):
    Q, K, V = (rng.standard_normal((2, 3, 4)) for _ in range(3))
    mask = att.padding_mask([3, 0], 3)  # the second sequence is all padding
    out, cache = att.attention_forward(Q, K, V, mask)
    assert np.all(np.isfinite(out)) and np.all(np.isfinite(cache.A))
    assert np.all(out[1] == 0.0) and np.all(cache.A[1] == 0.0)
    grads = att.attention_backward(np.ones_like(out), cache)
    assert all(np.all(np.isfinite(g)) for g in grads)


def test_large_logits_do_not_overflow(rng):
    Q, K = rng.standard_normal((4, 16)) * 40, rng.standard_normal((6, 16)) * 40
    out, cache = att.attention_forward(Q, K, rng.standard_normal((6, 2)))
    assert np.all(np.isfinite(out)) and np.allclose(cache.A.sum(-1), 1.0)


def test_causal_mask_and_kv_cache_alignment():
    assert np.array_equal(att.causal_mask(3), [[1, 0, 0], [1, 1, 0], [1, 1, 1]])
    # two new queries at positions 3 and 4 of a five-token sequence see keys 0..3 and 0..4
    assert np.array_equal(att.causal_mask(2, 5), [[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]])


def test_padding_mask_broadcasts_over_queries():
    mask = att.padding_mask(np.array([2, 0, 3]), 3)
    assert mask.shape == (3, 1, 3) and mask.dtype == bool
    assert np.array_equal(mask[:, 0], [[1, 1, 0], [0, 0, 0], [1, 1, 1]])


@pytest.mark.parametrize("causal", [False, True])
def test_column_form_backward_matches_finite_differences(rng, causal):
    d, h, T = 5, 3, 4
    inputs = {"X": rng.standard_normal((d, T)), "A": rng.standard_normal((h, d)),
              "B": rng.standard_normal((h, d)), "C": rng.standard_normal((h, d))}

    def backward(E, cache):  # order the gradients like the inputs: X first
        dA, dB, dC, dX = att.self_attention_col_backward(E, cache)
        return dX, dA, dB, dC

    errors = _fd_check(lambda X, A, B, C: att.self_attention_col_forward(X, A, B, C, causal),
                       backward, inputs)
    assert max(errors.values()) < TOL, errors


@pytest.mark.parametrize("causal", [False, True])
def test_column_form_is_the_row_form_transposed(rng, causal):
    d, h, T = 4, 3, 6
    X, A, B, C = (rng.standard_normal(s) for s in ((d, T), (h, d), (h, d), (h, d)))
    E = rng.standard_normal((h, T))
    Z, cache = att.self_attention_col_forward(X, A, B, C, causal)
    col = (Z, *att.self_attention_col_backward(E, cache))
    row = att.self_attention_col_via_rows(X, A, B, C, E, causal)
    for c, r in zip(col, row):
        assert np.allclose(c, r, rtol=1e-12, atol=1e-12)
    if causal:  # i <= t: the column form keeps the upper triangle
        assert np.allclose(np.tril(cache[-1], -1), 0.0)


def test_split_and_merge_heads_are_inverse(rng):
    x = rng.standard_normal((2, 5, 12))
    heads = att.split_heads(x, 3)
    assert heads.shape == (2, 3, 5, 4)
    assert np.array_equal(heads[1, 2, 4], x[1, 4, 8:12])  # head 2 owns features 8..11
    assert np.array_equal(att.merge_heads(heads), x)


def _mha_inputs(rng, B=2, T_q=3, T_k=5, d_model=6, n_heads=2, d_k=4, d_v=5):
    return {"x_q": rng.standard_normal((B, T_q, d_model)), "x_kv": rng.standard_normal((B, T_k, d_model)),
            "W_q": rng.standard_normal((d_model, n_heads * d_k)) / 2,
            "W_k": rng.standard_normal((d_model, n_heads * d_k)) / 2,
            "W_v": rng.standard_normal((d_model, n_heads * d_v)) / 2,
            "W_o": rng.standard_normal((n_heads * d_v, d_model)) / 2}


def test_cross_attention_backward_matches_finite_differences(rng):
    inputs = _mha_inputs(rng)  # T_q != T_k and d_k != d_v
    mask = att.padding_mask([5, 2], 5)[:, None]  # (B, 1, 1, T_k)
    errors = _fd_check(lambda **kw: att.mha_forward(**kw, n_heads=2, mask=mask),
                       att.mha_backward, inputs)
    assert max(errors.values()) < TOL, errors


def test_multi_head_weights_and_self_attention(rng):
    x = rng.standard_normal((1, 4, 8))
    W = [rng.standard_normal((8, 8)) for _ in range(4)]
    out, cache = att.mha_forward(x, x, *W, n_heads=2, mask=att.causal_mask(4))
    assert out.shape == (1, 4, 8) and cache.attention.A.shape == (1, 2, 4, 4)
    assert np.allclose(np.triu(cache.attention.A, 1), 0.0)
    # head 0 is plain attention on the first d_k columns of the projections
    head0, _ = att.attention_forward(x @ W[0][:, :4], x @ W[1][:, :4], x @ W[2][:, :4],
                                     att.causal_mask(4))
    assert np.allclose(cache.concat[..., :4], head0)


# ----------------------------------------------------------------------------- torch
def _torch(*arrays, grad=False):
    return [torch.tensor(a, requires_grad=grad) for a in arrays]


@pytest.mark.parametrize("mask_kind", [None, "causal", "padding"])
def test_torch_path_matches_numpy(rng, mask_kind):
    Q, K, V = rng.standard_normal((3, 4, 5)), rng.standard_normal((3, 4, 5)), rng.standard_normal((3, 4, 2))
    mask = {None: None, "causal": att.causal_mask(4),
            "padding": att.padding_mask([4, 1, 0], 4)}[mask_kind]
    dout = rng.standard_normal((3, 4, 2))
    out, cache = att.attention_forward(Q, K, V, mask)
    grads = att.attention_backward(dout, cache)
    q, k, v = _torch(Q, K, V, grad=True)
    out_t, a_t = att.attention_torch(q, k, v, None if mask is None else torch.from_numpy(mask))
    out_t.backward(torch.from_numpy(dout))
    assert np.allclose(out_t.detach().numpy(), out) and np.allclose(a_t.numpy(), cache.A)
    for g_np, t in zip(grads, (q, k, v)):
        assert np.allclose(t.grad.numpy(), g_np, rtol=1e-10, atol=1e-12)


def test_torch_custom_backward_matches_autograd(rng):
    q, k, v = _torch(rng.standard_normal((2, 6, 4)), rng.standard_normal((2, 6, 4)),
                     rng.standard_normal((2, 6, 3)), grad=True)
    mask = torch.from_numpy(att.causal_mask(6))
    assert torch.autograd.gradcheck(lambda *t: att.attention_torch(*t, mask)[0], (q, k, v))
    dout = torch.randn(2, 6, 3, dtype=torch.float64)
    manual = torch.autograd.grad(att.attention_torch(q, k, v, mask)[0], (q, k, v), dout)
    auto = torch.autograd.grad(att.attention_autograd_torch(q, k, v, mask)[0], (q, k, v), dout)
    for m, a in zip(manual, auto):
        assert torch.allclose(m, a, rtol=1e-10, atol=1e-12)


def test_multi_head_module_matches_numpy_reference(rng):
    inputs = _mha_inputs(rng, d_model=8, n_heads=2, d_k=4, d_v=4)
    mask = att.causal_mask(3, 5)
    module = att.MultiHeadAttention(8, 2).double()
    with torch.no_grad():
        for name in ("W_q", "W_k", "W_v", "W_o"):
            getattr(module, name).copy_(torch.from_numpy(inputs[name]))
    x_q, x_kv = _torch(inputs["x_q"], inputs["x_kv"], grad=True)
    out = module(x_q, x_kv, torch.from_numpy(mask))
    dout = rng.standard_normal(out.shape)
    out.backward(torch.from_numpy(dout))
    ref_out, cache = att.mha_forward(**inputs, n_heads=2, mask=mask)
    ref_grads = att.mha_backward(dout, cache)
    assert np.allclose(out.detach().numpy(), ref_out)
    assert np.allclose(module.attention.numpy(), cache.attention.A)
    torch_grads = (x_q.grad, x_kv.grad, module.W_q.grad, module.W_k.grad, module.W_v.grad, module.W_o.grad)
    for t, r in zip(torch_grads, ref_grads):
        assert np.allclose(t.numpy(), r, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("causal", [True, False])
def test_self_attention_path_matches_numpy_reference(rng, causal):
    """Self-attention without a cache or a mask (every GPT training step) takes
    ``_SelfAttention``, which lays the heads out itself: output, weights and every gradient
    equal ``mha_forward`` / ``mha_backward``'s with x_kv = x_q."""
    x = rng.standard_normal((3, 5, 8))
    W = {name: rng.standard_normal((8, 8)) / 2 for name in ("W_q", "W_k", "W_v", "W_o")}
    module = att.MultiHeadAttention(8, 2).double()
    with torch.no_grad():
        for name, w in W.items():
            getattr(module, name).copy_(torch.from_numpy(w))
    (x_t,) = _torch(x, grad=True)
    calls = []
    original = att._SelfAttention.forward
    with pytest.MonkeyPatch.context() as patch:  # the path taken, seen from its own forward
        patch.setattr(att._SelfAttention, "forward",
                      staticmethod(lambda *args: calls.append(1) or original(*args)))
        out = module(x_t, causal=causal)
    assert calls, "self-attention did not take _SelfAttention"
    (x_a,) = _torch(x, grad=True)  # the same through plain autograd
    bias = att._causal_bias_torch(5, x_a.device, x_a.dtype) if causal else None
    W_qkv = torch.cat((module.W_q, module.W_k, module.W_v), dim=1)
    auto = att.self_attention_autograd_torch(x_a @ W_qkv, 2, bias)[0] @ module.W_o
    dout = rng.standard_normal(out.shape)
    out.backward(torch.from_numpy(dout))
    mask = att.causal_mask(5) if causal else None
    ref_out, cache = att.mha_forward(x, x, *W.values(), n_heads=2, mask=mask)
    dx_q, dx_kv, *dW = att.mha_backward(dout, cache)
    assert np.allclose(out.detach().numpy(), ref_out, rtol=1e-10, atol=1e-12)
    assert np.allclose(module.attention.numpy(), cache.attention.A, rtol=1e-10, atol=1e-12)
    assert module.attention.shape == (3, 2, 5, 5)
    for t, r in zip((x_t.grad, module.W_q.grad, module.W_k.grad, module.W_v.grad,
                     module.W_o.grad), (dx_q + dx_kv, *dW)):
        assert np.allclose(t.numpy(), r, rtol=1e-10, atol=1e-12)
    assert np.allclose(auto.detach().numpy(), ref_out, rtol=1e-10, atol=1e-12)
    auto.backward(torch.from_numpy(dout))
    assert np.allclose(x_a.grad.numpy(), dx_q + dx_kv, rtol=1e-10, atol=1e-12)


def test_self_attention_path_takes_low_precision():
    """bfloat16 parameters (no autocast): the additive causal mask follows the scores' dtype,
    and the gradients come back in the parameters' dtype, finite."""
    torch.manual_seed(0)
    module = att.MultiHeadAttention(16, 2).to(torch.bfloat16)
    x = torch.randn(2, 6, 16, dtype=torch.bfloat16, requires_grad=True)
    out = module(x, causal=True)
    out.float().sum().backward()
    assert out.dtype == torch.bfloat16 and torch.isfinite(out.float()).all()
    assert torch.allclose(torch.triu(module.attention.float(), 1), torch.tensor(0.0))
    for g in (x.grad, module.W_q.grad, module.W_o.grad):
        assert g.dtype == torch.bfloat16 and torch.isfinite(g.float()).all()
    with torch.autocast("cpu", dtype=torch.bfloat16):  # CPU autocast: the GPU test's twin
        out = att.MultiHeadAttention(16, 2)(x.detach().float(), causal=True)
    assert torch.isfinite(out.float()).all()


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device"))])
@pytest.mark.parametrize("path", ["attention_torch", "self-attention"])
def test_attention_dropout_backward_matches_autograd(rng, path, device):
    """The hand-derived backward through dropped weights (dA = dA_drop * keep / (1 - p) before
    the softmax's JVP; dV from the dropped weights) against autograd on the same draws, and
    torch's gradcheck with the draws fixed by a seed (on a GPU, from CUDA's generator)."""
    p = 0.3
    mask = torch.from_numpy(att.causal_mask(6)).to(device)
    if path == "attention_torch":
        q, k, v = (t.to(device).requires_grad_()
                   for t in _torch(*(rng.standard_normal((2, 6, 4)) for _ in range(3))))

        def course(q, k, v):
            torch.manual_seed(7)
            return att.attention_torch(q, k, v, mask, p)[0]

        def reference(q, k, v):
            torch.manual_seed(7)
            return att.attention_autograd_torch(q, k, v, mask, p)[0]
        inputs = (q, k, v)
    else:
        module = att.MultiHeadAttention(8, 2, dropout=p).double().to(device)
        x = torch.from_numpy(rng.standard_normal((2, 6, 8))).to(device).requires_grad_()

        def course(x):
            torch.manual_seed(7)
            return module(x, causal=True)

        def reference(x):
            torch.manual_seed(7)
            q, k, v = (att.split_heads(x @ W, 2) for W in (module.W_q, module.W_k, module.W_v))
            return att.merge_heads(att.attention_autograd_torch(q, k, v, mask, p)[0]) @ module.W_o
        inputs = (x,)
    out = course(*inputs)
    ref = reference(*inputs)
    assert torch.allclose(out, ref, rtol=1e-10, atol=1e-12)
    dout = torch.from_numpy(rng.standard_normal(out.shape)).to(device)
    for g, r in zip(torch.autograd.grad(out, inputs, dout), torch.autograd.grad(ref, inputs, dout)):
        assert torch.allclose(g, r, rtol=1e-10, atol=1e-12)
    assert torch.autograd.gradcheck(course, inputs)


def test_attention_dropout_drops_at_its_rate_and_only_in_training():
    a_out, keep = att._dropped(torch.full((200, 200), 0.5), 0.25)
    assert abs(1 - keep.float().mean().item() - 0.25) < 0.01  # 40,000 draws
    assert torch.equal(a_out[keep], torch.full_like(a_out[keep], 0.5 / 0.75))  # rescaled
    assert torch.equal(a_out[~keep], torch.zeros_like(a_out[~keep]))
    torch.manual_seed(0)
    module, plain = att.MultiHeadAttention(64, 4, dropout=0.25), att.MultiHeadAttention(64, 4)
    plain.load_state_dict(module.state_dict())
    x = torch.randn(8, 32, 64)
    assert not torch.allclose(module(x, causal=True), plain(x, causal=True))  # training
    assert torch.equal(module.attention, plain.attention)  # the weights kept: before dropout
    module.eval()
    assert torch.equal(module(x, causal=True), plain(x, causal=True))
    with pytest.raises(ValueError, match="flash"):
        att.MultiHeadAttention(64, 4, flash=True, dropout=0.1)
    with pytest.raises(ValueError, match="rate"):
        att.MultiHeadAttention(64, 4, dropout=1.0)


def test_custom_backward_takes_the_mixed_dtypes_of_autocast():
    """Under CUDA autocast the matrix products give bfloat16 q, k, v and dout while the weights
    A (exp, sum: float32 ops there) stay float32: the backward must not mix them in one product.
    CPU autocast keeps A in bfloat16, so the mix is built by hand here; the CUDA test below
    trains under autocast itself."""
    gen = torch.Generator().manual_seed(0)
    q, k, v, dout = (torch.randn(2, 6, 4, generator=gen) for _ in range(4))
    mask = torch.from_numpy(att.causal_mask(6))
    qb, kb, vb, db = (t.bfloat16().float() for t in (q, k, v, dout))  # the values autocast keeps
    out, a = att.attention_torch(qb.requires_grad_(), kb.requires_grad_(), vb.requires_grad_(), mask)
    expected = torch.autograd.grad(out, (qb, kb, vb), db)

    class Ctx:
        saved_tensors = (qb.bfloat16(), kb.bfloat16(), vb.bfloat16(), a, None)  # no dropout
        p = 0.0
    grads = att._Attention.backward(Ctx, db.bfloat16(), None)[:3]
    for g, e in zip(grads, expected):
        assert g.dtype == torch.float32 and torch.allclose(g, e, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_gpt_trains_under_cuda_autocast():
    from course_lib.transformer import GPT, GPTConfig
    for flash in (False, True):
        torch.manual_seed(0)
        model = GPT(GPTConfig(65, block_size=64, d_model=64, n_heads=2, n_layers=2, flash=flash,
                              attn_dropout=0.0 if flash else 0.2)).cuda()  # nanoGPT's recipe
        x = torch.randint(0, 65, (4, 64), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            _, loss = model(x, x)
        loss.backward()
        grads = [p.grad for p in model.parameters()]
        assert all(g is not None and g.dtype == torch.float32 and g.isfinite().all() for g in grads)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_torch_path_runs_on_cuda(rng):
    q, k, v = (torch.randn(2, 8, 4, device="cuda", requires_grad=True) for _ in range(3))
    mask = torch.from_numpy(att.causal_mask(8)).cuda()
    out, _ = att.attention_torch(q, k, v, mask)
    out.sum().backward()
    ref, _ = att.attention_autograd_torch(q.detach().cpu(), k.detach().cpu(), v.detach().cpu(), mask.cpu())
    assert out.device.type == "cuda" and torch.allclose(out.detach().cpu(), ref, atol=1e-5)


def test_backward_timings_reports_both_paths():
    rows = timing.backward_timings([8, 16], batch_heads=2, d_k=4, repeats=3)
    assert [r["T"] for r in rows] == [8, 16] and "sdpa" not in rows[0]  # notebook 02's two
    for r in rows:
        assert r["manual"] > 0 and r["autograd"] > 0
        assert r["ratio"] == pytest.approx(r["autograd"] / r["manual"])
    (row,) = timing.backward_timings([16], batch_heads=2, d_k=4, repeats=2, sdpa=True)
    assert row["sdpa"] > 0 and row["sdpa_ratio"] == pytest.approx(row["sdpa"] / row["manual"])
    q, k, v = (torch.randn(2, 16, 4) for _ in range(3))  # the baseline computes the same thing
    mask = torch.from_numpy(att.causal_mask(16))
    torch.testing.assert_close(timing._sdpa_4d(q, k, v, mask)[0], att.attention_torch(q, k, v, mask)[0])
    for r in rows:
        # the spread of the rounds, notebook 02's error bar: the best-of ratio lies within it
        assert len(r["ratios"]) == 3 and min(r["ratios"]) <= r["ratio"] * (1 + 1e-12)
        assert r["ratio"] <= max(r["ratios"]) * (1 + 1e-12)
