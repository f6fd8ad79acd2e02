"""The exercises of notebook 07 (making attention fast): the references agree with the textbook
attention of course_lib.attention, the mistake models equal the references with no switch set,
every registered mistake is named, and the notebook's own solution code, right or with one
realistic bug, goes through the same path as a graded cell (``kernel.run_cases``, then ``judge``).
"""
import nbformat
import numpy as np
import pytest

from autograder.exercises import flash, get
from course_lib import attention as textbook
from exercise_bank import TEST_KEY, assert_bug_is_named, learner_verdict, mistake_verdicts
from helpers import SOLUTIONS

KEYS = (TEST_KEY, b"another key")
NOTEBOOK = SOLUTIONS / "07_fast_attention" / "fast_attention.ipynb"


def _textbook(Q, K, V, causal):
    mask = textbook.causal_mask(Q.shape[-2], K.shape[-2]) if causal else None
    return textbook.attention_forward(Q, K, V, mask)


def test_forward_reference_is_the_textbook_attention_and_its_log_sum_exp():
    for key in KEYS:
        for case in get("flash.forward").graded_cases(key):
            out, lse = flash._forward_reference(**case)
            want, cache = _textbook(case["Q"], case["K"], case["V"], case["causal"])
            np.testing.assert_allclose(out, want, atol=1e-12)
            mask = textbook.causal_mask(*cache.A.shape[-2:]) if case["causal"] else None
            S = textbook.masked_scores(case["Q"] @ np.swapaxes(case["K"], -1, -2)
                                       / np.sqrt(case["Q"].shape[-1]), mask)
            with np.errstate(divide="ignore", invalid="ignore"):
                top = np.where(np.isfinite(S.max(-1)), S.max(-1), 0.0)
                want_lse = top + np.log(np.exp(S - top[..., None]).sum(-1))
            np.testing.assert_allclose(lse, want_lse, rtol=1e-12)  # -inf where a query sees no key


def test_backward_reference_is_the_textbook_backward():
    for key in KEYS:
        for case in get("flash.backward").graded_cases(key):
            _, cache = _textbook(case["Q"], case["K"], case["V"], case["causal"])
            want = textbook.attention_backward(case["dout"], cache)
            for got, expected in zip(flash._backward_reference(**case), want):
                np.testing.assert_allclose(got, expected, atol=1e-12)


