"""The judge scores cases and names mistakes; the check cell advises."""
import importlib

import numpy as np
import pytest

from autograder.exercises import all_exercises, get, topics
from autograder.judge.exercise import Exercise, Mistake, as_outputs, switchable
from autograder.judge.verdict import describe_difference, distinct, judge
from autograder.kernel.transport import NOT_IMPLEMENTED, Raised
from exercise_bank import TEST_KEY


def _cases(rng, hidden):
    return [dict(x=rng.normal(size=(3, 4))) for _ in range(3 if hidden else 2)]


EX = Exercise(id="demo.double", function="double", signature="double(x) -> y", cases=_cases,
              reference=lambda x: 2 * x, points=3, output_names=("y",),
              mistakes=[Mistake(name="tripled instead of doubled", hint="multiply by 2.",
                                wrong=lambda x: 3 * x)])


CASES = EX.graded_cases(TEST_KEY)


def outputs(fn):
    return [as_outputs(fn(**c)) for c in CASES]


def test_right_answer_gets_full_marks():
    v = judge(EX, CASES, outputs(lambda x: x + x))
    assert (v.points, v.passed, v.total) == (3, 5, 5) and v.full_marks


def test_known_mistake_is_named_and_scores_zero():
    v = judge(EX, CASES, outputs(lambda x: 3 * x))
    assert v.points == 0 and "tripled instead of doubled" in " ".join(v.messages)


@pytest.mark.parametrize("a, b, shown", [
    (0.5, 0.25, ("0.5", "0.25")),                          # short numbers stay short
    (1.74604e11, 1.746e11 + 4.7e6, ("1.74604e+11", "1.74605e+11")),
    (1.746e11, 1.746e11 + 4.7e3, ("1.746e+11", "1.74600005e+11")),  # alike to 6 digits
    (np.float32(1.0), np.float32(1.0000001), ("1", "1.0000001")),
])
def test_two_numbers_that_differ_are_printed_differently(a, b, shown):
    assert distinct(a, b) == shown


def test_a_large_value_off_by_a_little_shows_the_difference():
    want = np.full((2, 2), 1.746e11)
    got = want.copy()
    got[1, 0] += 4.7e3
    ex = Exercise(id="demo.big", function="big", signature="big(x) -> y", cases=_cases, reference=lambda x: x,
                  output_names=("y",), rtol=1e-12, atol=0)
    text = describe_difference(ex, (got,), (want,))
    assert "expected 1.746e+11, got 1.74600005e+11" in text, text


@switchable
def _affine(factor=2.0, shift=0.0, square=False):
    """y = factor x (+ shift) (squared): a model whose switches each make one mistake."""
    return lambda x: (factor * x + shift) ** (2 if square else 1)


PAIRS = Exercise(id="demo.pairs", function="double", signature="double(x) -> y", cases=_cases,
                 reference=lambda x: 2 * x, output_names=("y",),
                 mistakes=[Mistake(name="tripled", hint="multiply by 2.", wrong=_affine(factor=3.0)),
                           Mistake(name="shifted", hint="add nothing.", wrong=_affine(shift=1.0)),
                           Mistake(name="squared", hint="do not square.", wrong=_affine(square=True))])


def test_two_listed_mistakes_at_once_are_named_together_and_only_when_one_pair_fits():
    v = judge(PAIRS, CASES, [as_outputs(3 * c["x"] + 1) for c in CASES])
    text = " ".join(v.messages)
    assert v.kind == "listed" and "two mistakes at once" in text and "tripled" in text and "shifted" in text
    assert "squared" not in text
    # one of them alone is named alone
    v = judge(PAIRS, CASES, [as_outputs(2 * c["x"] + 1) for c in CASES])
    assert "two mistakes" not in " ".join(v.messages) and "shifted" in " ".join(v.messages)
    # 3x + 1 squared: three mistakes, no pair fits; nothing is claimed
    v = judge(PAIRS, CASES, [as_outputs((3 * c["x"] + 1) ** 2) for c in CASES])
    assert "Looks like" not in " ".join(v.messages)


def test_partial_credit_and_location_of_the_first_difference():
    results = outputs(lambda x: 2 * x)
    results[3] = (results[3][0] + np.eye(3, 4),)
    v = judge(EX, CASES, results)
    assert v.points == round(3 * 4 / 5, 3)
    text = " ".join(v.messages)
    assert "hidden case 4 (plain inputs)" in text and "largest error 1" in text
    assert "index" not in text and "expected" not in text  # a hidden case's numbers stay hidden
    public = EX.public_cases()
    results = [as_outputs(2 * c["x"]) for c in public]
    results[1] = (results[1][0] + np.eye(3, 4),)
    assert "case 2 (plain inputs): `y` differs: max abs error 1 at index (" in \
        " ".join(judge(EX, public, results, public=True).messages)


