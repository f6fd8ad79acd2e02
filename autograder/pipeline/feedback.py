"""nbgrader's HTML feedback, without paying again for what every learner's report shares. [trusted]

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
cells) ``FeedbackExporter`` adds the same ``alt`` text with one regular expression. The
report is the one nbgrader writes, but for how BeautifulSoup re-serialises the markup.
"""
from __future__ import annotations

import re

from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter

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


class FeedbackExporter(HTMLExporter):
    """An ``HTMLExporter`` whose template environment and markdown renderings are shared."""

    def _key(self) -> tuple:
        return (self.template_name, tuple(self.template_paths), self.embed_images,
                self.anchor_link_text, self.exclude_anchor_links, self.sanitize_html)

    def _create_environment(self):
        key = self._key()
        if key not in _environments:
            _environments[key] = super()._create_environment()
        return _environments[key]

    @pass_context
    def markdown2html(self, context, source):
        cell = context.get("cell", {})
        if cell.get("attachments"):  # rendered with the cell's own images: not shared
            return super().markdown2html(context, source)
        path = context.get("resources", {}).get("metadata", {}).get("path", "")
        key = (self._key(), path, source)
        if key not in _markdown:
            if len(_markdown) >= MARKDOWN_CACHE:
                _markdown.clear()
            _markdown[key] = super().markdown2html(context, source)
        return _markdown[key]

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
