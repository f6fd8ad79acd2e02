"""course_lib against the implementations the field uses (PyTorch), in float64.

Every mapping between the course's conventions and PyTorch's is written here once, next to
the comparison that proves it; a learner moving on to PyTorch can read them as a table:

- weights: the course applies ``x @ W`` with W (d_in, d_out); ``nn.Linear`` and
  ``nn.MultiheadAttention`` store W^T (d_out, d_in). nn.MultiheadAttention stacks
  [W_q^T; W_k^T; W_v^T] in ``in_proj_weight``; the course's attention has no biases.
- masks: the course's boolean masks say True = "may attend". ``F.scaled_dot_product_attention``
  agrees; ``nn.MultiheadAttention``'s and ``nn.Transformer*Layer``'s boolean ``attn_mask`` /
  ``key_padding_mask`` say True = "may NOT attend": pass ``~mask``.
- LSTM gates: the course stacks (i, f, o, c_tilde) and applies W to [h_prev, x];
  ``nn.LSTMCell`` stacks (i, f, c_tilde, o), calling the candidate "g", with separate
  ``weight_hh`` and ``weight_ih``.
- RNN biases: the course's single ``b`` is ``nn.RNN``'s ``bias_ih + bias_hh``.
- RoPE: pair (x[2i], x[2i+1]) rotated by +t omega_i, [[cos, -sin], [sin, cos]] (Su et al.).
- cross-entropy: ``reduction="sum"`` is the seeds' sum over positions; PyTorch defaults to
  the mean; padding is ``ignore_index`` in both.
Fully masked attention rows are left out where PyTorch returns NaN and the course returns 0.
"""
import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from course_lib import attention as att
from course_lib import layernorm as ln
from course_lib import positional as pos
from course_lib import rnn, transformer
from course_lib.softmax import log_softmax, softmax

torch.manual_seed(0)
RNG = np.random.default_rng(0)


def t(x):
    return torch.from_numpy(np.asarray(x, dtype=np.float64))


def close(a, b, tol=1e-10):
    a = a.detach().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    b = b.detach().numpy() if isinstance(b, torch.Tensor) else np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


# ----------------------------------------------------------------------------- softmax
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_matches_torch_even_for_huge_logits(axis):
    z = RNG.normal(size=(3, 4, 5)) * 50 + 1000
    close(softmax(z, axis), torch.softmax(t(z), dim=axis))
    close(log_softmax(z, axis), torch.log_softmax(t(z), dim=axis))  # finite where softmax is 0


# ----------------------------------------------------------------------------- attention
def _qkv(*lead, T_q=4, T_k=6, d_k=5, d_v=3):
    return (RNG.normal(size=(*lead, T_q, d_k)), RNG.normal(size=(*lead, T_k, d_k)),
            RNG.normal(size=(*lead, T_k, d_v)))


@pytest.mark.parametrize("lead", [(), (2,), (2, 3)])
def test_scaled_dot_product_attention_with_boolean_and_additive_masks(lead):
    Q, K, V = _qkv(*lead)
    mask = RNG.random((*lead, 4, 6)) < 0.6
    mask[..., 0] = True  # no fully masked row: PyTorch returns NaN there, the course 0
    out, _ = att.attention_forward(Q, K, V, mask)
    close(out, F.scaled_dot_product_attention(t(Q), t(K), t(V), attn_mask=torch.from_numpy(mask)))
    additive = torch.from_numpy(np.where(mask, 0.0, -np.inf))  # M = 0 where allowed, -inf elsewhere
    close(out, F.scaled_dot_product_attention(t(Q), t(K), t(V), attn_mask=additive))
    if lead:  # the torch path with the hand-derived backward
        close(att.attention_torch(t(Q), t(K), t(V), torch.from_numpy(mask))[0], out)


