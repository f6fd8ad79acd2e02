"""pipeline/feedback.py and report.py: the learner's report reads offline and says what it means.

Two learners' copies of notebook 02 go through ``grade_notebook`` once each, with the report
written: one with the solution's code in every solution cell (the released notebook, so its
banner is there), one with a wrong answer, two exercises left as released and a markdown cell
of the learner's own with formulas. Headless Chromium opens each report from disk with every
request but ``file:`` refused, and finds: no http(s) request tried, every formula typeset as
MathML (none left as TeX), each exercise named in the summary, no bare score ``Out[n]`` and no
"No response.", and not the release's banner, which speaks to instructors.

Each report carries pictures as embedded PNG: the explorer of §9 (a course cell whose source
names a figure: notebooks 02's), and, under a failing graded cell only, the difference picture
of each of its failing public cases, at most three, then a line that names the rest.

A third report, of notebook 04 with a ``layernorm_forward`` that returns ``out`` alone (an
error message longer than the grader quotes), and the wrong answer's long "This line of
yours looks like the mistake" line are read at 1280 px: no message box scrolls sideways, and
no message is cut inside a word.
"""
import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell

from autograder.grading import grade_notebook
from autograder.kernel.calls import NotATuple, first_output

from helpers import CHROMIUM, NOTEBOOKS, SOLUTIONS, chromium, mutant

RELEASED, SOURCE = NOTEBOOKS / "02_attention" / "attention.ipynb", SOLUTIONS / "02_attention" / "attention.ipynb"
COMMAND = "autograder submit notebooks/02_attention/attention.ipynb"
BLANK = ("attention_causal_mask", "attention_padding_mask")
LAYER_NORM = SOLUTIONS / "04_layer_norm" / "layer_norm.ipynb"
SINGLE = ("layernorm_forward", "return out, (x_hat, var, eps, gamma)", "return out")
OWN_CELL = "print('a cell of my own, whose metadata asks for a picture')"
LEARNER_MATH = r"My notes: $\sqrt{d_k}$, $$A = \mathrm{softmax}(QK^\top)$$, \\(x_1\\) and \\[y^2\\]."


def _learner(blank=(), wrong=None) -> nbformat.NotebookNode:
    """The released notebook with the solution's code typed into its solution cells, but for
    the ``blank`` ones; ``wrong``: (grade id, old, new), an edit of one of them."""
    answers = {c.metadata.nbgrader.grade_id: c.source for c in nbformat.read(SOURCE, as_version=4).cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    nb = nbformat.read(RELEASED, as_version=4)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in answers and grade_id not in blank:
            cell.source = answers[grade_id]
            if wrong and wrong[0] == grade_id:
                assert wrong[1] in cell.source
                cell.source = cell.source.replace(wrong[1], wrong[2])
    return nb


# what the page shows: its summary, the text of its markdown cells, and of the whole page
READ = """() => ({
  toc: [...document.querySelectorAll("#toc li")].map(li => li.innerText.trim()),
  links: [...document.querySelectorAll("#toc li a")].map(a => [a.getAttribute("href"), a.innerText.trim()]),
  markdown: [...document.querySelectorAll(".text_cell_render")].map(
    e => ({text: e.innerText, formulas: e.querySelectorAll("math").length})),
  text: document.body.innerText,
  formulas: document.querySelectorAll("math").length,
  laidOut: [...document.querySelectorAll("math")].every(m => getComputedStyle(m).display.includes("math")),
})"""
# every box that holds a message: an output (the verdict, a fault note), a comment, the summary
BOXES = """() => [...document.querySelectorAll(
    ".output_subarea, .output_subarea pre, .panel-footer, #toc li")].map(
  e => ({text: e.innerText, scrollWidth: e.scrollWidth, clientWidth: e.clientWidth}))"""
VIEWPORT = {"width": 1280, "height": 900}
# per code cell with pictures: the start of its source, its images and its output text
PICTURES = """() => [...document.querySelectorAll(".cell.code_cell")].map(c => ({
  source: (c.querySelector(".input_area") || {innerText: ""}).innerText,
  images: [...c.querySelectorAll(".output_area img")].map(i => ({
    src: i.getAttribute("src").slice(0, 22), width: i.getBoundingClientRect().width,
    box: i.closest(".output_subarea").clientWidth})),
  text: [...c.querySelectorAll(".output_area")].map(o => o.innerText).join("\\n")})).filter(c => c.images.length)"""


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (.ci/run installs it)")
    tmp = tmp_path_factory.mktemp("feedback")
    wrong = _learner(BLANK, ("attention_forward", "np.sqrt(", "np.sqrt(2 * "))
    wrong.cells.insert(5, new_markdown_cell(LEARNER_MATH))
    wrong.cells.insert(6, new_code_cell(OWN_CELL, metadata={"autograder": {"report_picture": "course_lib.viz:toy_explorer"}}))
    paths = {name: tmp / name / "attention.ipynb" for name in ("full", "mutant", "single")}
    for name, nb in (("full", _learner()), ("mutant", wrong)):
        paths[name].parent.mkdir()
        nbformat.write(nb, paths[name])
    paths["single"].parent.mkdir()
    paths["single"] = mutant(LAYER_NORM, *SINGLE, paths["single"].parent)
    out = {}
    with chromium() as browser:
        for name, path in paths.items():
            result = grade_notebook(path, feedback_to=path.parent / "report.html")
            page, tried = browser.new_page(viewport=VIEWPORT), []
            page.on("request", lambda request: tried.append(request.url))
            page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:")
                       else route.abort())
            page.goto(Path(result.feedback_html).as_uri(), wait_until="load")
            page.wait_for_timeout(300)  # a script the page loaded late would have asked by now
            out[name] = result, {**page.evaluate(READ), "boxes": page.evaluate(BOXES),
                                 "pictures": page.evaluate(PICTURES)}, tried
            page.close()
    return out


