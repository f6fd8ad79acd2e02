"""pipeline/mathml.py: every formula of the course comes out as MathML, and MathML made from a
learner's TeX carries nothing but layout."""
import re

import nbformat

from autograder.pipeline.mathml import MathMLRenderer, markdown_to_html, tex_to_mathml
from nbconvert.filters.markdown_mistune import MarkdownWithMath

from helpers import SOLUTIONS

MARKDOWN = [(path.relative_to(SOLUTIONS).as_posix(), i, cell.source)
            for path in sorted(SOLUTIONS.glob("*/*.ipynb"))
            for i, cell in enumerate(nbformat.read(path, as_version=4).cells) if cell.cell_type == "markdown"]


def _formulas(source: str) -> list[tuple[str, bool]]:
    """(TeX, display) of every formula nbconvert's parser finds in ``source``."""
    found = []

    class Recorder(MathMLRenderer):
        def block_math(self, body):
            found.append((body, True))
            return super().block_math(body)

        def inline_math(self, body):
            found.append((body, False))
            return super().inline_math(body)

        def latex_environment(self, name, body):
            found.append((f"\\begin{{{name}}}{body}\\end{{{name}}}", True))
            return super().latex_environment(name, body)

    MarkdownWithMath(renderer=Recorder(escape=False)).render(source)
    return found


def _text(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html)


def test_every_formula_of_every_course_notebook_is_typeset():
    formulas = [(where, i, tex, display) for where, i, source in MARKDOWN for tex, display in _formulas(source)]
    assert len(formulas) > 900  # the course writes about 950
    failed = [(where, i, tex) for where, i, tex, display in formulas
              if not tex_to_mathml(tex, display).startswith("<math")]
    assert not failed, f"latex2mathml cannot read {len(failed)} formulas: {failed[:5]}"
    # a command latex2mathml does not know is written out as text (<mi>\foo</mi>)
    unknown = [(where, i, tex) for where, i, tex, display in formulas if "\\" in _text(tex_to_mathml(tex, display))]
    assert not unknown, unknown[:5]


def test_no_tex_is_left_in_any_course_markdown_cell():
    left = []
    for where, i, source in MARKDOWN:
        html = markdown_to_html(source)
        delimiters = [d for d in ("$", "\\(", "\\[", "\\begin") if d in _text(html)]
        if delimiters or html.count("<math") != len(_formulas(source)):
            left.append(f"{where}, cell {i}: {delimiters} in {_text(html)[:200]!r}")
    assert not left, "\n".join(left)


def test_text_is_escaped_and_only_layout_attributes_are_kept():
    assert tex_to_mathml(r"\text{<img src=x onerror=alert(1)>} < b", False) == (
        '<math display="inline"><mrow><mtext>&lt;img\xa0src=x\xa0onerror=alert(1)&gt;</mtext>'
        "<mo>&lt;</mo><mi>b</mi></mrow></math>")
    for tex in (r"\href{javascript:alert(1)}{x}", r"\style{color:red}{x}", r"\class{c}{x}"):
        assert not re.search(r"href|style|class|javascript", tex_to_mathml(tex, False)), tex


def test_escaped_characters_in_text_are_the_characters():
    assert "<mtext>vocab_size</mtext>" in tex_to_mathml(r"\text{vocab\_size}", False)


def test_a_formula_latex2mathml_cannot_read_is_shown_as_its_tex():
    assert tex_to_mathml("x^", False) == "<code>$x^$</code>"
    assert tex_to_mathml("a < b^", True) == "<code>$$a &lt; b^$$</code>"


def test_markdown_around_the_formulas_is_nbconverts():
    assert markdown_to_html("# Title\n\n**bold** $\\sqrt{2}$", exclude_anchor_links=True) == (
        '<h1>Title</h1>\n<p><strong>bold</strong> <math display="inline"><mrow><msqrt><mrow><mn>2</mn>'
        "</mrow></msqrt></mrow></math></p>\n")