def _torch_mha(W_q, W_k, W_v, W_o, n_heads):
    d_model = W_q.shape[0]
    mha = nn.MultiheadAttention(d_model, n_heads, bias=False, batch_first=True).double()
    with torch.no_grad():
        mha.in_proj_weight.copy_(t(np.concatenate([W_q.T, W_k.T, W_v.T])))  # x @ W <-> W^T rows
        mha.out_proj.weight.copy_(t(W_o.T))
    return mha


@pytest.mark.parametrize("kind", ["self, causal", "cross, key padding"])
def test_multi_head_attention_matches_nn_multiheadattention(kind):
    B, T_q, T_k, d_model, n_heads = 2, 5, 5 if kind.startswith("self") else 7, 8, 2
    W = [RNG.normal(size=(d_model, d_model)) / math.sqrt(d_model) for _ in range(4)]
    x_q = RNG.normal(size=(B, T_q, d_model))
    x_kv = x_q if kind.startswith("self") else RNG.normal(size=(B, T_k, d_model))
    mha = _torch_mha(*W, n_heads)
    if kind.startswith("self"):
        mask = att.causal_mask(T_q)  # (T, T), True = may attend
        want, weights = mha(t(x_q), t(x_kv), t(x_kv), attn_mask=torch.from_numpy(~mask),
                            average_attn_weights=False)
    else:
        keep = att.padding_mask([7, 4], T_k)  # (B, 1, T_k), True = a real token
        mask = keep[:, None]  # (B, 1, 1, T_k): broadcasts over heads and queries
        want, weights = mha(t(x_q), t(x_kv), t(x_kv), key_padding_mask=torch.from_numpy(~keep[:, 0]),
                            average_attn_weights=False)
    out, cache = att.mha_forward(x_q, x_kv, *W, n_heads, mask)
    close(out, want)
    close(cache.attention.A, weights)
    module = att.MultiHeadAttention(d_model, n_heads).double()  # the torch path
    with torch.no_grad():
        for name, w in zip(("W_q", "W_k", "W_v", "W_o"), W):
            getattr(module, name).copy_(t(w))
    close(module(t(x_q), t(x_kv), torch.from_numpy(mask)), want)


# ----------------------------------------------------------------------------- normalisation
def test_layer_norm_forward_and_gradients_match_nn_layernorm():
    x, dout = RNG.normal(size=(2, 3, 6)) * 3 + 1, RNG.normal(size=(2, 3, 6))
    gamma, beta = RNG.normal(size=6), RNG.normal(size=6)
    ref = nn.LayerNorm(6, eps=ln.EPS).double()
    with torch.no_grad():
        ref.weight.copy_(t(gamma)), ref.bias.copy_(t(beta))
    xt = t(x).requires_grad_()
    want = ref(xt)
    want.backward(t(dout))
    out, cache = ln.layernorm_forward(x, gamma, beta)
    close(out, want)
    for mine, theirs in zip(ln.layernorm_backward(dout, cache), (xt.grad, ref.weight.grad, ref.bias.grad)):
        close(mine, theirs)
    close(ln.layer_norm_torch(t(x), t(gamma), t(beta)), F.layer_norm(t(x), (6,), t(gamma), t(beta), ln.EPS))


def test_batch_norm_in_training_and_evaluation_matches_nn_batchnorm1d():
    x = RNG.normal(size=(16, 5)) * 2 + 3
    gamma, beta = RNG.normal(size=5), RNG.normal(size=5)
    bn = nn.BatchNorm1d(5, eps=ln.EPS).double()
    with torch.no_grad():
        bn.weight.copy_(t(gamma)), bn.bias.copy_(t(beta))
    bn.train()
    close(ln.batchnorm_forward(x, gamma, beta)[0], bn(t(x)))  # this batch's (biased) statistics
    bn.eval()
    running = (bn.running_mean.numpy(), bn.running_var.numpy())
    close(ln.batchnorm_forward(x, gamma, beta, running)[0], bn(t(x)))


