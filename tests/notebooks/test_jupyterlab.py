"""The course in a real JupyterLab, driven by headless Chromium: the attention explorer of
notebook 02 draws and answers clicks and hovering, in Lab and in its saved pages opened with
the network off (screenshots in $EXPLORER_ARTIFACTS); the explorers of notebooks 02, 05 and 06
fit their output areas in every view at 1280 px; the learner's Lab validates with the grader
and shows none of nbgrader's instructor tools.

Needs Debian's chromium (.ci/run installs it) and the playwright package (dev extra).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from autograder.lab import INSTRUCTOR_LAB_PLUGINS, instructor_mode
from autograder.pipeline.sandbox import ISOLATION_ENV
from helpers import CHROMIUM, NOTEBOOKS, SOLUTIONS, OPEN_LAB, chromium, jupyter_server

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                reason="Debian's chromium is not installed (.ci/run installs it)")

@contextmanager
def _jupyter_lab(root: Path, **env):
    """JupyterLab serving ``root`` with this environment's extensions, as a learner starts it.

    The Validate button grades in a child process that inherits the environment: under CI
    (AUTOGRADER_ISOLATION=required) it must grade in the sandbox, as a learner's does.
    ``env``: more variables for the server and its kernels (e.g. COURSE_MODE).
    """
    with jupyter_server("lab", root, *OPEN_LAB, "--ServerApp.disable_check_xsrf=True",
                        env={"JUPYTER_CONFIG_DIR": str(root / ".jupyter"),
                             ISOLATION_ENV: os.environ.get(ISOLATION_ENV, "auto"), **env}) as url:
        yield url


def _kernel_is_idle(lab):
    """True once the server runs a kernel for the notebook and that kernel is idle."""
    with urllib.request.urlopen(lab + "/api/sessions", timeout=5) as reply:
        sessions = json.load(reply)
    return any(s["kernel"]["execution_state"] == "idle" for s in sessions)


# JupyterLab shows a cell's exception as stderr text (not as the error's own mime type)
STDERR = '.jp-RenderedText[data-mime-type="application/vnd.jupyter.stderr"]'


def _shut_down_kernels(lab):
    with urllib.request.urlopen(lab + "/api/kernels", timeout=5) as reply:
        kernels = json.load(reply)
    for kernel in kernels:
        urllib.request.urlopen(urllib.request.Request(f"{lab}/api/kernels/{kernel['id']}", method="DELETE"),
                               timeout=30)


def _what_lab_shows(page, lab, console):
    """Why the explorers were not drawn, as far as the page and the server can tell."""
    with urllib.request.urlopen(lab + "/api/sessions", timeout=5) as reply:
        sessions = [(s["path"], s["kernel"]["execution_state"]) for s in json.load(reply)]
    dialogs = page.locator(".jp-Dialog").all_inner_texts()
    return (f"explorers drawn: {page.locator('.ax-root[data-draws]').count()} of "
            f"{page.locator('.ax-root').count()} on the page; widget outputs: "
            f"{page.locator('.jp-OutputArea-output').count()}; dialogs: {dialogs}; sessions: {sessions}; "
            "console:\n" + "\n".join(console[-30:]))


def _run_all_cells(page, lab):
    """Run > Run All Cells, again if the page dropped it (pressed before the kernel connected).

    A busy machine can start the kernel after JupyterLab's indicator already reads idle; the
    cells then keep their empty prompt `[ ]:` and never run.
    """
    deadline = time.monotonic() + 120
    while not _kernel_is_idle(lab):
        assert time.monotonic() < deadline, "the kernel did not start within 120 s"
        time.sleep(0.5)
    prompt = page.locator(".jp-Notebook .jp-CodeCell").first.locator(".jp-InputPrompt")
    while time.monotonic() < deadline:
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^Run$")).click()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile("^Run All Cells$")).click()
        try:
            page.wait_for_function("el => el.textContent.trim() !== '[ ]:'",
                                   arg=prompt.element_handle(), timeout=10_000)
            return
        except PlaywrightTimeout:
            page.keyboard.press("Escape")
    raise AssertionError("Run All Cells never started the first cell")


# --- the attention explorer: notebook 02 in JupyterLab, and its saved pages offline --------

SOLUTION_02 = SOLUTIONS / "02_attention" / "attention.ipynb"
GPT_CELL = '''\
# added by the browser test: a course GPT with random weights large enough for sharp heads
import torch
from course_lib.explorer import explore
from course_lib.tokenize import CharTokenizer
from course_lib.transformer import GPT, GPTConfig

torch.manual_seed(0)
text = "To be, or not to be, that is the question"
tok = CharTokenizer.from_text(text)
gpt = GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=64, d_model=32, n_heads=4, n_layers=3))
for weight in (p for p in gpt.parameters() if p.dim() == 2):
    torch.nn.init.normal_(weight, std=0.4)
gpt_explorer = explore(gpt, text, tok)
gpt_explorer.save_html("gpt_explorer.html")
gpt_explorer'''


@pytest.fixture
def artifacts(tmp_path):
    """Where the screenshots go: $EXPLORER_ARTIFACTS (kept by CI), else the test's tmp folder."""
    folder = Path(os.environ.get("EXPLORER_ARTIFACTS") or tmp_path / "artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def lab_02(tmp_path):
    """JupyterLab on a copy of notebook 02 (solved, without its submit cell) with one more
    cell at the end: the explorer of a small GPT, which also saves itself as a page."""
    nb = nbformat.read(SOLUTION_02, as_version=4)
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") != "submit"]
    nb.cells.append(new_code_cell(GPT_CELL))
    nbformat.write(nb, tmp_path / "attention.ipynb")
    with _jupyter_lab(tmp_path, COURSE_MODE="ci") as url:
        yield url, tmp_path


class Explorer:
    """One explorer on a page, driven like a person would, checked from its canvas."""

    def __init__(self, page, root):
        self.page, self.root, self.canvas = page, root, root.locator("canvas")

    def data(self, key):
        return self.root.get_attribute(f"data-{key}")

    def layout(self):
        return json.loads(self.data("layout"))

    def picture(self):
        return self.canvas.evaluate("c => c.toDataURL()")

    def changes(self, action, **expected):
        """Do ``action``; wait for the redraw; the state is ``expected`` and the pixels changed."""
        before, draws = self.picture(), self.data("draws")
        action()
        self.page.wait_for_function("([el, n]) => el.dataset.draws !== n",
                                    arg=[self.root.element_handle(), draws], timeout=30_000)
        for key, value in expected.items():
            self.page.wait_for_function("([el, k, v]) => el.dataset[k] === v",
                                        arg=[self.root.element_handle(), key, str(value)], timeout=30_000)
        assert self.picture() != before, f"the drawing did not change after {expected or action}"

    def button(self, name):
        return lambda: self.root.locator("button", has_text=name).click()

    def select(self, which, value):
        return lambda: self.root.locator(f"select.ax-{which}").select_option(str(value))

    def hover_token(self, side, index):
        lay = self.layout()
        x = 14 if side == "q" else lay["width"] - 14
        return lambda: self.canvas.hover(position={"x": x, "y": lay["top"] + (index + 0.5) * lay["row"]})

    def click_tile(self, layer, head):
        lay = self.layout()
        return lambda: self.canvas.click(position={"x": lay["left"] + head * lay["step"] + lay["tile"] / 2,
                                                   "y": lay["top"] + layer * lay["step"] + lay["tile"] / 2})

    def timings(self):
        return {key: self.data(key) for key in ("latency-ms", "frame-ms", "draw-ms")}


def _explore_toy(ex, shots, name):
    """Notebook 02's hand-set heads: kinds, head, query, hover, the model view and back."""
    assert ex.data("view") == "head" and ex.data("kind") == "self"
    ex.changes(ex.button("cross"), kind="cross")
    ex.changes(ex.select("head", 1), head=1)
    ex.changes(ex.select("query", 4), query=4)
    ex.changes(ex.hover_token("q", 2), hover='{"side":"q","index":2}')
    ex.changes(ex.hover_token("k", 0), hover='{"side":"k","index":0}')
    ex.root.screenshot(path=str(shots / f"{name}-head-view-hover.png"))
    ex.changes(ex.button("causal"), kind="causal")
    ex.changes(ex.button("model view"), view="model")
    ex.root.screenshot(path=str(shots / f"{name}-model-view.png"))
    ex.changes(ex.click_tile(0, 0), view="head", layer=0, head=0)
    ex.changes(ex.button("query–key view"), view="qk")  # the hand-set heads' own q and k
    ex.changes(ex.select("query", 2), query=2)
    assert "no queries and keys" not in ex.root.inner_text()
    ex.root.screenshot(path=str(shots / f"{name}-query-key-view.png"))


def _explore_gpt(ex, shots, name):
    """The GPT: layers, heads, all heads, query tokens, hover, model view, query-key view."""
    ex.changes(ex.select("layer", 2), layer=2)
    ex.changes(ex.select("head", 3), head=3)
    ex.changes(ex.select("query", 20), query=20)
    ex.changes(ex.hover_token("k", 5), hover='{"side":"k","index":5}')
    ex.changes(ex.select("head", -1), head=-1)
    ex.root.screenshot(path=str(shots / f"{name}-all-heads.png"))
    ex.changes(ex.button("model view"), view="model")
    ex.changes(ex.click_tile(1, 2), view="head", layer=1, head=2)
    ex.changes(ex.button("model view"), view="model")
    ex.root.screenshot(path=str(shots / f"{name}-model-view.png"))
    ex.changes(ex.button("query–key view"), view="qk")
    ex.changes(ex.select("query", 30), query=30)
    ex.changes(ex.select("layer", 0), layer=0)
    ex.root.screenshot(path=str(shots / f"{name}-query-key-view.png"))
    return ex.timings()


def _offline_page(browser, path: Path, shots, name):
    """Open a saved page with the network off; every explorer on it draws and answers, and
    nothing on it asks the network for anything but what the page names itself (nbconvert's
    template loads MathJax from a CDN; the explorer's own HTML names no address at all)."""
    named = set(re.findall(r"https?://[^\s\"'<>]+", path.read_text()))
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, offline=True)
    requests, errors = [], []
    context.on("request", lambda r: requests.append(r.url))
    page = context.new_page()
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(path.as_uri())
        roots = page.locator(".ax-root")
        roots.first.wait_for(timeout=60_000)
        count = roots.count()
        _explore_gpt(Explorer(page, roots.nth(count - 1)), shots, name)
        if count > 1:
            _explore_toy(Explorer(page, roots.first), shots, name + "-toy")
        page.screenshot(path=str(shots / f"{name}.png"), full_page=True)
    finally:
        context.close()
    assert not errors, errors
    assert all(url.startswith(("file:", "blob:", "data:")) or url in named for url in requests), requests
    return count


