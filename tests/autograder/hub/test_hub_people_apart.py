"""The hub keeps people apart: each attempt a learner could make from their own server's
terminal is a test.

Files are tried with the learner's Unix user (``runuser``), as their terminal would; the hub
and its services are asked over HTTP with the token their terminal holds (the server's
``JUPYTERHUB_API_TOKEN``, read from their running server's environment). The attacker is
the learner who takes only the first course; the victim, the learner who takes both.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

from hub_site import Person, refused
from helpers import CHROMIUM, chromium

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                reason="Debian's chromium is not installed (.ci/run installs it)")

# what the attacker tries to read or list on a hub where no class has gone yet (the rest:
# hub_site.AFTER_CLASS and GUESSES, tried at the end of test_hub_class.py)
FILES = {
    "another learner's home": "ls {victim_home}",
    "the course directory": "ls {course_dir}",
    "the gradebook": "cat {course_dir}/gradebook.db",
    "the hub's configuration (its password)": "cat {root}/jupyterhub_config.py",
    "the hub's database": "cat {root}/state/jupyterhub.sqlite",
    "the hub's log (it names every submission's folder)": "cat {log}",
}


@pytest.fixture(scope="module")
def attacker(site, artifacts):
    """The learner's name and the API token of their running server (logged in to start it)."""
    name = site.learners["mistake"]
    with chromium() as browser:
        Person(browser, site, name, artifacts)
    (server,) = [p for p in psutil.process_iter(["username", "cmdline"])
                 if p.info["username"] == name and any("jupyterhub-singleuser" in a for a in p.info["cmdline"] or [])]
    return name, server.environ()["JUPYTERHUB_API_TOKEN"]


@pytest.mark.parametrize("what", FILES)
def test_a_learner_cannot_reach(site, attacker, what):
    name, _ = attacker
    assert refused(site, name, FILES[what]) is None, refused(site, name, FILES[what])


def _status(url: str, token: str) -> int:
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            return reply.status
    except urllib.error.HTTPError as err:
        return err.code


def test_the_token_works_for_what_is_the_learners_own(site, attacker):
    """The other tests' refusals are refusals of this token, not of a broken one."""
    name, token = attacker
    assert _status(f"{site.url}/user/{name}/api/contents", token) == 200
    request = urllib.request.Request(f"{site.url}/hub/api/users/{name}", headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=60) as reply:
        assert f"nbgrader-{site.course}" in json.load(reply)["groups"]


@pytest.mark.parametrize("where", ["the course's formgrader", "the formgrader's API",
                                   "another course's service", "another learner's server",
                                   "the list of users"])
def test_a_learner_token_is_refused_by(site, attacker, where):
    name, token = attacker
    path = {"the course's formgrader": f"/services/{site.course}/formgrader",
            "the formgrader's API": f"/services/{site.course}/formgrader/api/assignments",
            "another course's service": f"/services/{site.other_course}/lab",
            "another learner's server": f"/user/{site.learners['honest']}/api/contents",
            "the list of users": "/hub/api/users"}[where]
    assert _status(site.url + path, token) in (403, 404), path
