"""Two mistakes at once, explained one at a time: listed mistakes in different outputs, two edits
of the learner's code, one edit that leaves a listed mistake. A claim is made only where it holds
on every case; where the parts say different things, nothing specific."""
import numpy as np
import pytest

from autograder.exercises import get
from autograder.judge.diagnose import safe_outputs
from autograder.judge.verdict import _touched, judge
from autograder.kernel.repair import Fix
from autograder.kernel.transport import as_outputs
from exercise_bank import TEST_KEY
from solution_cells import verdict_with


def _disjoint_pair(ex, cases):
    """Two listed mistakes of ``ex`` that change disjoint sets of outputs, with those sets."""
    wants = [as_outputs(ex.reference(**c)) for c in cases]
    moved = {}
    for m in ex.mistakes:
        if m.wrong is None:
            continue
        outs = [safe_outputs(m.wrong, c) for c in cases]
        if any(o is None or len(o) != len(w) or any(a.shape != b.shape for a, b in zip(o, w))
               for o, w in zip(outs, wants)):
            continue
        ks = {k for o, w in zip(outs, wants) for k in range(len(w)) if not np.allclose(o[k], w[k], equal_nan=True)}
        if ks:
            moved[m.name] = (m, ks, outs)
    for a in moved.values():
        for b in moved.values():
            if a[0].name < b[0].name and not a[1] & b[1]:
                both = [_mixed(o1, o2, a[1], b[1], w) for o1, o2, w in zip(a[2], b[2], wants)]
                if not any(all(np.allclose(x, y) for out, model in zip(both, _model(m, cases)) for x, y in zip(out, model))
                           for m in ex.mistakes if m.wrong is not None and _model(m, cases)):
                    return a, b, wants  # together not a mistake of the list already
    raise AssertionError(f"no two mistakes of {ex.id} in disjoint outputs")


def _model(mistake, cases):
    outs = [safe_outputs(mistake.wrong, c) for c in cases]
    return None if any(o is None for o in outs) else outs


def _mixed(one, two, ks, ls, want):
    return tuple(one[k] if k in ks else two[k] if k in ls else want[k] for k in range(len(want)))


@pytest.mark.parametrize("exercise_id", ["layernorm.backward", "flash.backward"])
def test_two_listed_mistakes_in_different_outputs_are_both_named(exercise_id):
    ex = get(exercise_id)
    cases = ex.graded_cases(TEST_KEY)
    (first, ks, one), (second, ls, two), wants = _disjoint_pair(ex, cases)
    results = [_mixed(o1, o2, ks, ls, w) for o1, o2, w in zip(one, two, wants)]
    v = judge(ex, cases, results)
    text = " ".join(v.messages)
    assert v.points < ex.points and v.kind == "listed"
    assert first.name in text and second.name in text and "two mistakes" in text, v.messages
    # one of them alone, the other output wrong in a way nothing lists: that one, and what still differs
    results = [tuple(o1[k] if k in ks else w[k] + 0.37 if k in ls else w[k] for k in range(len(w)))
               for o1, w in zip(one, wants)]
    v = judge(ex, cases, results)
    text = " ".join(v.messages)
    assert "One of the mistakes" in text and first.name in text and second.name not in text, v.messages
    assert "still differ" in text


def test_a_mistake_is_not_told_for_outputs_it_does_not_match():
    ex = get("attention.backward")
    cases = ex.graded_cases(TEST_KEY)
    wants = [as_outputs(ex.reference(**c)) for c in cases]
    # every output wrong by an unrelated amount: no listed mistake may be told
    results = [tuple(w_k * 1.1 + 0.05 for w_k in w) for w in wants]
    failing = [(c, r, w) for c, r, w in zip(cases, results, wants)]
    assert all(not _touched(ex, m, failing, [])[0] for m in ex.mistakes if m.wrong is not None)
    text = " ".join(judge(ex, cases, results).messages)
    assert not any(m.name in text for m in ex.mistakes)
    assert "One of the mistakes" not in text and "two mistakes" not in text


def test_two_edits_of_two_lines_are_named_together():
    v = verdict_with("warmup.softmax", """
def softmax(z, axis=-1):
    e = np.exp(z + np.max(z, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis)
""")
    text = v.messages[0]
    assert text.startswith("Two lines of yours look like two mistakes"), v.messages
    assert "`z - np.max(z, axis=axis, keepdims=True)` in place of" in text and "keepdims=True)` in place of `np.sum(e, axis=axis)`" in text
    assert set(v.lines) == {"e = np.exp(z + np.max(z, axis=axis, keepdims=True))", "return e / np.sum(e, axis=axis)"}


def test_two_edits_of_one_line_are_named_as_one_line():
    v = verdict_with("warmup.softmax", """
def softmax(z, axis=-1):
    m = np.max(z, axis=axis, keepdims=True)
    e = np.exp(z - m)
    return e / np.sum(e, axis=0, keepdims=True) * 2
""")
    text = v.messages[0]
    assert text.startswith("This line of yours looks wrong in two places"), v.messages
    assert "axis=axis" in text and "`e / np.sum(e, axis=0, keepdims=True)` in place of" in text


