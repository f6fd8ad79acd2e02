"""nbgrader's HTML feedback, offline, without paying again for what every report shares. [trusted]

``nbgrader generate_feedback`` builds a new nbconvert ``HTMLExporter`` for every run: it
finds and compiles the feedback template again and renders every markdown cell of the
notebook again, though the course's markdown is the same in every submission. In a grading
worker that renders hundreds of reports, ``FeedbackExporter`` (set as
``GenerateFeedback.exporter_class``) keeps both: one compiled template environment per
worker, and the HTML of each markdown source and of each code cell's highlighted source
already rendered.

nbconvert then parses the whole page with BeautifulSoup to give images without one an
``alt`` text (and, in the lab template only, to make cells focusable); on notebook 02 that
pass costs more than rendering the page. For nbgrader's feedback template (classic, no lab
cells) ``FeedbackExporter`` adds the same ``alt`` text with one regular expression.

The report is the one nbgrader writes, but for how BeautifulSoup re-serialises the markup,
and for what makes it read offline and name every exercise:

- formulas are MathML, typeset here (``mathml.py``), and the page loads no MathJax (nbgrader's
  template loads it from a CDN: offline, every formula showed as raw TeX);
- the page is ``feedback_template/index.html.j2``: nbgrader's, with a summary that names each
  exercise (``report.py`` says which), found before nbgrader's through ``extra_loaders``.
"""
from __future__ import annotations

import re
from pathlib import Path

import nbgrader
from jinja2 import FileSystemLoader, PrefixLoader
from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter
from traitlets import default

from autograder.pipeline.mathml import markdown_to_html

try:
    from jinja2 import pass_context
except ImportError:  # jinja2 < 3
    from jinja2 import contextfilter as pass_context

_environments: dict[tuple, object] = {}
_markdown: dict[tuple, str] = {}
_highlighted: dict[tuple, str] = {}
MARKDOWN_CACHE = 4096  # distinct markdown sources kept (a course notebook has ~100)
IMG_WITHOUT_ALT = re.compile(r"<img(?![^>]*\salt=)", re.I)
NO_ALT = '<img alt="No description has been provided for this image"'
TEMPLATE = Path(__file__).resolve().parent / "feedback_template"
# a base directory of nbconvert templates whose base/mathjax.html.j2 loads nothing (config.py)
OFFLINE_TEMPLATES = Path(__file__).resolve().parent / "offline_template"
NBGRADER_TEMPLATES = Path(nbgrader.__file__).resolve().parent / "server_extensions/formgrader/templates"


class FeedbackExporter(HTMLExporter):
    """An ``HTMLExporter`` whose template environment and markdown renderings are shared, whose
    formulas are MathML, and whose feedback page is the course's (see the module doc)."""

    def _key(self) -> tuple:
        return (self.template_name, tuple(self.template_paths), self.embed_images,
                self.anchor_link_text, self.exclude_anchor_links, self.sanitize_html)

    @default("extra_loaders")
    def _course_template(self):
        if self.template_name != "feedback":
            return []
        # ours first: its index.html.j2 (which extends nbgrader's, as "nbgrader/feedback/...")
        # and the mathjax.html.j2 whose macro loads nothing, for the one nbgrader's page calls
        return [FileSystemLoader([str(TEMPLATE), str(OFFLINE_TEMPLATES / "base")]),
                PrefixLoader({"nbgrader": FileSystemLoader(str(NBGRADER_TEMPLATES))})]

    def _create_environment(self):
        key = self._key()
        if key not in _environments:
            _environments[key] = super()._create_environment()
        return _environments[key]

    @pass_context
    def markdown2html(self, context, source):
        cell = context.get("cell", {})
        path = context.get("resources", {}).get("metadata", {}).get("path", "")
        if cell.get("attachments"):  # rendered with the cell's own images: not shared
            return self._render(source, path, cell.attachments)
        key = (self._key(), path, source)
        if key not in _markdown:
            if len(_markdown) >= MARKDOWN_CACHE:
                _markdown.clear()
            _markdown[key] = self._render(source, path, {})
        return _markdown[key]

    def _render(self, source: str, path: str, attachments: dict) -> str:
        """``HTMLExporter.markdown2html``, with its options, but formulas as MathML."""
        return markdown_to_html(source, attachments=attachments, embed_images=self.embed_images,
                                path=path, anchor_link_text=self.anchor_link_text,
                                exclude_anchor_links=self.exclude_anchor_links, **self.lexer_options)

    def from_notebook_node(self, nb, resources=None, **kw):
        """``HTMLExporter.from_notebook_node`` with the BeautifulSoup pass done as above."""
        if self.template_name != "feedback":
            return super().from_notebook_node(nb, resources, **kw)
        langinfo = nb.metadata.get("language_info", {})
        lexer = langinfo.get("pygments_lexer", langinfo.get("name", None))
        self.register_filter("highlight_code", _SharedHighlight(self.filters.get(
            "highlight_code", Highlight2HTML(pygments_lexer=lexer, parent=self)), lexer))
        resources = self._init_resources(resources)
        self.register_filter("filter_data_type", WidgetsDataTypeFilter(
            notebook_metadata=self._nb_metadata, parent=self, resources=resources))
        html, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
        return IMG_WITHOUT_ALT.sub(NO_ALT, html), resources


class _SharedHighlight:
    """The highlighting filter, remembering what it made for each (lexer, source)."""

    def __init__(self, highlight, lexer):
        self.highlight, self.lexer = highlight, lexer

    def __call__(self, source, language=None, metadata=None):
        if metadata:  # cell-specific options: not shared
            return self.highlight(source, language, metadata)
        key = (self.lexer, language, source)
        if key not in _highlighted:
            if len(_highlighted) >= MARKDOWN_CACHE:
                _highlighted.clear()
            _highlighted[key] = self.highlight(source, language, metadata)
        return _highlighted[key]
