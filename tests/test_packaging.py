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


def _audit():
    import importlib.util

    spec = importlib.util.spec_from_file_location("ci_audit", REPO / ".ci" / "audit.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_ci_audit_fails_on_a_known_advisory_and_names_it():
    verdict = _audit().verdict
    found = {"dependencies": [
        {"name": "jupyterlab", "version": "4.2.0", "vulns": [{"id": "GHSA-xxxx", "fix_versions": ["4.6.2"]}]},
        {"name": "numpy", "version": "2.0", "vulns": []},
        {"name": "aiodns", "version": "4.0", "skip_reason": "Dependency not found on PyPI"}]}
    status, lines = verdict(found)
    assert status == 1 and "jupyterlab 4.2.0: GHSA-xxxx (fixed in 4.6.2)" in "\n".join(lines)
    clean = {"dependencies": found["dependencies"][1:]}
    assert verdict(clean) == (0, ["advisory audit: 1 packages audited, no known advisory (1 could not be looked up)"])
    # advisory data out of reach: one line, and no failure
    for report in (None, {"dependencies": found["dependencies"][2:]}, {"oops": 1}):
        status, lines = verdict(report, "Name or service not known")
        assert status == 0 and len(lines) == 1 and "could not be reached" in lines[0]


def test_the_floors_are_above_the_fixed_advisories():
    from packaging.requirements import Requirement
    from packaging.version import Version

    floors = {"jupyterlab": "4.6.2", "notebook": "7.5.6", "jupyter_server": "2.20.0", "jupyterhub": "5.5.1"}
    deps, _ = _pyproject()
    for dep in map(Requirement, deps):
        if dep.name in floors:
            assert not dep.specifier.contains("0.0.1"), dep
            lowest = [s for s in dep.specifier if s.operator in (">=", "==")]
            assert lowest and all(Version(s.version) >= Version(floors[dep.name]) for s in lowest), dep
    assert {Requirement(d).name for d in deps} >= set(floors)
