"""What an exercise is: the declaration every exercise is written in [trusted; also the check cell]

An exercise is declared once (in ``autograder/exercises/<notebook>.py``) and used in three
places: the check cell in the learner's kernel (advisory feedback on the public cases), the
graded cell in the learner's kernel (records outputs as plain arrays, no verdict), and the
trusted judge (recomputes the reference and decides the score; never runs learner code).
It is declared with keywords only, ``Exercise(id=..., ...)``: a positional argument is a
TypeError.

Cases travel to the kernel and outputs back as plain data (``transport``), so an object whose
``__eq__`` always says yes, or a monkeypatched numpy in the kernel, cannot change a verdict.
The graded cases are drawn from a seed derived from the grader's secret key and the
submission, so no table of answers prepared in advance fits them.
"""
from __future__ import annotations

import copy
import functools
import hashlib
import hmac
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from autograder.judge.features import generic
from autograder.kernel.transport import as_outputs, encode_value  # as_outputs: also for the exercise modules

Case = dict  # keyword arguments for one call: {"Q": array, "K": array, ..., "mask": None}
Outputs = tuple  # a tuple of numpy arrays, one per returned value


@dataclass(frozen=True, kw_only=True)
class Mistake:
    """One plausible wrong answer, recognised and named, declared with keywords only.

    ``wrong`` is a (trusted) implementation of the mistake: it takes a case's keyword
    arguments and returns what the mistaken code would return. The judge names the mistake
    when the learner's outputs match ``wrong``'s outputs on every case where ``wrong``
    differs from the reference. Alternatively ``detect(case, outputs, reference)`` may
    return True when it recognises the mistake directly from the outputs.

    Two kinds of these the judge reads as data (``verdict``): a ``wrong`` made by a
    ``switchable`` model is a ``Switched``, which says how it was made (two such mistakes
    may be made at once), and a ``detect`` made by ``any_of`` is a ``Family``, which names
    its models (a passing case may contradict them all).
    """

    name: str  # short, used in tests to check the feedback: "softmax over the wrong axis"
    hint: str  # what to look at, in plain and kind words
    wrong: Callable[..., Any] | None = None
    detect: Callable[[Case, Outputs, Outputs], bool] | None = None

    def message(self) -> str:
        return f"Looks like {self.name}: {self.hint}"


@dataclass(frozen=True)
class Switched:
    """A mistake of a model whose keyword switches each turn one on: ``factory(*fixed,
    **switches)`` makes what the mistaken code computes, and ``Switched(...)(**case)`` returns
    its outputs. As a ``Mistake.wrong`` it tells the judge how it was made, so that the judge
    can turn on the switches of two listed mistakes at once (``both``,
    ``verdict.identify_pair``)."""

    factory: Callable[..., Callable]
    fixed: tuple = ()
    switches: dict = field(default_factory=dict, hash=False)
    model: Callable = field(init=False, repr=False, compare=False)  # made once, as declared

    def __post_init__(self):
        object.__setattr__(self, "model", self.factory(*self.fixed, **self.switches))

    def __call__(self, **case):
        return self.model(**case)


def switchable(factory: Callable[..., Callable]) -> Callable[..., Switched]:
    """Marks ``factory(*fixed, **switches) -> wrong``, a model of mistakes whose keyword
    switches each turn one on: ``switchable(factory)(*fixed, **switches)`` is that mistake,
    a ``Switched``."""
    @functools.wraps(factory)
    def make(*fixed, **switches):
        return Switched(factory, fixed, switches)
    return make


def switched(model: Callable[..., Any]) -> Callable[..., Switched]:
    """The ``switchable`` factory of a model written as one function with keyword switches,
    ``model(**case, **switches)``: ``switched(model)(k=v)`` is its mistake with k set to v. Make
    it once per model (a pair needs both mistakes from one factory)."""
    @switchable
    def make(**switches):
        return lambda **case: model(**case, **switches)
    make.__name__ = make.__qualname__ = f"switched({model.__name__})"
    return make


