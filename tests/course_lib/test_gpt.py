"""course_lib's GPT: numpy and torch agree, gradients equal plain autograd's, the KV cache
changes nothing but speed, and sampling with temperature, top-k and top-p."""
import os
import shutil

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from course_lib import attention
from course_lib import generate as gen
from course_lib import layernorm, timing
from course_lib import transformer as tf


def _model(**kw):
    torch.manual_seed(0)
    cfg = dict(vocab_size=13, block_size=10, d_model=16, n_heads=4, n_layers=2)
    return tf.GPT(tf.GPTConfig(**{**cfg, **kw})).double()


def _idx(B=3, T=9, V=13, seed=1):
    return torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))


def test_numpy_reference_equals_the_torch_model():
    model = _model(d_ff=24)
    idx = _idx()
    logits, loss = model(idx)
    assert loss is None and logits.shape == (3, 9, 13)
    ref = tf.gpt_forward(idx.numpy(), tf.gpt_params(model), n_heads=4)
    np.testing.assert_allclose(logits.detach().numpy(), ref, rtol=1e-10, atol=1e-12)


def test_output_layer_is_the_token_embedding_and_positions_are_learned():
    model = _model()
    assert model.n_params() == sum(p.numel() for p in model.parameters())
    names = [n for n, _ in model.named_parameters()]
    assert "pos_emb.weight" in names and not any("head" in n or "lm" in n for n in names)
    idx = _idx(B=1, T=4)
    with torch.no_grad():
        before, _ = model(idx)
        # one row of W_E (not by a constant, which every layer norm would remove)
        model.tok_emb.weight[idx[0, 0]] += torch.linspace(-1, 1, 16, dtype=torch.float64)
        after, _ = model(idx)
    changed = (after - before).abs().amax(dim=(0, 1)) > 1e-9  # (V,)
    assert changed.all()  # every logit changes through the input
    shapes = [tuple(p.shape) for p in model.parameters()]
    assert shapes.count((13, 16)) == 1  # one (vocab_size, d_model) matrix: input and output
    with torch.no_grad():
        model.pos_emb.weight[:] = model.pos_emb.weight.flip(0)
        flipped, _ = model(idx)
    assert not torch.allclose(flipped, after)
    assert model.n_params(non_embedding=True) == model.n_params() - (13 + 10) * 16


def test_causal_no_position_sees_the_future():
    model = _model()
    idx = _idx(B=2, T=8)
    logits, _ = model(idx)
    idx2 = idx.clone()
    idx2[:, 5:] = (idx2[:, 5:] + 1) % 13
    logits2, _ = model(idx2)
    torch.testing.assert_close(logits[:, :5], logits2[:, :5])
    assert not torch.allclose(logits[:, 5:], logits2[:, 5:])


def test_gradients_of_the_whole_model_equal_plain_autograd(monkeypatch):
    model = _model()
    idx, targets = _idx(), _idx(seed=2)
    _, loss = model(idx, targets)
    loss.backward()
    ours = {name: p.grad.clone() for name, p in model.named_parameters()}
    monkeypatch.setattr(attention, "attention_torch", attention.attention_autograd_torch)
    monkeypatch.setattr(attention, "self_attention_torch", attention.self_attention_autograd_torch)
    monkeypatch.setattr(layernorm, "layer_norm_torch",
                        lambda x, g, b, eps=layernorm.EPS: F.layer_norm(x, g.shape, g, b, eps))
    model.zero_grad()
    _, loss2 = model(idx, targets)
    loss2.backward()
    torch.testing.assert_close(loss, loss2)
    for name, p in model.named_parameters():
        torch.testing.assert_close(ours[name], p.grad, rtol=1e-9, atol=1e-12, msg=name)


def test_feeding_in_pieces_with_a_cache_equals_feeding_whole():
    model = _model()
    idx = _idx(T=10)
    whole, _ = model(idx)
    cache = model.new_cache()
    pieces = [model(idx[:, :4], cache=cache)[0]] + [model(idx[:, t:t + 1], cache=cache)[0]
                                                    for t in range(4, 8)]
    pieces.append(model(idx[:, 8:], cache=cache)[0])  # two at once after single steps
    torch.testing.assert_close(torch.cat(pieces, dim=1), whole)
    assert cache[0]["k"].shape == (3, 4, 10, 4)  # (B, n_heads, T, d_k)
    with pytest.raises(ValueError, match="crop"):
        model(idx[:, :1], cache=cache)


@pytest.mark.parametrize("kw", [dict(temperature=1.0), dict(temperature=0.0),
                                dict(temperature=0.8, top_k=5, top_p=0.9)])
def test_cached_sampling_gives_the_same_tokens(kw):
    model = _model().float()
    idx = _idx(B=2, T=3)
    runs = [gen.sample(model, idx, 15, generator=torch.Generator().manual_seed(7),
                       use_cache=cache, **kw) for cache in (False, True)]
    torch.testing.assert_close(runs[0], runs[1])  # 18 tokens > block_size 10: the cache refills
    assert runs[0].shape == (2, 18)


