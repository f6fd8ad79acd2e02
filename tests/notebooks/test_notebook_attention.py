"""Notebook 02 (attention): known wrong answers lose points and are named.

The bank of mutants below are realistic edits of the solution code, graded through the real
nbgrader pipeline. A grading run costs seconds, so each run carries one mutant for each of
several exercises (exercises are graded independently). ``multi_head_attention`` calls the
learner's ``attention_forward`` and ``split_heads``, so its mutants ride in runs where those
two are left intact. Full marks for the solution and zero for the release are checked for
every notebook in test_course_notebooks.py.
"""
import numpy as np
import pytest

from autograder.authoring import grade_id
from autograder.judge.exercise import as_outputs
from exercise_bank import TEST_KEY
from autograder.exercises.attention import EXERCISES
from autograder.judge.diagnose import safe_outputs
from autograder.judge.verdict import judge
from autograder.kernel.transport import Raised
from helpers import SOLUTIONS, claim, grade, mutant, solution_run

SOLUTION = SOLUTIONS / "02_attention" / "attention.ipynb"

# mutant name -> (the learner's function, [(old, new) edits of its cell], the mistake's name)
FORWARD = "attention_forward"
SCORES = "S = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])"
MASKING = "    if mask is not None:\n        S = np.where(mask, S, -np.inf)\n"
ROW_MAX = "m = np.max(S, axis=-1, keepdims=True)"
ROW_SUM = "total = np.sum(e, axis=-1, keepdims=True)"
STABLE_EXP = "e = np.exp(S - np.where(np.isfinite(m), m, 0.0))"
CAUSAL = "return np.tril(np.ones((T, T), dtype=bool))"
PAD_KEEP = "keep = np.arange(T)[None, :] < np.asarray(lengths)[:, None]"
PAD_RETURN = "return keep[:, None, :]"
CENTRAL = ("x[i] = old - eps\n        f_minus = f(x)\n        x[i] = old\n"
           "        grad[i] = (f_plus - f_minus) / (2 * eps)")
JVP = "dS = A * (dA - np.sum(dA * A, axis=-1, keepdims=True))"
P_MATRIX = "P = np.vstack([K @ G.T / np.sqrt(h), Q @ G / np.sqrt(h), E @ Att.T])"
COL_JVP = "G = Att * (g - np.sum(Att * g, axis=0, keepdims=True))"
SPLIT = "x = x.reshape(B, T, n_heads, d_model // n_heads)\n    return np.swapaxes(x, 1, 2)"
INLINE_ATTENTION_D_MODEL = """S = q @ np.swapaxes(k, -1, -2) / np.sqrt(x_q.shape[-1])
    if mask is not None:
        S = np.where(mask, S, -np.inf)
    m = S.max(axis=-1, keepdims=True)
    A = np.exp(S - np.where(np.isfinite(m), m, 0.0))  # a query with every key masked: zeros
    total = A.sum(axis=-1, keepdims=True)
    A = A / np.where(total == 0, 1.0, total)
    heads = A @ v"""

