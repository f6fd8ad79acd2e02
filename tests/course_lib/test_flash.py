"""course_lib.flash: the numpy tiles vs the textbook attention and finite differences, the
online softmax, the torch tiles vs numpy and autograd (float64, float32, bfloat16), the
dispatcher, the ``flash`` switch of the course's models, and the peak-memory helper."""
import numpy as np
import pytest
import torch

import course_lib.flash as flash
from course_lib import attention as att
from course_lib import generate as gen
from course_lib import transformer as tf
from course_lib.flash import reference as ref
from course_lib.flash.cpu import tiled_attention, tiled_backward, tiled_forward
from course_lib import timing
from course_lib.gradcheck import numerical_gradient, rel_error
from course_lib.softmax import softmax

# (lead, T_q, T_k, d_k, d_v, causal, block_q, block_k): blocks that do not divide T,
# T_q != T_k both ways (T_q > T_k with causal leaves the first queries without keys)
CASES = [((), 5, 5, 3, 3, False, 2, 2),
         ((2,), 7, 11, 4, 2, True, 3, 4),
         ((2, 3), 9, 4, 3, 5, True, 4, 3),
         ((2,), 6, 9, 2, 3, False, 4, 4),
         ((3,), 13, 13, 4, 4, True, 5, 6)]


def _qkv(lead, T_q, T_k, d_k, d_v, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((*lead, T_q, d_k)), rng.standard_normal((*lead, T_k, d_k)),
            rng.standard_normal((*lead, T_k, d_v)))


def _textbook(Q, K, V, causal, mask=None):
    """attention_forward/backward with the causal mask made explicit; (out, cache)."""
    if causal:
        future = att.causal_mask(Q.shape[-2], K.shape[-2])
        mask = future if mask is None else mask & future
    return att.attention_forward(Q, K, V, mask)


def _torch(*arrays, dtype=torch.float64):
    return [torch.tensor(a, dtype=dtype, requires_grad=True) for a in arrays]


# ----------------------------------------------------------------------------- numpy
@pytest.mark.parametrize("case", CASES)
def test_reference_equals_the_textbook_forward_and_backward(case):
    lead, T_q, T_k, d_k, d_v, causal, block_q, block_k = case
    Q, K, V = _qkv(lead, T_q, T_k, d_k, d_v)
    dout = np.random.default_rng(1).standard_normal((*lead, T_q, d_v))
    out, cache = ref.flash_forward(Q, K, V, causal, block_q, block_k)
    want, want_cache = _textbook(Q, K, V, causal)
    np.testing.assert_allclose(out, want, atol=1e-12)
    expected = att.attention_backward(dout, want_cache)
    for got, want_grad in zip(ref.flash_backward(dout, cache), expected):
        np.testing.assert_allclose(got, want_grad, atol=1e-12)


def test_keyless_queries_get_zero_output_and_minus_infinite_lse():
    Q, K, V = _qkv((2,), 6, 3, 2, 2)
    out, cache = ref.flash_forward(Q, K, V, causal=True, block_q=2, block_k=2)
    assert np.all(out[:, :3] == 0) and np.all(cache.lse[:, :3] == -np.inf)
    grads = ref.flash_backward(np.ones_like(out), cache)
    assert all(np.isfinite(g).all() for g in grads) and np.all(grads[0][:, :3] == 0)


@pytest.mark.parametrize("causal", [False, True])
def test_reference_backward_matches_finite_differences(causal):
    inputs = dict(zip("QKV", _qkv((2,), 5, 4, 3, 2, seed=3)))
    dout = np.random.default_rng(4).standard_normal((2, 5, 2))

    def forward():
        return ref.flash_forward(**inputs, causal=causal, block_q=2, block_k=3)

    grads = ref.flash_backward(dout, forward()[1])
    for (name, x), grad in zip(inputs.items(), grads):
        numeric = numerical_gradient(lambda _: np.sum(forward()[0] * dout), x)
        assert rel_error(grad, numeric) < 1e-7, name