# ----------------------------------------------------------------------------- recurrent
def test_elman_rnn_matches_nn_rnn():
    B, T, D, H = 2, 5, 3, 4
    ref = nn.RNN(D, H, batch_first=True).double()
    x, h0 = RNG.normal(size=(B, T, D)), RNG.normal(size=(B, H))
    Wxh, Whh = ref.weight_ih_l0.detach().numpy().T, ref.weight_hh_l0.detach().numpy().T
    b = (ref.bias_ih_l0 + ref.bias_hh_l0).detach().numpy()  # one bias in the course
    want, _ = ref(t(x), t(h0)[None])
    close(rnn.rnn_forward(x, h0, Wxh, Whh, b)[0], want)
    module = rnn.ElmanRNN(D, H).double()  # the torch path starts from a zero state
    with torch.no_grad():
        module.Wxh.copy_(t(Wxh)), module.Whh.copy_(t(Whh)), module.b.copy_(t(b))
    close(module(t(x))[0], ref(t(x))[0])


def test_lstm_cell_matches_nn_lstmcell_with_gates_reordered():
    B, D, H = 3, 4, 5
    ref = nn.LSTMCell(D, H).double()
    x, h_prev, c_prev = RNG.normal(size=(B, D)), RNG.normal(size=(B, H)), RNG.normal(size=(B, H))
    i, f, c_tilde, o = (slice(k * H, (k + 1) * H) for k in range(4))  # torch's order
    order = np.r_[i, f, o, c_tilde]  # the course's (i, f, o, c_tilde)
    W = np.concatenate([ref.weight_hh.detach().numpy().T, ref.weight_ih.detach().numpy().T])[:, order]
    b = (ref.bias_ih + ref.bias_hh).detach().numpy()[order]
    h, c, _ = rnn.lstm_cell_forward(x, h_prev, c_prev, W, b)
    want_h, want_c = ref(t(x), (t(h_prev), t(c_prev)))
    close(h, want_h), close(c, want_c)


# ----------------------------------------------------------------------------- loss
@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_cross_entropy_matches_f_cross_entropy_with_padding_ignored(reduction):
    logits, targets = RNG.normal(size=(2, 6, 7)) * 3, RNG.integers(0, 7, size=(2, 6))
    targets[1, 4:] = -1  # padding
    loss, dlogits = rnn.softmax_cross_entropy(logits, targets, reduction, ignore_index=-1)
    lt = t(logits).requires_grad_()
    want = F.cross_entropy(lt.flatten(0, 1), torch.from_numpy(targets).flatten(),
                           reduction=reduction, ignore_index=-1)
    want.backward()
    close(loss, want), close(dlogits, lt.grad)


