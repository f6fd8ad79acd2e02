"""Click-to-redraw latency of the attention explorer at 12 layers x 12 heads x 512 tokens.

Builds causal attention of that size from random queries and keys with a few recognisable
heads (previous token, first token, a local window), saves the explorer as a page, opens it
in headless Chromium with the network off, and clicks through it: a layer, a head, all
heads, a query token, each view, a model-view heatmap, and a hovered token. The widget
writes, on its root element, the time from the click event to the end of the redraw
(data-latency-ms) and to the next frame (data-frame-ms); the same code runs in JupyterLab,
where a click also never waits for the kernel. Side by side: what the old explorer paid per
click, a matplotlib redraw of the same head view rendered to PNG (before the kernel sends it).

    .venv/bin/python benchmarks/explorer_latency.py [--tokens 512] [--layers 12] [--heads 12]

Needs Debian's chromium and the playwright package (dev extra).
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from course_lib.attention import causal_mask
from course_lib.explorer import explore


def synthetic(n_layers: int, n_heads: int, T: int, d_k: int = 64, seed: int = 0):
    """Weights (L, H, T, T), q and k (L, H, T, d_k), float32, causal. A third of the heads
    look at the previous token, some at the first token, some at a window, the rest at random."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_layers, n_heads, T, d_k), dtype=np.float32)
    k = rng.standard_normal((n_layers, n_heads, T, d_k), dtype=np.float32)
    positions = rng.standard_normal((T, d_k), dtype=np.float32) * 3
    for layer in range(n_layers):
        for head in range(n_heads):
            if head % 3 == 0:  # previous token
                q[layer, head] += positions
                k[layer, head] += np.roll(positions, -1, axis=0)  # key j carries position j + 1
            elif head % 3 == 1:  # the first token: every query and that key share a direction
                u = rng.standard_normal(d_k).astype(np.float32)
                u *= 3 / np.linalg.norm(u)
                q[layer, head] += u
                k[layer, head, 0] += 3 * u
    mask = causal_mask(T)
    A = np.empty((n_layers, n_heads, T, T), np.float32)
    for layer in range(n_layers):
        S = q[layer] @ np.swapaxes(k[layer], -1, -2) / np.sqrt(d_k)  # (H, T, T)
        S = np.where(mask, S, -np.inf)
        E = np.exp(S - S.max(-1, keepdims=True))
        A[layer] = E / E.sum(-1, keepdims=True)
    return A, q, k, mask


