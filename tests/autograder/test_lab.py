"""Who sees what in JupyterLab: the learner's configuration that the set-up installs, and the
instructor's overrides, read back through Jupyter's own configuration readers; and the Validate
handler against a request that names what it must not grade (issue 23), in a real Jupyter server.
(Validate grading a notebook from Lab's button: tests/notebooks/test_jupyterlab.py.)"""
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote

import pytest
from jupyter_server.extension.config import ExtensionConfigManager
from jupyter_server.services.config.manager import ConfigManager
from nbconvert.exporters import HTMLExporter
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
from nbgrader.server_extensions.formgrader.formgrader import FormgradeExtension
from traitlets.config import Config

from autograder.lab import (INSTRUCTOR_LAB_PLUGINS, INSTRUCTOR_SERVER_EXTENSIONS, LAB_CONFIG_D,
                            SERVER_CONFIG_D, instructor_mode, set_instructor_mode)
from autograder.pipeline.course import new_course
from helpers import NOTEBOOKS, REPO, SOLUTIONS, jupyter_server

LEARNER = {SERVER_CONFIG_D: REPO / "jupyter-config" / "server" / "transformer_course.json",
           LAB_CONFIG_D: REPO / "jupyter-config" / "lab" / "transformer_course.json"}
SERVER_CONFIG = REPO / "jupyter-config" / "server" / "jupyter_server_config.json"  # its nbconvert settings


def _enabled(prefix: Path) -> tuple[dict, set]:
    """(server extension -> enabled, disabled Lab plugins) as Jupyter reads them under prefix."""
    etc = str(prefix / "etc" / "jupyter")
    server = ExtensionConfigManager(read_config_path=[etc]).get_jpserver_extensions()
    page = ConfigManager(read_config_path=[etc + "/labconfig"]).get("page_config")
    return server, {name for name, off in page.get("disabledExtensions", {}).items() if off}


def _shared_data() -> dict[str, str]:
    """What the set-up installs from this repository: its path -> the path under the prefix."""
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"][
        "wheel"]["shared-data"]


def test_setup_installed_the_learner_configuration():
    for source, target in _shared_data().items():
        for path in [p for p in (REPO / source).rglob("*") if p.is_file()] or [REPO / source]:
            installed = Path(sys.prefix) / target / path.relative_to(REPO / source)
            assert installed.exists(), f"{installed} is missing: run the set-up command again (README)"
            assert installed.read_text() == path.read_text(), f"{installed} is old: run the set-up again"


def test_learner_by_default_instructor_on_demand(tmp_path):
    # nbgrader's own file, which turns all its server extensions on, sorts before ours
    nbgrader_json = Path(sys.prefix) / SERVER_CONFIG_D / "nbgrader.json"
    (tmp_path / SERVER_CONFIG_D).mkdir(parents=True)
    shutil.copyfile(nbgrader_json, tmp_path / SERVER_CONFIG_D / "nbgrader.json")
    for folder, source in LEARNER.items():
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, tmp_path / folder / source.name)

    server, disabled = _enabled(tmp_path)
    assert server["autograder.lab"] and server["nbgrader.server_extensions.assignment_list"]
    assert not server["nbgrader.server_extensions.validate_assignment"]  # ours serves its URL
    assert not any(server[name] for name in INSTRUCTOR_SERVER_EXTENSIONS)
    assert disabled == set(INSTRUCTOR_LAB_PLUGINS) and not instructor_mode(tmp_path)

    set_instructor_mode(True, tmp_path)
    server, disabled = _enabled(tmp_path)
    assert all(server[name] for name in INSTRUCTOR_SERVER_EXTENSIONS) and server["autograder.lab"]
    assert not server["nbgrader.server_extensions.validate_assignment"]
    assert disabled == set() and instructor_mode(tmp_path)

    set_instructor_mode(False, tmp_path)
    assert _enabled(tmp_path)[1] == set(INSTRUCTOR_LAB_PLUGINS) and not instructor_mode(tmp_path)


def test_saved_widgets_reopen_and_exports_stay_offline():
    """Lab saves widget state into the notebook (a reopened explorer draws again); nbconvert,
    from the command line and from Lab's export, prefers an output's own HTML to the widget
    view, whose page would load the widget manager from a CDN."""
    etc = Path(sys.prefix) / "etc" / "jupyter"
    lab = ConfigManager(read_config_path=[str(etc / "labconfig")]).get("default_setting_overrides")
    assert lab["@jupyter-widgets/jupyterlab-manager:plugin"]["saveState"] is True
    cli = json.loads((REPO / "jupyter-config" / "nbconvert" / "jupyter_nbconvert_config.json").read_text())
    assert cli == json.loads(SERVER_CONFIG.read_text())
    order = cli["NbConvertBase"]["display_data_priority"]
    assert "text/vnd.mermaid" not in order  # nbconvert's mermaid output is an XSS (sanitize.py)
    assert order.index("text/html") < order.index("application/vnd.jupyter.widget-view+json")


