"""The course in a real JupyterLab, driven by headless Chromium: the attention explorer
renders offline and answers clicks.

Needs Debian's chromium (.ci/run installs it) and the playwright package (dev extra).
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from playwright.sync_api import TimeoutError as PlaywrightTimeout, sync_playwright

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                reason="Debian's chromium is not installed (.ci/run installs it)")

EXPLORER = ("from course_lib.viz import attention_explorer, toy_attention_examples\n"
            "attention_explorer(toy_attention_examples())")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab(tmp_path):
    nb = new_notebook(cells=[new_code_cell(EXPLORER)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nbformat.write(nb, tmp_path / "explorer.ipynb")
    port = _free_port()
    jupyter = Path(sys.executable).with_name("jupyter")
    proc = subprocess.Popen(
        [str(jupyter), "lab", "--no-browser", "--allow-root", f"--port={port}", "--ip=127.0.0.1",
         "--IdentityProvider.token=", "--ServerApp.password=", f"--ServerApp.root_dir={tmp_path}",
         "--ServerApp.disable_check_xsrf=True", "--LabApp.news_url=None",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / ".jupyter")})
    url = f"http://127.0.0.1:{port}"
    for _ in range(120):
        try:
            urllib.request.urlopen(url + "/api/status", timeout=1)
            break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("JupyterLab did not start within 60 s")
    yield url
    proc.terminate()
    proc.wait(timeout=20)


def _kernel_is_idle(lab):
    """True once the server runs a kernel for the notebook and that kernel is idle."""
    with urllib.request.urlopen(lab + "/api/sessions", timeout=5) as reply:
        sessions = json.load(reply)
    return any(s["kernel"]["execution_state"] == "idle" for s in sessions)


def _run_first_cell(page, lab):
    """Run the first cell, again if the page dropped it (pressed before the kernel connected).

    A busy machine can start the kernel after JupyterLab's indicator already reads idle; the
    cell then moves on with an empty prompt `[ ]:` and never runs.
    """
    deadline = time.monotonic() + 120
    while not _kernel_is_idle(lab):
        assert time.monotonic() < deadline, "the kernel did not start within 120 s"
        time.sleep(0.5)
    prompt = page.locator(".jp-Notebook .jp-Cell").first.locator(".jp-InputPrompt")
    while time.monotonic() < deadline:
        page.locator(".jp-Notebook .jp-Cell .jp-InputArea-editor").first.click()
        page.keyboard.press("Control+Enter")  # run in place
        try:
            page.wait_for_function("el => el.textContent.trim() !== '[ ]:'",
                                   arg=prompt.element_handle(), timeout=10_000)
            return
        except PlaywrightTimeout:
            continue
    raise AssertionError("the first cell never started running")


def test_attention_explorer_renders_and_responds(lab, tmp_path):
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{lab}/lab/tree/explorer.ipynb")
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
        try:
            _run_first_cell(page, lab)
            image = page.wait_for_selector(".widget-output img", timeout=120_000)
            first = image.get_attribute("src")
            assert first.startswith("data:image/png")
            buttons = page.locator(".widget-toggle-button")
            assert buttons.count() == 3
            page.locator(".widget-toggle-button", has_text="cross").click()
            page.wait_for_function(
                "old => { const img = document.querySelector('.widget-output img');"
                " return img && img.getAttribute('src') !== old; }", arg=first, timeout=60_000)
        finally:  # what the page looked like, for a failing run
            page.screenshot(path=str(tmp_path / "explorer.png"))
            browser.close()
