"""Recurrent language models: Elman RNN and LSTM (CS182 slides, "RNN", "LSTM", "RNN-LM + Loss").

Row convention (one example per row, as in the rest of the course): for a batch of B
sequences of T inputs of size d_in and a hidden state of size H,

    a_t = x_t W_xh + h_{t-1} W_hh + b,   h_t = tanh(a_t)          (Elman; CS182 slides: a_t, h_t)
    y_t = softmax(h_t W_hy + b_y),       loss = sum_t -log y_t[w*_t]

The CS182 slides write the same with column vectors (a_t = W_ah h_{t-1} + W_ax x_t + b_a); our
W_xh is their W_ax transposed. The numpy functions are the references for notebook 01's
exercises; ``CharRNN`` is the torch model that trains on the corpus and follows the
course's interface ``forward(idx, targets=None) -> (logits, loss)``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from course_lib.softmax import log_softmax


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


# --- Elman RNN, numpy reference ------------------------------------------------------------

def rnn_forward(x, h0, Wxh, Whh, b):
    """Run the Elman recurrence over a sequence.

    x: (B, T, d_in), h0: (B, H), Wxh: (d_in, H), Whh: (H, H), b: (H,).
    Returns h: (B, T, H) with h[:, t] = tanh(x[:, t] Wxh + h[:, t-1] Whh + b) (h[:, -1] = h0
    for t = 0), and cache = (x, h0, Wxh, Whh, h) for ``rnn_backward``.
    """
    B, T, _ = x.shape
    h = np.zeros((B, T, Whh.shape[0]), dtype=np.result_type(x, Whh))
    h_prev = h0
    for t in range(T):  # the same weights at every step; the state carries the past
        h_prev = np.tanh(x[:, t] @ Wxh + h_prev @ Whh + b)
        h[:, t] = h_prev
    return h, (x, h0, Wxh, Whh, h)


def rnn_backward(dh, cache):
    """Backpropagation through time for ``rnn_forward``.

    dh: (B, T, H), the gradient of the loss w.r.t. each h_t coming from *outside* the
    recurrence (the output layer at step t). Walking t = T-1 .. 0, the total gradient at h_t
    is dh[:, t] plus what flows back from step t+1; the weights are shared, so their
    gradients are *sums* over all steps.
    Returns (dx (B, T, d_in), dh0 (B, H), dWxh (d_in, H), dWhh (H, H), db (H,)).
    """
    x, h0, Wxh, Whh, h = cache
    T = x.shape[1]
    dx = np.zeros_like(x, dtype=np.result_type(x, dh))
    dWxh, dWhh = np.zeros_like(Wxh, dtype=dx.dtype), np.zeros_like(Whh, dtype=dx.dtype)
    db = np.zeros(Whh.shape[0], dtype=dx.dtype)
    dnext = np.zeros_like(h0, dtype=dx.dtype)  # gradient arriving from step t+1
    for t in reversed(range(T)):
        h_prev = h[:, t - 1] if t > 0 else h0
        da = (dh[:, t] + dnext) * (1.0 - h[:, t] ** 2)  # tanh'(a) = 1 - tanh(a)^2
        dx[:, t] = da @ Wxh.T
        dWxh += x[:, t].T @ da
        dWhh += h_prev.T @ da
        db += da.sum(axis=0)
        dnext = da @ Whh.T
    return dx, dnext, dWxh, dWhh, db


def softmax_cross_entropy(logits, targets, reduction: str = "sum", ignore_index: int | None = None):
    """Cross-entropy of softmax(logits) at the targets, and its gradient.

    logits: (..., vocab_size), targets: (...) ints. reduction "sum" adds the positions' losses
    as the CS182 slides' formula does (l = sum_t l_t); "mean" divides by the number of positions
    counted, like PyTorch's ``F.cross_entropy`` default. Positions whose target equals
    ``ignore_index`` (padding) count for nothing and get zero gradient.
    Returns (loss (scalar), dlogits (..., vocab_size)).
    """
    if reduction not in ("sum", "mean"):
        raise ValueError(f"reduction must be 'sum' or 'mean', not {reduction!r}")
    logp = log_softmax(logits)
    keep = np.ones(np.shape(targets), bool) if ignore_index is None else targets != ignore_index
    onehot = np.eye(logits.shape[-1])[np.where(keep, targets, 0)] * keep[..., None]
    loss, dlogits = -(onehot * logp).sum(), (np.exp(logp) - onehot) * keep[..., None]
    if reduction == "mean":
        n = max(int(keep.sum()), 1)
        loss, dlogits = loss / n, dlogits / n
    return loss, dlogits


def rnn_lm_loss(params: dict, idx, targets):
    """A whole numpy RNN-LM: one-hot input, Elman RNN, output layer, summed loss.

    params: Wxh (vocab_size, H), Whh (H, H), b (H,), Why (H, vocab_size), by (vocab_size,);
    idx, targets: (B, T) ints.
    Returns (loss, grads) with grads keyed like params: the example the notebook
    gradient-checks, BPTT included.
    """
    vocab_size = params["Why"].shape[1]
    x = np.eye(vocab_size)[idx]  # (B, T, vocab_size)
    h0 = np.zeros((idx.shape[0], params["Whh"].shape[0]))
    h, cache = rnn_forward(x, h0, params["Wxh"], params["Whh"], params["b"])
    logits = h @ params["Why"] + params["by"]  # (B, T, vocab_size)
    loss, dlogits = softmax_cross_entropy(logits, targets)
    grads = {"Why": np.einsum("bth,btv->hv", h, dlogits), "by": dlogits.sum(axis=(0, 1))}
    _, _, grads["Wxh"], grads["Whh"], grads["b"] = rnn_backward(dlogits @ params["Why"].T, cache)
    return loss, grads


# --- LSTM, numpy reference -------------------------------------------------------------------

def lstm_cell_forward(x, h_prev, c_prev, W, b):
    """One LSTM step with the blocks stacked as in the CS182 slides: (i, f, o, c_tilde).

    x: (B, d_in), h_prev, c_prev: (B, H), W: (H + d_in, 4H) acting on [h_prev, x], b: (4H,).
    i, f, o = sigmoid(.) gates in (0, 1); c_tilde = tanh(.) the candidate (the CS182 slides' C~_t);
    then c = f * c_prev + i * c_tilde (forget some history, add some new) and h = o * tanh(c).
    Returns (h, c, cache), h and c of shape (B, H).
    """
    H = h_prev.shape[1]
    z = np.concatenate([h_prev, x], axis=1) @ W + b  # (B, 4H)
    i, f, o = sigmoid(z[:, :H]), sigmoid(z[:, H:2 * H]), sigmoid(z[:, 2 * H:3 * H])
    c_tilde = np.tanh(z[:, 3 * H:])
    c = f * c_prev + i * c_tilde
    h = o * np.tanh(c)
    return h, c, (x, h_prev, c_prev, W, i, f, o, c_tilde, c)


def lstm_cell_backward(dh, dc, cache):
    """Gradients of one LSTM step. dh, dc: (B, H) arriving at h and c.

    Returns (dx (B, d_in), dh_prev (B, H), dc_prev (B, H), dW (H + d_in, 4H), db (4H,)).
    """
    x, h_prev, c_prev, W, i, f, o, c_tilde, c = cache
    H = h_prev.shape[1]
    tc = np.tanh(c)
    dc = dc + dh * o * (1.0 - tc ** 2)
    dz = np.concatenate([dc * c_tilde * i * (1 - i), dc * c_prev * f * (1 - f),
                         dh * tc * o * (1 - o), dc * i * (1 - c_tilde ** 2)], axis=1)  # (B, 4H)
    dhx = dz @ W.T
    dW = np.concatenate([h_prev, x], axis=1).T @ dz
    return dhx[:, H:], dhx[:, :H], dc * f, dW, dz.sum(axis=0)


def lstm_forward(x, h0, c0, W, b):
    """The LSTM cell applied along a sequence. x: (B, T, d_in) -> h: (B, T, H)."""
    h, c, hs = h0, c0, []
    for t in range(x.shape[1]):
        h, c, _ = lstm_cell_forward(x[:, t], h, c, W, b)
        hs.append(h)
    return np.stack(hs, axis=1)


# --- the torch models that train on the corpus ----------------------------------------------

class ElmanFunction(torch.autograd.Function):
    """The Elman recurrence in torch with the hand-derived BPTT as its backward.

    Same equations and shapes as ``rnn_forward``/``rnn_backward`` (x: (B, T, d_in), h0: (B, H),
    Wxh: (d_in, H), Whh: (H, H), b: (H,) -> h: (B, T, H)), batched on any device; this is what
    trains ``CharRNN(cell="rnn")``, so the derivation in notebook 01 is the one in use.
    """

    @staticmethod
    def forward(ctx, x, h0, Wxh, Whh, b):
        xW = x @ Wxh + b  # (B, T, H): the input term of every step in one matmul
        h_prev, hs = h0, []
        for t in range(x.shape[1]):
            h_prev = torch.tanh(xW[:, t] + h_prev @ Whh)
            hs.append(h_prev)
        h = torch.stack(hs, dim=1)
        ctx.save_for_backward(x, h0, Wxh, Whh, h)
        return h

    @staticmethod
    def backward(ctx, dh):
        x, h0, Wxh, Whh, h = ctx.saved_tensors
        da = torch.empty_like(h)  # (B, T, H): dloss/da_t for every step
        dnext = torch.zeros_like(h0)
        for t in reversed(range(x.shape[1])):
            da[:, t] = (dh[:, t] + dnext) * (1 - h[:, t] ** 2)
            dnext = da[:, t] @ Whh.T
        h_prev = torch.cat([h0[:, None], h[:, :-1]], dim=1)  # (B, T, H): h_{t-1} per step
        # the weights are shared over time: their gradients sum over every (b, t)
        dWxh = torch.einsum("btd,bth->dh", x, da)
        dWhh = torch.einsum("btk,bth->kh", h_prev, da)
        return da @ Wxh.T, dnext, dWxh, dWhh, da.sum(dim=(0, 1))


class ElmanRNN(torch.nn.Module):
    """One Elman layer, h_t = tanh(x_t Wxh + h_{t-1} Whh + b), from a zero state.

    x: (B, T, d_in) -> (h (B, T, d_hidden), None), shaped like ``torch.nn.RNN``'s output.
    """

    def __init__(self, d_in: int, d_hidden: int):
        super().__init__()
        bound = d_hidden ** -0.5  # torch.nn.RNN's initialisation
        self.Wxh = torch.nn.Parameter(torch.empty(d_in, d_hidden).uniform_(-bound, bound))
        self.Whh = torch.nn.Parameter(torch.empty(d_hidden, d_hidden).uniform_(-bound, bound))
        self.b = torch.nn.Parameter(torch.empty(d_hidden).uniform_(-bound, bound))

    def forward(self, x):
        h0 = x.new_zeros(x.shape[0], self.Whh.shape[0])
        return ElmanFunction.apply(x, h0, self.Wxh, self.Whh, self.b), None


@dataclass
class RNNConfig:
    vocab_size: int
    cell: str = "lstm"     # "rnn" (Elman, tanh) or "lstm"
    d_embed: int = 64      # a learned vector per character instead of a one-hot
    d_hidden: int = 256
    n_layers: int = 1
    block_size: int = 128  # sequence length in training; the sampler keeps this much context


class CharRNN(torch.nn.Module):
    """Character-level RNN-LM: embedding -> Elman RNN or LSTM -> linear to vocab_size.

    The Elman RNN runs on ``ElmanFunction`` (the hand-derived BPTT); the LSTM on
    ``torch.nn.LSTM`` (fused, and checked against ``lstm_forward`` in the tests).

    Each sequence starts from a zero state (as in the CS182 slides' Algorithm 1), so training,
    evaluation and sampling all see the same kind of input.
    forward(idx (B, T), targets (B, T) or None) -> (logits (B, T, vocab_size), mean loss).
    """

    def __init__(self, config: RNNConfig):
        super().__init__()
        self.config, self.block_size = config, config.block_size
        self.embed = torch.nn.Embedding(config.vocab_size, config.d_embed)
        if config.cell == "rnn":  # our own BPTT (ElmanFunction) trains the Elman RNN
            dims = [config.d_embed] + [config.d_hidden] * config.n_layers
            self.rnn = torch.nn.Sequential(*(_FirstOutput(ElmanRNN(a, b))
                                             for a, b in zip(dims, dims[1:])))
        else:
            self.rnn = _FirstOutput(torch.nn.LSTM(config.d_embed, config.d_hidden,
                                                  config.n_layers, batch_first=True))
        self.head = torch.nn.Linear(config.d_hidden, config.vocab_size)

    def forward(self, idx, targets=None):
        h = self.rnn(self.embed(idx))      # (B, T, d_hidden)
        logits = self.head(h)              # (B, T, vocab_size)
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        return logits, loss


class _FirstOutput(torch.nn.Module):
    """Keep only the sequence output of a recurrent layer that returns (output, state)."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, x):
        return self.layer(x)[0]
