"""pyproject.toml and environment.yml install the same things; the console script exists."""
import tomllib

import yaml

from helpers import REPO


def _pyproject():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return project["dependencies"] + project["optional-dependencies"]["dev"], project


def _environment():
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    (pip,) = [d["pip"] for d in env["dependencies"] if isinstance(d, dict)]
    return pip


def test_environment_yml_lists_what_pyproject_lists():
    deps, _ = _pyproject()
    assert sorted(deps) == sorted(_environment())


def test_console_script_points_at_the_cli():
    _, project = _pyproject()
    module, func = project["scripts"]["autograder"].split(":")
    assert module == "autograder.cli" and callable(getattr(__import__(module, fromlist=[func]), func))
