"""The encoder-decoder Transformer (Week 7, §7 "Transformer architecture") and the
decoder-only GPT (CS182 slides, "Transformer Language Model"), in torch.

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
derivation of notebooks 02 and 04, so those derivations are what train this model. With
``flash=True`` in either config, attention runs through notebook 07's tiled path instead
(``course_lib.flash``), whose backward is derived too.

    GPTBlock            Pre-LN causal self-attention and FFN, with an optional KV cache
    GPT                 token + learned position embeddings, GPT blocks, final LN, output
                        tied to the token embedding; forward(idx, targets) -> (logits, loss)

``encoder_block`` and ``decoder_block`` are the numpy references of the two blocks (forward
only), wired from the numpy layers of the same modules; the tests check that the torch
blocks compute the same numbers. ``gpt_block`` and ``gpt_forward`` do the same for GPT.
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
    flash: bool = False  # attention by course_lib.flash (notebook 07); keeps no weights


# ----------------------------------------------------------------------------- masks
def padding_keys(ids, pad_id: int = PAD):
    """ids (B, T) -> (B, 1, 1, T), True for every key that is not <pad>."""
    return (ids != pad_id)[:, None, None, :]


def attention_masks(src, tgt_in, pad_id: int = PAD):
    """The three boolean masks of the encoder-decoder (True: the query may see the key).

    src: (B, T_src) source ids; tgt_in: (B, T) decoder input ids; numpy arrays or torch tensors
    (the masks come back as the same kind, on the same device).
    Returns
      enc_mask   (B, 1, 1, T_src): encoder self-attention, no query sees a source <pad>;
      cross_mask (B, 1, 1, T_src): encoder-decoder attention, the same source padding;
      dec_mask   (B, 1, T, T): decoder self-attention, no <pad> and nothing in the future.
    The axes of size 1 broadcast over heads and queries.
    """
    src_keys = padding_keys(src, pad_id)  # (B, 1, 1, T_src)
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
    """One encoder block in numpy. x: (B, T_src, d_model) -> (B, T_src, d_model).

    p: dict of numpy arrays, as ``block_params`` returns: "self_attn" (W_q, W_k, W_v, W_o),
    "norm1", "norm2" (gamma, beta), "ffn" (W1, b1, W2, b2). mask: broadcastable to
    (B, n_heads, T_src, T_src), e.g. enc_mask of ``attention_masks``.
    """
    x = _add_norm(x, lambda h: mha_forward(h, h, *p["self_attn"], n_heads, mask)[0],
                  p["norm1"], order)
    return _add_norm(x, lambda h: ffn_forward(h, *p["ffn"])[0], p["norm2"], order)


def decoder_block(y, memory, p, n_heads, self_mask=None, cross_mask=None, order="post"):
    """One decoder block in numpy. y: (B, T, d_model), memory: (B, T_src, d_model), the
    encoder's output -> (B, T, d_model).

    Masked self-attention over y, then encoder-decoder attention (queries from y, keys and
    values from memory), then the FFN. p as in ``encoder_block`` plus "cross_attn" and
    "norm3". self_mask: (B, 1, T, T); cross_mask: (B, 1, 1, T_src).
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
    """Self-attention, then the FFN, each inside Add & Norm. (B, T_src, d_model) -> same."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.flash)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff)
        self.add_norms = nn.ModuleList(AddNorm(cfg) for _ in range(2))

    def forward(self, x, mask):
        x = self.add_norms[0](x, lambda h: self.self_attn(h, mask=mask))
        return self.add_norms[1](x, self.ffn)


class DecoderBlock(nn.Module):
    """Masked self-attention, encoder-decoder attention, FFN; each inside Add & Norm.

    In the encoder-decoder attention the queries come from the decoder and the keys and
    values from the encoder's output ``memory`` (Week 7, §7
    "Encoder-decoder attention"). (B, T, d_model) -> same.
    """

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.flash)
        self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.flash)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff)
        self.add_norms = nn.ModuleList(AddNorm(cfg) for _ in range(3))

    def forward(self, y, memory, self_mask, cross_mask):
        y = self.add_norms[0](y, lambda h: self.self_attn(h, mask=self_mask))
        y = self.add_norms[1](y, lambda h: self.cross_attn(h, memory, cross_mask))
        return self.add_norms[2](y, self.ffn)


class Transformer(nn.Module):
    """The encoder-decoder Transformer for sequence-to-sequence tasks.

    forward(src (B, T_src), tgt_in (B, T), targets (B, T) or None) -> (logits (B, T, vocab_size),
    loss): the mean cross-entropy over the target positions that are not <pad>, or None.
    ``encode`` and ``decode`` are the two halves, for decoding one token at a time.
    One embedding matrix W^E (vocab_size, d_model) serves the source, the target and the
    output layer (logits = h W^E^T), as in Week 7, §7 "Decoder stack".
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
        """src (B, T_src) -> memory (B, T_src, d_model), the encoder's output."""
        mask = padding_keys(src, self.cfg.pad_id)  # (B, 1, 1, T_src)
        x = self.embed_tokens(src)
        for block in self.encoder:
            x = block(x, mask)
        return self.enc_norm(x)

    def decode(self, tgt_in, memory, src):
        """tgt_in (B, T), memory (B, T_src, d_model), src (B, T_src) for its padding ->
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
        under "encoder" (self), "decoder" (masked self) and "cross" (encoder-decoder).
        A RuntimeError with ``cfg.flash``, whose attention keeps no weights."""
        return {"encoder": [b.self_attn.weights() for b in self.encoder],
                "decoder": [b.self_attn.weights() for b in self.decoder],
                "cross": [b.cross_attn.weights() for b in self.decoder]}


