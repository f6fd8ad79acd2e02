"""Markdown to HTML with every formula typeset as MathML, so a report needs no MathJax. [trusted]

nbconvert leaves a markdown cell's formulas (``$...$``, ``$$...$$``, ``\\(...\\)``,
``\\[...\\]``, ``\\begin{env}...\\end{env}``) as TeX for MathJax, which its pages load from a
CDN: offline, the learner's feedback report showed raw TeX. ``markdown_to_html`` renders
markdown as nbconvert does (mistune with nbconvert's math parser) but writes each formula as
MathML, made here by latex2mathml, which the browser lays out itself (MathML Core: Chromium
109+, Firefox, Safari). Nothing is loaded, and the page is the same from disk or from a server.

latex2mathml's own serialiser writes text unescaped (``\\text{<b>}`` becomes a tag) and keeps
what ``\\href``, ``\\style`` and ``\\class`` ask for, so its element tree is written out here
instead: the elements of ``TAGS`` only (any other becomes an ``mrow``), the presentational
attributes of ``ATTRIBUTES`` only, all text escaped. A learner's formulas come through here too
(``sanitize.py``), whose cleaner then allows exactly these elements and attributes. A formula
latex2mathml cannot read is shown as its TeX source, in ``<code>``.
"""
from __future__ import annotations

import functools
import re
from html import escape
from xml.etree.ElementTree import Element

from latex2mathml.converter import convert_to_element
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

TAGS = frozenset({
    "math", "mrow", "mi", "mn", "mo", "ms", "mtext", "mspace", "msub", "msup", "msubsup",
    "mfrac", "msqrt", "mroot", "mover", "munder", "munderover", "mtable", "mtr", "mtd",
    "mstyle", "mpadded", "mphantom", "menclose"})
# layout only: no href, style, class or id, nothing that names a URL or a script
ATTRIBUTES = frozenset({
    "display", "mathvariant", "mathsize", "mathcolor", "mathbackground", "stretchy", "fence",
    "form", "separator", "largeop", "movablelimits", "accent", "accentunder", "minsize",
    "maxsize", "symmetric", "lspace", "rspace", "width", "height", "depth", "voffset",
    "linethickness", "displaystyle", "scriptlevel", "columnalign", "rowalign", "columnspacing",
    "rowspacing", "columnlines", "rowlines", "frame", "notation"})
CHARACTER_REFERENCE = re.compile(r"&#x([0-9A-Fa-f]{1,6});")  # how latex2mathml writes a symbol
TEXT_ESCAPE = re.compile(r"\\([_%#$&{}])")  # \text{vocab\_size} means vocab_size


def _characters(text: str | None) -> str:
    """latex2mathml's text with its ``&#x2202;`` references made the characters they stand for."""
    return CHARACTER_REFERENCE.sub(
        lambda m: chr(int(m[1], 16)) if int(m[1], 16) <= 0x10FFFF else m[0], text or "")


def _write(element: Element) -> str:
    """One element of latex2mathml's tree as HTML, allowed names only, text escaped."""
    tag = element.tag if element.tag in TAGS else "mrow"
    attributes = "".join(f' {name}="{escape(value)}"' for name, value in sorted(element.attrib.items())
                         if name in ATTRIBUTES)
    text = _characters(element.text)
    if tag == "mtext":
        text = TEXT_ESCAPE.sub(r"\1", text)
    inner = escape(text, quote=False) + "".join(
        _write(child) + escape(_characters(child.tail), quote=False) for child in element)
    return f"<{tag}{attributes}>{inner}</{tag}>"


@functools.lru_cache(maxsize=4096)
def tex_to_mathml(tex: str, display: bool) -> str:
    """``\\sqrt{d_k}`` -> ``<math display="inline"><mrow><msqrt>...</msqrt></mrow></math>``;
    a formula latex2mathml cannot read -> its TeX, delimited, in ``<code>``."""
    try:
        return _write(convert_to_element(tex, display="block" if display else "inline"))
    except Exception:  # latex2mathml raises many kinds (a missing superscript, say): show the TeX
        fence = "$$" if display else "$"
        return f"<code>{escape(fence + tex + fence, quote=False)}</code>"


class MathMLRenderer(IPythonRenderer):
    """nbconvert's markdown renderer, with formulas written as MathML rather than left to MathJax."""

    def block_math(self, body: str) -> str:
        return tex_to_mathml(body, display=True)

    def inline_math(self, body: str) -> str:
        return tex_to_mathml(body, display=False)

    def latex_environment(self, name: str, body: str) -> str:
        return tex_to_mathml(f"\\begin{{{name}}}{body}\\end{{{name}}}", display=True)


def markdown_to_html(source: str, **options) -> str:
    """``source`` as nbconvert's ``markdown2html`` renders it (``options``: ``IPythonRenderer``'s),
    formulas as MathML."""
    return MarkdownWithMath(renderer=MathMLRenderer(escape=False, **options)).render(source)