def test_attention_explorer_in_jupyterlab_and_offline(lab_02, artifacts):
    url, root = lab_02
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{url}/lab/tree/attention.ipynb")
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
        try:
            _run_all_cells(page, url)
            page.wait_for_function(  # both explorers drawn, or a cell failed
                "() => document.querySelectorAll('.ax-root[data-draws]').length >= 2"
                f" || [...document.querySelectorAll('{STDERR}')].some(e => e.textContent.includes('Traceback'))",
                timeout=300_000)
            errors = page.locator(STDERR, has_text="Traceback")
            assert errors.count() == 0, errors.first.inner_text()
            roots = page.locator(".ax-root")
            assert roots.count() == 2
            _explore_toy(Explorer(page, roots.nth(0)), artifacts, "lab-02")
            timings = _explore_gpt(Explorer(page, roots.nth(1)), artifacts, "lab-gpt")
            (artifacts / "lab-timings.json").write_text(json.dumps(timings))
            # the clicks reached the kernel: the widget's traits there say what the page shows
            cells = page.locator(".jp-Notebook .jp-CodeCell")
            n = cells.count()
            cells.last.locator(".jp-InputArea-editor").click()
            page.keyboard.press("Escape")
            page.keyboard.press("b")  # a new cell below
            page.keyboard.press("Enter")
            page.keyboard.insert_text("g = gpt_explorer; f'{g.view} {g.kind} {g.layer} {g.head} {g.query}'")
            page.keyboard.press("Shift+Enter")
            answer = cells.nth(n).locator(".jp-OutputArea-output")  # (Shift+Enter adds one more cell)
            answer.wait_for(timeout=60_000)
            assert answer.inner_text().strip() == "'qk self 0 2 30'"
            page.keyboard.press("Control+s")
            deadline = time.monotonic() + 60
            while "qk self 0 2 30" not in (root / "attention.ipynb").read_text():  # the server wrote it
                assert time.monotonic() < deadline, "the notebook was not saved within 60 s"
                time.sleep(0.5)
            saved = nbformat.read(root / "attention.ipynb", as_version=4)
            shown = [o.data for c in saved.cells if c.cell_type == "code" for o in c.outputs
                     if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
            assert len(shown) == 2 and all({"image/png", "text/html"} <= set(d) for d in shown)
        finally:
            page.screenshot(path=str(artifacts / "lab.png"))
        # reopened another day: a new kernel, no explorer in Python; Lab draws both from the
        # widget state it saved in the notebook
        page.close()
        _shut_down_kernels(url)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        console = []
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
        page.goto(f"{url}/lab/tree/attention.ipynb")
        try:
            deadline = time.monotonic() + 120  # Lab restores saved widgets once the new kernel is up
            while not _kernel_is_idle(url):
                assert time.monotonic() < deadline, "no kernel for the reopened notebook within 120 s"
                time.sleep(0.5)
            try:
                page.wait_for_function(
                    "() => document.querySelectorAll('.ax-root[data-draws]').length >= 2", timeout=180_000)
            except PlaywrightTimeout:
                raise AssertionError(_what_lab_shows(page, url, console)) from None
            assert "model not found" not in page.content()
            gpt = Explorer(page, page.locator(".ax-root").nth(1))  # as it was left, and alive
            assert [gpt.data(k) for k in ("view", "layer", "head", "query")] == ["qk", "0", "2", "30"]
            gpt.changes(gpt.select("head", 1), head=1)
            gpt.root.screenshot(path=str(artifacts / "lab-reopened-gpt.png"))
        finally:
            page.screenshot(path=str(artifacts / "lab-reopened.png"))
        # the page the GPT cell saved, and nbconvert's HTML of the notebook Lab saved
        assert _offline_page(browser, root / "gpt_explorer.html", artifacts, "saved-page") == 1
        jupyter = Path(sys.executable).with_name("jupyter")
        subprocess.run([str(jupyter), "nbconvert", "--to", "html", str(root / "attention.ipynb")],
                       check=True, capture_output=True, timeout=120)
        assert _offline_page(browser, root / "attention.html", artifacts, "nbconvert") == 2


# --- the explorer fits its output area: every view, in Lab's default layout at 1280 px ------

# The explorers of notebooks 02 §9, 05 and 06 at the sizes they show, from untrained models
# (the layout needs no training): 05's model as configured there (d_model 64, 4 heads: d_k 16,
# 2 + 2 layers) on its date; 06's full-mode GPT (d_model 128, 4 heads: d_k 32, 4 layers) on
# its 27 characters.
FIT_CELLS = ['''\
from course_lib import viz
from course_lib.attention import causal_mask
viz.attention_explorer(viz.toy_attention_examples(), masks={"causal": causal_mask(len(viz.ENGLISH))})''', '''\
import torch
from course_lib.explorer import explore
from course_lib.tokenize import FIRST_MERGE_ID, BPETokenizer, CharTokenizer
from course_lib.transformer import GPT, GPTConfig, Transformer, TransformerConfig
torch.manual_seed(0)
dates = BPETokenizer.train(["Mon 21 Mar 94", "1994-03-21"], vocab_size=FIRST_MERGE_ID + 8)
explore(Transformer(TransformerConfig(dates.vocab_size)), tokenizer=dates, source="Mon 21 Mar 94",
        target="1994-03-21", kind="cross", layer=1)''', '''\
text = "ROMEO:\\nBut soft, what light"
chars = CharTokenizer.from_text(text)
explore(GPT(GPTConfig(chars.vocab_size, block_size=128, d_model=128, n_heads=4, n_layers=4)), text, chars)''']

# The size in px of every font an explorer's canvas writes with, kept on its root element
RECORD_FONTS = """
const fillText = CanvasRenderingContext2D.prototype.fillText;
CanvasRenderingContext2D.prototype.fillText = function (...args) {
  const root = this.canvas.closest?.(".ax-root");
  if (root) (root.axFonts ??= []).push(parseFloat(this.font));
  return fillText.apply(this, args);
};
"""

# An explorer against the output area it sits in, in CSS px: the area's width and the width of
# what it holds, the widget's margins to its edges (< 0: past them), the stage's width and that
# of what it holds (the stage scrolls), the canvas's width and its right margin to the area's
# edge; the smallest font written since the last look
MEASURE_FIT = """root => {
  const area = root.closest(".jp-OutputArea-output"), stage = root.querySelector(".ax-stage");
  const [a, r, c] = [area, root, stage.querySelector("canvas")].map((e) => e.getBoundingClientRect());
  return { area: area.clientWidth, areaContent: area.scrollWidth, left: r.left - a.left,
           right: a.right - r.right, stage: stage.clientWidth, stageContent: stage.scrollWidth,
           canvas: c.width, canvasRight: a.right - c.right, smallestFont: Math.min(...(root.axFonts || []).splice(0)) };
}"""


@pytest.fixture
def lab_fit(tmp_path):
    """JupyterLab on a notebook of the three explorers (FIT_CELLS)."""
    python = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb = new_notebook(cells=[new_code_cell(source) for source in FIT_CELLS], metadata={"kernelspec": python})
    nbformat.write(nb, tmp_path / "fit.ipynb")
    with _jupyter_lab(tmp_path) as url:
        yield url


def _fits(m) -> bool:
    """Whether MEASURE_FIT's ``m`` has the whole picture in view: nothing past the output area's
    edges, and nothing to scroll sideways to, in the area or inside the explorer."""
    return (m["areaContent"] <= m["area"] and min(m["left"], m["right"], m["canvasRight"]) >= 0
            and m["stageContent"] <= m["stage"])


def _show(ex, **state):
    """Click the buttons of ``state`` (view=..., kind=...); wait until the explorer shows it."""
    for key, value in state.items():
        if ex.data(key) != value:
            ex.root.locator(f'button[value="{value}"]').click()
            ex.page.wait_for_function("([el, k, v]) => el.dataset[k] === v",
                                      arg=[ex.root.element_handle(), key, value], timeout=30_000)
    ex.root.scroll_into_view_if_needed()
    return ex.root.evaluate(MEASURE_FIT)


def test_every_view_of_the_explorer_fits_its_output_area_at_1280_px(lab_fit, artifacts):
    """Notebooks 02, 05 and 06's explorers in Lab's default layout (the file browser open) in a
    1280 px wide window: in every view and kind the picture lies inside the output area, with
    no sideways scroll (in the query-key view of 05 and 06 the softmax column lay beyond the
    area's edge, a scroll away from the key names), and no text smaller than 9 px; with the
    file browser closed and opened again, the explorer is drawn again for the width it has."""
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.add_init_script(RECORD_FONTS)
        page.goto(f"{lab_fit}/lab/tree/fit.ipynb")
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
        seen = {}  # "notebook kind view": MEASURE_FIT's measurements
        try:
            assert page.locator("#filebrowser").is_visible()
            _run_all_cells(page, lab_fit)
            page.wait_for_function(
                "() => document.querySelectorAll('.ax-root[data-draws]').length >= 3"
                f" || [...document.querySelectorAll('{STDERR}')].some(e => e.textContent.includes('Traceback'))",
                timeout=300_000)
            errors = page.locator(STDERR, has_text="Traceback")
            assert errors.count() == 0, errors.first.inner_text()
            roots = page.locator(".ax-root")
            for notebook, n in (("02", 0), ("05", 1), ("06", 2)):
                ex = Explorer(page, roots.nth(n))
                kinds = ex.root.locator("button.ax-kind").evaluate_all("bs => bs.map(b => b.value)")
                for kind in kinds or [ex.data("kind")]:
                    for view in ("head", "model", "qk"):
                        seen[f"{notebook} {kind} {view}"] = _show(ex, kind=kind, view=view)
            wide = {name: m for name, m in seen.items() if not _fits(m)}
            assert not wide, f"wider than the output area or scrolled inside: {wide}"
            small = {name: m["smallestFont"] for name, m in seen.items() if m["smallestFont"] < 9}
            assert not small, f"text smaller than 9 px: {small}"

            # the file browser closed, then opened again: the explorer is drawn anew for its width
            gpt = Explorer(page, roots.nth(2))  # in the query-key view, the widest
            tab = page.locator('.jp-SideBar.jp-mod-left .lm-TabBar-tab[data-id="filebrowser"]')
            for step in ("closed", "open again"):
                width = gpt.root.evaluate("el => el.clientWidth")
                tab.click()
                page.wait_for_function(  # the width changed, and the picture was drawn for it
                    "([el, w]) => el.clientWidth !== w && el.dataset.width === String(el.clientWidth)",
                    arg=[gpt.root.element_handle(), width], timeout=10_000)
                seen[f"06 self qk, file browser {step}"] = m = _show(gpt)
                assert _fits(m), f"file browser {step}: {m}"
            assert seen["06 self qk, file browser closed"]["canvas"] > seen["06 self qk"]["canvas"]
        finally:
            (artifacts / "lab-fit.json").write_text(json.dumps(seen, indent=1))
            page.screenshot(path=str(artifacts / "lab-fit.png"))


# --- the learner's Lab: Validate asks the grader; no instructor tools -------------------------

RELEASE_00 = NOTEBOOKS / "00_start_here" / "start_here.ipynb"
SOLUTION_00 = SOLUTIONS / "00_start_here" / "start_here.ipynb"


@pytest.fixture(scope="module")
def course_lab(tmp_path_factory):
    """A learner's JupyterLab serving a blank and a solved copy of notebook 00."""
    if instructor_mode():
        pytest.skip("instructor mode is on in this environment: `autograder instructor-mode off`")
    root = tmp_path_factory.mktemp("course")
    for folder, source in (("blank", RELEASE_00), ("solved", SOLUTION_00)):
        (root / folder).mkdir()
        shutil.copyfile(source, root / folder / "start_here.ipynb")
    shutil.copyfile(RELEASE_00, root / "mine.ipynb")  # not a course notebook's name
    with _jupyter_lab(root) as url:
        yield url, root


def _validate(page, url, path):
    """Open a notebook, press its Validate button, return the text of the dialog that answers."""
    page.goto(f"{url}/lab/tree/{path}?reset")  # ?reset: no notebook left open from before
    panel = page.locator(".jp-NotebookPanel:visible")
    panel.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=60_000)
    panel.locator(".validate-button").click()  # checks nbgrader's version, saves, validates
    return page.wait_for_selector(".jp-Dialog", timeout=300_000).inner_text()