def noam_lr(step: int, d_model: int, warmup: int = 400, factor: float = 1.0) -> float:
    """The paper's learning rate (Vaswani et al. 2017, eq. 3), for step = 1, 2, ...:

        lr = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5),

    rising linearly for ``warmup`` steps, then decaying as 1/sqrt(step).
    """
    step = max(step, 1)
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


# ============================================================================ GPT
@dataclass
class GPTConfig:
    """Sizes of a decoder-only language model. The defaults are nanoGPT's CPU recipe
    (4 layers, 4 heads, d_model 128, context 64); GPT-3 175B is n_layers=96, d_model=12288,
    n_heads=96, block_size=2048, vocab_size=50257 (the blog post, "GPT-3")."""
    vocab_size: int
    block_size: int = 64  # the longest context, and the number of learned positions
    d_model: int = 128
    n_heads: int = 4
    n_layers: int = 4
    d_ff: int | None = None  # 4 * d_model when None, as in GPT
    dropout: float = 0.0  # on the embeddings and on each sublayer's output
    attn_dropout: float = 0.0  # on the attention weights, not with flash (nanoGPT: = dropout)
    flash: bool = False  # attention by course_lib.flash (notebook 07); keeps no weights


def gpt_block(x, p, n_heads):
    """One GPT block in numpy, Pre-LN with causal self-attention (CS182 slides,
    "Transformer Layer"):

        h = x + MHA(LN_1(x)) with a causal mask;  out = h + FFN(LN_2(h)).

    x: (B, T, d_model) -> (B, T, d_model). p: "attn" (W_q, W_k, W_v, W_o), "norm1", "norm2"
    (gamma, beta), "ffn" (W1, b1, W2, b2), as ``gpt_params`` returns.
    """
    mask = causal_mask(x.shape[-2])  # (T, T): query i sees keys 0..i
    h = layernorm_forward(x, *p["norm1"])[0]
    x = x + mha_forward(h, h, *p["attn"], n_heads, mask)[0]
    return x + ffn_forward(layernorm_forward(x, *p["norm2"])[0], *p["ffn"])[0]


def gpt_forward(idx, params, n_heads):
    """The whole GPT in numpy: idx (B, T) ints -> logits (B, T, vocab_size).

    x = W_E[idx] + W_P[:T] (no scaling by sqrt(d_model), unlike notebook 05), the blocks,
    a final layer norm, then logits = x W_E^T: the output layer is the token embedding.
    params: "W_E" (vocab_size, d_model), "W_P" (block_size, d_model), "blocks" (a list of
    ``gpt_block`` dicts), "norm_f" (gamma, beta).
    """
    T = idx.shape[-1]
    x = params["W_E"][idx] + params["W_P"][:T]  # (B, T, d_model)
    for p in params["blocks"]:
        x = gpt_block(x, p, n_heads)
    return layernorm_forward(x, *params["norm_f"])[0] @ params["W_E"].T


