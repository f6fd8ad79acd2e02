"""pipeline/sanitize.py: nothing a learner wrote or displayed runs in a page made of the notebook.

Every vector of an XSS corpus goes into a learner's markdown cell, a learner's ``text/html``
output and a learner's raw cell; ``SanitizeOutputs`` cleans the notebook; nbconvert renders it
with nbgrader's feedback template (through ``FeedbackExporter``, as ``generate_feedback`` does;
the formgrader's template shares its cell blocks) and with the lab template (``jupyter nbconvert
--to html``). Headless Chromium opens each page, hovers and focuses every element and clicks
every link and button: no vector's ``alert`` may fire, and every URL left in the page must be
http(s), mailto, relative, or an inline PNG/JPEG/GIF image.
"""
import base64
import copy
import re
from pathlib import Path

import nbformat
import nbgrader
import pytest
from nbconvert.exporters import HTMLExporter
from nbconvert.filters.markdown_mistune import markdown2html_mistune
from nbformat.v4 import new_code_cell, new_markdown_cell, new_output, new_raw_cell

from autograder.pipeline.feedback import FeedbackExporter
from autograder.pipeline.mathml import markdown_to_html
from autograder.pipeline.plan import PLAN, Plan
from autograder.pipeline.sanitize import NOT_SHOWN, SanitizeOutputs, clean, markdown_as_html

from helpers import CHROMIUM, SOLUTIONS, chromium


ASSIGNMENT, NOTEBOOK = "00_start_here", "start_here"
FORMGRADER = Path(nbgrader.__file__).parent / "server_extensions" / "formgrader"
PLACES = {"md": 1000, "out": 2000, "raw": 3000}  # place + i names vector i in that kind of cell
DOT = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAAAAAA6fptVAAAACklEQVR4nGNgAAAAAgABSK+kcQAAAABJRU5ErkJggg=="
SAFE = f"[web](https://example.org) [next](other.ipynb) [up](#anchor) ![dot](data:image/png;base64,{DOT})"
SAFE_HTML = f'<a href="https://example.org">web</a> <a href="other.ipynb">next</a> <a href="#anchor">up</a> <img src="data:image/png;base64,{DOT}" alt="dot">'


def _entities(text: str, form: str) -> str:
    return "".join(form.format(ord(ch)) for ch in text)


def _payload(number: int) -> str:
    return f"__xss={number},alert({number})"