def both(first: Callable, second: Callable) -> Switched | None:
    """The model of two mistakes made at once: one ``Switched`` with the switches of both, or
    None when they are not both ``Switched``, come from different models or set the same
    switch."""
    if not (isinstance(first, Switched) and isinstance(second, Switched)) \
            or first.factory is not second.factory or first.fixed != second.fixed \
            or set(first.switches) & set(second.switches):
        return None
    return Switched(first.factory, first.fixed, {**first.switches, **second.switches})


@dataclass(frozen=True)
class Family:
    """A ``Mistake.detect`` that recognises the outputs of any of ``models``: variants of one
    bug (with a mask and without, before or after a cut). A model that raises on a case does
    not match there. As a record it tells the judge its models: a passing case may contradict
    them all (``verdict._contradicted``)."""

    models: tuple[Callable[..., Any], ...]

    def __call__(self, case: Case, got: Outputs, want: Outputs) -> bool:
        for model in self.models:
            try:
                wrong = as_outputs(model(**copy.deepcopy(case)))
            except Exception:
                continue
            if len(wrong) == len(got) and all(
                    g.shape == w.shape and np.allclose(g, w, rtol=1e-5, atol=1e-7, equal_nan=True)
                    for g, w in zip(got, wrong)):
                return True
        return False


def any_of(*models: Callable[..., Any]) -> Family:
    """The ``Family`` of ``models``, as a ``Mistake.detect`` is declared:
    ``detect=any_of(model_a, model_b)``."""
    return Family(models)