def test_online_softmax_equals_softmax_including_fully_masked_rows():
    s = np.random.default_rng(5).standard_normal((3, 4, 11)) * 10
    s[0, 1] = -np.inf  # a row with no key
    s[1, 2, :6] = -np.inf  # the first blocks masked, the maximum found late
    for block in (1, 3, 4, 11, 20):
        np.testing.assert_allclose(ref.online_softmax(s, block), softmax(s), atol=1e-14)
    m, l = ref.online_softmax_stats(s, 4)
    assert m[0, 1] == -np.inf and l[0, 1] == 0
    np.testing.assert_allclose(m[2], s[2].max(-1))


# ----------------------------------------------------------------------------- torch tiles
@pytest.mark.parametrize("case", CASES)
def test_torch_tiles_equal_the_numpy_reference(case):
    lead, T_q, T_k, d_k, d_v, causal, block_q, block_k = case
    Q, K, V = _qkv(lead, T_q, T_k, d_k, d_v)
    dout = np.random.default_rng(1).standard_normal((*lead, T_q, d_v))
    want, cache = ref.flash_forward(Q, K, V, causal, block_q, block_k)
    q, k, v = _torch(Q, K, V)
    out = tiled_attention(q, k, v, causal, None, block_q, block_k)
    out.backward(torch.from_numpy(dout))
    np.testing.assert_allclose(out.detach().numpy(), want, atol=1e-10)
    for x, expected in zip((q, k, v), ref.flash_backward(dout, cache)):
        np.testing.assert_allclose(x.grad.numpy(), expected, atol=1e-10)


@pytest.mark.parametrize("mask_kind", ["padding", "random", "padding+causal"])
def test_torch_tiles_with_a_mask_equal_the_textbook(mask_kind):
    """A boolean mask broadcast from fewer axes (the encoder-decoder's padding) or a full one."""
    rng = np.random.default_rng(6)
    Q, K, V = _qkv((3, 2), 7, 7, 4, 3)
    mask = {"padding": att.padding_mask([7, 3, 0], 7)[:, None],  # (3, 1, 1, 7)
            "random": rng.random((3, 2, 7, 7)) < 0.6,
            "padding+causal": att.padding_mask([7, 5, 2], 7)[:, None]}[mask_kind]
    causal = mask_kind.endswith("causal")
    dout = rng.standard_normal((3, 2, 7, 3))
    want, cache = _textbook(Q, K, V, causal, mask)
    q, k, v = _torch(Q, K, V)
    out = tiled_attention(q, k, v, causal, torch.from_numpy(mask), 3, 2)
    out.backward(torch.from_numpy(dout))
    np.testing.assert_allclose(out.detach().numpy(), want, atol=1e-10)
    for x, expected in zip((q, k, v), att.attention_backward(dout, cache)):
        np.testing.assert_allclose(x.grad.numpy(), expected, atol=1e-10)
        assert torch.isfinite(x.grad).all()


def test_torch_tiles_equal_torch_autograd_at_default_blocks():
    q, k, v = (torch.randn(2, 3, 700, 16, dtype=torch.float64, requires_grad=True)
               for _ in range(3))
    for causal in (False, True):
        mask = torch.from_numpy(att.causal_mask(700)) if causal else None
        want = att.attention_autograd_torch(q, k, v, mask)[0]
        got = tiled_attention(q, k, v, causal)  # 700 keys: more than one key block
        dout = torch.randn_like(got)
        torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
        for a, b in zip(torch.autograd.grad(got, (q, k, v), dout),
                        torch.autograd.grad(want, (q, k, v), dout)):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 3e-2)])
def test_low_precision_stays_close_to_float64(dtype, tol):
    Q, K, V = _qkv((2, 2), 300, 300, 32, 32, seed=7)
    dout = np.random.default_rng(8).standard_normal((2, 2, 300, 32))
    want, cache = ref.flash_forward(Q, K, V, causal=True)
    q, k, v = _torch(Q, K, V, dtype=dtype)
    out = tiled_attention(q, k, v, causal=True)
    out.backward(torch.from_numpy(dout).to(dtype))
    assert out.dtype == q.grad.dtype == dtype
    assert rel_error(out.float().detach().numpy(), want) < tol
    for x, expected in zip((q, k, v), ref.flash_backward(dout, cache)):
        assert rel_error(x.grad.float().numpy(), expected) < tol