def vectors(js: str) -> dict[str, str]:
    """Known ways to run ``js``, by name.

    The HTML ones are from the OWASP XSS Filter Evasion Cheat Sheet
    (https://cheatsheetseries.owasp.org/cheatsheets/XSS_Filter_Evasion_Cheat_Sheet.html), ``js``
    standing for its ``alert('XSS')``; the markdown ones write a ``javascript:`` destination in
    each of CommonMark's link forms (https://spec.commonmark.org/0.31.2/: inline links and images
    6.3-6.4, autolinks 6.5, link reference definitions 4.7).
    """
    url = f"javascript:{js}"
    escaped = f"%{ord(js[0]):02X}{js[1:]}"  # a javascript: URL is percent-decoded before it runs
    page = base64.b64encode(f"<script>{js}</script>".encode()).decode()
    svg = base64.b64encode(f'<svg xmlns="http://www.w3.org/2000/svg" onload="{js}"/>'.encode()).decode()
    return {
        # OWASP: scripts and tags that carry them
        "script tag": f"<script>{js}</script>",
        "script src data": f'<SCRIPT SRC="data:text/javascript,{js}"></SCRIPT>',
        "non-alpha script": f"<SCRIPT/XSS>{js}</SCRIPT>",
        "extraneous brackets": f"<<SCRIPT>{js}//<</SCRIPT>",
        "malformed img": f'<IMG """><SCRIPT>{js}</SCRIPT>">',
        "img onerror": f'<IMG SRC=/ onerror="{js}"></img>',
        "img onmouseover": f'<IMG SRC=# onmouseover="{js}">',
        "svg onload": f"<svg/onload={js}>",
        "body onload junk": f"<BODY onload!#$%&()*~+-_.,:;?@[/|\\]^`={js}>",
        "details ontoggle": f"<details open ontoggle={js}><summary>x</summary></details>",
        "input autofocus": f"<input onfocus={js} autofocus>",
        "video source onerror": f"<video><source onerror={js}></video>",
        "iframe javascript": f'<IFRAME SRC="{url}"></IFRAME>',
        "iframe srcdoc": f'<iframe srcdoc="&lt;script&gt;parent.{js}&lt;/script&gt;"></iframe>',
        "object data": f'<OBJECT TYPE="text/html" DATA="data:text/html;base64,{page}"></OBJECT>',
        "embed src": f'<EMBED SRC="data:text/html;base64,{page}"></EMBED>',
        "meta refresh": f'<META HTTP-EQUIV="refresh" CONTENT="0;url={url}">',
        "base href": f'<BASE HREF="{url}//"><a href="x">x</a>',
        "form action": f'<form action="{url}"><input type="submit" value="go"></form>',
        "button formaction": f'<form><button formaction="{url}">go</button></form>',
        "svg xlink": f'<svg><a xlink:href="{url}"><text y="20">x</text></a></svg>',
        "math href": f'<math><mi href="{url}">x</mi></math>',
        "table background": f'<TABLE BACKGROUND="{url}"><tr><td>x</td></tr></TABLE>',
        "style url": f'<DIV STYLE="background-image: url({url})">x</DIV>',
        "style tag": f'<STYLE>li {{list-style-image: url("{url}");}}</STYLE><UL><LI>x</LI></UL>',
        "img javascript": f'<IMG SRC="{url}">',
        "img svg data": f'<img src="data:image/svg+xml;base64,{svg}">',
        # OWASP: a javascript: link, its scheme disguised
        "a javascript": f'<a href="{url}">x</a>',
        "a mixed case": f'<a href="JaVaScRiPt:{js}">x</a>',
        "a decimal entities": f'<a href="{_entities("javascript:", "&#{};")}{js}">x</a>',
        "a padded decimal": f'<a href="{_entities("javascript:", "&#{:07d}")}{js}">x</a>',
        "a hex entities": f'<a href="{_entities("javascript:", "&#x{:X}")}{js}">x</a>',
        "a named colon": f'<a href="javascript&colon;{js}">x</a>',
        "a tab": f'<a href="jav\tascript:{js}">x</a>',
        "a encoded tab": f'<a href="jav&#x09;ascript:{js}">x</a>',
        "a encoded newline": f'<a href="jav&#x0A;ascript:{js}">x</a>',
        "a encoded return": f'<a href="jav&#x0D;ascript:{js}">x</a>',
        "a null byte": f'<a href="java\0script:{js}">x</a>',
        "a leading space and meta": f'<a href=" &#14;  {url}">x</a>',
        "a control character": f'<a href="\x01{url}">x</a>',
        "a percent-encoded body": f'<a href="javascript:{escaped}">x</a>',
        "a comment newline": f'<a href="javascript://%0a{js}">x</a>',
        "a data html": f'<a href="data:text/html;base64,{page}">x</a>',
        "a vbscript": f'<a href="vbscript:{js.replace("alert", "msgbox")}">x</a>',
        "area href": f'<map name="m"><area shape="rect" coords="0,0,50,50" href="{url}"></map><img usemap="#m" src="x">',
        # CommonMark: the same destination in each link form
        "md inline link": f"[x]({url})",
        "md inline link, title": f'[x]({url} "t")',
        "md pointy destination": f"[x](<{url}>)",
        "md mixed case": f"[x](JaVaScRiPt:{js})",
        "md entity in scheme": f"[x](&#106;avascript:{js})",
        "md named colon": f"[x](javascript&colon;{js})",
        "md percent-encoded body": f"[x](javascript:{escaped})",
        "md autolink": f"<{url}>",
        "md autolink mixed case": f"<JaVaScRiPt:{js}>",
        "md reference": f"[x][r]\n\n[r]: {url}",
        "md reference, pointy and title": f'[x][r]\n\n[r]: <{url}> "t"',
        "md collapsed reference": f"[r][]\n\n[r]: {url}",
        "md image": f"![x]({url})",
        "md data link": f"[x](data:text/html;base64,{page})",
        "md vbscript": f"[x](vbscript:{js.replace('alert', 'msgbox')})",
        "md title breakout": f'![x](/y "a\\" onerror=\\"{js}")',
        "md html in label": f"[<img src=x onerror={js}>](https://example.org)",
        # TeX: a learner's formulas become MathML (mathml.py); latex2mathml alone would write
        # \text{} unescaped and keep what \href, \style and \class ask for
        "tex text html": f"$\\text{{<img src=x onerror={js}>}}$",
        "tex display text html": f"$$\\text{{<svg/onload={js}>}}$$",
        "tex href": f"$\\href{{{url}}}{{x}}$",
        "tex style": f"$\\style{{background-image: url({url})}}{{x}}$",
        "tex class": f"$\\class{{{js}}}{{x}}$",
    }


