"""What an exercise is: the declaration every notebook's exercises are written in.

An exercise is declared once (in ``autograder/exercises/<notebook>.py``) and used in three
places: the check cell in the learner's kernel (advisory feedback on the public cases), the
graded cell in the learner's kernel (records outputs as plain arrays, no verdict), and the
trusted judge (recomputes the reference and decides the score; never runs learner code).

Outputs travel between the kernel and the judge as plain numeric arrays, so an object whose
``__eq__`` always says yes, or a monkeypatched numpy in the kernel, cannot change a verdict.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

Case = dict  # keyword arguments for one call: {"Q": array, "K": array, ..., "mask": None}
Outputs = tuple  # a tuple of numpy arrays, one per returned value


@dataclass(frozen=True)
class Mistake:
    """One plausible wrong answer, recognised and named.

    ``wrong`` is a (trusted) implementation of the mistake: it takes a case's keyword
    arguments and returns what the mistaken code would return. The judge names the mistake
    when the learner's outputs match ``wrong``'s outputs on every case where ``wrong``
    differs from the reference. Alternatively ``detect(case, outputs, reference)`` may
    return True when it recognises the mistake directly from the outputs.
    """

    name: str  # short, used in tests to check the feedback: "softmax over the wrong axis"
    hint: str  # what to look at, in plain and kind words
    wrong: Callable[..., Any] | None = None
    detect: Callable[[Case, Outputs, Outputs], bool] | None = None

    def message(self) -> str:
        return f"Looks like {self.name}: {self.hint}"


# Code that the learner's own cells may never use, whatever the exercise: it would let
# learner code reach the grader or the reference, or bind names the scan cannot read.
# Names match whole or as a dotted prefix (`sys.modules` also bans `sys.modules.get`).
ALWAYS_FORBIDDEN = ("autograder", "importlib", "__import__", "exec", "eval", "compile",
                    "sys.modules", "builtins", "__builtins__", "getattr", "setattr", "delattr",
                    "vars", "globals", "locals", "__main__", "get_ipython", "IPython")
# Attributes banned whatever object they are read from: they reach a function's module, a
# frame's namespace or IPython's.
FORBIDDEN_ATTRIBUTES = ("__globals__", "__builtins__", "__dict__", "__code__", "__subclasses__",
                        "__closure__", "__wrapped__", "__self__", "__func__", "__reduce__",
                        "__reduce_ex__", "__getattribute__", "__setattr__", "__setitem__",
                        "__loader__", "__spec__", "__file__", "__path__", "__mro__", "__bases__",
                        "__base__", "f_globals", "f_locals", "f_builtins", "f_back", "tb_frame",
                        "gi_frame", "cr_frame", "ag_frame", "_getframe", "user_ns", "user_global_ns")
# Modules that turn data into code or reach into the interpreter: refused when imported.
FORBIDDEN_IMPORTS = ("pickle", "_pickle", "dill", "cloudpickle", "joblib", "shelve", "marshal",
                     "copyreg", "gc", "ctypes", "runpy", "code", "codeop")


@dataclass(frozen=True)
class Exercise:
    """One graded function.

    id:        "<topic>.<name>", unique over the course, e.g. "attention.forward".
    function:  the name the learner defines in the notebook, e.g. "attention_forward".
    signature: shown to the learner, e.g. "attention_forward(Q, K, V, mask=None) -> (out, A)".
    cases:     ``cases(rng, hidden) -> list[Case]``; public cases when ``hidden`` is False
               (shown by the check cell), the extra hidden cases otherwise. Deterministic
               given ``rng``; the judge and the kernel both call it with ``self.rng(hidden)``.
    reference: ``reference(**case)`` -> array or tuple of arrays (from ``course_lib``).
    call:      how to call the learner's code: ``call(namespace, case)``; by default
               ``namespace[function](**case)``. Use it when an exercise needs two learner
               functions (a backward that takes its own forward's cache), and name the
               other one in ``helpers`` so that the forbidden-code scan reads it too.
    points, rtol, atol: grading; score = points x (cases passed / cases).
    mistakes:  recognised wrong answers, checked in order; the first that matches is named.
    forbidden: dotted names the learner's code must not use for this exercise, e.g.
               ("course_lib.attention", "torch.autograd"). The scan adds ``ALWAYS_FORBIDDEN`` and friends.
    """

    id: str
    function: str
    signature: str
    cases: Callable[[np.random.Generator, bool], Sequence[Case]]
    reference: Callable[..., Any]
    points: float = 1.0
    rtol: float = 1e-5
    atol: float = 1e-7
    mistakes: Sequence[Mistake] = ()
    forbidden: Sequence[str] = ()
    call: Callable[[Mapping[str, Any], Case], Any] | None = None
    output_names: Sequence[str] = field(default=())  # e.g. ("out", "A"), for messages
    helpers: Sequence[str] = ()  # other learner functions ``call`` runs: scanned like ``function``

    def rng(self, hidden: bool) -> np.random.Generator:
        """The seeded generator for the public (or hidden) cases of this exercise."""
        digest = hashlib.sha256(f"{self.id}/{'hidden' if hidden else 'public'}".encode())
        return np.random.default_rng(int.from_bytes(digest.digest()[:8], "little"))

    def all_cases(self, hidden: bool = True) -> list[Case]:
        """Public cases, followed by the hidden ones when ``hidden``."""
        cases = list(self.cases(self.rng(False), False))
        if hidden:
            cases += list(self.cases(self.rng(True), True))
        return cases

    def run_learner(self, namespace: Mapping[str, Any], case: Case) -> Any:
        """Call the learner's code on one case (kernel side only)."""
        if self.call is not None:
            return self.call(namespace, case)
        return namespace[self.function](**case)

    def name_of(self, i: int) -> str:
        return self.output_names[i] if i < len(self.output_names) else f"output {i}"


def as_outputs(value: Any) -> Outputs:
    """Normalise a return value to a tuple of float/int numpy arrays.

    Raises TypeError for anything that is not plain numbers (object arrays, None, strings),
    so that no learner-made object can travel to the judge.
    """
    items = value if isinstance(value, tuple) else (value,)
    out = []
    for item in items:
        if hasattr(item, "detach") and hasattr(item, "cpu"):  # a torch tensor
            item = item.detach().cpu().numpy()
        arr = np.array(item, copy=True)
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"returned a value of type {type(item).__name__}, expected numbers")
        out.append(arr)
    return tuple(out)