class GPTBlock(nn.Module):
    """Torch twin of ``gpt_block``. forward(x (B, T, d_model), cache=None) -> same shape.

    With a ``cache`` (a dict, empty at first) the block keeps the keys and values of every
    position it has seen, and x holds only the new positions: their queries attend to the
    cached keys and to their own, never to later ones. Feeding a sequence in pieces then
    gives the same outputs as feeding it whole, while each step projects only the new tokens.
    """

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.norm1, self.norm2 = LayerNorm(cfg.d_model), LayerNorm(cfg.d_model)
        self.attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.flash, cfg.attn_dropout)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff or 4 * cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x, cache: dict | None = None):
        # causal=True, not a mask: the attention aligns it with the cached keys, and the
        # flash path skips the future instead of reading a (T, T) mask
        x = x + self.drop(self.attn(self.norm1(x), cache=cache, causal=True))
        return x + self.drop(self.ffn(self.norm2(x)))


class GPT(nn.Module):
    """A decoder-only Transformer language model (GPT; CS182 slides, "Transformer Language
    Model"), Pre-LN, with the course's hand-derived attention and layer-norm backward passes.

    forward(idx (B, T), targets (B, T) or None, cache=None) -> (logits (B, T, vocab_size),
    loss: mean cross-entropy in nats or None): the interface of every language model in the
    course. With a ``cache`` from ``new_cache()``, idx holds only the tokens after those
    already fed, and their positions continue from there (see ``GPTBlock``).
    """

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg, self.block_size = cfg, cfg.block_size
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)  # W_E, also the output layer
        self.pos_emb = nn.Embedding(cfg.block_size, cfg.d_model)  # W_P, learned
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(GPTBlock(cfg) for _ in range(cfg.n_layers))
        self.norm_f = LayerNorm(cfg.d_model)
        # GPT-2's initialisation: N(0, 0.02), and the two projections that write into the
        # residual stream scaled by 1/sqrt(2 n_layers), so its variance does not grow with depth
        for name, param in self.named_parameters():
            if param.dim() == 2:
                std = 0.02 / math.sqrt(2 * cfg.n_layers) if name.endswith(("W_o", "fc2.weight")) else 0.02
                nn.init.normal_(param, std=std)
            elif name.endswith("bias"):
                nn.init.zeros_(param)

    def new_cache(self) -> list[dict]:
        """An empty KV cache: one dict per block, filled by ``forward(..., cache=...)``."""
        return [{} for _ in self.blocks]

    def forward(self, idx, targets=None, cache: list[dict] | None = None):
        start = cache[0]["k"].shape[-2] if cache and "k" in cache[0] else 0
        T = idx.shape[1]
        if start + T > self.block_size:
            raise ValueError(f"{start + T} positions, but the model has {self.block_size} "
                             "(crop the context to the last block_size tokens)")
        pos = torch.arange(start, start + T, device=idx.device)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(pos))  # (B, T, d_model)
        for i, block in enumerate(self.blocks):
            x = block(x, None if cache is None else cache[i])
        logits = self.norm_f(x) @ self.tok_emb.weight.T  # (B, T, vocab_size), tied
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return logits, loss

    def n_params(self, non_embedding: bool = False) -> int:
        """Parameters (the tied output layer counted once); without the token and position
        embeddings when ``non_embedding`` (Kaplan et al. 2020's N)."""
        n = sum(p.numel() for p in self.parameters())
        if non_embedding:
            n -= self.tok_emb.weight.numel() + self.pos_emb.weight.numel()
        return n

    def attention_maps(self) -> list[torch.Tensor]:
        """After a forward pass: the weights of every block, (B, n_heads, T_q, T_k) each.
        A RuntimeError with ``cfg.flash``, whose attention keeps no weights."""
        return [b.attn.weights() for b in self.blocks]


def gpt_params(model: GPT) -> dict:
    """The weights of a torch ``GPT`` as numpy arrays, laid out for ``gpt_forward``."""
    def arr(t):
        return t.detach().cpu().numpy()

    return {"W_E": arr(model.tok_emb.weight), "W_P": arr(model.pos_emb.weight),
            "norm_f": (arr(model.norm_f.gamma), arr(model.norm_f.beta)),
            "blocks": [{"attn": tuple(arr(w) for w in (b.attn.W_q, b.attn.W_k, b.attn.W_v, b.attn.W_o)),
                        "norm1": (arr(b.norm1.gamma), arr(b.norm1.beta)),
                        "norm2": (arr(b.norm2.gamma), arr(b.norm2.beta)),
                        "ffn": (arr(b.ffn.fc1.weight.T), arr(b.ffn.fc1.bias),
                                arr(b.ffn.fc2.weight.T), arr(b.ffn.fc2.bias))}
                       for b in model.blocks]}