@pytest.mark.parametrize("name", ["full", "mutant"])
def test_the_report_reads_offline(reports, name):
    result, page, tried = reports[name]
    assert not [url for url in tried if re.match(r"https?:", url)], tried
    assert page["formulas"] > 100 and page["laidOut"]  # Chromium lays MathML out itself
    left = [cell["text"][:200] for cell in page["markdown"] if re.search(r"\$|\\\(|\\\[|\\begin\{", cell["text"])]
    assert not left, left


@pytest.mark.parametrize("name", ["full", "mutant"])
def test_the_summary_names_each_exercise_and_its_score(reports, name):
    result, page, _ = reports[name]
    assert len(page["toc"]) == len(result.exercises) == 8
    for line, exercise in zip(page["toc"], result.exercises):
        assert line.startswith(f"{exercise.id}: ")
        assert f"(Score: {round(exercise.points, 2)} / {exercise.max_points})" in line, line
    assert all(text not in ("Test cell", "Comment") for _, text in page["links"])
    answers = [href for href, text in page["links"] if text == "your code"]
    assert len(answers) == 8 and all(href.startswith("#comment-attention_") for href in answers)


@pytest.mark.parametrize("name", ["full", "mutant"])
def test_no_bare_score_and_no_empty_comment(reports, name):
    result, page, _ = reports[name]
    assert "Out[" not in page["text"] and "No response." not in page["text"] and "Comments:" not in page["text"]
    forward = result.by_id("attention.forward")
    assert f"attention.forward: {forward.points:g} / 3 points" in page["text"]  # the verdict says it


def test_the_report_shows_no_banner(reports):
    banner = [c for c in nbformat.read(RELEASED, as_version=4).cells if "instructors edit" in c.source]
    assert banner and COMMAND in banner[0].source  # the learner's notebook has it
    for _, page, _ in reports.values():
        assert "Generated file" not in page["text"] and "instructors edit" not in page["text"]


def test_scores_are_still_nbgraders_partial_credit(reports):
    full, mutant = reports["full"][0], reports["mutant"][0]
    assert full.total == full.max_total == 17
    forward = mutant.by_id("attention.forward")
    assert 0 < forward.points < forward.max_points  # read from the graded cell's execute_result
    for exercise_id in ("attention.causal_mask", "attention.padding_mask"):
        blank = mutant.by_id(exercise_id)
        assert blank.points == 0 and any("not implemented yet" in m for m in blank.messages)


def test_the_learners_own_formulas_are_typeset(reports):
    _, page, _ = reports["mutant"]
    (notes,) = [cell for cell in page["markdown"] if cell["text"].startswith("My notes:")]
    assert notes["formulas"] == 4 and "$" not in notes["text"] and "\\" not in notes["text"]


