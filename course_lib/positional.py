"""Positional information for attention: sinusoidal encoding, the rotation A(tau), learned
position embeddings, and rotary position embedding (RoPE).

Attention by itself cannot tell positions apart (shuffle the tokens and the outputs
shuffle the same way), so position has to be put into the vectors.

Layout convention used everywhere in this module (Week 7, eq. (11)): the d_model
dimensions form d_model / 2 *pairs* of adjacent dimensions (2i, 2i+1), i = 0 .. d_model/2 - 1.
Pair i turns at the angular frequency

    omega_i = 1 / base ** (2i / d_model),        base = 10000                  (eq. 10)

and holds [sin(omega_i t), cos(omega_i t)] in the sinusoidal encoding. The rotation A(tau)
(eq. 12) is block diagonal with one 2x2 block per pair,

    [[ cos(omega_i tau), sin(omega_i tau)],
     [-sin(omega_i tau), cos(omega_i tau)]],

so that A(tau) P[t] = P[t + tau]. Because a pair holds (sin, cos), moving *forward* tau positions
turns it by -omega_i tau in the plane of its two coordinates.

RoPE (Su et al. 2021, "RoFormer", section 3.2) rotates the query or key at position t
by R(t), whose 2x2 blocks turn by +omega_i t:

    [[cos(omega_i t), -sin(omega_i t)],
     [sin(omega_i t),  cos(omega_i t)]],        so R(t) = A(t)^T = A(-t),

on the same adjacent pairs (2i, 2i+1) -- *not* the "first half / second half" pairing some
libraries use -- so that R(t) q . R(t') k = q . R(t' - t) k depends on t' - t only.

numpy functions are the reference (float64 friendly); the ``*_torch`` twins are the
device-agnostic fast path and are tested against them.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

BASE = 10000.0


# ----------------------------------------------------------------------------- numpy
def frequencies(d_model: int, base: float = BASE) -> np.ndarray:
    """omega_i = base^(-2i/d_model) for i = 0 .. d_model/2 - 1 (eq. 10). Shape (d_model/2,)."""
    if d_model % 2:
        raise ValueError(f"d_model must be even (pairs of dimensions), got {d_model}")
    i = np.arange(d_model // 2)
    return base ** (-2.0 * i / d_model)


def sinusoidal_encoding(positions, d_model: int, base: float = BASE) -> np.ndarray:
    """The sinusoidal positional encoding P of Week 7, §5, eqs. (10)-(11).

    positions: (T,) positions t (Week 7 counts t = 1 .. n; any numbers work).
    Returns P of shape (T, d_model) with P[:, 2i] = sin(omega_i t), P[:, 2i+1] = cos(omega_i t).
    """
    t = np.asarray(positions, dtype=np.float64)[:, None]  # (T, 1)
    angles = t * frequencies(d_model, base)[None, :]  # (T, d_model/2)
    P = np.empty((t.shape[0], d_model))
    P[:, 0::2] = np.sin(angles)
    P[:, 1::2] = np.cos(angles)
    return P


def rotation_matrix(tau, d_model: int, base: float = BASE) -> np.ndarray:
    """A(tau) of eq. (12): block-diagonal 2x2 rotations, one per pair. Shape (d_model, d_model).

    A(tau) @ P[t] == P[t + tau] for every t: shifting by tau is the same linear map everywhere.
    Blocks [[cos, sin], [-sin, cos]] at omega_i tau; RoPE's rotation R(t) is A(t)^T = A(-t).
    """
    theta = tau * frequencies(d_model, base)  # (d_model/2,)
    c, s = np.cos(theta), np.sin(theta)
    A = np.zeros((d_model, d_model))
    even, odd = np.arange(0, d_model, 2), np.arange(1, d_model, 2)
    A[even, even], A[even, odd] = c, s
    A[odd, even], A[odd, odd] = -s, c
    return A


def apply_rope(x, positions, base: float = BASE) -> np.ndarray:
    """RoPE (Su et al.): row t of ``x`` becomes R(positions[t]) @ x[..., t, :].

    x:         (..., T, d) queries or keys (leading axes such as B, n_heads are kept), d even.
    positions: (T,) position of each row.
    Returns an array of the same shape. Only the adjacent pairs (2i, 2i+1) are mixed:
    out[2i] = cos * x[2i] - sin * x[2i+1], out[2i+1] = sin * x[2i] + cos * x[2i+1], at the
    angle omega_i t, i.e. R(t) = A(t)^T = A(-t) with A of ``rotation_matrix``.

    R(t) is a rotation, so its transpose is R(-t): the backward of RoPE is
    ``apply_rope(dout, -positions)``, and (R(t) q) . (R(t') k) = q . R(t' - t) k.
    """
    x = np.asarray(x)
    d = x.shape[-1]
    theta = np.asarray(positions, dtype=np.float64)[:, None] * frequencies(d, base)  # (T, d/2)
    c, s = np.cos(theta), np.sin(theta)
    x_even, x_odd = x[..., 0::2], x[..., 1::2]  # (..., T, d/2) each
    out = np.empty(np.broadcast_shapes(x.shape, (theta.shape[0], d)), dtype=np.result_type(x, c))
    out[..., 0::2] = c * x_even - s * x_odd
    out[..., 1::2] = s * x_even + c * x_odd
    return out


# ----------------------------------------------------------------------------- torch
def frequencies_torch(d_model: int, base: float = BASE, device=None, dtype=torch.float32):
    if d_model % 2:
        raise ValueError(f"d_model must be even (pairs of dimensions), got {d_model}")
    i = torch.arange(d_model // 2, device=device, dtype=dtype)
    return base ** (-2.0 * i / d_model)


def sinusoidal_encoding_torch(positions: torch.Tensor, d_model: int, base: float = BASE):
    """Torch twin of ``sinusoidal_encoding``; positions (T,) -> (T, d_model) on their device."""
    dtype = positions.dtype if positions.is_floating_point() else torch.float32
    angles = positions.to(dtype)[:, None] * frequencies_torch(d_model, base, positions.device, dtype)
    # stack then flatten interleaves the pairs: (T, d/2, 2) -> (T, d) = [sin0, cos0, sin1, ...]
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)


def apply_rope_torch(x: torch.Tensor, positions: torch.Tensor, base: float = BASE):
    """Torch twin of ``apply_rope``: x (..., T, d), positions (T,). Autograd gives the backward."""
    d = x.shape[-1]
    theta = positions.to(x.dtype)[:, None] * frequencies_torch(d, base, x.device, x.dtype)
    c, s = theta.cos(), theta.sin()  # (T, d/2)
    x_even, x_odd = x[..., 0::2], x[..., 1::2]
    return torch.stack((c * x_even - s * x_odd, s * x_even + c * x_odd), dim=-1).flatten(-2)


class LearnedPositionEmbedding(nn.Module):
    """One trainable vector per position 0 .. max_len - 1, added to the token embeddings.

    Rows that training never reaches (positions beyond the training length) keep their
    random initialisation: a learned table has nothing to say about unseen positions.
    """

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.table = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.table.weight, std=0.02)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:  # (T,) -> (T, d_model)
        return self.table(positions)


class PositionProbe(nn.Module):
    """A one-layer causal attention model for comparing position schemes.

    position: "none", "sinusoidal", "learned" (both added to the token embeddings)
    or "rope" (rotates queries and keys). forward(idx, targets=None) -> (logits, loss),
    idx (B, T) token ids, logits (B, T, vocab_size); targets equal to -1 are ignored.
    """

    def __init__(self, vocab_size: int, d_model: int, position: str, max_len: int = 512):
        super().__init__()
        if position not in ("none", "sinusoidal", "learned", "rope"):
            raise ValueError(f"unknown position scheme {position!r}")
        self.position, self.d_model = position, d_model
        self.embed = nn.Embedding(vocab_size, d_model)
        self.learned = LearnedPositionEmbedding(max_len, d_model) if position == "learned" else None
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.head = nn.Linear(2 * d_model, vocab_size)  # sees its own token and the attended one

    def forward(self, idx, targets=None):
        T = idx.shape[1]
        pos = torch.arange(T, device=idx.device)
        x = self.embed(idx)  # (B, T, d_model)
        if self.position == "sinusoidal":
            x = x + sinusoidal_encoding_torch(pos, self.d_model)
        elif self.position == "learned":
            x = x + self.learned(pos)
        q, k, v = self.qkv(x).chunk(3, dim=-1)  # (B, T, d_model) each
        if self.position == "rope":
            q, k = apply_rope_torch(q, pos), apply_rope_torch(k, pos)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, T, d_model)
        logits = self.head(torch.cat((x, att), dim=-1))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-1)
        return logits, loss
