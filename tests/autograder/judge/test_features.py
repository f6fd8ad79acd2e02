"""Every feature a hidden case exercises appears in a public case, so the check cell can fail first."""
import numpy as np
import pytest

from autograder.exercises import all_exercises
from autograder.judge.features import generic, mask_kind
from course_lib.attention import causal_mask, padding_mask
from exercise_bank import TEST_KEY


@pytest.mark.parametrize("ex", all_exercises(), ids=lambda ex: ex.id)
def test_public_cases_exercise_every_feature_of_the_hidden_cases(ex):
    public = set().union(*(ex.describe(c) for c in ex.public_cases()))
    n_public = len(ex.public_cases())
    for key in (TEST_KEY, b"another key"):
        hidden = ex.graded_cases(key)[n_public:]
        missing = set().union(*(ex.describe(c) for c in hidden)) - public
        assert not missing, f"{ex.id}: hidden cases exercise {missing}, no public case does"


def test_features_are_named_from_the_values():
    mask = padding_mask([3, 0], 4)
    assert mask_kind(causal_mask(4)) == "a causal mask" and mask_kind(mask) == "a padding mask"
    assert mask_kind(np.array([[True, False], [False, True]])) == "a mask"
    assert generic({"mask": mask, "x": np.ones(3, np.float32) * 1e3}) == [
        "a padding mask", "a query whose keys are all masked", "float32 inputs", "very large values"]
    assert generic({"x": np.array([0.0, -np.inf])}) == ["-inf entries"]
    assert generic({"x": np.ones(3), "mask": None}) == []


def absent_while_graded_table() -> str:
    """The README's table, computed from the solutions' graded cells and the registry."""
    import nbformat

    from autograder.exercises import get
    from autograder.paths import SOLUTIONS
    from autograder.pipeline.plan import recorded_exercise
    from autograder.pipeline.sandbox import HIDE_WITH, hidden_packages

    family = set(HIDE_WITH["torch"])
    rows = ["| notebook | course_lib modules | packages |", "|---|---|---|"]
    for path in sorted(SOLUTIONS.glob("*/*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        forbidden = {f for c in nb.cells if recorded_exercise(c)
                     for f in get(recorded_exercise(c)).forbidden}
        modules, packages = hidden_packages(forbidden)
        named = (["torch family"] if family <= set(packages) else []) + \
            sorted(set(packages) - family)
        rows.append(f"| `{path.parent.name}` | {', '.join(f'`{m}`' for m in modules)} | "
                    f"{', '.join(named)} |")
    return "\n".join(rows)


def test_the_readme_lists_what_is_absent_while_graded_as_the_registry_says():
    from autograder.paths import REPO

    readme = (REPO / "README.md").read_text()
    start = readme.index("<!-- absent-while-graded")
    table = readme[readme.index("\n", start) + 1:readme.index("<!-- end absent-while-graded")]
    assert table.strip() == absent_while_graded_table(), \
        "README.md's table is out of date; replace it with:\n" + absent_while_graded_table()
