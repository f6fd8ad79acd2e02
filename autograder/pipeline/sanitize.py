"""Learner-made HTML is shown, never run, where the instructor and the learner read it. [trusted]

The autograded notebook is what the formgrader shows in the instructor's browser, signed in
to the Jupyter server that holds the gradebook, and what nbgrader turns into the learner's
HTML feedback. nbconvert puts a cell's ``text/html`` and ``application/javascript`` outputs
and a markdown cell's raw HTML into the page as they are, so a learner's
``display(HTML("<script>..."))`` would run there with the instructor's rights (change grades,
start a terminal). ``SanitizeOutputs``, a step of ``nbgrader autograde`` right after the
judge, rewrites the notebook so that nothing the learner made can run:

- outputs (but the graded cells', which hold the judge's verdict): HTML is cleaned with
  nbconvert's own cleaner (bleach: no scripts, no event handlers); JavaScript, SVG, markdown,
  LaTeX and widget outputs are dropped, keeping their ``text/plain`` form, or a line that says
  what was dropped; images stay (base64 PNG/JPEG);
- markdown cells the learner wrote (any not in the assignment's source) are cleaned the same
  way; the course's own cells are left alone;
- saved widget state (the notebook's ``widgets`` metadata, which JupyterLab writes on save) is
  removed: its models may carry JavaScript that nbconvert's page would load and run.
"""
from __future__ import annotations

import nbformat
from nbconvert.filters.strings import clean_html
from nbgrader.preprocessors import NbGraderPreprocessor

from autograder.paths import SOLUTIONS
from autograder.pipeline.plan import GRADED

KEEP = {"text/plain", "image/png", "image/jpeg", "image/gif"}


def _course_markdown(resources) -> set[str]:
    info = resources.get("nbgrader", {})
    path = SOLUTIONS / info.get("assignment", "") / f"{info.get('notebook', '')}.ipynb"
    if not path.is_file():
        return set()
    return {c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown"}


def sanitize_output(output) -> None:
    """Clean one output in place (display data and results only; text streams are text)."""
    data = output.get("data")
    if output.get("output_type") not in ("display_data", "execute_result") or not data:
        return
    dropped = sorted(m for m in data if m not in KEEP and m != "text/html")
    for mime in dropped:
        del data[mime]
    if "text/html" in data:
        html = data["text/html"]
        data["text/html"] = clean_html("".join(html) if isinstance(html, list) else html)
    if not data:
        data["text/plain"] = f"[not shown: {', '.join(dropped)} made by the learner's code]"


class SanitizeOutputs(NbGraderPreprocessor):
    """Clean learner-made HTML out of the autograded notebook (see the module doc)."""

    def preprocess(self, nb, resources):
        # saved widget state: nbconvert's page (formgrader, feedback) loads a widget manager for
        # it, which would run the JavaScript a widget model names (anywidget's _esm, say)
        nb.metadata.pop("widgets", None)
        course = _course_markdown(resources)
        judged = resources.get("autograder", {}).get(GRADED, {})  # their outputs are the judge's
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "code" and i not in judged:
                for output in cell.get("outputs", []):
                    sanitize_output(output)
            elif cell.cell_type == "markdown" and cell.source not in course:
                cell.source = clean_html(cell.source)
        return nb, resources
