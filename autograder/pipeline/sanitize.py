"""Learner-made HTML is shown, never run, where the instructor and the learner read it. [trusted]

The autograded notebook is what the formgrader shows in the instructor's browser, signed in
to the Jupyter server that holds the gradebook, and what nbgrader turns into the learner's
HTML feedback. nbconvert puts a cell's ``text/html`` and ``application/javascript`` outputs
and a markdown cell's raw HTML into the page as they are, so a learner's
``display(HTML("<script>..."))`` would run there with the instructor's rights (change grades,
start a terminal). ``SanitizeOutputs``, a step of ``nbgrader autograde`` right after the
judge, rewrites the notebook so that nothing the learner made can run:

- outputs (but the graded cells', which hold the judge's verdict): HTML is cleaned (below);
  JavaScript, SVG, markdown, LaTeX and widget outputs are dropped, keeping their
  ``text/plain`` form, or a line that says what was dropped; images stay (base64 PNG, JPEG,
  GIF). Of an output's metadata only an image's numeric width and height stay: the templates
  write those into the ``<img>`` tag unquoted (``width=1 onerror=...`` would be a handler),
  and the rest (``isolated``, ``filenames``) changes how the page loads the output;
- markdown cells the learner wrote (any not in the assignment's source) are rendered to HTML
  here, by the renderer nbconvert uses (mistune, as ``markdown2html``), and the cleaned HTML
  becomes the cell's source. Cleaning the markdown *source* as HTML is not enough: markdown's
  own links (``[x](javascript:...)``, ``<javascript:...>``, ``[x][r]`` with ``[r]: ...``,
  ``![x](...)``) become tags only when nbconvert renders the cell, after this step, and its
  renderer lets every scheme through. The HTML is stored as one line inside a ``<div>``
  (newlines written ``&#10;``, the same HTML): a line that opens with ``<div>`` is one raw
  HTML block to a CommonMark renderer (nbconvert's, JupyterLab's), passed on untouched, so the
  page shows exactly what was cleaned. The step checks that nbconvert's renderer and the
  report's (``mathml.py``) both do; if either ever did not, the cell is replaced by a line
  saying it is not shown. The learner's formulas become MathML here, as the course's do in the
  report (``mathml.py``), so the report typesets them with no MathJax;
- raw cells the learner made are cleaned as HTML (the HTML templates show them as HTML);
  the course's own markdown and raw cells (and the release's header, ``header.py``) are left alone;
- every output (but the graded cells') is one nbformat's schema describes, stdout or stderr
  where it is a stream (the schema allows any text: the pages and nbgrader's ``LimitOutput``
  expect one of the two), within the wire's limits (``wire.check``), or it is replaced by a
  line saying it was dropped (``readable``), whatever step made it;
- saved widget state (the notebook's ``widgets`` metadata, which JupyterLab writes on save) is
  removed: its models may carry JavaScript that nbconvert's page would load and run.

The cleaner is nh3 (ammonia: an HTML5 parser and an allow-list), with its default tags and
attributes: no scripts, styles, frames, forms or event handlers, and no ``class``, ``id`` or
``style`` (the page's own scripts, MathJax and mermaid, act on classes); for the learner's
formulas it allows MathML's layout elements and attributes too (``mathml.TAGS`` and
``mathml.ATTRIBUTES``: none names a URL). URLs keep only the schemes http, https and mailto,
or are relative (``#anchor`` too); ``data:`` only as an image's source and only PNG, JPEG or
GIF, and an image only from such a URL: the page loads nothing the learner points it to. ammonia reads a URL's scheme as a browser does (entities decoded, tabs and newlines
dropped, case folded), so a disguised ``javascript:`` is still one and goes.
"""
from __future__ import annotations

from html import escape

import nbformat
import nh3
from nbconvert.filters.markdown_mistune import MarkdownWithMath, markdown2html_mistune
from nbformat.v4 import new_output
from nbformat.v4.nbbase import validate
from nbgrader.preprocessors import NbGraderPreprocessor

from autograder.pipeline.header import header_cells
from autograder.pipeline import mathml
from autograder.pipeline.assignment import NoSuchAssignment, source
from autograder.pipeline.plan import PLAN
from autograder.kernel import wire
from autograder.kernel.hints import shorten

KEEP = {"text/plain", "image/png", "image/jpeg", "image/gif"}
OUTPUT_TYPES = ("stream", "display_data", "execute_result", "error")  # nbformat 4's
STREAMS = ("stdout", "stderr")
C0_AND_SPACE = "".join(map(chr, range(33)))
INLINE_IMAGES = ("data:image/png;", "data:image/jpeg;", "data:image/gif;")
NOT_SHOWN = "<div><p><em>[This markdown cell is not shown: the grader could not display it safely.]</em></p></div>"


