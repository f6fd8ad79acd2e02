"""Sampling text from any course language model (CS182 slides, "Sampling from a Language Model"),
and decoding an encoder-decoder model: greedy and beam search (notebook 05).

At each step: run the model on the context, take the distribution for the last position,
roll that weighted die, append the face, repeat. ``temperature`` divides the logits
(below 1 sharpens the die towards its likeliest faces, above 1 flattens it; 0 means always
take the likeliest face, i.e. greedy); ``top_k`` keeps only the k likeliest faces, ``top_p``
the fewest likeliest faces that together hold probability p. A GPT can keep its keys and
values between steps (a KV cache) and read only the new token.
Works for every model with ``forward(idx, targets=None) -> (logits, loss)`` and a
``block_size`` (how much context it can use).

An encoder-decoder model (``course_lib.transformer.Transformer``) translates instead: at
test time the decoder starts from <s> and is run once per output token, each time reading
everything it has produced so far (Week 7, §7 "Decoder stack"). ``greedy_decode`` takes the
likeliest token at each step; ``beam_search`` keeps the ``beam_size`` likeliest partial
translations (by the sum of log-probabilities), sets aside those that end with </s>, and
picks the best finished one after dividing its score by its length. Both need ``model.encode(src) -> memory`` and
``model.decode(tgt_in, memory, src) -> logits``.
"""
from __future__ import annotations

import torch

from course_lib.tokenize import BOS, EOS, PAD