def test_wrong_shape_and_errors_are_reported():
    v = judge(EX, CASES, [(np.zeros(2),)] * 4 + [Raised("ValueError: boom")])
    text = " ".join(v.messages)
    assert v.points == 0 and "shape (2,)" in text and "ValueError: boom" in text


def test_not_implemented_says_so():
    v = judge(EX, CASES, [NOT_IMPLEMENTED] * 5)
    assert v.points == 0 and v.messages == ["`double` is not implemented yet."]


def test_an_exercise_is_declared_with_keywords_only():
    with pytest.raises(TypeError):
        Exercise("demo.double", "double", "double(x) -> y", _cases, lambda x: 2 * x)


def test_every_registered_exercise_is_found_by_its_id_under_its_topic():
    exercises = all_exercises()
    assert exercises and len({ex.id for ex in exercises}) == len(exercises)
    for topic in topics():
        for ex in importlib.import_module(f"autograder.exercises.{topic}").EXERCISES:
            assert ex.id.startswith(f"{topic}."), (topic, ex.id)
    for ex in exercises:
        assert get(ex.id) is ex, ex.id


def test_graded_cases_depend_on_the_key_and_public_cases_do_not():
    other = EX.graded_cases(b"another key, another submission")
    assert not np.array_equal(other[0]["x"], CASES[0]["x"])
    assert all(np.array_equal(a["x"], b["x"]) for a, b in zip(EX.graded_cases(TEST_KEY), CASES))
    assert np.array_equal(EX.public_cases()[0]["x"], EX.public_cases()[0]["x"])
    assert not np.array_equal(EX.public_cases()[0]["x"], CASES[0]["x"])


def test_the_check_cell_warns_about_a_module_absent_while_graded(capsys):
    from autograder.check_cell import check

    namespace = {"__name__": "__main__"}  # a notebook's globals
    exec("from course_lib import softmax as library\n\n"
         "def softmax(z, axis=-1):\n    return library.softmax(z, axis)\n", namespace)
    assert not check("warmup.softmax", namespace)
    out = capsys.readouterr().out
    assert "course_lib.softmax" in out and "not available while the notebook is graded" in out


def test_the_check_cell_fails_code_that_changes_its_input_and_says_so(capsys):
    from autograder.check_cell import check

    namespace = {"__name__": "__main__", "np": np}
    exec("def softmax(z, axis=-1):\n    z -= z.max(axis=axis, keepdims=True)\n    np.exp(z, out=z)\n"
         "    z /= z.sum(axis=axis, keepdims=True)\n    return z\n", namespace)
    check("warmup.softmax", namespace)
    out = capsys.readouterr().out
    assert out.startswith("\u2718 softmax") and "Your `softmax` changes its input `z` in place" in out
    assert "right outputs but change an input in place" in out


def test_objects_are_not_numbers():
    class AlwaysEqual:
        def __eq__(self, other):
            return True
    try:
        as_outputs(AlwaysEqual())
    except TypeError as err:
        assert "AlwaysEqual" in str(err)
    else:
        raise AssertionError("an object travelled as an output")


def test_the_check_cell_names_a_failing_helper(capsys):
    from autograder.check_cell import check
    from course_lib import layernorm as ln

    def layernorm_forward(x, gamma, beta, eps=1e-5):  # unbiased variance: a wrong forward
        mu, var = x.mean(-1, keepdims=True), x.var(-1, ddof=1, keepdims=True)
        return gamma * (x - mu) / np.sqrt(var + eps) + beta, None

    def ffn_forward(x, W1, b1, W2, b2):
        return ln.ffn_forward(x, W1, b1, W2, b2)

    def pre_ln_block(x, W1, b1, W2, b2, gamma, beta):
        return x + ffn_forward(layernorm_forward(x, gamma, beta)[0], W1, b1, W2, b2)[0]

    assert not check("layernorm.pre_ln", dict(locals()))
    out = capsys.readouterr().out
    assert "runs your `layernorm_forward`" in out and "ffn_forward" not in out.split("runs your")[1]