@dataclass(frozen=True, kw_only=True)
class Exercise:
    """One graded function.

    id:        "<topic>.<name>", unique over the course, e.g. "attention.forward".
    function:  the name the learner defines in the notebook, e.g. "attention_forward".
    signature: shown to the learner, e.g. "attention_forward(Q, K, V, mask=None) -> (out, A)".
    cases:     ``cases(rng, hidden) -> list[Case]``; public cases when ``hidden`` is False
               (the check cell runs them with a fixed seed), the extra hidden cases
               otherwise. Deterministic given ``rng``. Grading draws both kinds from a
               secret seed (``graded_cases``).
    reference: ``reference(**case)`` -> array or tuple of arrays (from ``course_lib``).
    call:      the name of a function in ``autograder.kernel.calls`` that calls the learner's code
               on one case; None: ``function(**case)``. When it runs a second learner
               function (a backward fed by the learner's own forward), name that one in
               ``helpers``, so that feedback can point at it.
    points, rtol, atol: grading; score = points x (cases passed / cases).
    mistakes:  recognised wrong answers, checked in order; the first that matches is named.
    forbidden: modules that compute the answer, e.g. ("course_lib.attention", "torch"):
               absent from the grading sandbox of every notebook holding this exercise
               (``sandbox``), and named by the check cell when the learner's code uses them.
    features:  ``features(case) -> [str]``: what a case exercises beyond ``features.generic``
               ("T_q ≠ T_k", "batch axes"); feedback on hidden cases names these, and every
               feature of a hidden case must appear in a public case (a test checks).
    dims:      ``dims(case) -> {"d_k": 4, "T": 5}``: named sizes, so that feedback can say
               "off by a factor sqrt(d_k)" (``diagnose``).
    axes:      ``{output name: (rows, columns)}``: the course glossary's names of the last two
               axes of a matrix output, e.g. ``{"out": ("T_q (queries)", "d_v")}``, for the
               check cell's picture (``autograder.picture``); an output not named here gets
               the glossary letter's (``A``, ``S``, ``mask``: queries and keys), else
               "axis -2", "axis -1".
    equivalent: ``{mutant id: reason}``: mutants of the reference (``autograder.judge.mutation``)
               that no legitimate case can tell from it, each with a one-line reason a
               reviewer can check; every other mutant must lose points on the graded cases
               under every key (``autograder.exercises.adequacy``,
               ``tests/autograder/exercises/test_mutation_adequacy.py``).
    int_scalars: the text promises the exercise's whole numbers as ints: a number output
               the reference gives as an int must be one (else scalars may be any number).
    memory:    ``memory(case) -> (bytes, why) or None``: where the text promises never to build
               a large array (tiles, not the (T_q, T_k) matrix), the most the learner's call may
               hold at once on that case, as Python's ``tracemalloc`` counts it (numpy's arrays
               included), and in words what the whole array would take; a case past it fails
               with those words (``autograder.kernel.cases``). None: no limit.
    search_sites: the edits the search for a fix of a learner's code tries at most
               (``autograder.kernel.repair``): about 3 s of the exercise's calls on a 2-core
               machine, as ``benchmarks/repair_search.py`` measures them; a count, so that
               what a learner is told never depends on how busy the machine is.
    held_constant: for a backward pass, ``{"the mean": fn}`` where ``fn(**case)`` returns the
               gradients with that quantity of the forward held constant; feedback names the
               missing term when the learner's gradients match one.
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
    call: str | None = None
    output_names: Sequence[str] = field(default=())  # e.g. ("out", "A"), for messages
    helpers: Sequence[str] = ()  # other learner functions ``call`` runs
    features: Callable[[Case], Sequence[str]] | None = None
    dims: Callable[[Case], dict] | None = None
    axes: dict = field(default_factory=dict)  # output name -> (rows, columns), for the picture
    held_constant: dict = field(default_factory=dict)
    int_scalars: bool = False
    equivalent: dict = field(default_factory=dict)
    memory: Callable[[Case], tuple[int, str] | None] | None = None
    search_sites: int = 6000

    def _rng(self, label: str, key: bytes | None) -> np.random.Generator:
        message = f"{self.id}/{label}".encode()
        digest = hmac.new(key, message, "sha256") if key else hashlib.sha256(message)
        return np.random.default_rng(int.from_bytes(digest.digest()[:8], "little"))

    def public_cases(self) -> list[Case]:
        """The cases of the check cell: fixed, the same for every learner."""
        return list(self.cases(self._rng("public", None), False))

    def probes(self, graded: Sequence[Case] = ()) -> tuple[list[Case], list[Outputs]]:
        """(cases, the reference's outputs on them): the public cases and hidden-kind cases
        drawn from a public seed, on which the search for a fix of a learner's code
        (``autograder.kernel.repair``) tries its edits. They go into the grading sandbox with their
        answers, so any that equals one of the ``graded`` cases (a generator that draws
        nothing at random) is left out: the sandbox never holds a graded case's answer."""
        taken = {_key(c) for c in graded}
        cases = [c for c in self.public_cases() + list(self.cases(self._rng("hidden", None), True))
                 if _key(c) not in taken]
        return cases, [as_outputs(self.reference(**copy.deepcopy(c))) for c in cases]

    def graded_cases(self, key: bytes) -> list[Case]:
        """Public-kind cases, then hidden ones, drawn from a seed derived from ``key``."""
        if not key:
            raise ValueError("graded cases need a non-empty key")
        return list(self.cases(self._rng("public", key), False)) + \
            list(self.cases(self._rng("hidden", key), True))

    def memory_limits(self, cases: Sequence[Case]) -> list[int | None]:
        """Per case, the bytes the learner's call may hold at once (None: no limit)."""
        limits = [self.memory(c) if self.memory else None for c in cases]
        return [None if limit is None else limit[0] for limit in limits]

    def describe(self, case: Case) -> list[str]:
        """What ``case`` exercises, in words (``autograder.judge.features``)."""
        return generic(case) + list(self.features(case) if self.features else ())

    def name_of(self, i: int) -> str:
        return self.output_names[i] if i < len(self.output_names) else f"output {i}"


def _key(case: Case) -> str:
    """A case as text, to tell equal cases apart from different ones."""
    return json.dumps(encode_value(case), sort_keys=True)
