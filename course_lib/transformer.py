"""The encoder-decoder Transformer (seed 001, "Transformer architecture"), in torch.

Read top to bottom, in dependency order:

    LayerNorm           course_lib.layernorm  (hand-derived backward, notebook 04)
    MultiHeadAttention  course_lib.attention  (hand-derived backward, notebook 02)
    FeedForward         course_lib.layernorm  (position-wise MLP)
    attention_masks     which key each query may see: source padding, causality
    AddNorm             the residual connection and layer norm around every sublayer
    EncoderBlock        self-attention, FFN; each inside Add & Norm
    DecoderBlock        masked self-attention, encoder-decoder attention, FFN
    Transformer         shared embedding (scaled by sqrt(d_model)) + sinusoidal positions,
                        encoder stack, decoder stack, output projection tied to the embedding

Add & Norm comes in the paper's order, Post-LN: LN(x + sublayer(x)), or as Pre-LN:
x + sublayer(LN(x)), with one more LN at the end of each stack (notebook 04 compares them).
Attention and layer norm run through ``torch.autograd.Function``s whose backward is the
derivation of notebooks 02 and 04, so those derivations are what train this model.

``encoder_block`` and ``decoder_block`` are the numpy references of the two blocks (forward
only), wired from the numpy layers of the same modules; the tests check that the torch
blocks compute the same numbers.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from course_lib.attention import MultiHeadAttention, causal_mask, mha_forward
from course_lib.layernorm import FeedForward, LayerNorm, ffn_forward, layernorm_forward
from course_lib.positional import sinusoidal_encoding_torch
from course_lib.tokenize import PAD


@dataclass
class TransformerConfig:
    """Sizes of the model; the paper's base model is d_model=512, n_heads=8, d_ff=2048,
    n_layers=6. The defaults are small enough to train on a laptop CPU in minutes."""
    vocab_size: int
    d_model: int = 64
    n_heads: int = 4
    d_ff: int = 256
    n_layers: int = 2  # encoder blocks, and as many decoder blocks
    dropout: float = 0.0
    norm: str = "post"  # "post" (the paper) or "pre"
    pad_id: int = PAD
    label_smoothing: float = 0.0  # the paper used 0.1


# ----------------------------------------------------------------------------- masks
def padding_keys(ids, pad_id: int = PAD):
    """ids (B, T) -> (B, 1, 1, T), True for every key that is not <pad>."""
    return (ids != pad_id)[:, None, None, :]


def attention_masks(src, tgt_in, pad_id: int = PAD):
    """The three boolean masks of the encoder-decoder (True: the query may see the key).

    src: (B, S) source ids; tgt_in: (B, T) decoder input ids; numpy arrays or torch tensors
    (the masks come back as the same kind, on the same device).
    Returns
      enc_mask   (B, 1, 1, S): encoder self-attention, no query sees a source <pad>;
      cross_mask (B, 1, 1, S): encoder-decoder attention, the same source padding;
      dec_mask   (B, 1, T, T): decoder self-attention, no <pad> and nothing in the future.
    The axes of size 1 broadcast over heads and queries.
    """
    src_keys = padding_keys(src, pad_id)  # (B, 1, 1, S)
    causal = causal_mask(tgt_in.shape[1])  # (T, T)
    if isinstance(tgt_in, torch.Tensor):
        causal = torch.from_numpy(causal).to(tgt_in.device)
    return src_keys, src_keys, padding_keys(tgt_in, pad_id) & causal  # (B, 1, T, T)


# ------------------------------------------------------------------- numpy references
def _add_norm(x, sublayer, norm, order):
    """Post-LN: LN(x + sublayer(x)); Pre-LN: x + sublayer(LN(x)). norm = (gamma, beta)."""
    if order == "post":
        return layernorm_forward(x + sublayer(x), *norm)[0]
    return x + sublayer(layernorm_forward(x, *norm)[0])


def encoder_block(x, p, n_heads, mask=None, order="post"):
    """One encoder block in numpy. x: (B, S, d_model) -> (B, S, d_model).

    p: dict of numpy arrays, as ``block_params`` returns: "self_attn" (W_q, W_k, W_v, W_o),
    "norm1", "norm2" (gamma, beta), "ffn" (W1, b1, W2, b2). mask: broadcastable to
    (B, n_heads, S, S), e.g. enc_mask of ``attention_masks``.
    """
    x = _add_norm(x, lambda h: mha_forward(h, h, *p["self_attn"], n_heads, mask)[0],
                  p["norm1"], order)
    return _add_norm(x, lambda h: ffn_forward(h, *p["ffn"])[0], p["norm2"], order)


def decoder_block(y, memory, p, n_heads, self_mask=None, cross_mask=None, order="post"):
    """One decoder block in numpy. y: (B, T, d_model), memory: (B, S, d_model), the
    encoder's output -> (B, T, d_model).

    Masked self-attention over y, then encoder-decoder attention (queries from y, keys and
    values from memory), then the FFN. p as in ``encoder_block`` plus "cross_attn" and
    "norm3". self_mask: (B, 1, T, T); cross_mask: (B, 1, 1, S).
    """
    y = _add_norm(y, lambda h: mha_forward(h, h, *p["self_attn"], n_heads, self_mask)[0],
                  p["norm1"], order)
    y = _add_norm(y, lambda h: mha_forward(h, memory, *p["cross_attn"], n_heads, cross_mask)[0],
                  p["norm2"], order)
    return _add_norm(y, lambda h: ffn_forward(h, *p["ffn"])[0], p["norm3"], order)


def block_params(block: nn.Module) -> dict:
    """The weights of a torch ``EncoderBlock`` or ``DecoderBlock`` as numpy arrays, in the
    layout of the numpy references (weights used as x @ W)."""
    def arr(t):
        return t.detach().cpu().numpy()

    def attn(m):
        return tuple(arr(w) for w in (m.W_q, m.W_k, m.W_v, m.W_o))

    out = {"self_attn": attn(block.self_attn),
           "ffn": (arr(block.ffn.fc1.weight.T), arr(block.ffn.fc1.bias),
                   arr(block.ffn.fc2.weight.T), arr(block.ffn.fc2.bias))}
    if hasattr(block, "cross_attn"):
        out["cross_attn"] = attn(block.cross_attn)
    for i, add_norm in enumerate(block.add_norms, start=1):
        out[f"norm{i}"] = (arr(add_norm.norm.gamma), arr(add_norm.norm.beta))
    return out


# ----------------------------------------------------------------------------- torch
class AddNorm(nn.Module):
    """The residual wrapper around a sublayer, torch twin of ``_add_norm``.

    forward(x, sublayer): Post-LN LN(x + sublayer(x)) or Pre-LN x + sublayer(LN(x)), with
    dropout on the sublayer's output (the paper's "residual dropout"). Unlike
    ``layernorm.ResidualBlock`` it takes the sublayer per call, so the sublayer can be a
    closure that also reads the masks and the encoder's output.
    """

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.norm, self.drop, self.order = LayerNorm(cfg.d_model), nn.Dropout(cfg.dropout), cfg.norm

    def forward(self, x, sublayer):
        if self.order == "post":
            return self.norm(x + self.drop(sublayer(x)))
        return x + self.drop(sublayer(self.norm(x)))


class EncoderBlock(nn.Module):
    """Self-attention, then the FFN, each inside Add & Norm. (B, S, d_model) -> same."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff)
        self.add_norms = nn.ModuleList(AddNorm(cfg) for _ in range(2))

    def forward(self, x, mask):
        x = self.add_norms[0](x, lambda h: self.self_attn(h, mask=mask))
        return self.add_norms[1](x, self.ffn)


