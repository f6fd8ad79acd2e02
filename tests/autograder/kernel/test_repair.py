"""The search for one edit that fixes a learner's code (``autograder.kernel.repair``) and how the judge
uses what it finds: in the check cell, in the graded cell, and through the real sandbox."""
import copy
import json
import time

import numpy as np

from autograder.kernel import cases as kernel
from autograder.exercises import get
from autograder.judge.verdict import judge
from autograder.kernel import repair
from autograder.kernel.contained import _armed
from autograder.kernel.repair import decode_fixes, fixes
from autograder.kernel.transport import MIME, as_outputs, encode_cases, encode_probes
from exercise_bank import TEST_KEY
from autograder.grading import grade_notebook
from helpers import SOLUTIONS, mutant
from solution_cells import _run_cell, edited, namespace_with

SOFTMAX_MIN = '''
def softmax(z, axis=-1):
    shifted = z - np.min(z, axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)
'''


def _learner(source: str) -> dict:
    scope = {"__name__": "__main__", "np": np}
    _run_cell(source, scope)
    return scope




def test_a_fix_names_the_learners_line_and_the_judge_confirms_it_on_every_case():
    ex = get("warmup.softmax")
    scope = _learner(SOFTMAX_MIN)
    cases = ex.graded_cases(TEST_KEY)
    probes, wants = ex.probes()
    found = fixes(scope, ex.function, ex.call, probes, wants, cases, ex.rtol, ex.atol)
    assert found and found[0]["line"] == "shifted = z - np.min(z, axis=axis, keepdims=True)"
    assert "`np.max(z, axis=axis, keepdims=True)` in place of `np.min(z, axis=axis, keepdims=True)`" \
        in found[0]["words"]
    results = kernel.run_cases(scope, ex.function, ex.call, cases)
    plain = judge(ex, cases, results)
    named = judge(ex, cases, results, fixes=decode_fixes(found, len(cases)))
    assert named.kind == "specific" and named.lines == ("shifted = z - np.min(z, axis=axis, keepdims=True)",)
    assert named.messages[0].startswith("This line of yours looks like the mistake")
    assert named.points == plain.points < ex.points  # a fix names the mistake; it never scores


def test_a_fix_that_does_not_hold_on_every_graded_case_is_not_named():
    """The sandbox's data is not trusted: a fix whose outputs differ from the reference on
    one graded case (or that is malformed) is left out, and the score never moves."""
    ex = get("warmup.softmax")
    scope = _learner(SOFTMAX_MIN)
    cases = ex.graded_cases(TEST_KEY)
    probes, wants = ex.probes()
    found = fixes(scope, ex.function, ex.call, probes, wants, cases, ex.rtol, ex.atol)
    results = kernel.run_cases(scope, ex.function, ex.call, cases)
    forged = copy.deepcopy(found[0])
    forged["results"][-1] = forged["results"][0]  # one case's outputs from another case
    forged["words"] = "with nothing changed"
    broken = [{"line": "x"}, {"line": "y", "words": "z", "results": "not a list"}, "junk"]
    verdict = judge(ex, cases, results, fixes=decode_fixes([forged, *broken], len(cases)))
    assert not verdict.lines and "nothing changed" not in " ".join(verdict.messages)
    assert verdict.points == judge(ex, cases, results).points
    assert decode_fixes("not a list", 3) == [] and decode_fixes(found, len(cases) + 1) == []


def test_edits_of_two_lines_are_both_named_and_of_more_lines_none():
    ex = get("warmup.softmax")
    cases = ex.public_cases()
    wants = [as_outputs(ex.reference(**c)) for c in cases]
    good = [w for w in wants]
    two = judge(ex, cases, [tuple(w[::-1] for w in want) for want in wants],
                fixes=[("a = 1", "with `2` in place of `1`", good), ("b = 2", "without this line", good)])
    assert two.lines == ("a = 1", "b = 2") and "either change" in two.messages[0]
    three = judge(ex, cases, [tuple(w[::-1] for w in want) for want in wants],
                  fixes=[(f"line {i}", "w", good) for i in range(3)])
    assert not three.lines and not any("looks like the mistake" in m for m in three.messages)


def test_a_search_that_loops_or_allocates_ends_within_its_budget():
    ex = get("warmup.softmax")
    scope = _learner('''
def softmax(z, axis=-1):
    n = 1
    while n > 0:          # an edit of this bound loops for ever; n = 0 fixes nothing either
        n -= 1
    big = np.ones(10)     # an edit of a size could allocate without end
    e = np.exp(z - np.min(z, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True) + 0 * big.sum()
''')
    probes, wants = ex.probes()
    start = time.monotonic()
    found = fixes(scope, ex.function, ex.call, probes, wants, probes, ex.rtol, ex.atol, budget=1.0, wall=3.0)
    assert time.monotonic() - start < 3.5
    assert all(f["line"] for f in found)