def test_keyless_queries_have_zero_not_nan_gradients():
    q, k, v = _torch(*_qkv((2,), 6, 3, 4, 2))
    out = tiled_attention(q, k, v, causal=True, block_q=2, block_k=2)
    lse = tiled_forward(q.detach(), k.detach(), v.detach(), causal=True, block_q=2, block_k=2)[1]
    assert (out[:, :3] == 0).all() and (lse[:, :3] == -torch.inf).all()
    out.sum().backward()
    assert all(torch.isfinite(x.grad).all() for x in (q, k, v)) and (q.grad[:, :3] == 0).all()


def test_torch_autograd_gradcheck_on_tiny_inputs():
    q, k, v = _torch(*_qkv((2,), 4, 5, 3, 2, seed=9))
    mask = torch.rand(2, 4, 5, generator=torch.Generator().manual_seed(0)) < 0.7
    assert torch.autograd.gradcheck(lambda q, k, v: tiled_attention(q, k, v, True, mask, 3, 2),
                                    (q, k, v))


def test_backward_is_the_derivation_not_autograd():
    """The graph holds one node for the whole attention, and its backward is tiled_backward."""
    q, k, v = _torch(*_qkv((), 4, 4, 2, 2))
    out = tiled_attention(q, k, v)
    assert type(out.grad_fn).__name__ == "_TiledAttentionBackward"
    dout = torch.randn_like(out)
    out.backward(dout)
    lse = tiled_forward(q.detach(), k.detach(), v.detach())[1]
    manual = tiled_backward(dout, q.detach(), k.detach(), v.detach(), out.detach(), lse)
    for x, g in zip((q, k, v), manual):
        torch.testing.assert_close(x.grad, g, rtol=0, atol=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_torch_tiles_run_on_cuda_tensors():
    q, k, v = (torch.randn(2, 300, 16, dtype=torch.float64, requires_grad=True) for _ in range(3))
    gq, gk, gv = (x.detach().cuda().requires_grad_() for x in (q, k, v))
    tiled_attention(q, k, v, causal=True).sum().backward()
    tiled_attention(gq, gk, gv, causal=True).sum().backward()
    for a, b in zip((q, k, v), (gq, gk, gv)):
        torch.testing.assert_close(a.grad, b.grad.cpu())


def test_the_dispatcher_picks_the_torch_tiles_on_the_cpu(monkeypatch):
    """float64 (and anything else the compiled kernel does not take) runs the torch tiles."""
    monkeypatch.setattr(flash, "_triton_kernels", lambda: pytest.fail("asked Triton on a CPU"))
    q, k, v = _torch(*_qkv((2,), 5, 5, 3, 3))
    out = flash.flash_attention(q, k, v, causal=True)
    assert type(out.grad_fn).__name__ == "_TiledAttentionBackward"
    torch.testing.assert_close(out, tiled_attention(q, k, v, True))


def test_the_dispatcher_picks_the_compiled_kernel_for_float32_where_set_up_built_it():
    """float32 CPU tensors without a mask go to notebook 07's compiled kernel (its backward node
    says so), with the tiles' numbers; with a mask, the tiles again. Where set-up built nothing
    the tiles run and nothing is built (test_flash_compiled.py, in a fresh process)."""
    from course_lib import cpu_kernels
    if not cpu_kernels.loaded():
        pytest.skip(f"the C++ kernels are not built here: {cpu_kernels.reason()}")
    q, k, v = (torch.randn(2, 3, 40, 8, requires_grad=True) for _ in range(3))
    out = flash.flash_attention(q, k, v, causal=True)
    assert type(out.grad_fn).__name__ == "_CompiledAttentionBackward"
    torch.testing.assert_close(out, tiled_attention(q, k, v, True), rtol=1e-5, atol=1e-6)
    mask = torch.rand(40, 40, generator=torch.Generator().manual_seed(0)) > 0.3
    masked = flash.flash_attention(q, k, v, mask=mask)
    assert type(masked.grad_fn).__name__ == "_TiledAttentionBackward"


# ----------------------------------------------------------------------------- the switch
def _gpt(flash_on, **kw):
    torch.manual_seed(0)
    cfg = tf.GPTConfig(vocab_size=13, block_size=12, d_model=16, n_heads=4, n_layers=2,
                       flash=flash_on, **kw)
    return tf.GPT(cfg).double()


def _same_loss_and_gradients(run, textbook, fast):
    fast.load_state_dict(textbook.state_dict())
    losses = []
    for model in (textbook, fast):
        loss = run(model)
        loss.backward()
        losses.append(loss)
    torch.testing.assert_close(losses[0], losses[1], rtol=1e-12, atol=1e-12)
    for (name, p), p_fast in zip(textbook.named_parameters(), fast.parameters()):
        torch.testing.assert_close(p.grad, p_fast.grad, rtol=1e-10, atol=1e-12, msg=name)


def test_gpt_with_flash_gives_the_textbook_loss_and_gradients():
    g = torch.Generator().manual_seed(1)
    idx, targets = (torch.randint(0, 13, (3, 11), generator=g) for _ in range(2))
    _same_loss_and_gradients(lambda m: m(idx, targets)[1], _gpt(False), _gpt(True))


def test_encoder_decoder_with_flash_gives_the_textbook_loss_and_gradients():
    g = torch.Generator().manual_seed(2)
    src, tgt_in, targets = (torch.randint(3, 11, (3, n), generator=g) for n in (6, 5, 5))
    src[1, 4:], tgt_in[1, 3:], targets[1, 3:] = 0, 0, 0  # <pad>: the masks matter

    def model(flash_on):
        torch.manual_seed(0)
        cfg = tf.TransformerConfig(vocab_size=11, d_model=8, n_heads=2, d_ff=12, flash=flash_on)
        return tf.Transformer(cfg).double()

    _same_loss_and_gradients(lambda m: m(src, tgt_in, targets)[1], model(False), model(True))


def test_cached_generation_works_with_flash():
    textbook, fast = _gpt(False).float(), _gpt(True).float()
    fast.load_state_dict(textbook.state_dict())
    idx = torch.randint(0, 13, (2, 3), generator=torch.Generator().manual_seed(3))
    runs = [gen.sample(m, idx, 14, temperature=0, use_cache=cache)
            for m, cache in ((textbook, False), (fast, True))]  # 17 tokens: the cache refills
    torch.testing.assert_close(runs[0], runs[1])
    whole = fast(idx)[0]
    cache = fast.new_cache()
    pieces = torch.cat([fast(idx[:, :2], cache=cache)[0], fast(idx[:, 2:], cache=cache)[0]], dim=1)
    torch.testing.assert_close(pieces, whole)


def test_flash_models_refuse_to_plot_weights_they_never_formed():
    model = _gpt(True)
    model(torch.zeros(1, 4, dtype=torch.long))
    assert model.blocks[0].attn.attention is None
    with pytest.raises(RuntimeError, match="flash=False"):
        model.attention_maps()
    assert _gpt(False).attention_maps() == [None, None]  # no forward pass yet


# ----------------------------------------------------------------------------- measuring
def test_peak_memory_sees_a_temporary_and_grows_with_T():
    assert timing.peak_memory(lambda: torch.empty(1000, 250).sum()) >= 1_000_000
    peaks = []
    for T in (256, 1024):
        q, k, v = (torch.randn(4, T, 16, requires_grad=True) for _ in range(3))
        peaks.append(timing.peak_memory(lambda: tiled_attention(q, k, v, True).sum().backward()))
    assert 0 < peaks[0] < peaks[1]


def test_cpu_timings_rows():
    rows = timing.cpu_timings([16, 32], batch_heads=2, d_k=4, repeats=1)
    assert [r["T"] for r in rows] == [16, 32]
    for r in rows:
        for name in ("textbook", "autograd", "tiled", "compiled", "sdpa"):
            assert r[name] > 0 and r[f"{name}_bytes"] > 0
        assert r["vs_sdpa"] == r["sdpa"] / r["tiled"]
        assert r["compiled_vs_sdpa"] == r["sdpa"] / r["compiled"]


def test_cpu_timings_measure_sdpas_fused_kernel():
    """The SDPA a model calls: 4-D inputs, for which the CPU runs the fused kernel (0.8 MiB here).
    3-D ones take the math pass, which keeps (T, T) arrays as the textbook pass does (6.2 MiB
    against its 10)."""
    [row] = timing.cpu_timings([512], batch_heads=2, d_k=16, repeats=1)
    weights = 2 * 512 * 512 * 4  # one float32 (batch_heads, T, T) array: 2 MiB
    assert row["textbook_bytes"] > weights > row["sdpa_bytes"], row
