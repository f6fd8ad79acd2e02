"""How an exercise calls the learner's functions on one case. [sandbox]

Most exercises call ``function(**case)``; the few that need more (the first of several
returned values, a backward pass fed by the learner's own forward, a numerical gradient of a
test function, a decoder fed a model made from a table of log-probabilities, a KV-cached step fed one
token at a time) name one of the
``CALLS`` below in their ``Exercise.call``. The grader tells the kernel that name in the
cases file, so this module runs in the grading sandbox: it holds no reference and imports
nothing of the grader's.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

Namespace = Mapping[str, Any]


def learner_function(namespace: Namespace, name: str) -> Callable:
    fn = namespace.get(name)
    if not callable(fn):
        raise NameError(f"`{name}` is not defined when its graded cell runs: run (or keep) the "
                        "cell that defines it above the graded cell")
    return fn


def plain(namespace: Namespace, function: str, case: dict):
    return learner_function(namespace, function)(**case)


class NotATuple(TypeError):
    """The learner's layer returned one value where the exercise asks for a tuple."""


def first_output(namespace: Namespace, function: str, case: dict):
    """The first returned value only, e.g. ``out`` of a layer's ``(out, cache)``."""
    result = learner_function(namespace, function)(**case)
    if not isinstance(result, (tuple, list)):  # [0] of an array would be its first row
        raise NotATuple(f"`{function}` returned a single {type(result).__name__}; the exercise asks "
                        "for a tuple whose first element is the output, e.g. `return out, cache`")
    return result[0]


def output_and_cache(namespace: Namespace, function: str, case: dict):
    """A layer's ``(out, cache)`` as one flat tuple ``(out, *cache)``, where the text prescribes
    the cache's items: their number, order and values are graded with the output."""
    result = learner_function(namespace, function)(**case)
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        what = f"a tuple of {len(result)}" if isinstance(result, (tuple, list)) else f"a single {type(result).__name__}"
        raise NotATuple(f"`{function}` returned {what}; the exercise asks for a tuple `(out, cache)`")
    out, cache = result
    if not isinstance(cache, (tuple, list)):
        raise TypeError(f"`{function}`'s cache is a {type(cache).__name__}; the exercise asks for the "
                        "tuple it describes")
    return (out, *cache)


def layernorm_backward(namespace: Namespace, function: str, case: dict):
    """The learner's backward, fed the cache of the learner's own ``layernorm_forward``."""
    _, cache = learner_function(namespace, "layernorm_forward")(case["x"], case["gamma"], case["beta"])
    return learner_function(namespace, function)(case["dout"], cache)


def test_function(w: np.ndarray, c: float) -> Callable[[np.ndarray], float]:
    """f(x) = sum(w cos(c x)) + (sum x)^2 / 2: curved, and every entry interacts."""
    return lambda x: float(np.sum(w * np.cos(c * x)) + 0.5 * np.sum(x) ** 2)


def gradient_target(w: np.ndarray, c: float, x: np.ndarray, outside: bool = False) -> Callable[[np.ndarray], float]:
    """``test_function(w, c)``; with ``outside``, one that ignores its argument and reads ``x``
    itself, as the notebooks' losses do (``lambda _: loss()``): the text's method, x changed in
    place and put back, gets the gradient there; changed copies of x do not."""
    f = test_function(w, c)
    return (lambda _: f(x)) if outside else f


def numerical_gradient(namespace: Namespace, function: str, case: dict):
    """The gradient of ``gradient_target`` at x with the case's step (1e-6 where it gives
    none), and x itself (which must be left as it was)."""
    x = case["x"]
    f = gradient_target(case["w"], case["c"], x, case.get("outside", False))
    grad = learner_function(namespace, function)(f, x, eps=case.get("eps", 1e-6))
    return grad, x


def table_model(logp: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """``next_log_probs`` of a model whose next token depends on the step and the last token.

    logp: (max_len + 1, vocab_size, vocab_size), logp[t - 1, a] = log p(next | last token a)
    for prefixes of t tokens. The returned function maps prefixes (n, t) of ints (each
    starting with <s>) to (n, vocab_size) log-probabilities; one prefix is (1, t), as for a
    real model (a 1-D prefix would not get through the notebook's Transformer either).
    """
    def next_log_probs(prefixes):
        prefixes = np.asarray(prefixes)
        if prefixes.ndim != 2 or not 1 <= prefixes.shape[1] <= len(logp):
            one = ": one prefix is np.array([tokens])" if prefixes.ndim == 1 else ""
            raise ValueError(f"next_log_probs takes prefixes (n, t) with 1 <= t <= {len(logp)}, "
                             f"got shape {prefixes.shape}{one}")
        rows = prefixes.astype(np.int64)
        return logp[rows.shape[1] - 1, rows[:, -1]]  # (n, vocab_size), a copy
    return next_log_probs


def once_per_step(next_log_probs: Callable) -> Callable:
    """``next_log_probs`` that refuses a second call with prefixes as long as an earlier one's:
    a decoder calls it once per step, with every live prefix in one (n, t) array (the
    exercises' text; a real model runs once per call, so a call per beam costs beam_size x).
    In the kernel this is advice (the learner's code can reach the model it wraps); the
    grader keeps the rule where that code cannot reach, serving the model from outside
    (``autograder.pipeline.rerun``)."""
    seen = set()

    def counted(prefixes):
        t = np.shape(prefixes)[-1] if np.ndim(prefixes) else None
        if t in seen:
            raise ValueError(f"next_log_probs called twice on length-{t} prefixes: one call per step, "
                             "all whole sequences so far")
        seen.add(t)
        return next_log_probs(prefixes)
    return counted


def markov_decoder(namespace: Namespace, function: str, case: dict):
    """The learner's decoder run on ``table_model(case["logp"])``, called once per step, with
    the case's other arguments."""
    args = dict(case)
    return learner_function(namespace, function)(once_per_step(table_model(args.pop("logp"))), **args)


def served_decoder(namespace: Namespace, function: str, case: dict):
    """The learner's decoder run on the model the grader serves from outside its process
    (``fresh``): ``case["next_log_probs"]``, with the case's other arguments."""
    args = dict(case)
    return learner_function(namespace, function)(args.pop("next_log_probs"), **args)


def stepwise(namespace: Namespace, function: str, case: dict):
    """The learner's one-token step (KV cache) fed ``case["idx"]`` (B, T) column by column,
    ``step(token (B,), pos, cache, params, n_heads) -> logits (B, vocab_size)``, starting from
    an empty dict as the cache; the logits of every step stacked: (B, T, vocab_size)."""
    step = learner_function(namespace, function)
    idx, cache = np.asarray(case["idx"]), {}
    return np.stack([np.asarray(step(idx[:, t].copy(), t, cache, case["params"], case["n_heads"]))
                     for t in range(idx.shape[1])], axis=1)


CALLS = {"first_output": first_output, "output_and_cache": output_and_cache,
         "layernorm_backward": layernorm_backward,
         "numerical_gradient": numerical_gradient, "markov_decoder": markov_decoder,
         "served_decoder": served_decoder, "stepwise": stepwise}


def run(namespace: Namespace, function: str, call: str | None, case: dict):
    """Call the learner's code on one case as the exercise says (``call`` None: plainly)."""
    return CALLS[call](namespace, function, case) if call else plain(namespace, function, case)