# ----------------------------------------------------------------------------- positions
def test_sinusoidal_encoding_is_the_papers_formula():
    d_model, positions = 16, np.arange(0, 50, 7)
    want = np.zeros((len(positions), d_model))
    for r, p in enumerate(positions):  # PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos(...)
        for i in range(d_model // 2):
            want[r, 2 * i] = math.sin(p / 10000 ** (2 * i / d_model))
            want[r, 2 * i + 1] = math.cos(p / 10000 ** (2 * i / d_model))
    close(pos.sinusoidal_encoding(positions, d_model), want)


def test_rope_is_the_papers_rotation():
    x, positions = RNG.normal(size=(5, 8)), np.array([0, 1, 3, 10, 200])
    want = np.empty_like(x)
    for r, m in enumerate(positions):
        for k in range(4):
            theta = m * 10000 ** (-2 * k / 8)
            c, s = math.cos(theta), math.sin(theta)
            want[r, 2 * k] = c * x[r, 2 * k] - s * x[r, 2 * k + 1]
            want[r, 2 * k + 1] = s * x[r, 2 * k] + c * x[r, 2 * k + 1]
    close(pos.apply_rope(x, positions), want)
    close(pos.apply_rope_torch(t(x), torch.from_numpy(positions)), want)


# ----------------------------------------------------------------------------- blocks
def _params(d_model, d_ff, cross=False):
    W = lambda *s: RNG.normal(size=s) / math.sqrt(s[0])  # noqa: E731
    p = {"self_attn": tuple(W(d_model, d_model) for _ in range(4)),
         "ffn": (W(d_model, d_ff), RNG.normal(size=d_ff) * 0.1, W(d_ff, d_model), RNG.normal(size=d_model) * 0.1)}
    if cross:
        p["cross_attn"] = tuple(W(d_model, d_model) for _ in range(4))
    for k in range(1, 4 if cross else 3):
        p[f"norm{k}"] = (1 + 0.1 * RNG.normal(size=d_model), 0.1 * RNG.normal(size=d_model))
    return p


def _load_attention(mha: nn.MultiheadAttention, W):
    W_q, W_k, W_v, W_o = W
    with torch.no_grad():
        mha.in_proj_weight.copy_(t(np.concatenate([W_q.T, W_k.T, W_v.T])))
        mha.in_proj_bias.zero_(), mha.out_proj.weight.copy_(t(W_o.T)), mha.out_proj.bias.zero_()


def _load_layer(layer, p):
    _load_attention(layer.self_attn, p["self_attn"])
    if "cross_attn" in p:
        _load_attention(layer.multihead_attn, p["cross_attn"])
    W1, b1, W2, b2 = p["ffn"]
    with torch.no_grad():
        layer.linear1.weight.copy_(t(W1.T)), layer.linear1.bias.copy_(t(b1))
        layer.linear2.weight.copy_(t(W2.T)), layer.linear2.bias.copy_(t(b2))
        for k in range(1, 4 if "cross_attn" in p else 3):
            norm = getattr(layer, f"norm{k}")
            norm.weight.copy_(t(p[f"norm{k}"][0])), norm.bias.copy_(t(p[f"norm{k}"][1]))
    return layer.eval()


@pytest.mark.parametrize("order", ["post", "pre"])
def test_encoder_and_decoder_blocks_match_nn_transformer_layers(order):
    B, S, T, d_model, n_heads, d_ff = 2, 6, 5, 8, 2, 16
    src = np.array([[5, 6, 7, 8, 0, 0], [5, 6, 7, 8, 9, 10]])
    tgt = np.array([[1, 5, 6, 0, 0], [1, 5, 6, 7, 8]])
    enc_mask, cross_mask, dec_mask = transformer.attention_masks(src, tgt)
    x, y = RNG.normal(size=(B, S, d_model)), RNG.normal(size=(B, T, d_model))
    common = dict(dim_feedforward=d_ff, dropout=0.0, batch_first=True, norm_first=order == "pre",
                  layer_norm_eps=ln.EPS)
    p = _params(d_model, d_ff)
    enc = _load_layer(nn.TransformerEncoderLayer(d_model, n_heads, **common).double(), p)
    pad = torch.from_numpy(src == 0)  # True = a padding key, to be ignored
    memory = transformer.encoder_block(x, p, n_heads, enc_mask, order)
    close(memory, enc(t(x), src_key_padding_mask=pad), tol=1e-9)

    q = _params(d_model, d_ff, cross=True)
    dec = _load_layer(nn.TransformerDecoderLayer(d_model, n_heads, **common).double(), q)
    not_allowed = torch.from_numpy(~att.causal_mask(T))
    want = dec(t(y), t(memory), tgt_mask=not_allowed, tgt_key_padding_mask=torch.from_numpy(tgt == 0),
               memory_key_padding_mask=pad)
    got = transformer.decoder_block(y, memory, q, n_heads, dec_mask, cross_mask, order)
    rows = tgt != 0  # a padded query attends to nothing in the course (output from the residual)
    close(got[rows], want.detach().numpy()[rows], tol=1e-9)