# --- HTML pages of a notebook, offline ---------------------------------------------------------
# what a page would fetch: a script's, a style sheet's or a frame's address, a module imported
FETCHED = re.compile(r"""<(?:script|link|iframe)\b[^>]*?\b(?:src|href)\s*=\s*["']?([^"'\s>]*)"""
                     r"""|\bimport\s*\(?\s*["']([^"']*)""", re.I)


def _fetched_elsewhere(page: str) -> list[str]:
    """What ``page`` would load from another host (or from an empty address: the page again)."""
    urls = [a or b for a, b in FETCHED.findall(page)]
    return [u for u in urls if not u.startswith("/") or u.startswith("//")] + re.findall(r"cdnjs|unpkg", page)


def _math_and_mermaid() -> dict:
    """A notebook with formulas, markdown, a mermaid output (as a learner's code may display
    one) and saved widget state, whose pages nbconvert makes load MathJax, mermaid, require.js
    and the widget manager from CDNs."""
    nb = new_notebook(cells=[
        new_markdown_cell("# Attention\n\nThe scores $S = QK^T / \\sqrt{d_k}$, row-wise:\n\n"
                          "$$P_{ij} = \\frac{e^{S_{ij}}}{\\sum_k e^{S_{ik}}}$$"),
        new_markdown_cell("Some *markdown* of the learner's."),
        new_code_cell("show()", outputs=[new_output("display_data", data={
            "text/vnd.mermaid": "graph TD; A-->B", "text/plain": "a diagram"})])])
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {
        "state": {}, "version_major": 2, "version_minor": 0}}
    return nb


def _assert_offline(page: str, where: str) -> None:
    assert "\\sqrt{d_k}" in page and "a diagram" in page, where  # the page is the notebook's
    assert not _fetched_elsewhere(page), (where, _fetched_elsewhere(page))
    assert "jp-Mermaid" not in page and "graph TD" not in page, where


@pytest.fixture
def installed(tmp_path):
    """The repository's ``jupyter-config/`` laid out under a prefix as the set-up installs it
    (pyproject's shared-data), and the variables that make Jupyter read it before this
    environment's own copy."""
    prefix = tmp_path / "prefix"
    for source, target in _shared_data().items():
        (prefix / target).parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if (REPO / source).is_dir() else shutil.copyfile)(REPO / source, prefix / target)
    return prefix, {"JUPYTER_CONFIG_PATH": str(prefix / "etc" / "jupyter"),
                    "JUPYTER_PATH": str(prefix / "share" / "jupyter")}


def test_lab_export_and_nbconvert_pages_load_nothing_from_a_cdn(tmp_path, installed):
    """Lab's "Export as HTML" (the server's ``/nbconvert/html``) and ``jupyter nbconvert --to
    html``, with the configuration the set-up installs: no script from a CDN (offline they fail,
    online a third party learns who reads what), none from an empty address, no mermaid."""
    prefix, env = installed
    root = tmp_path / "home"
    root.mkdir()
    path = root / "attention.ipynb"
    path.write_text(json.dumps(_math_and_mermaid()))
    with jupyter_server("server", root, f"--IdentityProvider.token={TOKEN}", ready=f"/api/status?token={TOKEN}",
                        env={**env, "JUPYTER_CONFIG_DIR": str(tmp_path / ".jupyter"),
                             "JUPYTER_RUNTIME_DIR": str(tmp_path / "run")}) as url:
        with urllib.request.urlopen(f"{url}/nbconvert/html/attention.ipynb?download=true&token={TOKEN}",
                                    timeout=60) as reply:
            _assert_offline(reply.read().decode(), "Lab's export")
    cli = subprocess.run([str(Path(sys.executable).with_name("jupyter")), "nbconvert", "--to", "html",
                          "--stdout", str(path)], capture_output=True, text=True, check=True,
                         env={**os.environ, **env, "JUPYTER_CONFIG_DIR": str(tmp_path / ".jupyter")})
    _assert_offline(cli.stdout, "jupyter nbconvert")


def test_the_formgraders_page_of_a_submission_loads_nothing_from_a_cdn(tmp_path, installed, monkeypatch):
    """The formgrader renders a submission with an ``HTMLExporter`` of its own configuration:
    the server's (the set-up's file) and the course's ``nbgrader_config.py``. nbgrader's page
    calls nbconvert's MathJax macro without an address, so its default (cdnjs) applied."""
    prefix, env = installed
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "course").mkdir()
    new_course(tmp_path / "course")
    monkeypatch.chdir(tmp_path / "course")
    server = json.loads((prefix / "etc" / "jupyter" / SERVER_CONFIG.name).read_text())
    formgrader = FormgradeExtension(config=Config(server))
    formgrader.initialize([])
    exporter = HTMLExporter(config=formgrader.config)  # as FormgradeExtension.init_tornado_settings
    page, _ = exporter.from_notebook_node(_math_and_mermaid(), resources={
        "base_url": "/user/ada", "assignment_id": "02_attention", "notebook_id": "attention",
        "submission_id": "1", "index": 0, "total": 1, "student": "bo", "last_name": "", "first_name": "",
        "notebook_path": "submitted/bo/02_attention/attention.ipynb"})
    assert "/user/ada/formgrader/static/js/formgrade.js" in page  # nbgrader's page, its own scripts
    _assert_offline(page, "the formgrader")