MUTANTS = {
    "forward: softmax over queries": (FORWARD, [(ROW_MAX, ROW_MAX.replace("-1", "-2")),
                                                (ROW_SUM, ROW_SUM.replace("-1", "-2"))],
                                      "softmax over the wrong axis"),
    "forward: no scaling": (FORWARD, [(SCORES, "S = Q @ np.swapaxes(K, -1, -2)")], "no scaling"),
    "forward: mask after softmax": (FORWARD, [(MASKING, ""), ("    return A @ V, A",
                                    "    if mask is not None:\n        A = A * mask\n    return A @ V, A")],
                                    "mask applied after softmax"),
    "forward: exp without the max": (FORWARD, [(STABLE_EXP, "e = np.exp(S)")],
                                     "no max-subtraction"),
    "causal: diagonal excluded": ("causal_mask", [(CAUSAL, CAUSAL.replace("bool))", "bool), k=-1)"))],
                                  "causal diagonal off by one"),
    "causal: next key included": ("causal_mask", [(CAUSAL, CAUSAL.replace("bool))", "bool), k=1)"))],
                                  "a query sees the next key"),
    "causal: polarity": ("causal_mask", [(CAUSAL, CAUSAL.replace("np.tril", "~np.tril"))],
                         "mask polarity inverted"),
    "causal: triu": ("causal_mask", [(CAUSAL, CAUSAL.replace("tril", "triu"))],
                     "upper triangle instead of lower"),
    "causal: additive": ("causal_mask", [(CAUSAL, "return np.where(np.tril(np.ones((T, T), dtype=bool)), 0.0, -np.inf)")],
                         "additive -inf mask"),
    "padding: polarity": ("padding_mask", [(PAD_KEEP, PAD_KEEP.replace("<", ">="))],
                          "padding mask polarity inverted"),
    "padding: off by one": ("padding_mask", [(PAD_KEEP, PAD_KEEP.replace("<", "<="))],
                            "padding mask off by one"),
    "padding: no query axis": ("padding_mask", [(PAD_RETURN, "return keep")], "query axis missing"),
    "padding: query axis last": ("padding_mask", [(PAD_RETURN, "return keep[:, :, None]")],
                                 "mask built along the query axis"),
    "gradient: one-sided": ("numerical_gradient", [(CENTRAL, "x[i] = old\n        grad[i] = (f_plus - f(x)) / eps")],
                            "one-sided difference"),
    "gradient: over eps": ("numerical_gradient", [("/ (2 * eps)", "/ eps")], "divided by eps instead of 2 eps"),
    "gradient: not restored": ("numerical_gradient", [("        x[i] = old\n", "")], "x not restored"),
    "backward: no sum term": ("attention_backward", [(JVP, "dS = A * dA")],
                              "softmax backward missing the sum term"),
    "backward: sum over queries": ("attention_backward", [(JVP, JVP.replace("-1", "-2"))],
                                   "softmax backward summed over the wrong axis"),
    "backward: dQ dK swapped": ("attention_backward", [("return dQ, dK, dV", "return dK, dQ, dV")],
                                "dQ and dK swapped"),
    "backward: unscaled": ("attention_backward", [("scale = 1.0 / np.sqrt(Q.shape[-1])", "scale = 1.0")],
                           "dQ and dK unscaled"),
    "backward: dV without transpose": ("attention_backward", [("dV = np.swapaxes(A, -1, -2) @ dout", "dV = A @ dout")],
                                       "dV computed with A instead of A^T"),
    "column: dA dB swapped": ("attention_backward_col", [(P_MATRIX, "P = np.vstack([Q @ G / np.sqrt(h), K @ G.T / np.sqrt(h), E @ Att.T])")],
                              "dA and dB swapped"),
    "column: unscaled": ("attention_backward_col", [(P_MATRIX, "P = np.vstack([K @ G.T, Q @ G, E @ Att.T])")],
                         "missing 1/sqrt(d_k)"),
    "column: jvp over rows": ("attention_backward_col", [(COL_JVP, COL_JVP.replace("axis=0", "axis=1"))],
                              "softmax backward taken row-wise"),
    "column: no sum term": ("attention_backward_col", [(COL_JVP, "G = Att * g")],
                            "softmax backward missing the sum term"),
    "column: dX through V only": ("attention_backward_col", [("dX = np.vstack([A, B, C]).T @ P", "dX = C.T @ P[2 * h:]")],
                                  "dX only through the values"),
    "split: no transpose": ("split_heads", [(SPLIT, "return x.reshape(B, n_heads, T, d_model // n_heads)")],
                            "heads split without transpose"),
    "split: interleaved": ("split_heads", [(SPLIT, "x = x.reshape(B, T, d_model // n_heads, n_heads)\n"
                                                   "    return x.transpose(0, 3, 1, 2)")],
                           "heads interleaved"),
    "multi-head: scaled by d_model": ("multi_head_attention", [("heads, A = attention_forward(q, k, v, mask)",
                                                                 INLINE_ATTENTION_D_MODEL)],
                                      "scaling by sqrt(d_model) instead of sqrt(d_k)"),
    "multi-head: keys from the decoder": ("multi_head_attention", [("k = split_heads(x_kv @ W_k, n_heads)",
                                                                     "k = split_heads(x_q @ W_k, n_heads)")],
                                          "cross-attention keys taken from the decoder"),
    "padding: calls the library": ("padding_mask", [(PAD_KEEP + "  # (B, T)\n    " + PAD_RETURN,
                                                     "from course_lib.attention import padding_mask as ready\n"
                                                     "    return ready(lengths, T)")],
                                   "course_lib.attention"),
    "backward: autograd": ("attention_backward", [("dA = dout @ np.swapaxes(V, -1, -2)",
                                                   "import torch.autograd\n    dA = dout @ np.swapaxes(V, -1, -2)")],
                           "torch"),
}