NAMES = list(vectors(_payload(0)))


def _learner_notebook():
    """The course notebook with every vector in a learner's markdown cell, output and raw cell,
    and a cell of each kind with links and an image that must stay."""
    nb = nbformat.read(SOLUTIONS / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)
    for place, base in PLACES.items():
        for i, name in enumerate(NAMES):
            vector = vectors(_payload(base + i))[name]
            if place == "md":
                cell = new_markdown_cell(vector)
            elif place == "raw":
                cell = new_raw_cell(vector, metadata={"raw_mimetype": "text/html"})
            else:
                cell = new_code_cell("display(HTML(...))", outputs=[new_output(
                    "display_data", data={"text/html": vector, "text/plain": "<HTML>"})])
            nb.cells.append(cell)
    nb.cells.append(new_markdown_cell(SAFE.replace("](", "-md](")))
    nb.cells.append(new_code_cell("display(HTML(...))", outputs=[new_output(
        "display_data", data={"text/html": SAFE_HTML.replace("</a>", "-out</a>"), "text/plain": "<HTML>"})]))
    # an image whose size metadata would open the <img> tag that the templates write unquoted
    nb.cells.append(new_code_cell("display(Image(...))", outputs=[new_output(
        "display_data", data={"image/png": "x", "text/plain": "<Image>"},
        metadata={"image/png": {"width": f"1 onerror={_payload(PLACES['out'] + 999)}"}})]))
    return nb


@pytest.fixture(scope="module")
def sanitized():
    nb = _learner_notebook()
    resources = {"nbgrader": {"assignment": ASSIGNMENT, "notebook": NOTEBOOK}, "autograder": {PLAN: Plan(b"", {})}}
    SanitizeOutputs().preprocess(nb, resources)
    return nb


def _pages(nb) -> dict[str, str]:
    """The notebook as nbgrader's feedback shows it, and as ``jupyter nbconvert --to html``."""
    feedback = FeedbackExporter(
        template_name="feedback", extra_template_basedirs=[str(FORMGRADER / "templates")],
        extra_template_paths=[str(FORMGRADER / "static" / "node_modules" / "bootstrap" / "dist" / "css")])
    scores = {"nbgrader": {"notebook": NOTEBOOK, "score": 0, "max_score": 4, "late_penalty": 0}}
    graded = copy.deepcopy(nb)
    for cell in graded.cells:
        if cell.metadata.get("nbgrader", {}).get("grade"):
            cell.metadata.nbgrader.score = 0  # as nbgrader's GetGrades puts it there
    return {"feedback": feedback.from_notebook_node(graded, scores)[0],
            "lab": HTMLExporter(template_name="lab").from_notebook_node(nb)[0]}


@pytest.fixture(scope="module")
def pages(sanitized):
    return _pages(sanitized)


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (.ci/run installs it)")
    with chromium() as browser:
        yield browser


# Everything a vector could use: hover and focus every element, click every link and button.
# A safe link is not followed (it would take the page away); any other link is.
PROVOKE = """async () => {
  document.addEventListener("click", e => {
    const a = e.target.closest && e.target.closest("a, area");
    if (a && ["http:", "https:", "file:", "mailto:"].includes(a.protocol)) e.preventDefault();
  }, true);
  const events = ["mouseover", "mouseenter", "mousemove", "mousedown", "mouseup", "pointerover",
                  "focus", "focusin", "animationstart", "toggle"];
  for (const el of document.querySelectorAll("*")) {
    for (const type of events) el.dispatchEvent(new Event(type));
    if (el.focus) el.focus();
  }
  for (const el of document.querySelectorAll("a, area, button, input, summary")) {
    el.click();
    await new Promise(r => setTimeout(r, 0));  // a javascript: URL runs in a task of its own
  }
  await new Promise(r => setTimeout(r, 300));
}"""