def measure(page, action, repeats: int) -> list[tuple[float, float]]:
    """Run ``action(i)`` ``repeats`` times; (click->drawn, click->next frame) in ms each time."""
    out = []
    root = page.locator(".ax-root")
    for i in range(repeats):
        before = root.get_attribute("data-draws")
        page.evaluate("() => { delete document.querySelector('.ax-root').dataset.frameMs; }")
        action(i)
        page.wait_for_function("n => { const d = document.querySelector('.ax-root').dataset;"
                               " return d.draws !== n && d.frameMs !== undefined; }",
                               arg=before, timeout=60_000)
        data = root.evaluate("r => [Number(r.dataset.latencyMs), Number(r.dataset.frameMs)]")
        out.append(tuple(data))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    t = time.perf_counter()
    A, q, k, mask = synthetic(args.layers, args.heads, args.tokens)
    words = [f"w{i}" for i in range(args.tokens)]
    explorer = explore(A, tokens=words, q=q, k=k, masks=mask)
    build = time.perf_counter() - t
    folder = Path(tempfile.mkdtemp())
    page_path = explorer.save_html(folder / "explorer.html")
    print(f"{args.layers} layers x {args.heads} heads x {args.tokens} tokens: "
          f"data {len(explorer._data) / 2**20:.1f} MiB (weights uint8, q and k float16), "
          f"page {page_path.stat().st_size / 2**20:.1f} MiB; "
          f"explore() + packing {build:.2f} s")

    t = time.perf_counter()
    explorer.static("head").savefig(folder / "static.png", dpi=80)
    matplotlib_ms = 1e3 * (time.perf_counter() - t)

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        context.set_offline(True)
        page = context.new_page()
        t = time.perf_counter()
        page.goto(page_path.as_uri())
        page.wait_for_selector(".ax-root[data-draws='1']", timeout=120_000)
        load_ms = 1e3 * (time.perf_counter() - t)
        first_draw = float(page.locator(".ax-root").get_attribute("data-draw-ms"))
        L, H, T = args.layers, args.heads, args.tokens

        def view(name):
            return lambda i: page.get_by_role("button", name=name).click()

        def pick(which, values):  # the i-th of ``values`` in a select
            return lambda i: page.locator(f"select.ax-{which}").select_option(str(values[i % len(values)]))

        def layout():
            return json.loads(page.locator(".ax-root").get_attribute("data-layout"))

        def tile(i):  # a heatmap in the model view, a different one each time
            lay = layout()
            head, layer, middle = i % H, (i + 3) % L, lay["tile"] / 2
            page.locator(".ax-canvas").click(position={"x": lay["left"] + lay["step"] * head + middle,
                                                       "y": lay["top"] + lay["step"] * layer + middle})

        n = args.repeats
        steps = [("layer (head view, one head)", pick("layer", [(2 * i + 1) % L for i in range(L)]), n),
                 ("head (head view)", pick("head", [(5 * i + 2) % H for i in range(H)]), n),
                 ("query token (head view)", pick("query", [(97 * i + 11) % T for i in range(T)]), n),
                 ("all heads in colours", pick("head", [-1]), 1),
                 ("one head again", pick("head", [3]), 1),
                 ("head -> model view, first time", view("model view"), 1),
                 ("model view -> head view", view("head view"), 1),
                 ("head -> model view, again", view("model view"), 1)]
        steps += [("click a model-view heatmap", tile, 1), ("", view("model view"), 1)] * args.repeats
        steps += [("-> query-key view", view("query–key view"), 1),
                  ("query token (query-key view)", pick("query", [(89 * i + 300) % T for i in range(T)]),
                   args.repeats),
                  ("", view("head view"), 1)]
        rows = [(name, measure(page, action, repeats)) for name, action, repeats in steps]
        canvas = page.locator(".ax-canvas")
        hover = []
        for i in range(args.repeats):  # hover: mouse move to the redraw (no click; drawMs only)
            y = layout()["top"] + layout()["row"] * (11 * i + 5.5)  # inside the visible part of the stage
            box = canvas.bounding_box()
            page.mouse.move(box["x"] + 20, box["y"] + y)
            page.wait_for_function("() => document.querySelector('.ax-root').dataset.hover !== ''",
                                   timeout=30_000)
            hover.append(float(page.locator(".ax-root").get_attribute("data-draw-ms")))
            page.mouse.move(0, 0)
        page.screenshot(path=str(folder / "explorer.png"))
        browser.close()

    print(f"page load to first picture: {load_ms:.0f} ms (first draw {first_draw:.0f} ms)")
    print(f"{'action':34} {'click->drawn ms':>16} {'click->frame ms':>16}   (median, max)")
    merged = {}
    for name, values in rows:
        if name:
            merged.setdefault(name, []).extend(values)
    for name, values in merged.items():
        drawn, frame = zip(*values)
        print(f"{name:34} {statistics.median(drawn):8.1f} {max(drawn):7.1f} "
              f"{statistics.median(frame):8.1f} {max(frame):7.1f}")
    print(f"{'hover a token (draw only)':34} {statistics.median(hover):8.1f} {max(hover):7.1f}")
    typical = statistics.median(frame for name, values in merged.items() if "first" not in name
                                for _, frame in values)
    print(f"matplotlib redraw of the head view as PNG (the old explorer, per click): {matplotlib_ms:.0f} ms; "
          f"ratio to the median click->frame here: {matplotlib_ms / typical:.0f}x")
    print(f"screenshot: {folder / 'explorer.png'}")


if __name__ == "__main__":
    main()
