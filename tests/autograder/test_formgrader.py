"""nbgrader's formgrader, in headless Chromium, on a class graded by `autograder grade`.

A real JupyterLab serves the course directory with the instructor's tools switched on the
way `autograder instructor-mode on` does (here in a private config folder). The formgrader
lists the submissions with our scores, shows the judge's messages, and a score changed by
hand there ends up in `nbgrader export`. One learner's cells display HTML and JavaScript:
neither the formgrader nor the feedback runs it.
"""
from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell

from autograder.classroom.grade import grade_submissions
from autograder.pipeline.course import new_course
from autograder.lab import set_instructor_mode
from helpers import CHROMIUM, OPEN_LAB, SOLUTIONS, chromium, jupyter_server, mutant

ASSIGNMENT = "00_start_here"
SOLUTION = SOLUTIONS / ASSIGNMENT / "start_here.ipynb"
JVP = "return s * (g - np.sum(g * s, axis=axis, keepdims=True))"
BIN = Path(sys.executable).parent
PAYLOAD = ("from IPython.display import HTML, Javascript, SVG, display\n"
           "display(HTML('<b>bold</b><script>window.pwned = 1</script><img src=x onerror=\"window.pwned = 2\">'))\n"
           "display(Javascript('window.pwned = 3'))\n"
           "display(SVG('<svg xmlns=\"http://www.w3.org/2000/svg\"><script>window.pwned = 4</script></svg>'))")