def test_an_edit_that_matches_by_coincidence_is_said_as_its_line_only():
    """An extra residual before the final layer norm: `x + gpt_block(...)` made
    `T + gpt_block(...)` makes every case match (a layer norm ignores any shift), but so would
    any number: the search marks it loose, and the judge offers the edit a learner would
    write, the term dropped. Where only loose edits are found, the line is said alone."""
    ex = get("gpt.forward")
    line = "x = x + gpt_block(x, p, n_heads)"
    scope = namespace_with(ex.id, edited(ex.id, "x = gpt_block(x, p, n_heads)", line))
    cases = ex.graded_cases(TEST_KEY)
    probes, wants = ex.probes()
    found = fixes(scope, ex.function, ex.call, probes, wants, cases, ex.rtol, ex.atol)
    loose = {f["words"] for f in found if f.get("loose")}
    plain = {f["words"] for f in found if not f.get("loose")}
    assert any("`T + gpt_block" in w for w in loose), found
    assert plain == {"with `gpt_block(x, p, n_heads)` in place of `x + gpt_block(x, p, n_heads)`"}, found
    results = kernel.run_cases(scope, ex.function, ex.call, cases)
    named = judge(ex, cases, results, fixes=decode_fixes(found, len(cases)))
    assert named.lines == (line,) and "With `gpt_block(x, p, n_heads)` in place of" in named.messages[0]
    only_loose = judge(ex, cases, results, fixes=[f for f in decode_fixes(found, len(cases)) if f.loose])
    assert only_loose.messages[0] == f"This line of yours looks like the mistake: `{line}`.", only_loose.messages
    assert only_loose.points == named.points == judge(ex, cases, results).points


def test_a_copy_is_offered_where_an_alias_is_overwritten():
    """`m_new = m`, then `m_new[...] = ...`: the running maximum changes in place. Any value
    in place of `m` would do there (`block_k * m`, overwritten at once): those are loose; the
    edit offered is the copy."""
    ex = get("flash.online_softmax")
    scope = _learner('''
def online_softmax_stats(s, block_k):
    m = np.full(s.shape[:-1], -np.inf)
    l = np.zeros(s.shape[:-1])
    ms, ls = [], []
    for start in range(0, s.shape[-1], block_k):
        block = s[..., start:start + block_k]
        m_new = m
        m_new[...] = np.maximum(m, block.max(axis=-1))
        shift = np.where(np.isfinite(m_new), m_new, 0.0)
        l = np.exp(m - shift) * l + np.exp(block - shift[..., None]).sum(axis=-1)
        m = m_new
        ms.append(m.copy())
        ls.append(l)
    return np.stack(ms, axis=-1), np.stack(ls, axis=-1)
''')
    probes, wants = ex.probes()
    found = fixes(scope, ex.function, ex.call, probes, wants, probes, ex.rtol, ex.atol)
    assert [f["words"] for f in found if not f.get("loose")] == ["with `m_new = m.copy()` in place of `m_new = m`"]
    assert all("* m" in f["words"] for f in found if f.get("loose")) and len(found) > 1


def test_the_search_is_counted_so_a_busy_machine_is_told_the_same():
    """The search ends after ``sites`` edits, not at a time: code four times slower (a busy
    machine) tries the same edits and is told the same."""
    ex = get("warmup.softmax")
    probes, wants = ex.probes()
    runs = []
    for slow in (1, 4):
        scope = _learner(SOFTMAX_MIN.replace("np.exp(shifted)", "np.exp(2 * shifted)")  # two mistakes
                         .replace("    e =", f"    [np.exp(z).sum() for _ in range({slow * 200})]\n    e ="))
        runs.append(_armed(lambda deadline: repair._search(scope, ex.function, ex.call, probes, wants, probes,
                                                           ex.rtol, ex.atol, deadline, 30), 60.0))
        assert repair.last_search == {"sites": 30, "stop": "count"}
    assert runs[0] == runs[1]