# What is left that could run later or elsewhere: handlers, frames, and URLs outside the
# allowed schemes, as the browser itself resolves them.
LEFT = """() => {
  const urls = ["href", "src", "action", "formaction", "xlink:href", "background", "poster",
                "data", "cite", "srcset"];
  const found = [];
  for (const el of document.querySelectorAll("iframe, frame, object, embed, base, form, meta[http-equiv]"))
    found.push(el.outerHTML.slice(0, 160));
  for (const el of document.querySelectorAll("*")) {
    for (const {name, value} of el.attributes) {
      let bad = name.startsWith("on") || name === "srcdoc";
      if (urls.includes(name)) {
        let scheme = "";
        try { scheme = new URL(value, document.baseURI).protocol } catch (e) { continue }
        const image = el.tagName === "IMG" && name === "src" && /^data:image\\/(png|jpeg|gif)[;,]/i.test(value);
        bad = bad || !(["http:", "https:", "mailto:", "file:"].includes(scheme) || image);
      }
      if (bad) found.push(`${el.tagName} ${name}=${value.slice(0, 120)}`);
    }
  }
  return found;
}"""


def _visit(browser, html: str, path: Path):
    """Open ``html`` from a file, provoke it; the alerts that fired, what is left (above) and
    the last ``window.__xss`` a vector set."""
    path.write_text(html, encoding="utf-8")
    page = browser.new_page()
    alerts = []
    page.on("dialog", lambda d: (alerts.append(d.message), d.dismiss()))
    page.route(re.compile(r"^https?://"), lambda route: route.abort())  # no network: CDN scripts
    try:
        page.goto(path.as_uri(), wait_until="load")
        left = page.evaluate(LEFT)
        page.evaluate(PROVOKE)
        assert page.url == path.as_uri(), f"a vector took the page to {page.url}"
        ran = page.evaluate("window.__xss")
    finally:
        page.close()
    return alerts, left, ran


def _named(number: int) -> str:
    """``1007``: vector 7 in a markdown cell."""
    place = max((p for p, base in PLACES.items() if number >= base), key=PLACES.get)
    i = number - PLACES[place]
    return f"{place}: {NAMES[i]}" if i < len(NAMES) else f"{place}: image size metadata"


def _number(what: str) -> int:
    """The vector's number in what was left of it (in its base64 page, if that is all)."""
    for text in (what, *(base64.b64decode(b + "==").decode(errors="replace")
                         for b in re.findall(r"base64,([A-Za-z0-9+/]+)", what))):
        if found := re.search(r"\((\d{4})\)", text):
            return int(found[1])
    raise AssertionError(f"a vector the corpus does not name: {what}")


@pytest.mark.parametrize("template", ["feedback", "lab"])
def test_no_learner_vector_runs_or_leaves_a_live_url(pages, browser, template, tmp_path):
    alerts, left, ran = _visit(browser, pages[template], tmp_path / f"{template}.html")
    through = sorted({_named(int(a)) for a in alerts} | {_named(_number(what)) for what in left})
    assert not alerts and not left and ran is None, (
        f"{len(through)} vectors got through in the {template} page, {len(alerts)} ran "
        f"(window.__xss = {ran}):\n" + "\n".join(through) + "\n\nleft:\n" + "\n".join(left))


def test_the_corpus_is_large_enough():
    assert len(NAMES) >= 30


def test_safe_links_and_images_survive(pages):
    for template, html in pages.items():
        for place in ("md", "out"):
            for href, text in (("https://example.org", "web"), ("other.ipynb", "next"), ("#anchor", "up")):
                assert re.search(f'<a href="{re.escape(href)}"[^>]*>{text}-{place}</a>', html), (template, href, place)
        assert html.count(f'src="data:image/png;base64,{DOT}"') == 2, template


def test_a_learners_image_makes_the_page_load_nothing_from_elsewhere():
    """No tracking pixel, no GET to the formgrader's server as the page opens: only an inline
    image keeps its source; the others keep their alt text."""
    away = ["https://tracker.example/p.png", "//tracker.example/p.gif", "/formgrader/api/x",
            "other.png", " HTTPS://tracker.example/p.png", "data:image/svg+xml,<svg/>"]
    for url in away:
        for html in (markdown_as_html(new_markdown_cell(f"![pixel-{len(url)}]({url})")),
                     clean(f'<img src="{url}" alt="pixel-{len(url)}">')):
            assert "src=" not in html and f'alt="pixel-{len(url)}"' in html, html
    inline = f"data:image/png;base64,{DOT}"
    assert f'src="{inline}"' in clean(f'<img src="{inline}">')


