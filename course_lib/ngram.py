"""n-gram language models: count, smooth, roll the die, measure.

As on the CS182 slides "n-Gram Language Model": the chain rule writes any sequence
probability exactly as
    p(w_1..w_T) = prod_t p(w_t | w_{t-1}, ..., w_1);
an n-gram model *assumes* only the last n-1 tokens matter:
    p(w_t | w_{t-1}, ..., w_1) ~= p(w_t | w_{t-n+1}, ..., w_{t-1}).
Its maximum-likelihood parameters are counts divided by context counts ("just count").

The numpy functions below are the references for notebook 01's exercises (small dense
tables, any n). ``NgramLM`` is the model used on the real corpus: sparse counts for n up to
5 or more, Witten-Bell interpolation so unseen n-grams keep some probability, and the
course's language-model interface ``forward(idx, targets=None) -> (logits, loss)`` so the
same evaluator and sampler serve it, the RNNs and the Transformers.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from numpy.lib.stride_tricks import sliding_window_view


# --- references for the exercises (dense tables, small vocab_size) ------------------------

def count_ngrams(idx: np.ndarray, n: int, vocab_size: int) -> np.ndarray:
    """counts[a_1, ..., a_{n-1}, w] = #{t : idx[t-n+1..t-1] = a, idx[t] = w}.

    idx: (T,) ints in [0, vocab_size). Returns int64 of shape (vocab_size,) * n. Every window
    of n consecutive tokens is one n-gram; there are T - n + 1 of them (none wrap around).
    """
    counts = np.zeros((vocab_size,) * n, dtype=np.int64)
    windows = sliding_window_view(np.asarray(idx), n)  # (T-n+1, n)
    np.add.at(counts, tuple(windows.T), 1)
    return counts


def ngram_probs(counts: np.ndarray, k: float = 0.0) -> np.ndarray:
    """Add-k estimate p(w | context) = (c(context, w) + k) / (c(context) + k * vocab_size).

    counts: (vocab_size,) * n; the last axis is the next token w. k = 0 is the MLE. A context
    never seen (c(context) = 0 and k = 0) gets the uniform distribution: with no evidence, a
    fair die. Returns float64 of the same shape; it sums to 1 over the last axis.
    """
    counts = np.asarray(counts, dtype=np.float64) + k
    total = counts.sum(axis=-1, keepdims=True)
    vocab_size = counts.shape[-1]
    safe = np.where(total > 0, total, 1.0)
    return np.where(total > 0, counts / safe, 1.0 / vocab_size)


def roll_die(weights: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Roll one weighted die per row: the smallest face i with cdf[i] > u.

    weights: (B, vocab_size), non-negative, not necessarily normalised; u: (B,) uniform
    numbers in [0, 1) (the randomness comes from the caller, so a seed fixes the rolls).
    Returns int64 faces, shape (B,). A face of weight 0 never comes up.
    """
    weights = np.asarray(weights, dtype=np.float64)
    cum = np.cumsum(weights, axis=-1)  # unnormalised cdf; cum[:, -1] is the total exactly
    threshold = np.asarray(u, dtype=np.float64)[:, None] * cum[:, -1:]
    return (cum <= threshold).sum(axis=-1).astype(np.int64)


