"""The numpy references of decoding, graded in notebooks 05 and 06: the next token's
distribution (temperature, top-k, top-p) and greedy and beam search over any model given as
``next_log_probs(prefixes (B, t) int) -> (B, vocab_size)`` log-probabilities.

``course_lib.generate`` runs the same ideas in torch on the course's models; these are the
plain versions the learner writes, which the grader compares against. The grading sandbox
hides this module while those notebooks are graded.
"""
from __future__ import annotations

import numpy as np

from course_lib.softmax import softmax


def next_token_probs(logits, temperature=1.0, top_k=None, top_p=None):
    """The distribution of the next token, logits (B, vocab_size) -> probs (B, vocab_size): softmax of
    logits / temperature, then top-k (the k likeliest tokens kept), then top-p (the fewest
    likeliest tokens whose probability adds up to at least top_p; the token that crosses it
    is kept), each followed by renormalising what is kept."""
    probs = softmax(logits / temperature, axis=-1)
    if top_k is not None:
        kth = np.sort(probs, axis=-1)[:, -top_k][:, None]  # (B, 1): the k-th largest
        probs = np.where(probs >= kth, probs, 0.0)
        probs = probs / probs.sum(axis=-1, keepdims=True)
    if top_p is not None:
        order = np.argsort(-probs, axis=-1, kind="stable")  # likeliest first
        sorted_p = np.take_along_axis(probs, order, axis=-1)
        before = np.cumsum(sorted_p, axis=-1) - sorted_p  # mass of the likelier tokens
        keep = np.zeros(probs.shape, dtype=bool)
        np.put_along_axis(keep, order, before < top_p, axis=-1)
        probs = np.where(keep, probs, 0.0)
        probs = probs / probs.sum(axis=-1, keepdims=True)
    return probs


def greedy_decode(next_log_probs, bos=1, eos=2, max_len=10):
    """The likeliest next token (ties: the smallest id) until eos, at most max_len tokens.
    Returns the tokens after bos, eos included when it came: (L,) int, L <= max_len."""
    tokens = [bos]
    for _ in range(max_len):
        tokens.append(int(np.argmax(next_log_probs(np.array([tokens]))[0])))  # prefixes (1, t)
        if tokens[-1] == eos:
            break
    return np.array(tokens[1:], dtype=np.int64)


def beam_search(next_log_probs, bos=1, eos=2, beam_size=3, max_len=10, alpha=1.0):
    """Beam search on sums of log-probabilities, with length normalisation.

    Each step, every live beam (a prefix starting with bos; one at first) proposes every
    token: candidate score = beam score + log p(token | prefix). The beam_size best
    candidates of all live beams together are kept (ties: the earlier candidate in (beam
    index, token id) order, beams ranked best first). A kept candidate that ends with eos is
    finished: it leaves the beam and is never extended; the others are the next live beams.
    Stops after max_len steps or when no live beam is left. Then among the finished
    sequences (or, if none finished, the live ones) returns the one with the highest
    score / length ** alpha, length = number of generated tokens including eos (ties: the one
    finished first): its tokens after bos, (L,) int, and that normalised score. With
    beam_size 1 this is greedy decoding.
    """
    beams = np.full((1, 1), bos, dtype=np.int64)  # (B, t) live prefixes, best first
    scores = np.zeros(1)  # (n,) their summed log-probabilities
    finished = []  # (tokens after bos, score), in the order they finished
    for _ in range(max_len):
        logp = next_log_probs(beams)  # (B, vocab_size)
        cand = (scores[:, None] + logp).ravel()  # (n*V,)
        kept = np.argsort(-cand, kind="stable")[:beam_size]  # best first; ties keep (beam, token)
        beam, token = np.divmod(kept, logp.shape[1])
        seqs = np.concatenate([beams[beam], token[:, None]], axis=1)  # (B, t+1)
        done = token == eos
        finished += list(zip(seqs[done, 1:], cand[kept][done]))
        beams, scores = seqs[~done], cand[kept][~done]
        if not len(beams):
            break
    pool = finished or list(zip(beams[:, 1:], scores))
    normalised = [score / len(tokens) ** alpha for tokens, score in pool]
    best = int(np.argmax(normalised))  # the first of equal ones
    return pool[best][0], np.float64(normalised[best])
