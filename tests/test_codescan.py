"""The forbidden-code scan follows names to their last binding and ignores locked cells."""
import pytest

from autograder.codescan import forbidden_uses, parse
from autograder.exercise import Exercise

EX = Exercise("demo.f", "f", "f(Q)", cases=lambda rng, hidden: [], reference=None,
              forbidden=("course_lib.attention", "torch"))


def learner(*sources):
    return [(s, False) for s in sources]


@pytest.mark.parametrize("cells, expected", [
    # a locked set-up cell's imports are not the learner's, and a local name is not followed
    ([("import numpy as np\nfrom course_lib import attention, viz\nA = attention.x(1)", True)]
     + learner("def f(Q):\n    A = Q\n    return np.exp(A)"), []),
    # a helper in another cell importing the reference under another name is found
    (learner("def f(Q):\n    return helper(Q)", "def helper(x):\n    return g(x)",
             "from course_lib.attention import sdpa as g"), ["course_lib.attention"]),
    ([("import torch", True)] + learner("def f(Q):\n    return torch.softmax(Q, -1)"), ["torch"]),
    # the grader itself is off limits anywhere in learner code
    (learner("import autograder.kernel as k\nk.record = None", "def f(Q): return Q"), ["autograder"]),
    (learner("def f(Q): return Q", "x = check.__globals__"), ["__globals__"]),
    (learner("def f(Q): return Q", "getattr(np, 'x')"), ["getattr"]),
    # a name means its last binding: a later learner def replaces an earlier import ...
    (learner("from course_lib.attention import f", "def f(Q): return Q"), []),
    # ... and a later import replaces the learner's def
    (learner("def f(Q): return Q", "from course_lib.attention import f"), ["course_lib.attention"]),
    (learner("from course_lib.attention import *", "def f(Q): return sdpa(Q)"), ["course_lib.attention"]),
    (learner("%timeit 1\ndef f(Q):\n    return Q"), []),
])
def test_forbidden_uses(cells, expected):
    assert forbidden_uses(EX, cells) == expected


def test_unparsable_cell_is_skipped_not_fatal():
    assert parse("def f(:\n") is None
    assert forbidden_uses(EX, learner("def f(:", "def f(Q): return Q")) == []
