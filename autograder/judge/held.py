"""Gradients with one quantity of the forward held constant. [trusted; also the check cell]

For ``Exercise.held_constant``. A backward pass that leaves out a term of the derivation
computes the gradient of a forward in which one intermediate quantity (a mean, a softmax's
normaliser, the keys) does not move with the inputs. Such gradients are computed here numerically, from a forward written once
per exercise, so no one has to foresee the learner's code: if the learner's gradients match
them, the judge names the quantity whose term is missing.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from course_lib.gradcheck import numerical_gradient


def holding(forward: Callable, quantities: Sequence[str], wrt: Sequence[str],
            inputs: Callable[[dict], dict], upstream: str = "dout") -> Callable[..., tuple]:
    """``fn(**case)``: d sum(upstream * out) / d(each of ``wrt``) with ``quantities`` frozen.

    forward(**inputs, frozen) -> (out, {name: value}) computes each named quantity itself
    unless ``frozen`` holds it; ``inputs(case)`` picks the forward's inputs from a case.
    """
    def gradients(**case):
        args = {k: np.array(v, dtype=np.float64) if isinstance(v, np.ndarray) else v
                for k, v in inputs(case).items()}
        _, at_case = forward(**args, frozen={})
        frozen = {q: at_case[q] for q in quantities}

        def loss(_):
            return float(np.sum(case[upstream] * forward(**args, frozen=frozen)[0]))
        return tuple(numerical_gradient(loss, args[w]) for w in wrt)
    return gradients