def _full_error() -> str:
    """The whole message of the error ``layernorm_forward`` raises when it returns ``out`` alone."""
    with pytest.raises(NotATuple) as raised:
        first_output({"layernorm_forward": lambda **case: np.zeros(3)}, "layernorm_forward", {})
    return f"NotATuple: {raised.value}"


@pytest.mark.parametrize("name", ["full", "mutant", "single"])
def test_every_message_box_wraps_at_1280_px(reports, name):
    _, page, _ = reports[name]
    if name == "mutant":  # a line longer than the box is wide
        assert any("This line of yours looks like the mistake" in b["text"] for b in page["boxes"])
    wide = [(b["scrollWidth"], b["clientWidth"], b["text"][:80]) for b in page["boxes"]
            if b["scrollWidth"] > b["clientWidth"]]
    assert not wide, wide


def test_a_shortened_message_ends_at_a_word(reports):
    result, page, _ = reports["single"]
    full = _full_error()
    (message,) = [m for m in result.by_id("layernorm.forward").messages if "NotATuple" in m]
    assert len(full) > 110 and "\u2026" in message  # the grader quotes it shortened
    shown = message[message.index("NotATuple"):message.index("\u2026")]
    assert full.startswith(shown) and not full[len(shown)].isalnum(), (shown, full)
    words = set(re.findall(r"\w+", full))
    cut = [m.group(1) for b in page["boxes"] for m in re.finditer(r"(\w+)\u2026", b["text"])]
    assert cut and all(word in words for word in cut), cut


def _failing_public(exercise_id: str, function) -> list[int]:
    """The public cases (counted from 1) on which ``function`` gives a wrong matrix, as the
    grader's own reference finds them."""
    from autograder.exercises import get
    from autograder.kernel.transport import as_outputs
    from autograder.picture import failing_matrices

    ex = get(exercise_id)
    cases = ex.public_cases()
    results = [as_outputs(function(**c)) for c in cases]
    wants = [as_outputs(ex.reference(**c)) for c in cases]
    return [number for number, _ in failing_matrices(ex, results, wants)]


def _wrong_attention(Q, K, V, mask=None):
    """attention_forward with the report's mutant's mistake: sqrt(2 d_k)."""
    from course_lib.attention import attention_forward

    out, cache = attention_forward(Q / np.sqrt(2), K, V, mask)
    return out, cache.A


def test_the_report_draws_the_failing_public_cases_under_their_graded_cell(reports):
    from autograder.pipeline.pictures import PER_EXERCISE

    result, page, _ = reports["mutant"]
    failing = _failing_public("attention.forward", _wrong_attention)
    assert len(failing) > PER_EXERCISE  # every public case has a matrix output, and it is wrong
    drawn = [c for c in page["pictures"] if "record(" in c["source"]]
    by_exercise = {re.search(r'record\("([\w.]+)"', c["source"]).group(1): c for c in drawn}
    # the two that use attention_forward fail; the blank ones raise (nothing to draw); the rest pass
    assert set(by_exercise) == {"attention.forward", "attention.multi_head"}
    forward = by_exercise["attention.forward"]
    assert len(forward["images"]) == PER_EXERCISE
    assert all(i["src"] == "data:image/png;base64," and i["width"] <= i["box"] for i in forward["images"])
    rest = ", ".join(map(str, failing[PER_EXERCISE:]))
    assert f"Not drawn here: public case{'s' if len(failing) > PER_EXERCISE + 1 else ''} {rest};" in forward["text"]
    assert "show_case('attention.forward', n)" in forward["text"]
    assert not [c for c in reports["full"][1]["pictures"] if "record(" in c["source"]]  # full marks: none


def test_the_report_shows_the_explorer_the_notebook_promises(reports):
    promise = [c.source for c in nbformat.read(RELEASED, as_version=4).cells if "toy_explorer" in c.source]
    assert len(promise) == 1 and "report" in promise[0]  # the cell says the report has it
    for name in ("full", "mutant"):
        (explorer,) = [c for c in reports[name][1]["pictures"] if "toy_explorer" in c["source"]]
        (image,) = explorer["images"]
        assert image["src"] == "data:image/png;base64," and image["width"] <= image["box"]
    # a learner's cell gets no picture by asking for one in its metadata: the course's source says
    assert not [c for c in reports["mutant"][1]["pictures"] if "a cell of my own" in c["source"]]
    assert "a cell of my own" in reports["mutant"][1]["text"]  # the cell is there
