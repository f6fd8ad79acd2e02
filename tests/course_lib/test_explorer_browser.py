"""course_lib.explorer in headless Chromium, on a saved page (no JupyterLab): what the canvas
shows stays inside it. (Clicks, hovering and JupyterLab itself: tests/notebooks/test_jupyterlab.py.)

Needs Debian's chromium (.ci/run installs it) and the playwright package (dev extra).
"""
from pathlib import Path

import numpy as np
import pytest

from course_lib.explorer import explore
from helpers import CHROMIUM, chromium

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                reason="Debian's chromium is not installed (.ci/run installs it)")


# Every fillText on a canvas, with its ink's box (measureText, relative to the text's alignment
# point) and the canvas's width, in CSS pixels.
RECORD_TEXT = """
window.drawnTexts = [];
const fillText = CanvasRenderingContext2D.prototype.fillText;
CanvasRenderingContext2D.prototype.fillText = function (text, x, y, ...rest) {
  const ink = this.measureText(text), scale = this.getTransform().a;
  window.drawnTexts.push({ text, left: x - ink.actualBoundingBoxLeft, right: x + ink.actualBoundingBoxRight,
                           top: y - ink.actualBoundingBoxAscent, bottom: y + ink.actualBoundingBoxDescent,
                           width: this.canvas.width / scale });
  return fillText.call(this, text, x, y, ...rest);
};
"""


@pytest.fixture(scope="module")
def page():
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.add_init_script(RECORD_TEXT)
        yield page


def _texts(page, explorer, path):
    """What the explorer's saved page writes on its canvas when it opens."""
    page.goto(explorer.save_html(path).as_uri())
    page.wait_for_selector(".ax-root[data-draws]", timeout=30_000)
    return page.evaluate("window.drawnTexts")


def _overlap(a, b, gap=4):
    """Whether two drawn texts' ink boxes come closer than ``gap`` pixels side by side (two
    labels that touch read as one: "…d_k = 8)q ⊙ k_j …") or overlap at all."""
    return (a["left"] < b["right"] + gap and b["left"] < a["right"] + gap
            and a["top"] < b["bottom"] and b["top"] < a["bottom"])


@pytest.mark.parametrize("view", ["qk", "head", "model"])
def test_every_label_lies_inside_the_canvas_and_apart(page, tmp_path, view):
    """Notebook 05's cross-attention: the query "<s>" is wider than every key name (one or two
    characters); in the query-key view its label "q: “<s>”" began left of the canvas and read
    'ı: “<s>”' or “<s>”, and with d_k = 8 the title of the keys ran into the next one. A query
    token wider still, and a key token too, in every view."""
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((1, 2, 3, 8)), rng.standard_normal((1, 2, 4, 8))
    S = q @ np.swapaxes(k, -1, -2) / np.sqrt(8)
    A = np.exp(S) / np.exp(S).sum(-1, keepdims=True)
    queries = ["<s>", "1", "a rather long query token"]
    for query, keys in enumerate((["M", "␣2", "1", "4"], ["M", "␣2", "1", "4"], ["M", "␣2", "1", "a long key token"])):
        ex = explore(A, tokens=(queries, keys), q=q, k=k, view=view, query=query)
        texts = _texts(page, ex, tmp_path / f"{view}{query}.html")
        assert any(queries[query][:5] in t["text"] for t in texts) or view == "model"
        outside = [t for t in texts if not 0 <= t["left"] < t["right"] <= t["width"]]
        assert not outside, f"cut at the canvas's edge: {outside}"
        crossing = [(a["text"], b["text"]) for n, a in enumerate(texts) for b in texts[n + 1:] if _overlap(a, b)]
        assert not crossing, f"labels that touch or overlap: {crossing}"


@pytest.mark.parametrize("view", ["qk", "head", "model"])
def test_a_large_model_is_laid_out_for_a_narrow_page(page, tmp_path, view):
    """24 heads with d_k = 64 on a 900 px page: each view is drawn for the page's width (no
    sideways scroll), the heads numbered where "head 23" no longer fits over a tile, and the
    labels stay inside the canvas and apart. (Notebook-sized explorers in JupyterLab at 1280 px:
    tests/notebooks/test_jupyterlab.py.)"""
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((2, 24, 48, 64)), rng.standard_normal((2, 24, 48, 64))
    S = q @ np.swapaxes(k, -1, -2) / 8
    A = np.exp(S) / np.exp(S).sum(-1, keepdims=True)
    ex = explore(A, tokens=[f"token {t}" for t in range(48)], q=q, k=k, view=view)
    page.set_viewport_size({"width": 900, "height": 1000})
    try:
        texts = _texts(page, ex, tmp_path / f"{view}.html")
        inside, width = page.evaluate("() => [...document.querySelectorAll('.ax-stage')].map("
                                      "s => [s.scrollWidth, s.clientWidth])[0]")
    finally:
        page.set_viewport_size({"width": 1400, "height": 1000})
    assert inside <= width <= 900, f"the picture is {inside} px wide in a stage of {width} px"
    texts = list({(t["text"], t["left"], t["top"]): t for t in texts}.values())  # once if drawn again
    outside = [t for t in texts if not 0 <= t["left"] < t["right"] <= t["width"]]
    assert not outside, f"cut at the canvas's edge: {outside}"
    crossing = [(a["text"], b["text"]) for n, a in enumerate(texts) for b in texts[n + 1:] if _overlap(a, b)]
    assert not crossing, f"labels that touch or overlap: {crossing}"
    if view == "model":
        assert {"head", "23"} <= {t["text"] for t in texts}
