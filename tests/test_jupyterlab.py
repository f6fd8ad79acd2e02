"""The course in a real JupyterLab, driven by headless Chromium: the attention explorer
renders offline and answers clicks; the learner's Lab validates with the grader and shows
none of nbgrader's instructor tools.

Needs Debian's chromium (.ci/run installs it) and the playwright package (dev extra).
"""
import json
import os
import shutil
import socket
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
from playwright.sync_api import TimeoutError as PlaywrightTimeout, sync_playwright

from autograder.lab import INSTRUCTOR_LAB_PLUGINS, instructor_mode
from autograder.sandbox import ISOLATION_ENV
from helpers import NOTEBOOKS, SOLUTIONS

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                reason="Debian's chromium is not installed (.ci/run installs it)")

EXPLORER = ("from course_lib.viz import attention_explorer, toy_attention_examples\n"
            "attention_explorer(toy_attention_examples())")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def _jupyter_lab(root: Path):
    """JupyterLab serving ``root`` with this environment's extensions, as a learner starts it.

    The Validate button grades in a child process that inherits the environment: under CI
    (AUTOGRADER_ISOLATION=required) it must grade in the sandbox, as a learner's does.
    """
    port = _free_port()
    jupyter = Path(sys.executable).with_name("jupyter")
    proc = subprocess.Popen(
        [str(jupyter), "lab", "--no-browser", "--allow-root", f"--port={port}", "--ip=127.0.0.1",
         "--IdentityProvider.token=", "--ServerApp.password=", f"--ServerApp.root_dir={root}",
         "--ServerApp.disable_check_xsrf=True", "--LabApp.news_url=None",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "JUPYTER_CONFIG_DIR": str(root / ".jupyter"),
             ISOLATION_ENV: os.environ.get(ISOLATION_ENV, "auto")})
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(url + "/api/status", timeout=1)
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("JupyterLab did not start within 60 s")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@contextmanager
def _browser():
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def lab(tmp_path):
    nb = new_notebook(cells=[new_code_cell(EXPLORER)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nbformat.write(nb, tmp_path / "explorer.ipynb")
    with _jupyter_lab(tmp_path) as url:
        yield url


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
    with _browser() as browser:
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
    with _browser() as browser:
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
    with _browser() as browser:
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