# --- the Validate handler, attacked --------------------------------------------------------------
TOKEN = "learner-token"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A Jupyter server with the learner's configuration and a token, serving a folder in which
    an attacker left links out of it, a FIFO named like a course notebook and a folder named
    like one; beside it, outside, a course notebook."""
    tmp = tmp_path_factory.mktemp("served")
    root, outside = tmp / "home", tmp / "outside"
    root.mkdir()
    outside.mkdir()
    shutil.copyfile(NOTEBOOKS / "00_start_here" / "start_here.ipynb", outside / "start_here.ipynb")
    (root / "link.ipynb").symlink_to(outside / "start_here.ipynb")
    (root / "inner").mkdir()
    (root / "inner" / "up").symlink_to(outside, target_is_directory=True)
    os.mkfifo(root / "start_here.ipynb")
    (root / "attention.ipynb").mkdir()
    with jupyter_server("server", root, f"--IdentityProvider.token={TOKEN}", ready=f"/api/status?token={TOKEN}",
                        env={"JUPYTER_CONFIG_DIR": str(tmp / ".jupyter"),
                             "JUPYTER_RUNTIME_DIR": str(tmp / "run")}) as url:
        yield url


def _validate(url: str, path: str, token: str | None = TOKEN) -> tuple[int, dict | None]:
    """(HTTP status, reply) of a POST to the Validate URL, as Lab's button makes it."""
    request = urllib.request.Request(f"{url}/assignments/validate?path={quote(path)}", method="POST",
                                     data=b"", headers={"Authorization": f"token {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=120) as reply:
            return reply.status, json.load(reply)
    except urllib.error.HTTPError as err:
        return err.code, None


OUTSIDE = {
    "an absolute path": "/etc/passwd",
    "the instructor's solution, absolute": str(SOLUTIONS / "00_start_here" / "start_here.ipynb"),
    "up and out": "../outside/start_here.ipynb",
    "in and up and out": "inner/../../outside/start_here.ipynb",
    "a link to a notebook outside": "link.ipynb",
    "a linked folder": "inner/up/start_here.ipynb",
}


def test_validate_grades_nothing_outside_the_served_folder(served):
    """Each path names a notebook (or a file) outside the folder the server serves, directly or
    through a link the learner made: refused before anything is graded or read."""
    for name, path in OUTSIDE.items():
        assert _validate(served, path) == (403, None), name


def test_validate_answers_a_fifo_or_a_folder_named_like_a_notebook_at_once(served):
    """A FIFO named ``start_here.ipynb`` would block whoever opens it, forever; a folder named
    ``attention.ipynb`` is no notebook. Both are answered as not gradable, quickly."""
    for path in ("start_here.ipynb", "attention.ipynb"):
        status, reply = _validate(served, path)
        assert status == 200 and reply["success"] is False and "no such notebook" in reply["value"], reply


def test_validate_needs_the_servers_token(served):
    """Another page or user on the machine cannot make the learner's server grade (and run)
    a notebook: without the server's token, or with another, the request is refused."""
    for token in (None, "guessed"):
        assert _validate(served, "start_here.ipynb", token) == (403, None), token


def test_validate_answers_with_the_note_of_a_grading_without_the_sandbox(tmp_path):
    """A learner's server where bubblewrap cannot run (none on its PATH; AUTOGRADER_ISOLATION
    auto, the default): Validate grades without the sandbox, and its answer says so, where
    nbgrader's dialog shows it (the first failure) and as ``"notes"``. (Before, it said nothing.)"""
    root = tmp_path / "home"
    root.mkdir()
    shutil.copyfile(NOTEBOOKS / "00_start_here" / "start_here.ipynb", root / "start_here.ipynb")
    with jupyter_server("server", root, f"--IdentityProvider.token={TOKEN}", ready=f"/api/status?token={TOKEN}",
                        env={"PATH": str(Path(sys.executable).parent), "AUTOGRADER_ISOLATION": "auto",
                             "JUPYTER_CONFIG_DIR": str(tmp_path / ".jupyter"),
                             "JUPYTER_RUNTIME_DIR": str(tmp_path / "run")}) as url:
        status, reply = _validate(url, "start_here.ipynb")
    assert status == 200 and reply["success"] is True, reply
    (note,) = reply["value"]["notes"]
    assert note.startswith("Graded without isolation: bubblewrap (bwrap) is not installed."), note
    assert note in html.unescape(reply["value"]["failed"][0]["error"])
