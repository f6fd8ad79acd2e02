"""Normalisation and the residual "Add & Norm" block: batch norm (recap), layer norm
forward/backward, the position-wise feed-forward network, and Post-LN / Pre-LN blocks.

Week 7 (§6 "Layer normalisation"): batch norm averages each feature over the M examples of
a mini batch; layer norm averages over the n_k = d_model features of one example, so every
vector is normalised on its own -- independent of the batch and identical at training and
test time. Both use the biased variance (divide by the count, not count - 1) and put eps
inside the square root.

The FFN and the blocks live here rather than in ``transformer.py`` because this module is
about the Add & Norm wrapper itself; ``ResidualBlock`` wraps any sublayer (attention or FFN).

numpy functions are the float64-friendly reference; ``layer_norm_torch`` wires the
hand-derived backward below into torch through ``torch.autograd.Function``. For float32 CPU
tensors that node is compiled (``layernorm_kernel.cpp``: the same forward, the same derivation
in C++, built at set-up by ``course_lib.cpu_kernels``); everything else, and every call where
set-up could not build it, runs the backward in torch (``layernorm_backward_torch``: the same
numbers up to rounding). ``kernel_reason`` says which and why. A training step never compiles.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from course_lib import cpu_kernels
from course_lib.attention import MultiHeadAttention

EPS = 1e-5


# ------------------------------------------------------------------- batch norm (recap)
def batchnorm_forward(x, gamma, beta, running=None, eps=EPS):
    """Batch norm: each feature normalised with statistics over the batch (and time) axes.

    x: (B, d_model) or (B, T, d_model); gamma, beta: (d_model,).
    running: None while training (use this batch's statistics), or (mean, var) each (d,)
    at test time (use the running averages collected during training).
    Returns (out, (mean, var)): out has x's shape; mean, var are the statistics used.
    """
    axes = tuple(range(x.ndim - 1))  # every axis but the feature axis
    if running is None:
        mean, var = x.mean(axis=axes), x.var(axis=axes)
    else:
        mean, var = running
    return gamma * (x - mean) / np.sqrt(var + eps) + beta, (mean, var)


# ------------------------------------------------------------------------ layer norm
def layernorm_forward(x, gamma, beta, eps=EPS):
    """Layer norm over the last axis (Week 7, §6; the CS182 slide "Layer Normalization").

    x: (..., d_model), e.g. (B, T, d_model); gamma, beta: (d_model,).
    mu = mean(x), sigma^2 = mean((x - mu)^2) over d_model (biased), per vector;
    x_hat = (x - mu) / sqrt(sigma^2 + eps); out = gamma * x_hat + beta.
    Returns (out, cache) with out of x's shape.
    """
    mu = x.mean(axis=-1, keepdims=True)  # (..., 1)
    xc = x - mu
    var = (xc ** 2).mean(axis=-1, keepdims=True)  # (..., 1)
    inv_std = 1.0 / np.sqrt(var + eps)
    x_hat = xc * inv_std
    return gamma * x_hat + beta, (x_hat, inv_std, gamma)


def layernorm_backward(dout, cache):
    """Gradients of layer norm. dout: (..., d_model) -> (dx, dgamma, dbeta).

    mu and sigma depend on every x_j of the vector, so dx is not just dout * gamma / sigma:
        g = dout * gamma,
        dx = inv_std * (g - mean(g) - x_hat * mean(g * x_hat))      (means over d_model).
    dgamma, dbeta: (d_model,), summed over every leading axis (gamma is shared by all vectors).
    """
    x_hat, inv_std, gamma = cache
    lead = tuple(range(dout.ndim - 1))
    dbeta = dout.sum(axis=lead)
    dgamma = (dout * x_hat).sum(axis=lead)
    g = dout * gamma
    dx = inv_std * (g - g.mean(axis=-1, keepdims=True)
                    - x_hat * (g * x_hat).mean(axis=-1, keepdims=True))
    return dx, dgamma, dbeta


# ----------------------------------------------------- position-wise feed-forward network
def ffn_forward(x, W1, b1, W2, b2):
    """FFN(x) = ReLU(x W1 + b1) W2 + b2, applied to every position on its own (the blog post's
    forward step 4; Week 7, §7 "Encoder stack").

    x: (..., d_model); W1: (d_model, d_ff); b1: (d_ff,); W2: (d_ff, d_model); b2: (d_model,).
    The original Transformer used d_model = 512, d_ff = 2048. Returns (out, cache).
    """
    h = np.maximum(x @ W1 + b1, 0.0)  # (..., d_ff)
    return h @ W2 + b2, (x, h, W1, W2)


def ffn_backward(dout, cache):
    """dout: (..., d_model) -> (dx, dW1, db1, dW2, db2), weight grads summed over positions."""
    x, h, W1, W2 = cache
    x2, h2, d2 = x.reshape(-1, x.shape[-1]), h.reshape(-1, h.shape[-1]), dout.reshape(-1, dout.shape[-1])
    dh = (d2 @ W2.T) * (h2 > 0)  # ReLU passes gradient only where it was active
    dx = (dh @ W1.T).reshape(x.shape)
    return dx, x2.T @ dh, dh.sum(0), h2.T @ d2, d2.sum(0)


# ----------------------------------------------------------- residual blocks (numpy)
def post_ln_block(x, W1, b1, W2, b2, gamma, beta, eps=EPS):
    """Post-LN (original Transformer, 2017): out = LN(x + FFN(x)). Shapes as ffn_forward."""
    return layernorm_forward(x + ffn_forward(x, W1, b1, W2, b2)[0], gamma, beta, eps)[0]


def pre_ln_block(x, W1, b1, W2, b2, gamma, beta, eps=EPS):
    """Pre-LN: out = x + FFN(LN(x)); the residual path carries the *un-normalised* x."""
    return x + ffn_forward(layernorm_forward(x, gamma, beta, eps)[0], W1, b1, W2, b2)[0]


# ----------------------------------------------------------------------------- torch
class _LayerNormFunction(torch.autograd.Function):
    """Layer norm whose backward is ``layernorm_backward`` in torch (``layernorm_kernel.cpp``
    holds the same node with the backward compiled)."""

    @staticmethod
    def forward(ctx, x, gamma, beta, eps):
        # out = gamma * x_hat + beta, with mean and rstd = inv_std (..., 1), in one fused kernel:
        # the forward is not what the course derives, the backward below is
        # a branch, not .to() on every call: .to() of the same dtype hands back its input, and
        # torch.compile on a GPU (torch 2.11) then traced wrong gradients (the GPT stopped
        # learning; the CUDA compile test of tests/course_lib/test_gpt.py sees it)
        if x.dtype == gamma.dtype == beta.dtype:
            out, mean, rstd = torch.native_layer_norm(x, x.shape[-1:], gamma, beta, eps)
        else:  # bfloat16 x, float32 gains (a model cast in part): CPU's kernel mixes them, a
            # GPU's takes one dtype, so x is normalised in the wider and out given back in x's
            wide = torch.promote_types(x.dtype, gamma.dtype)
            out, mean, rstd = torch.native_layer_norm(x.to(wide), x.shape[-1:], gamma.to(wide),
                                                      beta.to(wide), eps)
            out = out.to(x.dtype)
        ctx.save_for_backward(x, mean, rstd, gamma)  # x_hat is recomputed: one pass less here
        return out

    @staticmethod
    def backward(ctx, dout):
        return *layernorm_backward_torch(dout, *ctx.saved_tensors), None, None


def layernorm_backward_torch(dout, x, mean, rstd, gamma):
    """``layernorm_backward`` in torch, from what the forward saved -> (dx, dgamma, dbeta).

    dout, x: (..., d_model); mean, rstd = inv_std: (..., 1); gamma: (d_model,).
    """
    x_hat = (x - mean) * rstd
    g = dout * gamma
    dx = rstd * (g - g.mean(-1, keepdim=True) - x_hat * (g * x_hat).mean(-1, keepdim=True))
    # summed over every leading axis (sum_to_size, as sum(()) would sum a 1-D dout whole)
    return dx, (dout * x_hat).sum_to_size(gamma.shape), dout.sum_to_size(gamma.shape)


def kernel_reason(*tensors) -> str:
    """Why the compiled layer norm does not take these tensors ('' when it does); with none, why
    it is not usable at all. It takes float32 CPU tensors, once set-up has built it, outside
    ``torch.compile`` (``cpu_kernels.why_not_usable``)."""
    why = cpu_kernels.why_not_usable()
    if why:
        return why
    for t in tensors:
        if not t.is_cpu:
            return f"{t.device.type} tensors: the kernel runs on the CPU"
        if t.dtype != torch.float32:
            return f"{t.dtype} tensors: the kernel takes float32"
        if t.numel() == 0:
            return "an empty tensor"
    return ""


def layer_norm_torch(x, gamma, beta, eps=EPS, compiled=True):
    """Torch twin of ``layernorm_forward``, differentiated by the hand-derived backward.

    x: (..., d_model); gamma, beta: (d_model,); returns out (..., d_model). Where
    ``kernel_reason(x, gamma, beta)`` is '', one autograd node in C++ (the forward, then the
    compiled backward: its output's gradient has its type, float32 on the CPU); elsewhere, or
    with ``compiled=False`` (to compare the two), ``_LayerNormFunction``.
    """
    if compiled and not kernel_reason(x, gamma, beta):
        return torch.ops.course_layernorm.layer_norm(x, gamma, beta, eps)
    return _LayerNormFunction.apply(x, gamma, beta, eps)


class LayerNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = EPS):
        super().__init__()
        self.gamma, self.beta = nn.Parameter(torch.ones(d_model)), nn.Parameter(torch.zeros(d_model))
        self.eps = eps

    def forward(self, x):
        return layer_norm_torch(x, self.gamma, self.beta, self.eps)


class FeedForward(nn.Module):
    """Torch twin of ``ffn_forward``: Linear(d_model, d_ff) -> ReLU -> Linear(d_ff, d_model)."""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class ResidualBlock(nn.Module):
    """Add & Norm around any sublayer (attention or FFN) mapping (..., d_model) to itself.

    order="post": LN(x + sublayer(x))  -- the 2017 Transformer;
    order="pre":  x + sublayer(LN(x))  -- LN moved to the start of the sublayer (the CS182
    slides' "Transformer Layer", Pre-LN version).
    """

    def __init__(self, sublayer: nn.Module, d_model: int, order: str):
        super().__init__()
        if order not in ("post", "pre"):
            raise ValueError(f"order must be 'post' or 'pre', got {order!r}")
        self.sublayer, self.norm, self.order = sublayer, LayerNorm(d_model), order

    def forward(self, x):
        if self.order == "post":
            return self.norm(x + self.sublayer(x))
        return x + self.sublayer(self.norm(x))


# ------------------------------------------------- the Post-LN vs Pre-LN experiment (torch)
class _CausalSelfAttention(nn.Module):
    """course_lib.attention's multi-head attention with a causal mask, as a sublayer."""

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.attention = MultiHeadAttention(d_model, n_heads)

    def forward(self, x):  # (B, T, d_model)
        T = x.shape[-2]
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()  # (T, T), True = may attend
        return self.attention(x, mask=mask)


class ResidualStackLM(nn.Module):
    """n_layers x (attention block, FFN block), each wrapped in Add & Norm of the given order.

    forward(idx, targets=None) -> (logits, loss); idx (B, T), logits (B, T, vocab_size).
    Pre-LN needs one more LN before the output layer, because its residual stream is never
    normalised otherwise. Weights use Xavier initialisation as in Xiong et al. (2020), who
    compared the two orders.
    """

    def __init__(self, vocab_size: int, d_model: int, n_layers: int, n_heads: int, order: str,
                 max_len: int = 256):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList()
        for _ in range(n_layers):
            self.blocks.append(ResidualBlock(_CausalSelfAttention(d_model, n_heads), d_model, order))
            self.blocks.append(ResidualBlock(FeedForward(d_model, 4 * d_model), d_model, order))
        self.final_norm = LayerNorm(d_model) if order == "pre" else nn.Identity()
        self.head = nn.Linear(d_model, vocab_size)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.xavier_uniform_(p)

    def forward(self, idx, targets=None):
        x = self.embed(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.final_norm(x))
        loss = None if targets is None else F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return logits, loss

    def sublayer_grad_norms(self) -> dict[str, list[float]]:
        """After backward(): gradient norm of each layer's attention and FFN weights, by depth."""
        norms = {"attention": [], "ffn": []}
        for i, block in enumerate(self.blocks):
            grads = [p.grad for p in block.sublayer.parameters() if p.grad is not None]
            norms["attention" if i % 2 == 0 else "ffn"].append(
                float(torch.sqrt(sum((g * g).sum() for g in grads))))
        return norms


def grad_norms_at_init(order, idx, targets, n_inits=5, **config):
    """Gradient norm of each layer's attention and FFN weights after one backward pass at
    initialisation, averaged over ``n_inits`` initialisations (torch seeds 0, 1, ...).

    idx, targets: (B, T) on the device to use; config: the other arguments of
    ``ResidualStackLM`` (vocab_size, d_model, n_layers, n_heads). Returns
    {"attention": (n_layers,), "ffn": (n_layers,)}, layer 1 first.
    """
    runs = []
    for seed in range(n_inits):
        torch.manual_seed(seed)
        model = ResidualStackLM(order=order, **config).to(idx.device)
        _, loss = model(idx, targets)
        loss.backward()
        runs.append(model.sublayer_grad_norms())
    return {kind: np.mean([run[kind] for run in runs], axis=0) for kind in runs[0]}