# One grading run per line; no run mutates forward or split together with multi-head.
RUNS = [
    ["forward: softmax over queries", "causal: diagonal excluded", "padding: polarity",
     "gradient: one-sided", "backward: no sum term", "column: dA dB swapped", "split: no transpose"],
    ["forward: no scaling", "causal: next key included", "padding: off by one", "gradient: over eps",
     "backward: dQ dK swapped", "column: unscaled", "split: interleaved"],
    ["forward: mask after softmax", "causal: polarity", "padding: no query axis",
     "gradient: not restored", "backward: unscaled", "column: jvp over rows"],
    ["forward: exp without the max", "causal: triu", "padding: query axis last",
     "backward: dV without transpose", "column: dX through V only"],
    ["multi-head: scaled by d_model", "causal: additive", "backward: sum over queries",
     "column: no sum term"],
    ["multi-head: keys from the decoder", "padding: calls the library", "backward: autograd"],
]
EXERCISE_OF = {ex.function: ex.id for ex in EXERCISES}


def test_runs_cover_the_bank_once_each():
    names = [name for run in RUNS for name in run]
    assert sorted(names) == sorted(MUTANTS) and len(names) == len(set(names))
    for run in RUNS:
        cells = [MUTANTS[name][0] for name in run]
        assert len(cells) == len(set(cells)), run
        assert "multi_head_attention" not in cells or not {FORWARD, "split_heads"} & set(cells), run


@pytest.mark.parametrize("run", RUNS, ids=[f"run{i + 1}" for i in range(len(RUNS))])
def test_mutants_lose_points_and_are_named(tmp_path, run):
    path = None
    for name in run:
        function, edits, _ = MUTANTS[name]
        for old, new in edits:
            path = mutant(SOLUTION, grade_id(EXERCISE_OF[function]), old, new, tmp_path, base=path)
    result = grade(path)
    for name in run:
        function, _, expected = MUTANTS[name]
        e = result.by_id(EXERCISE_OF[function])
        assert e.points < e.max_points, (name, e)
        assert any(expected in m for m in e.messages), (name, expected, e.messages)
    untouched = {ex.id for ex in EXERCISES} - {EXERCISE_OF[MUTANTS[n][0]] for n in run}
    if not {FORWARD, "split_heads"} & {MUTANTS[n][0] for n in run}:
        for ex_id in untouched:  # exercises left as in the solution keep their marks
            e = result.by_id(ex_id)
            assert e.points == e.max_points, (ex_id, e.messages)


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda ex: ex.id)
def test_every_registered_mistake_costs_points_and_is_named_by_the_judge(ex):
    """Outputs equal to a mistake's model are scored below full marks and named (in-process)."""
    cases = ex.graded_cases(TEST_KEY)
    for mistake in ex.mistakes:
        if mistake.wrong is None:
            continue
        results = []
        for case in cases:
            outputs = safe_outputs(mistake.wrong, case)
            results.append(Raised("ValueError: shapes do not fit") if outputs is None else outputs)
        verdict = judge(ex, cases, results)
        assert verdict.points < verdict.max_points, mistake.name
        assert any(mistake.name in m for m in verdict.messages), (mistake.name, verdict.messages)


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda ex: ex.id)
def test_cases_are_float64_and_reference_is_finite(ex):
    for case in ex.graded_cases(TEST_KEY):
        for value in case.values():
            if isinstance(value, np.ndarray) and value.dtype.kind == "f":
                assert value.dtype == np.float64
        assert all(np.all(np.isfinite(o)) for o in as_outputs(ex.reference(**case)))


def test_section_2_says_what_the_scaling_figure_shows():
    """What the text says the figure of §2 shows (issue 24, item 7): it trains nothing, so the
    CI run shows what a learner sees."""
    claim(SOLUTION, "without scaling, the variance grows like $d_k$, the largest weight heads for 1 and "
                    "the Jacobian for 0; with scaling all three stay level (the variance near 1, the largest "
                    "weight near 0.25, the Jacobian's norm near 0.3), up to the sampling noise of only 16 "
                    "random keys, largest at $d_k = 4$.")
    values = solution_run("02_attention")[1]
    d_ks, variance = np.array(values["d_ks"]), values["variance"]
    top, jacobian = values["top_weight"], values["jacobian"]
    assert np.allclose(np.array(variance["raw"]) / d_ks, 1, atol=0.3)
    assert np.all(np.diff(top["raw"]) > 0) and top["raw"][-1] > 0.9
    assert np.all(np.diff(jacobian["raw"]) < 0) and jacobian["raw"][-1] < jacobian["raw"][0] / 5
    for curve, level in ((variance, 1), (top, 0.25), (jacobian, 0.3)):
        scaled = np.array(curve["scaled"])
        assert np.allclose(scaled[1:], level, rtol=0.1) and np.allclose(scaled[0], level, rtol=0.3), scaled