def test_the_courses_own_cells_are_left_as_they_are(sanitized):
    course = nbformat.read(SOLUTIONS / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)
    markdown = [c for c in course.cells if c.cell_type == "markdown"]
    assert markdown and [c for c in sanitized.cells[:len(course.cells)] if c.cell_type == "markdown"] == markdown


def test_a_learners_markdown_is_kept_as_the_html_the_page_shows(sanitized):
    course = nbformat.read(SOLUTIONS / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)
    learner = [c for c in sanitized.cells[len(course.cells):] if c.cell_type == "markdown"]
    assert len(learner) == len(NAMES) + 1
    for cell in learner:
        assert cell.source != NOT_SHOWN
        for render in (markdown2html_mistune, markdown_to_html):  # the formgrader's, the report's
            assert render(cell.source).strip() == cell.source


def test_a_learners_formulas_are_kept_as_mathml():
    html = markdown_as_html(new_markdown_cell(r"$\sqrt{d_k}$ and $$x < \text{<b>y</b>}$$ and $x^$"))
    assert html.count("<math") == 2 and "<msqrt>" in html and "&lt;b&gt;y&lt;/b&gt;" in html
    assert "<code>$x^$</code>" in html  # what latex2mathml cannot read is shown as TeX


def test_a_markdown_cell_the_renderer_refuses_is_shown_as_text():
    cell = new_markdown_cell("![me](attachment:gone.png) <b>hi</b>")  # nbconvert raises: no attachment
    assert markdown_as_html(cell) == "<div><pre>![me](attachment:gone.png) &lt;b&gt;hi&lt;/b&gt;</pre></div>"


def test_a_learners_mermaid_is_never_rendered():
    """nbconvert renders mermaid diagrams (a ``text/vnd.mermaid`` output, a ```mermaid fence in
    markdown) with a script of its page; a learner's must stay text until that is known safe."""
    from autograder.pipeline.sanitize import sanitize_output

    output = new_output("display_data", data={"text/vnd.mermaid": "graph TD; A-->B", "text/plain": "A->B"})
    sanitize_output(output)
    assert output["data"] == {"text/plain": "A->B"}
    alone = new_output("display_data", data={"text/vnd.mermaid": "graph TD; A-->B"})
    sanitize_output(alone)
    assert list(alone["data"]) == ["text/plain"] and "text/vnd.mermaid" in alone["data"]["text/plain"]
    html = markdown_as_html(new_markdown_cell("```mermaid\ngraph TD; A-->B\n```"))
    assert "graph TD" in html and "class=" not in html and "<script" not in html  # text, no hook


# --- outputs the pages cannot show as they are -----------------------------------------------
ABSURD = {  # outputs nbformat.from_dict makes without checking them, as nbclient can
    "a stream named as a tag": {"output_type": "stream", "name": "<b>", "text": "x"},
    "text that is numbers": {"output_type": "display_data", "data": {"text/plain": [1, 2]}, "metadata": {}},
    "HTML that is a mapping": {"output_type": "display_data", "data": {"text/html": {"a": 1}}, "metadata": {}},
    "an output type of its own": {"output_type": "widget", "data": {}},
    "metadata that is not finite": {"output_type": "display_data", "data": {"text/plain": "x"},
                                    "metadata": {"image/png": {"width": float("inf")}}},
    "a traceback that is text": {"output_type": "error", "ename": "E", "evalue": "v", "traceback": "t"},
}


def test_an_ungraded_cells_absurd_output_is_a_line_saying_it_was_dropped():
    nb = nbformat.read(SOLUTIONS / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)
    nb.cells.append(new_code_cell("print('kept')", outputs=[new_output("stream", name="stdout", text="kept")]))
    cell = new_code_cell("send(...)", execution_count=1)
    cell.outputs = [nbformat.from_dict(o) for o in ABSURD.values()]
    nb.cells.append(cell)
    resources = {"nbgrader": {"assignment": ASSIGNMENT, "notebook": NOTEBOOK}, "autograder": {PLAN: Plan(b"", {})}}
    SanitizeOutputs().preprocess(nb, resources)
    assert [o.name for o in cell.outputs] == ["stderr"] * len(ABSURD)
    assert all("could not show was dropped" in o.text for o in cell.outputs), cell.outputs
    assert nb.cells[-2].outputs[0].text == "kept"
    nbformat.validate(nb)