def test_fixes_are_worded_as_a_learner_writes_them():
    from autograder.kernel.repair import _tidy
    assert [_tidy(c) for c in ("d_model // 1", "x * 1", "1 * x", "x / 1.0", "x ** 1", "0 + x", "n - 1 + 1",
                               "(a + b) * 1", "x * 2")] == ["d_model", "x", "x", "x", "x", "x", "n", "a + b", "x * 2"]
    assert [_tidy(c) for c in ("x * np.zeros(x.shape)", "np.zeros_like(h[0]) * h[0]", "x * np.zeros(y.shape)",
                               "x * np.zeros((3, 4))")] == [
        "np.zeros_like(x)", "np.zeros_like(h[0])", "x * np.zeros(y.shape)", "x * np.zeros((3, 4))"]


def test_no_search_when_the_probes_pass():
    ex = get("warmup.softmax")
    scope = namespace_with("warmup.softmax")
    probes, wants = ex.probes()
    assert fixes(scope, ex.function, ex.call, probes, wants, probes, ex.rtol, ex.atol) == []


def test_the_graded_cell_records_fixes_beside_its_outputs(tmp_path, monkeypatch, capsys):
    """``record`` as the grader runs it: the fixes come after the outputs, which stay the
    learner's own (a search that fails costs nothing)."""
    ex = get("warmup.softmax")
    cases = ex.graded_cases(TEST_KEY)
    probes, wants = ex.probes()
    spec = encode_cases(ex.id, ex.function, ex.call, cases, ex.signature, encode_probes(probes, wants, ex.rtol, ex.atol, ex.search_sites))
    (tmp_path / f"{ex.id}.json").write_text(json.dumps(spec))
    monkeypatch.setenv(kernel.CASES_ENV, str(tmp_path))
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj, raw=False: shown.append(obj))
    scope = _learner(SOFTMAX_MIN)
    kernel.record(ex.id, scope)
    payload = shown[0][MIME]
    assert payload["fixes"] and payload["fixes"][0]["line"].startswith("shifted = z - np.min")
    assert len(payload["cases"]) == len(cases)
    monkeypatch.setattr("autograder.kernel.repair.fixes", lambda *a, **k: 1 / 0)
    shown.clear()
    kernel.record(ex.id, scope)
    assert shown[0][MIME]["fixes"] == [] and len(shown[0][MIME]["cases"]) == len(cases)


def test_through_the_real_sandbox_a_fix_is_named_and_the_score_is_the_judges(tmp_path):
    """One notebook graded once by the real pipeline (the sandbox where it can be had): two
    exercises with bugs nobody listed, each told its own line; the scores equal the verdicts
    of the same code judged in-process, and the feedback file says the same."""
    solution = SOLUTIONS / "00_start_here" / "start_here.ipynb"
    edits = {"warmup.softmax": ("warmup_softmax", "np.max(z, axis=axis, keepdims=True)",
                                "np.min(z, axis=axis, keepdims=True)"),
             "warmup.softmax_jvp": ("warmup_softmax_jvp", "np.sum(g * s, axis=axis, keepdims=True)",
                                    "np.sum(g * s, axis=0, keepdims=True)")}
    (tmp_path / "first").mkdir()
    first = mutant(solution, *edits["warmup.softmax"], tmp_path / "first")
    both = mutant(solution, *edits["warmup.softmax_jvp"], tmp_path, base=first)
    result = grade_notebook(both, feedback_to=tmp_path / "feedback.html")
    html = (tmp_path / "feedback.html").read_text()
    for exercise_id, (_, old, new) in edits.items():
        graded = result.by_id(exercise_id)
        message = graded.messages[0]
        assert message.startswith("This line of yours looks like the mistake") and new in message, message
        assert f"`{old}` in place of `{new}`" in message
        assert message.split("`")[1] in html.replace("&quot;", '"').replace("&#x27;", "'")
        assert graded.points < graded.max_points


def test_the_sandbox_never_holds_the_answer_of_a_graded_case():
    """The cases file gives the sandbox the answers of the probe cases. Those drawn at random
    come from a public seed, not the grader's secret; an exercise whose generator draws nothing
    at random (``causal_mask(T)``) would repeat graded cases among them, and those are left
    out. A learner's code that looks its inputs up in the probes' answers gains nothing."""
    from autograder.exercises import all_exercises
    from autograder.judge.exercise import _key
    repeated = []
    for ex in all_exercises():
        graded = ex.graded_cases(TEST_KEY)
        every, _ = ex.probes()
        probes, wants = ex.probes(graded=graded)
        assert not {_key(c) for c in graded} & {_key(c) for c in probes}, ex.id
        assert len(probes) == len(wants), ex.id
        repeated += [ex.id] * (len(every) > len(probes))
    assert "attention.causal_mask" in repeated  # the test can fail: such exercises exist
