"""The forbidden-code scan: follows names to every binding that may be live, reads magics the
way IPython runs them, ignores locked cells, and refuses the ways around it that we know."""
import pytest

from autograder.codescan import SHELL, forbidden_uses, parse, widened
from autograder.exercise import Exercise

EX = Exercise("demo.f", "f", "f(Q)", cases=lambda rng, hidden: [], reference=None,
              forbidden=("course_lib.attention", "torch"))
REF = "from course_lib.attention import attention_forward as g"


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
    # a name means its last settled binding: a later learner def replaces an earlier import ...
    (learner("from course_lib.attention import f", "def f(Q): return Q"), []),
    # ... and a later import replaces the learner's def
    (learner("def f(Q): return Q", "from course_lib.attention import f"), ["course_lib.attention"]),
    (learner("from course_lib.attention import *", "def f(Q): return sdpa(Q)"), ["course_lib.attention"]),
    # harmless magics and the check cell are fine
    (learner("%timeit f({})\n%matplotlib inline\ndef f(Q):\n    return Q", "%load_ext autoreload\n%autoreload 2",
             'check("demo.f", globals())', "f?"), []),
    (learner("import numpy as np\nprint(np.__version__, np.__name__)", "def f(Q): return Q"), []),
])
def test_forbidden_uses(cells, expected):
    assert forbidden_uses(EX, cells) == expected


@pytest.mark.parametrize("cells, expected", [
    # bindings the old top-level-only scan could not see
    (learner(f"if True:\n    {REF}\n    def f(Q):\n        return g(Q)[0]"), ["course_lib.attention"]),
    (learner(REF, "for f in [g]:\n    pass"), ["course_lib.attention"]),
    (learner(REF, "if (f := g):\n    pass"), ["course_lib.attention"]),
    (learner(REF, "def setup():\n    global f\n    f = g", "setup()"), ["course_lib.attention"]),
    (learner(REF, "def wrap(fn):\n    return g", "@wrap\ndef f(Q):\n    return Q"), ["course_lib.attention"]),
    # a local of an inner function is not a local of the outer one
    (learner(REF.replace(" as g", " as ref"),
             "def f(Q):\n    def inner():\n        ref = 1\n    return ref(Q)"), ["course_lib.attention"]),
    # a comprehension variable does not rebind the global of the same name
    (learner(REF, "def f(Q):\n    return g(Q)", "[g for g in range(3)]"), ["course_lib.attention"]),
    # a builtin shadowed by the reference
    (learner(REF.replace(" as g", " as sum"), "def f(Q):\n    return sum(Q)"), ["course_lib.attention"]),
    # a binding that may not have run leaves the earlier one in play
    (learner("from course_lib.attention import f", "if False:\n    def f(Q):\n        return Q"),
     ["course_lib.attention"]),
    (learner("from course_lib.attention import f") + [("1 / 0\ndef f(Q):\n    return Q", False, True)],
     ["course_lib.attention"]),
    (learner("from course_lib.attention import f") + [("def f(Q):\n    return Q", False, False)], []),
    # names bound where the scan cannot read them
    (learner(REF, 'globals()["f"] = g'), ["globals"]),
    (learner(REF, 'import sys\nsys._getframe(0).f_globals["f"] = g'), ["_getframe", "f_globals"]),
    (learner(REF, "import __main__\n__main__.f = g"), ["__main__"]),
    (learner(REF, 'get_ipython().user_ns["f"] = g'), ["get_ipython", "user_ns"]),
    (learner("def check(exercise, namespace):\n    namespace['f'] = 1", 'check("demo.f", globals())'),
     ["globals"]),
    # code from elsewhere: magics, shell, files the notebook wrote, unpickling
    (learner("%run helper.py"), ["%run"]),
    (learner("%pip install scipy"), ["%pip"]),
    (learner("%load_ext helper"), ["%load_ext"]),
    (learner("!echo 'f = 1' > helper.py"), [SHELL]),
    (learner("%%writefile helper.py\ndef f(Q):\n    return Q", "from helper import f"),
     ["%writefile", "helper (not an installed module)"]),
    (learner("import pickle\nf = pickle.loads(b'')"), ["pickle"]),
    (learner("import numpy as np\nf = np.load('f.npy', allow_pickle=True)[()]"), ["allow_pickle"]),
    (learner(REF, "%matplotlib {globals().update(f=g)}"), ["%matplotlib {...}"]),
    # magics that run code in the namespace are read as code
    (learner(REF, "%time f = g"), ["course_lib.attention"]),
    (learner(REF, "%%capture\nf = g"), ["course_lib.attention"]),
    # the library reached through another module, or through the package
    (learner("from course_lib.viz import mha_forward", "def f(Q):\n    return mha_forward(Q)"),
     ["course_lib.viz"]),
    (learner("import course_lib.softmax", "def f(Q):\n    c = course_lib\n    return c.attention.x(Q)"),
     ["course_lib"]),
    (learner("from course_lib import *", "def f(Q):\n    return attention.x(Q)"), ["course_lib.*"]),
])
def test_ways_around_the_scan_are_refused(cells, expected):
    assert forbidden_uses(EX, cells) == expected


def test_helpers_of_an_exercise_are_read_too():
    ex = Exercise("demo.b", "b", "b(d, cache)", cases=lambda rng, hidden: [], reference=None,
                  forbidden=("torch",), helpers=("fwd",))
    cells = learner("import torch", "def fwd(x):\n    return torch.exp(x)", "def b(d, cache):\n    return d")
    assert forbidden_uses(ex, cells) == ["torch"]


def test_widened_adds_the_modules_that_hand_out_the_reference():
    wide = widened(("course_lib.attention",))
    assert "course_lib.viz" in wide and "course_lib.softmax" not in wide
    assert "course_lib.train" in widened(("torch",))


def test_unparsable_cell_is_skipped_not_fatal():
    assert parse("def f(:\n").tree is None
    assert forbidden_uses(EX, learner("def f(:", "def f(Q): return Q")) == []