def next_token_probs(logits: torch.Tensor, temperature: float = 1.0,
                     top_k: int | None = None, top_p: float | None = None) -> torch.Tensor:
    """logits: (B, vocab_size) -> the die to roll, probs (B, vocab_size), in this order:

    1. temperature: softmax(logits / temperature);
    2. top-k: keep the k likeliest tokens (ties with the k-th are kept too);
    3. top-p (nucleus, Holtzman et al. 2020): keep the fewest likeliest tokens whose
       probabilities add up to at least p -- the token that crosses p is kept;
    then renormalise what is kept.
    """
    logits = logits / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if top_p is not None and top_p < 1.0:
        sorted_p, order = probs.sort(dim=-1, descending=True)  # (B, vocab_size) each
        before = sorted_p.cumsum(dim=-1) - sorted_p  # mass of the likelier tokens
        drop = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, before >= top_p)
        probs = probs.masked_fill(drop, 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


@torch.no_grad()
def sample(model, idx: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
           top_k: int | None = None, top_p: float | None = None,
           generator: torch.Generator | None = None, use_cache: bool = False) -> torch.Tensor:
    """Extend idx (B, T0) by ``max_new_tokens`` sampled tokens -> (B, T0 + max_new_tokens).

    ``generator`` (a seeded ``torch.Generator`` on idx's device) makes the rolls repeatable.
    ``use_cache`` (for models with ``new_cache()``, e.g. ``transformer.GPT``): keep every
    block's keys and values and feed one new token per step instead of the whole context;
    the tokens are the same as without it. When the context outgrows ``block_size`` the
    cache is rebuilt from the last ``block_size - 1`` tokens plus the new one, as the
    uncached loop crops.
    """
    was_training = model.training
    model.eval()
    cache, fed = None, 0  # fed: tokens of idx already in the cache
    for _ in range(max_new_tokens):
        if use_cache:
            if cache is None or fed >= model.block_size:
                cache, fed = model.new_cache(), max(0, idx.shape[1] - model.block_size)
            logits, _ = model(idx[:, fed:], cache=cache)
            fed = idx.shape[1]
        else:
            logits, _ = model(idx[:, -model.block_size:])
        last = logits[:, -1, :]  # (B, vocab_size): the distribution of the next token
        if temperature == 0:
            nxt = last.argmax(dim=-1, keepdim=True)
        else:
            probs = next_token_probs(last.float(), temperature, top_k, top_p)
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


# ------------------------------------------------------------ encoder-decoder decoding
def next_log_probs(model, tgt_in, memory, src) -> torch.Tensor:
    """log p(next token | source, tgt_in): (B, vocab_size) for the last position of
    tgt_in (B, t). <pad> and <s> are never produced (their probability is set to 0)."""
    logits = model.decode(tgt_in, memory, src)[:, -1, :].float()  # (B, vocab_size)
    logits[:, [PAD, BOS]] = float("-inf")
    return torch.log_softmax(logits, dim=-1)


@torch.no_grad()
def greedy_decode(model, src: torch.Tensor, max_len: int = 32) -> torch.Tensor:
    """The likeliest token at every step, until </s> (or ``max_len`` tokens).

    src: (B, T_src). Returns (B, T) ids without the <s>, T <= max_len: each row ends with its
    </s> (unless it ran out of steps) followed by <pad>. Stops as soon as every row is done.
    """
    was_training = model.training
    model.eval()
    memory = model.encode(src)
    out = torch.full((src.shape[0], 1), BOS, dtype=torch.long, device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        nxt = next_log_probs(model, out, memory, src).argmax(dim=-1)  # (B,)
        nxt = nxt.masked_fill(done, PAD)  # a finished row only grows <pad>
        out = torch.cat([out, nxt[:, None]], dim=1)
        done |= nxt == EOS
        if done.all():
            break
    model.train(was_training)
    return out[:, 1:]


@torch.no_grad()
def beam_search(model, src: torch.Tensor, beam_size: int = 4, max_len: int = 32,
                alpha: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Beam search, batched over the B sources and their ``beam_size`` beams at once.

    The rule is notebook 05's exercise (``autograder/exercises/encdec.py``), batched. A beam's
    score is the sum of the log-probabilities of its tokens (a product of probabilities would
    underflow). At each step every live beam proposes every token, and the ``beam_size``
    best of those candidates are kept. A kept candidate that ends with </s> is finished: it
    leaves the beam with its score and is never extended, so fewer beams live on (in the
    batch its slot stays, dead, with score -inf). A source is done when none of its beams
    lives. At the end each finished output's score is divided by length ** alpha (its tokens,
    </s> included) -- without this length normalisation every extra token lowers a score,
    so short outputs would win -- and the best one is returned (ties: the one finished
    first); a source with no finished output returns its best live beam the same way.

    src: (B, T_src). Returns tokens (B, T) laid out as in ``greedy_decode`` and the normalised
    scores (B,) of the returned sequences.
    """
    was_training = model.training
    model.eval()
    B, beams, dev = src.shape[0], beam_size, src.device
    src = src.repeat_interleave(beams, dim=0)  # (B*beams, T_src): beam j of b is row b*beams + j
    memory = model.encode(src)  # (B*beams, T_src, d_model)
    seqs = torch.full((B * beams, 1), BOS, dtype=torch.long, device=dev)
    scores = torch.full((B, beams), float("-inf"), device=dev)
    scores[:, 0] = 0.0  # all beams start as the same <s>: keep one, or we get `beams` copies
    best = torch.full((B,), float("-inf"), device=dev)  # best normalised finished score
    best_seq = torch.full((B, max_len), PAD, dtype=torch.long, device=dev)
    offsets = torch.arange(B, device=dev)[:, None] * beams  # (B, 1)
    for t in range(1, max_len + 1):  # t: tokens generated so far, after this step
        logp = next_log_probs(model, seqs, memory, src).view(B, beams, -1)  # (B, beams, vocab_size)
        V = logp.shape[-1]
        cand = (scores[:, :, None] + logp).view(B, beams * V)  # dead beams propose only -inf
        scores, flat = cand.topk(beams, dim=-1)  # (B, beams) each, best first
        rows = (flat // V + offsets).view(-1)  # (B*beams,): the beam each candidate extends
        seqs = torch.cat([seqs[rows], (flat % V).view(-1, 1)], dim=1)  # (B*beams, t+1)
        ended = ((flat % V) == EOS) & (scores > float("-inf"))  # (B, beams)
        if ended.any():  # finished outputs leave the beam; keep the best per source
            normalised = torch.where(ended, scores / t ** alpha, float("-inf"))
            top, j = normalised.max(dim=-1)  # (B,): the first of equal ones
            better = top > best
            best = torch.where(better, top, best)
            best_seq[better, :t] = seqs.view(B, beams, -1)[better, j[better], 1:]
            best_seq[better, t:] = PAD
            scores = scores.masked_fill(ended, float("-inf"))
        if (scores == float("-inf")).all():
            break
    alive = best == float("-inf")  # sources where nothing finished: best live beam
    if alive.any():
        j = scores.argmax(dim=-1)  # (B,)
        length = seqs.shape[1] - 1
        last = seqs.view(B, beams, -1)[torch.arange(B, device=dev), j, 1:]  # (B, length)
        best_seq[alive, :length] = last[alive]
        best = torch.where(alive, scores.gather(1, j[:, None])[:, 0] / length ** alpha, best)
    model.train(was_training)
    lengths = (best_seq != PAD).sum(dim=1)
    return best_seq[:, : max(int(lengths.max()), 1)], best