CDN = "https://cdnjs.cloudflare.com/ajax/libs/"  # nbconvert's template: MathJax, require.js
WIDGET_STATE = {"application/vnd.jupyter.widget-state+json": {"version_major": 2, "version_minor": 0, "state": {
    "f00d": {"model_name": "AnyModel", "model_module": "anywidget", "model_module_version": "~0.9.*",
             "state": {"_esm": "export default { initialize() { window.pwned = 6 } }"}}}}}


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A course with three graded submissions: honest, partial, and one that displays HTML/JS."""
    tmp = tmp_path_factory.mktemp("formgrader")
    folder = tmp / "class"
    folder.mkdir()
    (folder / "ada.ipynb").write_bytes(SOLUTION.read_bytes())
    (folder / "bo.ipynb").write_bytes(mutant(SOLUTION, "warmup_softmax_jvp", JVP, "return s * g", tmp).read_bytes())
    nb = nbformat.read(SOLUTION, as_version=4)
    nb.cells += [new_code_cell(PAYLOAD), new_markdown_cell("My notes <script>window.pwned = 5</script> **done**")]
    nb.metadata["widgets"] = WIDGET_STATE  # saved state whose model names code to run
    nbformat.write(nb, folder / "mal.ipynb")
    root = tmp / "course"
    root.mkdir()
    new_course(root)
    summary = grade_submissions(folder, ASSIGNMENT, root, jobs=2, progress=False)
    assert len(summary.graded) == 3, summary.report()
    return root


def test_learner_html_is_cleaned_before_anyone_renders_it(course):
    nb = nbformat.read(course / "autograded" / "mal" / ASSIGNMENT / "start_here.ipynb", as_version=4)
    (notes,) = [c for c in nb.cells if c.cell_type == "markdown" and "My notes" in c.source]
    assert "<script>" not in notes.source and "<strong>done</strong>" in notes.source  # kept as HTML
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    mimes = {m for o in outputs for m in o.get("data", {})}
    assert not mimes & {"application/javascript", "image/svg+xml"}
    html = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert html and all("<script" not in h and "onerror" not in h for h in html)  # the image stays, inert
    assert any("<b>bold</b>" in h for h in html)  # harmless HTML still shows
    feedback = (course / "feedback" / "mal" / ASSIGNMENT / "start_here.html").read_text()
    assert "<script>window.pwned" not in feedback and not re.search(r"<img[^>]*onerror", feedback)
    assert "widgets" not in nb.metadata and "window.pwned = 6" not in feedback  # no widget state
    assert "start_here (Score: 4.0 / 4.0)" in feedback  # cleaning costs no points


def test_plain_nbgrader_autograde_cleans_learner_html_too(tmp_path):
    """The course's nbgrader configuration sanitises, not only ``autograder grade``: an
    instructor who runs ``nbgrader autograde`` in the course directory gets the same."""
    root = tmp_path / "course"
    root.mkdir()
    new_course(root)
    mine = root / "submitted" / "mal" / ASSIGNMENT
    mine.mkdir(parents=True)
    nb = nbformat.read(SOLUTION, as_version=4)
    nb.cells += [new_code_cell(PAYLOAD)]
    nb.metadata["widgets"] = WIDGET_STATE
    nbformat.write(nb, mine / "start_here.ipynb")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run([str(BIN / "nbgrader"), "generate_assignment", ASSIGNMENT], cwd=root, env=env,
                   check=True, capture_output=True, timeout=300)
    done = subprocess.run([str(BIN / "nbgrader"), "autograde", ASSIGNMENT], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    graded = nbformat.read(root / "autograded" / "mal" / ASSIGNMENT / "start_here.ipynb", as_version=4)
    outputs = [o for c in graded.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not {m for o in outputs for m in o.get("data", {})} & {"application/javascript", "image/svg+xml"}
    html = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert html and all("<script" not in h for h in html)
    assert "widgets" not in graded.metadata  # nbconvert's page would run the state's models


@contextmanager
def _instructor_lab(root: Path, config: Path):
    """JupyterLab on the course directory, with formgrader on (as instructor-mode does)."""
    set_instructor_mode(True, prefix=config)
    with jupyter_server("lab", root, *OPEN_LAB, cwd=root, ready="/formgrader",
                        env={"PATH": f"{BIN}:{os.environ['PATH']}",
                             "JUPYTER_CONFIG_DIR": str(root / ".jupyter"),
                             "JUPYTER_CONFIG_PATH": str(config / "etc" / "jupyter")}) as url:
        yield url


def _submission_ids(course: Path) -> dict[str, str]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {s.student.id: s.notebooks[0].id for s in gb.assignment_submissions(ASSIGNMENT)}


def _exported(course: Path) -> dict[str, float]:
    out = course / "export.csv"
    subprocess.run([str(BIN / "nbgrader"), "export", "--to", str(out)], cwd=course, check=True,
                   capture_output=True, env={**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"})
    return {r["student_id"]: float(r["score"]) for r in csv.DictReader(out.open())}


def test_formgrader_shows_our_scores_and_messages_and_keeps_a_manual_override(course, tmp_path):
    pytest.importorskip("playwright")
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (.ci/run installs it)")
    ids = _submission_ids(course)
    assert _exported(course) == {"ada": 4.0, "bo": 2.0, "mal": 4.0}
    artifacts = Path(os.environ.get("AUTOGRADER_ARTIFACTS") or tmp_path)  # screenshots kept there
    artifacts.mkdir(parents=True, exist_ok=True)
    with _instructor_lab(course, tmp_path / "config") as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        dialogs = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        try:
            page.goto(f"{url}/formgrader/gradebook/{ASSIGNMENT}/start_here")
            page.wait_for_function("document.querySelectorAll('tbody tr a.name-shown').length == 3",
                                   timeout=60_000)
            rows = page.locator("tbody tr").evaluate_all(
                "rows => rows.map(r => [r.querySelector('a.name-shown').textContent.trim(), r.innerText])")
            rows = dict(rows)
            assert set(rows) == {"ada", "bo", "mal"}, rows
            assert "2 / 4" in rows["bo"] and "4 / 4" in rows["ada"], rows

            page.goto(f"{url}/formgrader/submissions/{ids['bo']}")
            score = page.locator("input.score#grade_warmup_softmax_jvp")
            score.wait_for(timeout=60_000)
            body = page.locator("body").inner_text()
            assert "warmup.softmax_jvp: 0 / 2 points" in body  # the judge's verdict, in formgrader
            message = body.split("warmup.softmax_jvp: 0 / 2 points", 1)[1].strip().splitlines()[0]
            assert len(message) > 20  # ... followed by the mistake's description
            page.screenshot(path=str(artifacts / "formgrader_submission.png"), full_page=True)
            score.fill("1.5")
            score.press("Tab")  # formgrader saves a score when the field loses focus
            deadline = time.monotonic() + 30
            while _exported(course).get("bo") != 3.5:
                assert time.monotonic() < deadline, "the manual score never reached the gradebook"
                time.sleep(0.5)

            elsewhere = []  # what the learner's page asks of any origin but the server's (nbconvert's
            # own page template loads MathJax and require.js from its CDN: not the learner's doing)
            page.on("request", lambda r: None if r.url.startswith((url, "data:", "about:", "blob:", CDN))
                    else elsewhere.append(r.url))
            page.goto(f"{url}/formgrader/submissions/{ids['mal']}")
            page.locator("input.score#grade_warmup_softmax").wait_for(timeout=60_000)
            assert page.evaluate("window.pwned") is None
            assert "bold" in page.locator("body").inner_text()
            # the server's nbconvert view of the autograded notebook (a hub's single-user
            # server shows a learner's notebook this way)
            xsrf = next((c["value"] for c in page.context.cookies() if c["name"] == "_xsrf"), "")
            shown = page.goto(f"{url}/nbconvert/html/autograded/mal/{ASSIGNMENT}/start_here.ipynb"
                              f"?download=false&_xsrf={xsrf}", wait_until="load", timeout=120_000)
            assert shown.ok and "bold" in page.content(), (shown.status, page.content()[:1000])
            assert page.evaluate("window.pwned") is None and not elsewhere, elsewhere
            # the feedback as its learner opens it
            page.goto((course / "feedback" / "mal" / ASSIGNMENT / "start_here.html").as_uri())
            page.wait_for_selector("text=Score", timeout=30_000)
            assert page.evaluate("window.pwned") is None
            assert not dialogs
        finally:
            page.screenshot(path=str(artifacts / "formgrader_last.png"), full_page=True)
    assert _exported(course) == {"ada": 4.0, "bo": 3.5, "mal": 4.0}
