"""The tests that must always hold, for every notebook of the course (DESIGN.md).

Each solution scores full marks through the real nbgrader pipeline and runs top to bottom in
CI mode; each released notebook runs without an error and scores zero; notebooks/ is exactly
what solutions/ generates; no committed notebook carries outputs; every registered exercise
has one graded cell worth its points; every markdown table is one that nbconvert renders.

Nothing leaks back (issue 22): the feedback report and the autograded notebook of each
solution and each released notebook, graded once for both checks, hold no hidden-case value
and not the course's secret, and those of the released notebook no solution code
(``tests/leaks.py``; a test shows it finds each of them when planted).
"""
import json
import re

import nbformat
import pytest

from autograder.exercises import all_exercises
from autograder.pipeline.mathml import markdown_to_html
from autograder.pipeline.plan import recorded_exercise
from autograder.release import assignments, generate_to_temp
from autograder.pipeline.plan import secret_key
from helpers import NOTEBOOKS, SOLUTIONS, graded_with_feedback, run_notebook, solution_run
from leaks import leaks, planted, solution_lines

ASSIGNMENTS = assignments()


def solution(a):
    (path,) = (SOLUTIONS / a).glob("*.ipynb")
    return path


def release(a):
    return NOTEBOOKS / a / solution(a).name


@pytest.fixture(scope="module")
def generated():
    tmp, paths = generate_to_temp()
    yield {(p.parent.name, p.name): p for p in paths}
    tmp.cleanup()


def test_every_course_notebook_is_there():
    assert ASSIGNMENTS[:1] == ["00_start_here"] and "02_attention" in ASSIGNMENTS


def test_committed_notebooks_have_no_outputs():
    for path in list(SOLUTIONS.rglob("*.ipynb")) + list(NOTEBOOKS.rglob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, f"{path} has outputs"


def test_notebooks_folder_is_what_solutions_generate(generated):
    committed = {(p.parent.name, p.name): p for p in NOTEBOOKS.glob("*/*.ipynb")}
    assert committed.keys() == generated.keys(), "run `autograder generate`"
    for key, path in generated.items():
        assert json.loads(committed[key].read_text()) == json.loads(path.read_text()), \
            f"notebooks/{key[0]}/{key[1]} is stale: run `autograder generate {key[0]}`"


@pytest.mark.parametrize("a", ASSIGNMENTS)
def test_time_line_says_what_a_quiet_laptop_takes(a):
    """Issue 24: each notebook's **Time.** line is written for a learner: what a 2-core laptop with
    nothing else running takes, that a busy machine takes a few times as long, no load averages."""
    (line,) = [p for c in nbformat.read(solution(a), as_version=4).cells if c.cell_type == "markdown"
               for p in c.source.split("\n\n") if p.startswith("**Time.**")]
    line = " ".join(line.split())
    assert "2-core laptop with nothing else running" in line and "a few times as long" in line, line
    assert "load average" not in line and "measured" not in line, line


def test_each_exercise_has_one_graded_cell_worth_its_points():
    seen = {}
    for path in SOLUTIONS.glob("*/*.ipynb"):
        for cell in nbformat.read(path, as_version=4).cells:
            ex_id = recorded_exercise(cell)
            if ex_id:
                assert ex_id not in seen, f"{ex_id} graded twice ({seen[ex_id]} and {path})"
                seen[ex_id] = (path, cell.metadata["nbgrader"]["points"])
    registry = {ex.id: ex.points for ex in all_exercises()}
    assert set(seen) == set(registry)
    for ex_id, (path, points) in seen.items():
        assert points == registry[ex_id], f"{path}: {ex_id} worth {points}, registry says {registry[ex_id]}"


DELIMITER_ROW = re.compile(r"\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*")
CELL_BORDER = re.compile(r"(?<!\\)\|")  # a pipe not written \| (GFM: in code spans too)


def _cells(row: str) -> list[str]:
    """``| a | `b` | c |`` -> ``["a", "`b`", "c"]`` (the outer pipes are optional)."""
    row = row.strip()
    row = row[1:] if row.startswith("|") else row
    row = row[:-1] if row.endswith("|") and not row.endswith("\\|") else row
    return [cell.strip() for cell in CELL_BORDER.split(row)]


def markdown_tables(source: str) -> list[list[list[str]]]:
    """Each GFM table of a markdown source (a header row, a delimiter row, rows up to a line
    with no pipe), as rows of cells."""
    lines, tables, i = source.split("\n"), [], 0
    while i + 1 < len(lines):
        if "|" in lines[i] and DELIMITER_ROW.fullmatch(lines[i + 1]):
            end = i + 2
            while end < len(lines) and "|" in lines[end]:
                end += 1
            tables.append([_cells(row) for row in lines[i:end]])
            i = end
        else:
            i += 1
    return tables


def test_markdown_tables_are_found():
    assert markdown_tables("x\n\n| a | b |\n|---|:-:|\n| `c\\|d` | e |\n\ntext") == [
        [["a", "b"], ["---", ":-:"], ["`c\\|d`", "e"]]]


def test_every_markdown_table_has_as_many_cells_in_each_row_as_its_header():
    """JupyterLab shows a row with a cell too many; nbconvert's renderer (the feedback report)
    then shows the whole table as raw pipes."""
    wrong, tables = [], 0
    for path in sorted(SOLUTIONS.glob("*/*.ipynb")):
        for i, cell in enumerate(nbformat.read(path, as_version=4).cells):
            if cell.cell_type != "markdown":
                continue
            found = markdown_tables(cell.source)
            tables += len(found)
            rows = [f"{path.parent.name} cell {i}: {len(row)} cells, header {len(table[0])}: {row}"
                    for table in found for row in table[1:] if len(row) != len(table[0])]
            if not rows and markdown_to_html(cell.source).count("<table>") != len(found):
                rows.append(f"{path.parent.name} cell {i}: a table nbconvert does not render as one")
            wrong += rows
    assert tables >= 8 and not wrong, "\n".join(wrong)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solution_scores_full_marks_and_its_feedback_leaks_nothing(assignment):
    result, html = graded_with_feedback(solution(assignment))
    lost = {e.id: e.messages for e in result.exercises if e.points < e.max_points}
    assert result.max_total > 0 and not lost, lost
    assert not leaks(result, html, own_code=True)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_release_runs_scores_zero_and_its_feedback_leaks_nothing(assignment):
    run_notebook(release(assignment), mode="grade")
    result, html = graded_with_feedback(release(assignment))
    assert result.total == 0 and result.max_total > 0
    for e in result.exercises:
        assert any("not implemented yet" in m for m in e.messages), (e.id, e.messages)
    assert not leaks(result, html, own_code=False)


def test_the_leak_check_finds_what_is_planted():
    """Hidden values as numpy prints them, the secret, a solution line: each is found."""
    result, html = graded_with_feedback(release(ASSIGNMENTS[0]))
    line = solution_lines(ASSIGNMENTS[0])[0]
    for page, what in ((planted(result, html), "hidden values in a row"),
                       (html + secret_key().decode(), "the secret"),
                       (html.replace("</body>", f"<pre>{line}</pre></body>"), "solution code")):
        assert any(what in found for found in leaks(result, page, own_code=False)), what


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solution_runs_top_to_bottom_in_ci_mode(assignment):
    solution_run(assignment)  # the run the tests of each notebook's text check numbers against
