"""Sampling text from any course language model (seed 004, "Sampling from a Language Model").

At each step: run the model on the context, take the distribution for the last position,
roll that weighted die, append the face, repeat. ``temperature`` divides the logits
(below 1 sharpens the die towards its likeliest faces, above 1 flattens it; 0 means always
take the likeliest face, i.e. greedy); ``top_k`` keeps only the k likeliest faces.
Works for every model with ``forward(idx, targets=None) -> (logits, loss)`` and a
``block_size`` (how much context it can use).
"""
from __future__ import annotations

import torch


def next_token_probs(logits: torch.Tensor, temperature: float = 1.0,
                     top_k: int | None = None) -> torch.Tensor:
    """logits: (B, V) -> the die to roll, probs (B, V), after temperature and top-k."""
    logits = logits / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return torch.softmax(logits, dim=-1)


@torch.no_grad()
def sample(model, idx: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
           top_k: int | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
    """Extend idx (B, T0) by ``max_new_tokens`` sampled tokens -> (B, T0 + max_new_tokens).

    ``generator`` (a seeded ``torch.Generator`` on idx's device) makes the rolls repeatable.
    """
    was_training = model.training
    model.eval()
    for _ in range(max_new_tokens):
        context = idx[:, -model.block_size:]
        logits, _ = model(context)
        last = logits[:, -1, :]  # (B, V): the distribution of the next token
        if temperature == 0:
            nxt = last.argmax(dim=-1, keepdim=True)
        else:
            probs = next_token_probs(last.float(), temperature, top_k)
            nxt = torch.multinomial(probs, 1, generator=generator)  # (B, 1)
        idx = torch.cat([idx, nxt], dim=1)
    model.train(was_training)
    return idx


def sample_text(model, tokenizer, prompt: str, max_new_tokens: int = 200, seed: int = 0,
                device=None, **kwargs) -> str:
    """The prompt followed by ``max_new_tokens`` sampled characters, as a string."""
    device = device or next((p.device for p in model.parameters()), torch.device("cpu"))
    idx = torch.as_tensor(tokenizer.encode(prompt), device=device)[None, :]  # (1, T0)
    generator = torch.Generator(device=device).manual_seed(seed)
    out = sample(model, idx, max_new_tokens, generator=generator, **kwargs)
    return tokenizer.decode(out[0])