def test_top_k_and_top_p_keep_the_right_tokens():
    probs = torch.tensor([[0.05, 0.5, 0.15, 0.3]])
    logits = probs.log()
    torch.testing.assert_close(gen.next_token_probs(logits), probs)
    k2 = gen.next_token_probs(logits, top_k=2)
    torch.testing.assert_close(k2, torch.tensor([[0.0, 0.625, 0.0, 0.375]]))
    p = gen.next_token_probs(logits, top_p=0.7)  # 0.5 < 0.7: 0.3 crosses it and is kept
    torch.testing.assert_close(p, torch.tensor([[0.0, 0.625, 0.0, 0.375]]))
    p = gen.next_token_probs(logits, top_p=0.81)  # 0.8 < 0.81: the third token is kept too
    torch.testing.assert_close(p, torch.tensor([[0.0, 0.5, 0.15, 0.3]]) / 0.95)
    p = gen.next_token_probs(logits, top_p=0.4)  # the likeliest token alone crosses 0.4
    torch.testing.assert_close(p, torch.tensor([[0.0, 1.0, 0.0, 0.0]]))
    cold = gen.next_token_probs(logits, temperature=0.5)
    torch.testing.assert_close(cold, probs ** 2 / (probs ** 2).sum())


def test_cache_timings_compare_equal_outputs():
    model = _model(block_size=20).float()
    rows = timing.cache_timings(model, [4, 12])
    assert [r["length"] for r in rows] == [4, 12]
    assert all(r["no_cache"] > 0 and r["cache"] > 0 and r["ratio"] == r["no_cache"] / r["cache"]
               for r in rows)


def test_attention_dropout_reaches_every_block_and_refuses_flash():
    sizes = dict(block_size=9, d_model=16, n_heads=2, n_layers=2, attn_dropout=0.2)
    model = tf.GPT(tf.GPTConfig(13, **sizes))
    assert [b.attn.dropout for b in model.blocks] == [0.2, 0.2]
    idx = _idx()
    assert not torch.equal(model(idx)[0], model(idx)[0])  # training: new draws each time
    model.eval()
    torch.testing.assert_close(model(idx)[0], model(idx)[0])  # none outside training
    with pytest.raises(ValueError, match="flash"):
        tf.GPT(tf.GPTConfig(13, flash=True, **sizes))


def _planted(backward, factor):
    """``backward`` with its first gradient (dq, or layer norm's dx) scaled by ``factor``."""
    def wrong(*args, **kwargs):
        first, *rest = backward(*args, **kwargs)
        return (first * factor, *rest)
    return wrong


@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated")  # inductor's own
@pytest.mark.parametrize("device", [
    pytest.param("cpu", marks=pytest.mark.skipif(
        not shutil.which(os.environ.get("CXX", "g++")),  # the compiler inductor calls
        reason="no C++ compiler (CXX, else g++): torch.compile's CPU backend writes C++")),
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                  reason="no CUDA device"))])
@pytest.mark.parametrize("flash", [False, True], ids=["textbook", "flash"])
def test_torch_compile_takes_the_model_whole_and_traces_the_hand_derived_backward(
        monkeypatch, flash, device):
    """``torch.compile`` (nanoGPT's ``train.py`` compiles by default on a GPU, and
    ``benchmarks/gpt_shakespeare_gpu.py`` compiles both models) takes the whole GPT as one graph
    (``fullgraph``): float32 on the CPU, where the eager model runs the C++ kernels (layer norm's
    backward, notebook 07's attention), which compile cannot see into, so it traces their torch
    twins instead. Its gradients are eager's. And the backward it compiles is the course's own,
    not one autograd derived from the forward: with an error planted in the hand-derived
    attention and layer-norm backwards, the compiled gradients carry it as the eager ones do.
    On a GPU the flash model's attention is notebook 07's Triton kernels, inside the graph."""
    model = _model(flash=flash).float().to(device)
    idx, targets = _idx().to(device), _idx(seed=2).to(device)

    def grads(run):
        model.zero_grad()
        loss = run(idx, targets)[1]
        loss.backward()
        return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters()}

    if not flash:  # planted before compiling: the backward is traced when the graph is made
        monkeypatch.setattr(attention, "_attend_backward", _planted(attention._attend_backward, 1.5))
        monkeypatch.setattr(layernorm, "layernorm_backward_torch",
                            _planted(layernorm.layernorm_backward_torch, 1.5))
    torch._dynamo.reset()
    loss, compiled = grads(torch.compile(model, fullgraph=True))
    torch._dynamo.reset()
    eager_loss, eager = grads(model)
    torch.testing.assert_close(loss, eager_loss)
    if not flash:  # eager float32 runs layer norm's C++ backward: plant into the torch one
        monkeypatch.setattr(layernorm, "kernel_reason", lambda *tensors: "the torch backward")
        _, eager = grads(model)
        monkeypatch.undo()
        _, right = grads(model)
        assert not torch.allclose(compiled["blocks.0.attn.W_q"], right["blocks.0.attn.W_q"],
                                  rtol=0.1)
    for name in compiled:
        torch.testing.assert_close(compiled[name], eager[name], rtol=1e-4, atol=1e-6, msg=name)