class DecoderBlock(nn.Module):
    """Masked self-attention, encoder-decoder attention, FFN; each inside Add & Norm.

    In the encoder-decoder attention the queries come from the decoder and the keys and
    values from the encoder's output ``memory`` (seed 001). (B, T, d_model) -> same.
    """

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads)
        self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff)
        self.add_norms = nn.ModuleList(AddNorm(cfg) for _ in range(3))

    def forward(self, y, memory, self_mask, cross_mask):
        y = self.add_norms[0](y, lambda h: self.self_attn(h, mask=self_mask))
        y = self.add_norms[1](y, lambda h: self.cross_attn(h, memory, cross_mask))
        return self.add_norms[2](y, self.ffn)


class Transformer(nn.Module):
    """The encoder-decoder Transformer for sequence-to-sequence tasks.

    forward(src (B, S), tgt_in (B, T), targets (B, T) or None) -> (logits (B, T, vocab_size),
    loss): the mean cross-entropy over the target positions that are not <pad>, or None.
    ``encode`` and ``decode`` are the two halves, for decoding one token at a time.
    One embedding matrix W^E (vocab_size, d_model) serves the source, the target and the
    output layer (logits = h W^E^T), as in seed 001.
    """

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        if cfg.norm not in ("post", "pre"):
            raise ValueError(f"norm must be 'post' or 'pre', got {cfg.norm!r}")
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        # std d_model^-1/2, so the scaled embedding sqrt(d_model) W^E has entries of size 1,
        # like the positional encoding it is added to
        nn.init.normal_(self.embed.weight, std=cfg.d_model ** -0.5)
        self.drop = nn.Dropout(cfg.dropout)
        self.encoder = nn.ModuleList(EncoderBlock(cfg) for _ in range(cfg.n_layers))
        self.decoder = nn.ModuleList(DecoderBlock(cfg) for _ in range(cfg.n_layers))
        # Pre-LN never normalises its residual stream, so each stack ends with one more LN
        self.enc_norm = LayerNorm(cfg.d_model) if cfg.norm == "pre" else nn.Identity()
        self.dec_norm = LayerNorm(cfg.d_model) if cfg.norm == "pre" else nn.Identity()

    def embed_tokens(self, idx):
        """(B, T) ids -> sqrt(d_model) W^E[idx] + P: (B, T, d_model)."""
        T = idx.shape[1]
        pos = sinusoidal_encoding_torch(torch.arange(T, device=idx.device), self.cfg.d_model)
        x = self.embed(idx) * math.sqrt(self.cfg.d_model) + pos.to(self.embed.weight.dtype)
        return self.drop(x)  # (B, T, d_model)

    def encode(self, src):
        """src (B, S) -> memory (B, S, d_model), the encoder's output."""
        mask = padding_keys(src, self.cfg.pad_id)  # (B, 1, 1, S)
        x = self.embed_tokens(src)
        for block in self.encoder:
            x = block(x, mask)
        return self.enc_norm(x)

    def decode(self, tgt_in, memory, src):
        """tgt_in (B, T), memory (B, S, d_model), src (B, S) for its padding ->
        logits (B, T, vocab_size) for the token after each position."""
        _, cross_mask, dec_mask = attention_masks(src, tgt_in, self.cfg.pad_id)
        y = self.embed_tokens(tgt_in)
        for block in self.decoder:
            y = block(y, memory, dec_mask, cross_mask)
        return self.dec_norm(y) @ self.embed.weight.T  # (B, T, vocab_size), tied W^E

    def forward(self, src, tgt_in, targets=None):
        logits = self.decode(tgt_in, self.encode(src), src)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(),
                                   ignore_index=self.cfg.pad_id,
                                   label_smoothing=self.cfg.label_smoothing)
        return logits, loss

    def attention_maps(self) -> dict[str, list[torch.Tensor]]:
        """After a forward pass: the weights of every layer, (B, n_heads, T_q, T_k) each,
        under "encoder" (self), "decoder" (masked self) and "cross" (encoder-decoder)."""
        return {"encoder": [b.self_attn.attention for b in self.encoder],
                "decoder": [b.self_attn.attention for b in self.decoder],
                "cross": [b.cross_attn.attention for b in self.decoder]}


def noam_lr(step: int, d_model: int, warmup: int = 400, factor: float = 1.0) -> float:
    """The paper's learning rate (Vaswani et al. 2017, eq. 3), for step = 1, 2, ...:

        lr = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5),

    rising linearly for ``warmup`` steps, then decaying as 1/sqrt(step).
    """
    step = max(step, 1)
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)