def test_online_softmax_reference_is_max_and_sum_of_every_prefix():
    for case in get("flash.online_softmax").graded_cases(TEST_KEY):
        s, b = case["s"], case["block_k"]
        m, l = flash._stats_reference(s, b)
        assert m.shape[-1] == -(-s.shape[-1] // b)
        for col, end in enumerate(range(b, s.shape[-1] + b, b)):
            prefix = s[..., :end]
            np.testing.assert_array_equal(m[..., col], prefix.max(-1))
            top = np.where(np.isfinite(m[..., col]), m[..., col], 0.0)[..., None]
            np.testing.assert_allclose(l[..., col], np.exp(prefix - top).sum(-1), rtol=1e-12)


@pytest.mark.parametrize("model,exercise_id", [(flash.running_stats, "flash.online_softmax"),
                                               (flash.tiled_forward, "flash.forward"),
                                               (flash.tiled_backward, "flash.backward")])
def test_mistake_models_without_a_switch_are_the_references(model, exercise_id):
    ex = get(exercise_id)
    for key in KEYS:
        for case in ex.graded_cases(key):
            with np.errstate(over="raise", invalid="raise"):
                got = model(**case)
            for g, w in zip(got, ex.reference(**case)):
                np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def test_every_registered_mistake_loses_points_and_is_named():
    names = []
    for exercise_id, name, verdict in mistake_verdicts(flash.EXERCISES):
        assert not verdict.full_marks, (exercise_id, name)
        assert any(name in m for m in verdict.messages), (exercise_id, name, verdict.messages)
        names.append(name)
    assert len(names) >= 8


def _solution(grade_id):
    """The source of one solution cell of the notebook (its markers are comments)."""
    cells = [c for c in nbformat.read(NOTEBOOK, as_version=4).cells
             if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id]
    assert len(cells) == 1, grade_id
    return cells[0].source


RIGHT = {"flash.online_softmax": "flash_online_softmax", "flash.forward": "flash_forward",
         "flash.backward": "flash_backward"}


def _verdict(exercise_id, source, key=TEST_KEY):
    return learner_verdict(exercise_id, [source], {"np": np}, key)


@pytest.mark.parametrize("exercise_id", sorted(RIGHT))
@pytest.mark.parametrize("key", KEYS)
def test_the_notebooks_solution_scores_full_marks(exercise_id, key):
    verdict = _verdict(exercise_id, _solution(RIGHT[exercise_id]), key)
    assert verdict.full_marks, verdict.messages


def _mutant(exercise_id, *edits):
    source = _solution(RIGHT[exercise_id])
    for old, new in edits:
        assert old in source, (exercise_id, old)
        source = source.replace(old, new)
    return exercise_id, source


GUARD_LSE = 'lse = np.where(np.isfinite(lse), lse, np.inf)'
CODE_MUTANTS = [  # realistic edits of the solution code, and the mistake the feedback must name
    (*_mutant("flash.online_softmax", ("np.exp(m - shift) * l", "l")),
     "normaliser not rescaled when the maximum changes"),
    (*_mutant("flash.online_softmax", ("np.exp(m - shift) * l", "np.exp(m - shift) ** 2 * l")),
     "normaliser rescaled twice"),
    (*_mutant("flash.online_softmax", ("np.exp(block - shift[..., None])", "np.exp(block - m[..., None])")),
     "running maximum not updated before exponentiating"),
    (*_mutant("flash.online_softmax", ("np.maximum(m, block.max(axis=-1))", "block.max(axis=-1)")),
     "the block's own maximum instead of the running maximum"),
    (*_mutant("flash.online_softmax", ("np.where(np.isfinite(m_new), m_new, 0.0)", "m_new")),
     "a row that is -inf so far gives NaN"),
    (*_mutant("flash.online_softmax", ("np.exp(m - shift) * l", "l"),
              ("np.exp(block - shift[..., None])", "np.exp(block)")),
     "normaliser without the maximum subtracted"),
    (*_mutant("flash.online_softmax", ("range(0, s.shape[-1], block_k)",
                                       "range(0, s.shape[-1] - block_k + 1, block_k)")),
     "last, shorter block skipped"),
    (*_mutant("flash.online_softmax", ("np.exp(m - shift) * l", "np.exp(shift - m) * l")), None),
    (*_mutant("flash.forward", ("acc = alpha[..., None] * acc + A_tilde", "acc = acc + A_tilde")),
     "running output not rescaled"),
    (*_mutant("flash.forward", ("m_new = np.maximum(m, S.max(axis=-1))",
                                "m = m_new = np.maximum(m, S.max(axis=-1))")),
     "rescaling factor taken after the maximum was overwritten"),
    (*_mutant("flash.forward", ("A_tilde = np.exp(S - shift[..., None])", "A_tilde = np.exp(S - m[..., None])")),
     "running maximum not updated before exponentiating"),
    (*_mutant("flash.forward", ("l = alpha * l + A_tilde", "l = alpha * alpha * l + A_tilde")),
     "normaliser rescaled twice"),
    (*_mutant("flash.forward", ("out[..., q0:q0 + rows, :] = acc / np.where(l == 0, 1.0, l)[..., None]",
                                "out[..., q0:q0 + rows, :] = acc"),
              ("            m = m_new\n", "            m = m_new\n"
               "            acc = acc / np.where(l == 0, 1.0, l)[..., None]\n")),
     "output divided by l inside the loop"),
    (*_mutant("flash.forward", ("            S = Qi @", "            with np.errstate(divide='ignore'):\n"
                                "                lse[..., q0:q0 + rows] = m + np.log(l)\n            S = Qi @"),
              ("            lse[..., q0:q0 + rows] = m + np.log(l)  ", "            pass  ")),
     "log-sum-exp saved before the last block"),
    (*_mutant("flash.forward", ("lse[..., q0:q0 + rows] = m + np.log(l)", "lse[..., q0:q0 + rows] = np.log(l)")),
     "log-sum-exp saved as log(l), without the maximum"),
    (*_mutant("flash.forward", ("q0 + rows + T_k - T_q", "q0 + T_k - T_q")),
     "causal key loop stops one block early"),
    (*_mutant("flash.forward", ("q0 + rows + T_k - T_q", "q0 + rows"),
              ("[:, None] + T_k - T_q", "[:, None]")),
     "causal mask aligned top-left instead of bottom-right"),
    (*_mutant("flash.forward", ("np.where(np.isfinite(m_new), m_new, 0.0)", "m_new")),
     "a query with no key gives NaN"),
    (*_mutant("flash.forward", ("acc / np.where(l == 0, 1.0, l)[..., None]", "acc / l[..., None]")),
     "a query with no key gives NaN"),
    (*_mutant("flash.forward", ("scale = 1.0 / np.sqrt(Q.shape[-1])", "scale = 1.0 / Q.shape[-1]")), None),
    (*_mutant("flash.backward", ("dS = A * (dA - delta[..., q0:q0 + rows, None])",
                                 "dS = A * (dA - np.sum(dA * A, axis=-1, keepdims=True))")),
     "delta computed from the tile's weights instead of rowsum(dout ∘ out)"),
    (*_mutant("flash.backward", ("dS = A * (dA - delta[..., q0:q0 + rows, None])", "dS = A * dA")),
     "softmax backward missing the delta term"),
    (*_mutant("flash.backward", ("A = np.exp(S - lse[..., q0:q0 + rows, None])",
                                 "A = np.exp(S - S.max(axis=-1, keepdims=True))\n"
                                 "            A = A / A.sum(axis=-1, keepdims=True)")),
     "weights recomputed by a softmax over the tile"),
    (*_mutant("flash.backward", ("S = np.where(np.arange(k0, k0 + S.shape[-1]) <= position, S, -np.inf)",
                                 "S = S")),
     "causal mask missing in the recomputed weights"),
    (*_mutant("flash.backward", ("np.swapaxes(dS, -1, -2) @ Qi * scale",
                                 "np.swapaxes(dS, -1, -2) @ (Qi * scale) * scale")),
     "scale applied twice in the backward"),
    (*_mutant("flash.backward", ("dS @ Kj * scale", "dS @ Kj"), ("@ Qi * scale", "@ Qi")),
     "dQ and dK not scaled"),
    (*_mutant("flash.backward", ("np.swapaxes(dS, -1, -2) @ Qi", "dS @ Qi")),
     "dK accumulated without the transpose"),
    (*_mutant("flash.backward", ("np.swapaxes(A, -1, -2) @ dOi", "A @ dOi")),
     "dV accumulated without the transpose"),
    (*_mutant("flash.backward", ("q0 + rows + T_k - T_q", "q0 + T_k - T_q")),
     "causal key loop stops one block early"),
    (*_mutant("flash.backward", (GUARD_LSE, "pass")), "a query with no key gives NaN"),
    (*_mutant("flash.backward", ("delta = np.sum(dout * out, axis=-1)", "delta = np.sum(dout * out, axis=-2)")),
     None),
]


@pytest.mark.parametrize("exercise_id,source,name", CODE_MUTANTS,
                         ids=[f"{m[0]}: {m[2]}" for m in CODE_MUTANTS])
def test_realistic_bugs_lose_points_and_are_named(exercise_id, source, name):
    assert_bug_is_named(_verdict(exercise_id, source), name, described=("differs", "raised", "NaN"))


# The text promises tiles, "without ever building a (T_q, T_k) array": a pass that builds the
# whole matrix gets every value right and loses the long cases, whose memory is counted.
WHOLE_MATRIX = {
    "flash.forward": '''
def flash_forward(Q, K, V, causal=False, block_q=16, block_k=16):
    T_q, T_k = Q.shape[-2], K.shape[-2]
    S = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if causal:
        S = np.where(np.arange(T_k) <= np.arange(T_q)[:, None] + T_k - T_q, S, -np.inf)
    m = S.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    E = np.exp(S - m)
    l = E.sum(-1, keepdims=True)
    with np.errstate(divide="ignore"):
        lse = (m + np.log(l))[..., 0]
    return E @ V / np.where(l == 0, 1.0, l), lse
''',
    "flash.backward": '''
def flash_backward(dout, Q, K, V, out, lse, causal=False, block_q=16, block_k=16):
    T_q, T_k = Q.shape[-2], K.shape[-2]
    scale = 1.0 / np.sqrt(Q.shape[-1])
    S = Q @ np.swapaxes(K, -1, -2) * scale
    if causal:
        S = np.where(np.arange(T_k) <= np.arange(T_q)[:, None] + T_k - T_q, S, -np.inf)
    A = np.exp(S - np.where(np.isfinite(lse), lse, np.inf)[..., None])
    dA = dout @ np.swapaxes(V, -1, -2)
    dS = A * (dA - np.sum(dout * out, axis=-1)[..., None])
    return dS @ K * scale, np.swapaxes(dS, -1, -2) @ Q * scale, np.swapaxes(A, -1, -2) @ dout
''',
}


@pytest.mark.parametrize("exercise_id", sorted(WHOLE_MATRIX))
def test_a_pass_that_builds_the_whole_matrix_loses_the_long_cases_and_is_told_why(exercise_id):
    ex = get(exercise_id)
    cases = ex.graded_cases(TEST_KEY)
    long = [i for i, c in enumerate(cases) if ex.memory(c) is not None]
    assert len(long) == 2 and len(ex.public_cases()) > long[0]  # one public-kind, one hidden
    whole = _verdict(exercise_id, WHOLE_MATRIX[exercise_id])
    assert whole.passed == len(cases) - 2, whole.messages
    told = [m for m in whole.messages if "at once, more than the" in m]
    assert len(told) == 2 and all("one tile at a time" in m and "MiB" in m for m in told), whole.messages
    # the same code with its memory count stopped from inside loses the same cases
    hidden = WHOLE_MATRIX[exercise_id].replace("    T_q, T_k", "    import tracemalloc\n"
                                               "    tracemalloc.stop()\n    T_q, T_k", 1)
    stopped = _verdict(exercise_id, hidden)
    assert stopped.passed == len(cases) - 2
    assert sum("stopped Python's count of allocations" in m for m in stopped.messages) == 2


FORGED = {  # the kernel's count of allocations, forged from inside the learner's call
    "stopped and started again": ("tracemalloc.stop(); tracemalloc.start()", True),
    "its reading replaced": ("tracemalloc.get_traced_memory = lambda: (0, 0)", True),
    "its peak reset": ("tracemalloc.reset_peak()", False),  # the whole arrays are still held
}


@pytest.mark.parametrize("exercise_id", sorted(WHOLE_MATRIX))
@pytest.mark.parametrize("forged", FORGED.values(), ids=list(FORGED))
def test_a_forged_memory_count_does_not_save_the_whole_matrix(exercise_id, forged, monkeypatch):
    """The count runs in the learner's process, which can forge it; the cases held to a limit
    that the kernel passed run again alone, where the operating system keeps the limit."""
    import tracemalloc
    monkeypatch.setattr(tracemalloc, "get_traced_memory", tracemalloc.get_traced_memory)  # put back after
    forge, alone = forged
    source = WHOLE_MATRIX[exercise_id].replace("    return ", f"    import tracemalloc\n    {forge}\n    return ", 1)
    verdict = _verdict(exercise_id, source)
    assert verdict.passed == verdict.total - 2, verdict.messages
    told = [m for m in verdict.messages if "MiB this case allows" in m]
    assert len(told) == 2, verdict.messages
    assert all(("run alone in a fresh process" in m) == alone for m in told), verdict.messages


def test_a_tiled_pass_that_prints_and_reads_a_global_keeps_full_marks_when_run_again_alone(capsys):
    """The long cases run again in a fresh process, from the function pickled by value: what
    it prints does not garble its results there, and what it reads of the notebook goes along."""
    source = _solution(RIGHT["flash.forward"])
    source = "TILE_NOTE = 'tile'\n" + source.replace(
        "    for q0 in range(0, T_q, block_q):", "    for q0 in range(0, T_q, block_q):\n        print(TILE_NOTE, q0)", 1)
    assert source.count("print(TILE_NOTE") == 1
    assert _verdict("flash.forward", source).full_marks


def test_a_tiled_pass_with_a_whole_boolean_causal_mask_keeps_full_marks():
    """The limit is a quarter of one float64 (T_q, T_k) array: a boolean mask of that shape
    (an eighth) made once is not what the text forbids (the scores and weights are)."""
    source = _solution(RIGHT["flash.forward"])
    old = "S = np.where(np.arange(k0, k0 + S.shape[-1]) <= position, S, -np.inf)"
    assert old in source
    source = source.replace("    for q0 in range(0, T_q, block_q):",
                            "    visible = np.arange(T_k) <= np.arange(T_q)[:, None] + T_k - T_q\n"
                            "    for q0 in range(0, T_q, block_q):", 1)
    source = source.replace(old, "S = np.where(visible[q0:q0 + rows, k0:k0 + block_k], S, -np.inf)")
    assert _verdict("flash.forward", source).full_marks