def test_validate_button_shows_the_graders_verdict(course_lab):
    url, root = course_lab
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            blank = _validate(page, url, "blank/start_here.ipynb")
            assert blank.count("The following cell failed:") == 2, blank
            for exercise, function in (("warmup.softmax", "softmax"), ("warmup.softmax_jvp", "softmax_jvp")):
                assert f"{exercise}: 0 of 2 points" in blank
                assert f"`{function}` is not implemented yet." in blank  # the judge's message
            assert "Success" not in blank
            page.locator(".jp-Dialog .jp-mod-accept").click()

            solved = _validate(page, url, "solved/start_here.ipynb")
            assert "Success! Your notebook passes all the tests." in solved, solved
        finally:
            page.screenshot(path=str(root / "validate.png"))


def test_learner_lab_shows_no_instructor_tools(course_lab):
    url, root = course_lab
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{url}/lab/tree/blank/start_here.ipynb?reset")
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
        page.wait_for_selector(".validate-button", timeout=60_000)  # nbgrader's plugins are up
        try:
            config = json.loads(page.locator("#jupyter-config-data").text_content())
            assert set(INSTRUCTOR_LAB_PLUGINS) <= set(config["disabledExtensions"])
            tabs = page.locator(".jp-SideBar .lm-TabBar-tab").evaluate_all(
                "tabs => tabs.map(t => t.getAttribute('title') || t.textContent)")
            assert "Property Inspector" in tabs and not any("Create Assignment" in t for t in tabs)
            page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").click()
            page.locator(".lm-Menu-itemLabel", has_text="Assignment List").wait_for(timeout=10_000)
            items = page.locator(".lm-Menu-itemLabel").all_inner_texts()
            assert [i for i in items if i] == ["Assignment List"]  # no Course List, Formgrader
            page.keyboard.press("Escape")
            # nor JupyterLab's first-run question about its news feed, a toast over the figures
            # (the set-up's default_setting_overrides answer it): it comes as Lab is restored
            page.wait_for_timeout(3000)
            assert page.get_by_text("official Jupyter news").count() == 0
        finally:
            page.screenshot(path=str(root / "learner.png"))
    with pytest.raises(urllib.error.HTTPError) as err:  # nor does the server serve them
        urllib.request.urlopen(url + "/formgrader", timeout=10)
    assert err.value.code == 404


def _post_validate(url, path):
    request = urllib.request.Request(f"{url}/assignments/validate?path={path}", method="POST", data=b"")
    with urllib.request.urlopen(request, timeout=60) as reply:
        return json.load(reply)


def test_validate_refuses_what_the_grader_cannot_grade(course_lab):
    url, _ = course_lab
    reply = _post_validate(url, "mine.ipynb")
    assert reply["success"] is False and "--assignment" in reply["value"]
    with pytest.raises(urllib.error.HTTPError) as err:
        _post_validate(url, "../outside.ipynb")
    assert err.value.code == 403