def test_a_pair_of_edits_is_named_only_where_it_holds_on_every_case_and_is_the_only_pair():
    ex = get("warmup.softmax")
    cases = ex.public_cases()
    wants = [as_outputs(ex.reference(**c)) for c in cases]
    wrong = [tuple(w[::-1] for w in want) for want in wants]
    one = Fix("a = 1", "with `2` in place of `1`", wants, ("b = 2", "without this line"))
    other = Fix("c = 3", "with `4` in place of `3`", wants, ("d = 4", "without this line"))
    off = Fix("a = 1", "with `2` in place of `1`", wrong, ("b = 2", "without this line"))
    assert "Two lines of yours" in judge(ex, cases, wrong, fixes=[one]).messages[0]
    for fixes in ([one, other], [off]):
        assert not any("Two lines" in m for m in judge(ex, cases, wrong, fixes=fixes).messages)


def test_one_edit_that_leaves_a_listed_mistake_names_both():
    ex = get("attention.forward")
    cases = ex.graded_cases(TEST_KEY)
    scaled = next(m for m in ex.mistakes if m.name == "scaling by d_k instead of sqrt(d_k)")
    wants = [as_outputs(ex.reference(**c)) for c in cases]
    left = [safe_outputs(scaled.wrong, c) for c in cases]
    learner = [tuple(o + 1.0 for o in out) for out in left]  # and a slip the edit undoes
    partial = Fix("return out + 1, A + 1", "with `out, A` in place of `out + 1, A + 1`", left, partial=True)
    v = judge(ex, cases, learner, fixes=[partial])
    assert "two mistakes" in v.messages[0] and scaled.name in v.messages[0] and "return out + 1" in v.messages[0]
    # an edit whose outputs no listed mistake explains says nothing of a mistake
    partial = Fix("return out + 1, A + 1", "with `out, A` in place of `out + 1, A + 1`",
                  [tuple(o * 1.3 for o in w) for w in wants], partial=True)
    assert not any("two mistakes" in m for m in judge(ex, cases, learner, fixes=[partial]).messages)



def test_one_mistake_on_some_cases_and_something_else_on_the_others_says_where_the_rest_is():
    from two_mistake_bank import ANSWERS  # a beam search without length normalisation, ties reversed
    answer = next(a for a in ANSWERS if a.exercise == "encdec.beam_search" and "no length normalisation: alpha ignored" in a.what)
    text = " ".join(verdict_with(answer.exercise, answer.source).messages)
    assert "One of the mistakes" in text and "no length normalisation" in text, text
    assert "still differs on 1 of the 13 failing cases" in text, text


def _mistake(ex, name):
    return next(m for m in ex.mistakes if m.name == name)


def test_a_near_miss_is_said_with_something_else_and_never_for_an_unrelated_bug():
    from autograder.judge.verdict import near_miss

    ex = get("attention.forward")
    cases = ex.graded_cases(TEST_KEY)
    wants = [as_outputs(ex.reference(**c)) for c in cases]
    model = _mistake(ex, "scaling by d_k instead of sqrt(d_k)")
    # the mistake, and a second slip in one number of the first output of every case
    results = []
    for c in cases:
        out = tuple(np.array(a, dtype=np.float64) for a in safe_outputs(model.wrong, c))
        out[0].flat[0] += 0.5
        results.append(out)
    v = judge(ex, cases, results)
    text = " ".join(v.messages)
    assert v.points == 0 and "Looks like scaling by d_k instead of sqrt(d_k) (and something else differs too)" in text
    assert "cases match the reference" in text
    # an unrelated bug of the same size: nothing listed is said
    failing = [(c, tuple(w * 1.1 + 0.05 for w in want), want) for c, want in zip(cases, wants)]
    assert near_miss(ex, failing, []) is None
    unrelated = " ".join(judge(ex, cases, [f[1] for f in failing]).messages)
    assert "something else differs" not in unrelated and not any(m.name in unrelated for m in ex.mistakes)
    # right code: nothing to miss
    assert judge(ex, cases, wants).messages == [f"All {len(cases)} cases match the reference."]


def test_an_edit_that_fixes_part_weakly_is_tried_first_once_every_single_edit_was():
    """Swapped ``gamma, beta`` and no residual: undoing either leaves most of the error (the
    other mistake touches every element), so neither fixes part strongly. Once every single
    edit is tried, the weak ones are first edits too, and the pair is found."""
    v = verdict_with("layernorm.post_ln", """
def post_ln_block(x, W1, b1, W2, b2, gamma, beta):
    y = ffn_forward(x, W1, b1, W2, b2)[0]
    return layernorm_forward(y, beta, gamma)[0]
""")
    text = v.messages[0]
    assert text.startswith("Two lines of yours look like two mistakes"), v.messages
    assert "`layernorm_forward(y, gamma, beta)` in place of" in text and "+ x` in place of" in text, text


def test_weakly_better_is_ranked_below_every_strong_part():
    from autograder.kernel.repair import _better
    before = (0, 0.10, 1.0)
    assert _better((0, 0.10, 0.7), before)[0] == -1  # 70% of the error left: weak
    assert _better((0, 0.12, 1.0), before)[0] == -1  # a few more elements right: weak
    assert _better((0, 0.10, 0.9), before) is None   # 90% left, nothing more right: no better
    assert _better((0, 0.10, 0.4), before)[0] == 0 and _better((1, 0.5, 0.9), before)[0] == 2
