"""course_lib.transformer: masks, numpy/torch agreement of the blocks, gradients of the
whole model against plain autograd, embedding scale and tying, the warm-up schedule."""
import math

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from course_lib import attention, layernorm
from course_lib import transformer as tf
from course_lib.tokenize import PAD


def _model(norm="post", seed=0, **kw):
    torch.manual_seed(seed)
    cfg = tf.TransformerConfig(vocab_size=11, d_model=8, n_heads=2, d_ff=12, n_layers=2,
                               norm=norm, **kw)
    return tf.Transformer(cfg).double()


def _batch(seed=0, B=3, S=6, T=5, V=11):
    """Random ids in 3..V-1 with some right padding (row 0 unpadded)."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, V, (B, S), generator=g)
    tgt_in = torch.randint(3, V, (B, T), generator=g)
    tgt_in[:, 0] = 1  # <s>
    targets = torch.randint(3, V, (B, T), generator=g)
    for b in range(1, B):
        src[b, S - b:] = PAD
        tgt_in[b, T - b:] = PAD
        targets[b, T - b:] = PAD
    return src, tgt_in, targets


def test_masks_hide_source_padding_and_the_future():
    src = np.array([[5, 6, 7], [5, 6, PAD]])
    tgt_in = np.array([[1, 4, 4, 4], [1, 4, PAD, PAD]])
    enc, cross, dec = tf.attention_masks(src, tgt_in)
    assert enc.shape == cross.shape == (2, 1, 1, 3) and dec.shape == (2, 1, 4, 4)
    np.testing.assert_array_equal(enc[1, 0, 0], [True, True, False])
    np.testing.assert_array_equal(cross, enc)
    np.testing.assert_array_equal(dec[0, 0], np.tril(np.ones((4, 4), bool)))
    np.testing.assert_array_equal(dec[1, 0], np.tril(np.ones((4, 4), bool)) & [1, 1, 0, 0])
    # the same function on torch tensors gives the same masks, as tensors
    for mine, want in zip(tf.attention_masks(torch.tensor(src), torch.tensor(tgt_in)),
                          (enc, cross, dec)):
        assert isinstance(mine, torch.Tensor)
        np.testing.assert_array_equal(mine.numpy(), want)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_torch_blocks_match_the_numpy_references(norm):
    model = _model(norm)
    src, tgt_in, _ = _batch()
    enc_mask, cross_mask, dec_mask = tf.attention_masks(src, tgt_in)
    x = torch.randn(3, 6, 8, dtype=torch.float64)
    y = torch.randn(3, 5, 8, dtype=torch.float64)
    enc, dec = model.encoder[0], model.decoder[0]
    want = tf.encoder_block(x.numpy(), tf.block_params(enc), 2, enc_mask.numpy(), norm)
    np.testing.assert_allclose(enc(x, enc_mask).detach().numpy(), want, atol=1e-12)
    want = tf.decoder_block(y.numpy(), x.numpy(), tf.block_params(dec), 2, dec_mask.numpy(),
                            cross_mask.numpy(), norm)
    got = dec(y, x, dec_mask, cross_mask).detach().numpy()
    np.testing.assert_allclose(got, want, atol=1e-12)


def test_cross_attention_reads_keys_and_values_from_the_encoder():
    model = _model()
    src, tgt_in, _ = _batch()
    enc_mask, cross_mask, dec_mask = tf.attention_masks(src, tgt_in)
    memory = torch.randn(3, 6, 8, dtype=torch.float64)
    y = torch.randn(3, 5, 8, dtype=torch.float64)
    p = tf.block_params(model.decoder[0])
    out = tf.decoder_block(y.numpy(), memory.numpy(), p, 2, dec_mask.numpy(), cross_mask.numpy())
    # keys and values from the decoder instead (a plausible mistake) give other numbers
    wrong = tf.decoder_block(y.numpy(), y.numpy(), p, 2, dec_mask.numpy(), None)
    assert not np.allclose(out, wrong)
    model.decoder[0](y, memory, dec_mask, cross_mask)
    weights = model.decoder[0].cross_attn.attention  # (B, n_heads, T, S)
    assert weights.shape == (3, 2, 5, 6)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 2, 5, dtype=torch.float64))
    assert (weights[2, :, :, -2:] == 0).all()  # row 2 has two source <pad>s


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_gradients_of_the_whole_model_equal_plain_autograd(norm, monkeypatch):
    src, tgt_in, targets = _batch()
    model = _model(norm, label_smoothing=0.1)
    _, loss = model(src, tgt_in, targets)
    loss.backward()
    ours = {name: p.grad.clone() for name, p in model.named_parameters()}
    # the same model with torch's own attention and layer norm, differentiated by autograd
    monkeypatch.setattr(attention, "attention_torch", attention.attention_autograd_torch)
    monkeypatch.setattr(layernorm, "layer_norm_torch",
                        lambda x, g, b, eps=layernorm.EPS: F.layer_norm(x, g.shape, g, b, eps))
    model.zero_grad()
    _, loss2 = model(src, tgt_in, targets)
    loss2.backward()
    torch.testing.assert_close(loss, loss2)
    for name, p in model.named_parameters():
        torch.testing.assert_close(ours[name], p.grad, rtol=1e-9, atol=1e-12, msg=name)


def test_whole_model_passes_gradcheck():
    """Finite differences through the whole model, for a weight of the cross-attention and
    a layer-norm gain (the others held fixed)."""
    model = _model("pre")
    src, tgt_in, targets = _batch(B=2, S=4, T=3)
    names = ("decoder.0.cross_attn.W_q", "encoder.0.add_norms.0.norm.gamma")
    params = dict(model.named_parameters())

    def loss(*values):
        return torch.func.functional_call(model, dict(zip(names, values)),
                                          (src, tgt_in, targets))[1]

    assert torch.autograd.gradcheck(loss, [params[n].detach().clone().requires_grad_()
                                           for n in names])


def test_loss_ignores_padding_and_decoding_sees_no_future():
    model = _model()
    src, tgt_in, targets = _batch()
    logits, loss = model(src, tgt_in, targets)
    keep = targets != PAD
    torch.testing.assert_close(loss, F.cross_entropy(logits[keep], targets[keep]))
    # changing a later decoder input leaves the earlier logits alone (causal mask)
    changed = tgt_in.clone()
    changed[0, 3] = 7 if tgt_in[0, 3] != 7 else 8
    torch.testing.assert_close(model(src, changed)[0][0, :3], logits[0, :3])
    assert not torch.allclose(model(src, changed)[0][0, 3:], logits[0, 3:])
    torch.testing.assert_close(model.decode(tgt_in, model.encode(src), src), logits)


def test_padded_source_positions_are_invisible():
    model = _model()
    src, tgt_in, _ = _batch()
    logits = model(src, tgt_in)[0]
    # the token *under* a <pad> never matters: compute row 2 without its padding at all
    short = src[2:3, :-2]
    torch.testing.assert_close(model(short, tgt_in[2:3])[0], logits[2:3])


def test_embedding_is_scaled_shared_and_tied():
    model = _model()
    src, tgt_in, _ = _batch()
    W_E = model.embed.weight
    x = model.embed_tokens(src)
    pos = tf.sinusoidal_encoding_torch(torch.arange(6, dtype=torch.float64), 8)
    torch.testing.assert_close(x, W_E[src] * math.sqrt(8) + pos)
    _, cross_mask, dec_mask = tf.attention_masks(src, tgt_in)
    memory, y = model.encode(src), model.embed_tokens(tgt_in)
    for block in model.decoder:
        y = block(y, memory, dec_mask, cross_mask)
    torch.testing.assert_close(model(src, tgt_in)[0], y @ W_E.T)  # Post-LN: no final norm
    assert sum(p.shape == W_E.shape for p in model.parameters()) == 1  # one matrix for all


def test_model_runs_on_cuda_when_present():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    model = _model().cuda()
    src, tgt_in, targets = (t.cuda() for t in _batch())
    logits, loss = model(src, tgt_in, targets)
    loss.backward()
    assert logits.device.type == "cuda"


def test_noam_schedule_warms_up_then_decays():
    lrs = [tf.noam_lr(s, 64, warmup=100) for s in range(1, 1001)]
    assert np.argmax(lrs) == 99  # the peak is at step = warmup
    assert lrs[0] < lrs[50] < lrs[99] and lrs[99] > lrs[400] > lrs[999]
    assert math.isclose(lrs[99], 64 ** -0.5 * 100 ** -0.5)


def test_config_rejects_an_unknown_norm():
    with pytest.raises(ValueError, match="post"):
        tf.Transformer(tf.TransformerConfig(vocab_size=5, norm="middle"))
