"""The exercise registry: one module per notebook topic [trusted; also the check cell]

A topic's module is found by the prefix of an exercise's id. ``adequacy.py``, beside the topics,
is no topic: the offline check that the topics' cases tell every mutant apart.

``get("attention.forward")`` imports ``autograder/exercises/attention.py`` and returns the
``Exercise`` with that id from its ``EXERCISES`` list. Each exercise is declared with keywords
only, ``Exercise(id=..., ...)``, its id starting with its module's topic. Adding a notebook
means adding one module here; nothing else needs to change.

A topic's module has one layout, in the notebook's order: under a header comment, a section holds
one exercise (or a few close ones), each as its parts (cases, reference, mistake models, features,
equivalent mutants) followed by ``NAME = Exercise(...)``; the module ends with ``EXERCISES = [NAME,
...]``. A part that several exercises use comes before the first of them; what belongs to none
(``FORBIDDEN``, case helpers, parts most sections use) sits at the top, in a "shared" section.
"""
from __future__ import annotations

import importlib
import pkgutil

from autograder.judge.exercise import Exercise


NOT_TOPICS = frozenset({"adequacy"})  # modules here that declare no exercises


def _module(topic: str):
    if topic in NOT_TOPICS:
        raise ModuleNotFoundError(f"{__name__}.{topic} declares no exercises")
    return importlib.import_module(f"{__name__}.{topic}")


def get(exercise_id: str) -> Exercise:
    """The exercise with this id; KeyError with the known ids when there is none."""
    topic = exercise_id.split(".", 1)[0]
    try:
        exercises = _module(topic).EXERCISES
    except ModuleNotFoundError:
        raise KeyError(f"no exercise topic {topic!r}; known topics: {', '.join(topics())}")
    for ex in exercises:
        if ex.id == exercise_id:
            return ex
    raise KeyError(f"no exercise {exercise_id!r}; known: {', '.join(e.id for e in exercises)}")


def by_function(exercise_id: str, function: str) -> Exercise | None:
    """The exercise of the same topic as ``exercise_id`` whose learner function is ``function``."""
    return next((ex for ex in _module(exercise_id.split(".", 1)[0]).EXERCISES
                 if ex.function == function), None)


def topics() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in NOT_TOPICS)


def all_exercises() -> list[Exercise]:
    return [ex for topic in topics() for ex in _module(topic).EXERCISES]