def perplexity(probs: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(ppl, bpc)`` of a model that predicted ``probs`` for tokens ``targets``.

    probs: (T, vocab_size), each row p(. | context_t); targets: (T,) ints.
    nll = -(1/T) sum_t ln p_t(targets_t)   (nats per token)
    ppl = exp(nll);  bpc = nll / ln 2      (bits per character, the same number in base 2).
    """
    p = np.asarray(probs, dtype=np.float64)[np.arange(len(targets)), targets]
    nll = -np.mean(np.log(p))
    return np.exp(nll), nll / np.log(2.0)


# --- the model for the real corpus ---------------------------------------------------------

class NgramLM(torch.nn.Module):
    """Character n-gram LM with Witten-Bell interpolation, fitted by counting.

    p_order(w | a) = (c(a, w) + u(a) p_{order-1}(w | a')) / (c(a) + u(a)), where a is a
    context of order - 1 tokens, a' drops its oldest token, c counts, and u(a) is the number
    of distinct tokens seen after a: a context followed by many different tokens trusts its
    own counts less. The base case is
    add-one unigrams, so no probability is zero. Contexts shorter than n-1 (the first
    tokens of a sequence) use the longest order available.

    forward(idx (B, T), targets (B, T) or None) -> (logits (B, T, vocab_size), loss or None);
    logits are log-probabilities, so softmax(logits) is the model's distribution.
    """

    def __init__(self, n: int, vocab_size: int):
        super().__init__()
        self.n, self.vocab_size = n, vocab_size
        self.block_size = max(n - 1, 1)  # the sampler feeds this many tokens of context
        self.tables: list = []

    def fit(self, ids: np.ndarray) -> "NgramLM":
        """Count every order 1..n in ``ids`` (T,). Returns self."""
        ids, V = np.asarray(ids, dtype=np.int64), self.vocab_size
        unigram = np.bincount(ids, minlength=V).astype(np.float64)
        self.unigram = (unigram + 1.0) / (unigram.sum() + V)
        self.tables = []
        for m in range(2, self.n + 1):
            windows = sliding_window_view(ids, m)  # (T-order+1, order)
            full = self._key(windows[:, :-1]) * V + windows[:, -1]
            full, count = np.unique(full, return_counts=True)
            ctx, first, types = np.unique(full // V, return_index=True, return_counts=True)
            total = np.add.reduceat(count, first)
            self.tables.append((full, count, ctx, total, types))
        return self

    def _key(self, contexts: np.ndarray) -> np.ndarray:
        """One int64 per context row (rows, order-1): its tokens as digits in base vocab_size."""
        key = np.zeros(len(contexts), dtype=np.int64)
        for j in range(contexts.shape[1]):
            key = key * self.vocab_size + contexts[:, j]
        return key

    def probs(self, contexts: np.ndarray) -> np.ndarray:
        """contexts: (rows, n-1) ids, oldest first, -1 where there is none -> (rows, vocab_size)."""
        V = self.vocab_size
        p = np.tile(self.unigram, (len(contexts), 1))
        for m, (full, count, ctx, total, types) in enumerate(self.tables, start=2):
            h = contexts[:, contexts.shape[1] - (m - 1):]
            valid = (h >= 0).all(axis=1)
            key = self._key(np.where(h >= 0, h, 0))
            pos = np.minimum(np.searchsorted(ctx, key), len(ctx) - 1)
            seen = valid & (ctx[pos] == key)
            rows = np.flatnonzero(seen)
            if len(rows) == 0:
                continue
            keys = key[rows, None] * V + np.arange(V)  # (R, V) every (h, w)
            at = np.minimum(np.searchsorted(full, keys), len(full) - 1)
            c_hw = np.where(full[at] == keys, count[at], 0)
            c_h, t_h = total[pos[rows], None], types[pos[rows], None]
            p[rows] = (c_hw + t_h * p[rows]) / (c_h + t_h)
        return p

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        B, T = idx.shape
        ids = idx.detach().cpu().numpy()
        padded = np.concatenate([np.full((B, self.n - 1), -1), ids], axis=1)
        # position t predicts idx[t+1] from the n-1 tokens ending at idx[t] (inclusive)
        contexts = sliding_window_view(padded, self.n - 1, axis=1)[:, 1:]  # (B, T, n-1)
        p = self.probs(contexts.reshape(B * T, self.n - 1))
        logits = torch.from_numpy(np.log(p)).float().view(B, T, -1).to(idx.device)
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.view(B * T, -1), targets.reshape(-1))
        return logits, loss
