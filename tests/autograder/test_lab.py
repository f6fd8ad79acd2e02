"""Who sees what in JupyterLab: the learner's configuration that the set-up installs, and the
instructor's overrides, read back through Jupyter's own configuration readers."""
import json
import shutil
import sys
from pathlib import Path

from jupyter_server.extension.config import ExtensionConfigManager
from jupyter_server.services.config.manager import ConfigManager

from autograder.lab import (INSTRUCTOR_LAB_PLUGINS, INSTRUCTOR_SERVER_EXTENSIONS, LAB_CONFIG_D,
                            SERVER_CONFIG_D, instructor_mode, set_instructor_mode)
from helpers import REPO

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