def _inline_images_only(element: str, attribute: str, value: str) -> str | None:
    """ammonia's last word on an attribute it kept: a ``data:`` URL only as a PNG/JPEG/GIF
    image, and an image only from such a URL.

    ``data`` is among the allowed schemes so that images survive; any other ``data:`` goes
    here. An image from anywhere else (``https:``, ``//host``, a relative path) would be
    fetched by the page as it opens, with no click: a tracking pixel that tells the learner
    when the instructor reads, or a GET request to the formgrader's own server in the
    instructor's name. Its ``src`` goes; its ``alt`` text stays. The value is read as a
    browser's URL parser starts (leading and trailing controls and spaces stripped, tabs and
    newlines dropped, case folded), so ``" DaTa:"`` is caught.
    """
    url = value.strip(C0_AND_SPACE).translate({ord(c): None for c in "\t\n\r"}).lower()
    inline_image = element == "img" and attribute == "src" and url.startswith(INLINE_IMAGES)
    if element == "img" and attribute == "src" or url.startswith("data:"):
        return value if inline_image else None
    return value


CLEANER = nh3.Cleaner(
    tags=nh3.ALLOWED_TAGS | mathml.TAGS,
    attributes={**nh3.ALLOWED_ATTRIBUTES, **{tag: set(mathml.ATTRIBUTES) for tag in mathml.TAGS}},
    url_schemes={"http", "https", "mailto", "data"}, attribute_filter=_inline_images_only)
# the renderers of the pages that show a learner's stored markdown: jupyter nbconvert's and the
# formgrader's, and the feedback report's
PAGE_RENDERERS = (markdown2html_mistune, mathml.markdown_to_html)


def clean(html: str) -> str:
    """``html`` with nothing left that could run (see the module doc)."""
    return CLEANER.clean(html)


def markdown_as_html(cell) -> str:
    """A learner's markdown cell as cleaned HTML, in the one-line form a markdown renderer passes on."""
    renderer = mathml.MathMLRenderer(escape=False, attachments=cell.get("attachments", {}),
                                     exclude_anchor_links=True)
    try:
        html = MarkdownWithMath(renderer=renderer).render(cell.source)
    except Exception:  # a missing attachment, say: the learner's text is shown as text
        html = f"<pre>{escape(cell.source)}</pre>"
    stored = "<div>" + clean(html).replace("\n", "&#10;") + "</div>"
    # each page renders the stored source again: it must come out as it went in
    return stored if all(render(stored).strip() == stored for render in PAGE_RENDERERS) else NOT_SHOWN


def _course_text(resources) -> set[str]:
    """The sources of the assignment's own markdown and raw cells, its header's included."""
    info = resources.get("nbgrader", {})
    assignment, notebook = info.get("assignment", ""), info.get("notebook", "")
    try:
        own = source(assignment, notebook).text
    except NoSuchAssignment:
        return set()
    return own | {c.source for c in header_cells(assignment, notebook) if c.cell_type != "code"}


def _sizes(metadata) -> dict:
    """An image's width and height, when they are numbers."""
    if not isinstance(metadata, dict):
        return {}
    return {k: v for k, v in metadata.items() if k in ("width", "height") and type(v) in (int, float)}


def readable(output):
    """``output`` itself if it is an output the pages can show (see the module doc), else a
    stderr line saying what was dropped."""
    kind = output.get("output_type") if isinstance(output, dict) else None
    try:
        if kind not in OUTPUT_TYPES:
            raise wire.Unreadable(f"an output of type {str(kind)[:40]!r}")
        wire.check(output)
        validate(output, kind)
        if kind == "stream" and output["name"] not in STREAMS:
            raise wire.Unreadable(f"a stream named {output['name'][:40]!r}")
    except (wire.Unreadable, nbformat.ValidationError) as err:
        why = shorten((str(err).splitlines() or [""])[0], 200)
        return new_output("stream", name="stderr", text=f"[an output the grader could not show was dropped: {why}]\n")
    return output


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
        data["text/html"] = clean("".join(html) if isinstance(html, list) else html)
    if not data:
        data["text/plain"] = f"[not shown: {', '.join(dropped)} made by the learner's code]"
    metadata = output.get("metadata") if isinstance(output.get("metadata"), dict) else {}
    sizes = {mime: _sizes(metadata.get(mime)) for mime in KEEP - {"text/plain"}}
    output["metadata"] = {**_sizes(metadata), **{mime: size for mime, size in sizes.items() if size}}


class SanitizeOutputs(NbGraderPreprocessor):
    """Clean learner-made HTML out of the autograded notebook (see the module doc)."""

    def preprocess(self, nb, resources):
        # saved widget state: nbconvert's page (formgrader, feedback) loads a widget manager for
        # it, which would run the JavaScript a widget model names (anywidget's _esm, say)
        nb.metadata.pop("widgets", None)
        course = _course_text(resources)
        made = resources.get("autograder", {}).get(PLAN)
        judged = made.graded if made else {}  # their outputs are the judge's
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "code" and i not in judged:
                cell.outputs = [readable(output) for output in cell.get("outputs", [])]
                for output in cell.outputs:
                    sanitize_output(output)
            elif cell.cell_type == "markdown" and cell.source not in course:
                cell.source = markdown_as_html(cell)
                cell.pop("attachments", None)  # now inside the HTML, as data: images
            elif cell.cell_type == "raw" and cell.source not in course:
                cell.source = clean(cell.source)
        return nb, resources
