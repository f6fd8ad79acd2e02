"""The mutation engine (``autograder.judge.mutation``) and the naming of unlisted mistakes
(``explain``)."""
import inspect

import numpy as np
import pytest

import autograder.judge.explain as explain_module
from autograder.exercises import get
from autograder.judge.explain import explain, matching
from autograder.judge.verdict import judge
from autograder.kernel import run_cases
from autograder.judge.mutation import Mutant, hosts, mutants
from autograder.kernel.transport import as_outputs
from course_lib import softmax as softmax_module
from exercise_bank import TEST_KEY


def test_mutants_cover_the_kinds_and_leave_the_reference_alone():
    ex = get("warmup.softmax")
    before = inspect.getsource(softmax_module.softmax), softmax_module.softmax
    made = mutants(ex)
    families = {m.family for m in made}
    assert {"axis", "keepdims", "function", "operands", "variable", "constant", "statement"} <= families
    assert len({m.id for m in made}) == len(made), "mutant ids must be unique"
    assert (inspect.getsource(softmax_module.softmax), softmax_module.softmax) == before
    z = np.random.default_rng(0).standard_normal((3, 4))
    assert np.allclose(softmax_module.softmax(z).sum(-1), 1)  # nothing was patched
    flipped = next(m for m in made if m.family == "function" and "`min`" in m.words)
    with np.errstate(all="ignore"):  # the min only differs where exp overflows
        assert not np.allclose(flipped.fn(800 * z), softmax_module.softmax(800 * z))


def test_helpers_of_a_reference_are_mutated_through_copies():
    ex = get("attention.forward")
    names = {h.__name__ for h in hosts(ex.reference)}
    assert {"attention_forward", "softmax"} <= names
    case = ex.public_cases()[0]
    inside = [m for m in mutants(ex) if m.host.endswith(".softmax") and m.family == "function"]
    assert inside and all("(in softmax)" in m.words for m in inside)
    want = as_outputs(ex.reference(**case))
    assert any(not np.allclose(as_outputs(m.fn(**case))[1], want[1]) for m in inside)
    assert np.allclose(as_outputs(ex.reference(**case))[1], want[1])


def _verdict(exercise_id, source):
    ex = get(exercise_id)
    scope = {"np": np}
    exec(source, scope)
    cases = ex.graded_cases(TEST_KEY)
    return judge(ex, cases, run_cases(scope, ex.function, ex.call, cases))


def test_a_bug_nobody_listed_is_named_from_its_mutant():
    v = _verdict("warmup.softmax_jvp", "def softmax_jvp(s, g, axis=-1):\n"
                 "    return s * (g - np.mean(g * s, axis=axis, keepdims=True))\n")
    assert v.kind == "specific" and not v.full_marks
    assert "`mean` is used where `sum` belongs" in v.messages[0]
    assert "np.sum" not in " ".join(v.messages)  # the reference's line is never pasted


def test_a_bug_that_raises_on_some_cases_is_matched_with_a_mutant_that_raises_there_too():
    v = _verdict("lm.ngram_probs", "def ngram_probs(counts, k=0.0):\n"
                 "    c = counts + k\n    total = c.sum(axis=-1)\n"
                 "    V = counts.shape[-1]\n    return np.where(total > 0, c / np.where(total > 0, total, 1), 1 / V)\n")
    assert not v.full_marks
    assert any("keepdims" in line for line in v.messages), v.messages


def _fake(monkeypatch, fns):
    made = tuple(Mutant(f"fake {i}", "fake", i, family, words, fn) for i, (family, words, fn) in enumerate(fns))
    monkeypatch.setattr(explain_module, "mutants", lambda ex: made)


def _failing(ex, fn):
    cases = ex.graded_cases(TEST_KEY)
    return [(c, as_outputs(fn(**c)), as_outputs(ex.reference(**c))) for c in cases]


def test_two_unrelated_explanations_give_no_claim(monkeypatch):
    ex = get("warmup.softmax")
    double = lambda z, axis=-1: 2 * softmax_module.softmax(z, axis)  # noqa: E731
    _fake(monkeypatch, [("constant", "a factor 2 appears", double), ("term", "a term is added twice", double)])
    assert explain(ex, _failing(ex, double), []) is None
    _fake(monkeypatch, [("constant", "a factor 2 appears", double)])
    assert "a factor 2 appears" in explain(ex, _failing(ex, double), [])


def test_a_mutant_that_loops_or_eats_memory_is_cut_off(monkeypatch):
    ex = get("warmup.softmax")
    double = lambda z, axis=-1: 2 * softmax_module.softmax(z, axis)  # noqa: E731

    def loops(z, axis=-1):
        while True:
            pass

    def eats(z, axis=-1):
        return np.ones(1 << 40)  # a terabyte: past the search's memory limit

    _fake(monkeypatch, [("statement", "loops", loops), ("constant", "eats", eats),
                        ("constant", "a factor 2 appears", double)])
    failing = _failing(ex, double)
    assert [m.words for m in matching(ex, [(c, g) for c, g, _ in failing[:2]])] == ["a factor 2 appears"]


def test_a_search_past_its_budget_makes_no_claim(monkeypatch):
    ex = get("warmup.softmax")

    def slow(z, axis=-1):
        import time
        time.sleep(0.3)
        return softmax_module.softmax(z, axis)

    _fake(monkeypatch, [("statement", f"slow {i}", slow) for i in range(10)])
    failing = _failing(ex, slow)
    assert matching(ex, [(c, g) for c, g, _ in failing], budget=1.0) is None


@pytest.mark.parametrize("exercise_id", ["lm.count_ngrams", "attention.causal_mask"])
def test_the_promised_dtype_is_graded(exercise_id):
    ex = get(exercise_id)
    cases = ex.graded_cases(TEST_KEY)
    results = [tuple(o.astype(np.float64) for o in as_outputs(ex.reference(**c))) for c in cases]
    v = judge(ex, cases, results)
    assert v.points == 0 and v.kind == "specific"
    assert "holds the right numbers" in v.messages[0] and "array" in v.messages[0]


def test_a_layer_returning_one_array_where_a_tuple_is_asked_is_told_so():
    v = _verdict("layernorm.forward", "def layernorm_forward(x, gamma, beta, eps=1e-5):\n"
                 "    mu = x.mean(-1, keepdims=True)\n    var = x.var(-1, keepdims=True)\n"
                 "    return gamma * (x - mu) / np.sqrt(var + eps) + beta\n")
    assert v.points == 0
    assert "returned a single ndarray" in " ".join(v.messages), v.messages


def _two_sums(x, y):
    a = x + y
    b = x * 2
    return a - b


def _two_sums_moved(x, y):
    b = x * 2
    a = x + y
    return a - b


def test_a_mutant_id_names_its_statement_and_stays_put_when_a_line_moves():
    from autograder.judge.mutation import _ids
    from autograder.kernel.operators import changes, source_tree
    import ast

    def named(fn):
        tree = source_tree(fn)
        nodes, sites = list(ast.walk(tree)), changes(tree, {"x", "y"})
        ids = [i.replace(fn.__name__, "f") for i in _ids(fn, tree, nodes, sites)]
        changed = [ast.unparse(site.new) for site in sites]
        return dict(zip(ids, changed))
    here, moved = named(_two_sums), named(_two_sums_moved)
    assert len(set(here)) == len(here), "ids are unique"
    assert "f: x -> y in `a = …`" in here and "f: x -> y in `b = …`" in here
    assert not any("#" in i for i in here), "no position where the statement tells them apart"
    assert here == moved, "moving a line renames no mutant and points no id at another change"
