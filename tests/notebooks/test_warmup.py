"""Notebook 00's exercises through the real pipeline: known mistakes, and tricks that must fail."""
import nbformat
import pytest
from nbformat.v4 import new_code_cell

from helpers import NOTEBOOKS, SOLUTIONS, grade, mutant

SOLUTION = SOLUTIONS / "00_start_here" / "start_here.ipynb"
RELEASE = NOTEBOOKS / "00_start_here" / "start_here.ipynb"
SOFTMAX_MAX = "np.exp(z - np.max(z, axis=axis, keepdims=True))"
SOFTMAX_SUM = "return e / np.sum(e, axis=axis, keepdims=True)"
JVP = "return s * (g - np.sum(g * s, axis=axis, keepdims=True))"

# (softmax edit, its mistake) paired with (jvp edit, its mistake): one grading run per pair
PAIRS = [
    ((SOFTMAX_MAX, "np.exp(z)"), "no max-subtraction",
     (JVP, "return s * g"), "softmax backward missing the sum term"),
    ((SOFTMAX_MAX, "np.exp(z - np.max(z))"), "maximum taken over the whole array",
     (JVP, "return s * (g + np.sum(g * s, axis=axis, keepdims=True))"), "sum term with the wrong sign"),
    ((SOFTMAX_SUM, "return e"), "not normalised",
     (JVP, "return s * (g - np.sum(g * s, axis=-1, keepdims=True))"), "sum over the wrong axis"),
    (("axis=axis, keepdims=True))\n    return e / np.sum(e, axis=axis,",
      "axis=-1, keepdims=True))\n    return e / np.sum(e, axis=-1,"), "normalised over the wrong axis",
     (JVP, "return s * (g - np.sum(g * s, axis=axis))"), "sum without keepdims"),
]


@pytest.mark.parametrize("softmax_edit, softmax_name, jvp_edit, jvp_name", PAIRS,
                         ids=[p[1] for p in PAIRS])
def test_known_mistakes_lose_points_and_are_named(tmp_path, softmax_edit, softmax_name, jvp_edit, jvp_name):
    path = mutant(SOLUTION, "warmup_softmax", *softmax_edit, tmp_path)
    path = mutant(SOLUTION, "warmup_softmax_jvp", *jvp_edit, tmp_path, base=path)
    result = grade(path)
    for ex_id, name in (("warmup.softmax", softmax_name), ("warmup.softmax_jvp", jvp_name)):
        e = result.by_id(ex_id)
        assert e.points < e.max_points, (ex_id, e)
        assert any(name in m for m in e.messages), (ex_id, name, e.messages)


def _with_cell_after(src_nb, grade_id, source, tmp_path):
    nb = nbformat.read(src_nb, as_version=4)
    i = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    nb.cells.insert(i + 1, new_code_cell(source))
    out = tmp_path / SOLUTION.name
    nbformat.write(nb, out)
    return out


def test_tricks_in_the_kernel_do_not_raise_the_score(tmp_path):
    # softmax: wrong answer, then numpy's comparison functions patched to always agree
    path = mutant(SOLUTION, "warmup_softmax", SOFTMAX_SUM, "return e", tmp_path)
    path = _with_cell_after(path, "warmup_softmax",
                            "np.allclose = lambda *a, **k: True\nnp.array_equal = lambda *a, **k: True",
                            tmp_path)
    # softmax_jvp: returns an object that claims to equal anything
    path = mutant(SOLUTION, "warmup_softmax_jvp", JVP,
                  "class Yes:\n        def __eq__(self, other):\n            return True\n"
                  "    return Yes()", tmp_path, base=path)
    result = grade(path)
    softmax, jvp = result.by_id("warmup.softmax"), result.by_id("warmup.softmax_jvp")
    # the wrong softmax is right only where its sums happen to be 1, patched numpy or not
    assert softmax.points < 1 and any("not normalised" in m for m in softmax.messages)
    assert jvp.points == 0 and any("expected numbers" in m for m in jvp.messages)


def test_a_learner_record_cannot_replace_the_graders(tmp_path):
    fake = ("def record(exercise_id, namespace):\n"
            "    print('4.0')\n")
    path = mutant(SOLUTION, "warmup_softmax", SOFTMAX_SUM, "return e * 0", tmp_path)
    path = _with_cell_after(path, "warmup_softmax", fake, tmp_path)
    assert grade(path).by_id("warmup.softmax").points == 0


def test_calling_the_reference_finds_it_absent(tmp_path):
    path = mutant(SOLUTION, "warmup_softmax", SOFTMAX_SUM,
                  "from course_lib.softmax import softmax as ready_made\n    return ready_made(z, axis)",
                  tmp_path)
    e = grade(path).by_id("warmup.softmax")
    assert e.points == 0 and any("course_lib.softmax" in m for m in e.messages)


def test_overwritten_graded_cells_are_restored(tmp_path):
    nb = nbformat.read(RELEASE, as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade") and cell.cell_type == "code":
            cell.source = "2.0"  # an execute_result of 2.0 would be nbgrader partial credit
    path = tmp_path / RELEASE.name
    nbformat.write(nb, path)
    assert grade(path).total == 0


def test_stderr_and_one_broken_exercise(tmp_path):
    # stderr noise in a correct softmax costs nothing; a crashing jvp cell costs jvp only
    path = mutant(SOLUTION, "warmup_softmax", SOFTMAX_SUM,
                  "import sys\n    print('debug', file=sys.stderr)\n    " + SOFTMAX_SUM, tmp_path)
    path = mutant(SOLUTION, "warmup_softmax_jvp", "def softmax_jvp", "raise RuntimeError('oops')\ndef softmax_jvp",
                  tmp_path, base=path)
    result = grade(path)
    assert result.by_id("warmup.softmax").points == 2
    jvp = result.by_id("warmup.softmax_jvp")
    assert jvp.points == 0 and any("is not defined" in m for m in jvp.messages)