def test_check_cells_return_nothing_and_translate_exceptions(capsys):
    from autograder.check_cell import check

    import linecache

    source = ("def attention_forward(Q, K, V, mask=None):\n"
              "    S = Q @ K.T / np.sqrt(Q.shape[-1])\n"
              "    A = np.exp(S - S.max(-1, keepdims=True))\n"
              "    A = A / A.sum(-1, keepdims=True)\n"
              "    return A @ V, A\n")
    cell = "/tmp/ipykernel_1/2.py"  # how ipykernel names a cell, so hints can quote its lines
    linecache.cache[cell] = (len(source), None, source.splitlines(True), cell)
    namespace = {"__name__": "__main__", "np": np}
    exec(compile(source, cell, "exec"), namespace)
    assert check("attention.forward", namespace) is None  # no stray True/False under the message
    out = capsys.readouterr().out
    assert "swapaxes" in out and "show_case('attention.forward'" in out and "Traceback" not in out


def test_show_case_prints_a_public_case_and_returns_its_inputs(capsys):
    from autograder.check_cell import show_case
    from autograder.exercises import get

    case = show_case("attention.forward", 3)
    out = capsys.readouterr().out
    assert "public case 3 of" in out and "a padding mask" in out and "expected out" in out
    public = get("attention.forward").public_cases()[2]
    assert all(np.array_equal(case[k], public[k]) for k in ("Q", "K", "V", "mask"))
    assert show_case("attention.forward", 99) is None and "public cases 1 to" in capsys.readouterr().out


def test_the_check_cell_prints_the_verdict_not_numpys_warnings_about_wrong_code(capsys, recwarn):
    """A top-p that keeps one token too few divides 0 by 0 on some rows: the verdict says what
    is wrong; numpy's "invalid value encountered in divide" above it would read as a crash."""
    from autograder.check_cell import check
    from solution_cells import edited, namespace_with

    source = edited("gpt.next_token_probs", "before >= top_p", "np.cumsum(sorted_p, axis=-1) >= top_p")
    check("gpt.next_token_probs", namespace_with("gpt.next_token_probs", source))
    out = capsys.readouterr()
    assert out.out.startswith("\u2718 next_token_probs") and "RuntimeWarning" not in out.out + out.err
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_of_several_fixes_of_one_line_the_one_that_only_deletes_is_shown():
    from autograder.judge.verdict import _confirmed_fix

    want = [as_outputs(np.ones(3))]
    fixes = [("n = len(t) - 1 if t[-1] == eos else len(t)", words, [want[0]]) for words in (
        "with `t[-1] == V` in place of `t[-1] == eos`",
        "with `len(t) if t[-1] == eos else len(t)` in place of `len(t) - 1 if t[-1] == eos else len(t)`")]
    _, message = _confirmed_fix(EX, want, fixes)
    assert "with `len(t) if t[-1] == eos else len(t)`" in message and "== V" not in message


def test_names_of_changed_inputs_from_the_sandbox_are_told_only_when_they_are_the_cases_own():
    # the list comes from the learner's process: anything but a name of the case's inputs is dropped
    forged = [["x", "<b>gradebook</b>", 3, "y"]] + [[] for _ in CASES[1:]]
    v = judge(EX, CASES, outputs(lambda x: 2 * x), changed=forged)
    assert v.passed == len(CASES) - 1, "the case whose input changed in place does not pass"
    assert "1 more give the right outputs but change an input in place" in " ".join(v.messages)
    assert "`x`" in v.changed and "gradebook" not in v.changed and "`y`" not in v.changed
    for junk in ("x", [["z"]] * len(CASES), [["x"]] * (len(CASES) + 1)):
        v = judge(EX, CASES, outputs(lambda x: 2 * x), changed=junk)
        assert v.changed is None and v.full_marks, junk


def test_a_slow_check_cell_says_it_is_looking_first(capsys, monkeypatch):
    from autograder import check_cell

    monkeypatch.setattr(check_cell, "PATIENCE", 0.05)
    namespace = {"__name__": "__main__", "np": np}
    exec("import time\ndef softmax(z, axis=-1):\n    time.sleep(0.05)\n    return np.exp(z)\n", namespace)
    check_cell.check("warmup.softmax", namespace)
    out = capsys.readouterr().out
    assert out.startswith("Looking for the mistake\u2026\n\u2718 softmax"), out[:200]
    exec("def softmax(z, axis=-1):\n    return np.exp(z)\n", namespace)
    monkeypatch.setattr(check_cell, "PATIENCE", 30.0)
    check_cell.check("warmup.softmax", namespace)
    assert "Looking" not in capsys.readouterr().out, "a quick answer comes alone"
