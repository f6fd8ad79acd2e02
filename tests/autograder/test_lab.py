"""Who sees what in JupyterLab: the learner's configuration that the set-up installs, and the
instructor's overrides, read back through Jupyter's own configuration readers; and the Validate
handler against a request that names what it must not grade (issue 23), in a real Jupyter server.
(Validate grading a notebook from Lab's button: tests/notebooks/test_jupyterlab.py.)"""
import html
import json
import os
import shutil
import sys
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote

import pytest
from jupyter_server.extension.config import ExtensionConfigManager
from jupyter_server.services.config.manager import ConfigManager

from autograder.lab import (INSTRUCTOR_LAB_PLUGINS, INSTRUCTOR_SERVER_EXTENSIONS, LAB_CONFIG_D,
                            SERVER_CONFIG_D, instructor_mode, set_instructor_mode)
from helpers import NOTEBOOKS, REPO, SOLUTIONS, jupyter_server

LEARNER = {SERVER_CONFIG_D: REPO / "jupyter-config" / "server" / "transformer_course.json",
           LAB_CONFIG_D: REPO / "jupyter-config" / "lab" / "transformer_course.json"}


def _enabled(prefix: Path) -> tuple[dict, set]:
    """(server extension -> enabled, disabled Lab plugins) as Jupyter reads them under prefix."""
    etc = str(prefix / "etc" / "jupyter")
    server = ExtensionConfigManager(read_config_path=[etc]).get_jpserver_extensions()
    page = ConfigManager(read_config_path=[etc + "/labconfig"]).get("page_config")
    return server, {name for name, off in page.get("disabledExtensions", {}).items() if off}


def test_setup_installed_the_learner_configuration():
    for folder, source in LEARNER.items():
        installed = Path(sys.prefix) / folder / source.name
        assert installed.exists(), f"{installed} is missing: run the set-up command again (README)"
        assert json.loads(installed.read_text()) == json.loads(source.read_text())


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
    cli = json.loads((etc / "jupyter_nbconvert_config.json").read_text())["NbConvertBase"]
    server = json.loads(LEARNER[SERVER_CONFIG_D].read_text())["NbConvertBase"]
    assert cli == server
    order = cli["display_data_priority"]
    assert order.index("text/html") < order.index("application/vnd.jupyter.widget-view+json")


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
