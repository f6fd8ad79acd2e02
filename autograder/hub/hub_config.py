"""``jupyterhub_config.py`` and the shared nbgrader configuration, written from a course file. [trusted]

The layout is nbgrader's "Using nbgrader with JupyterHub", multiple classes: each course has a
grader account ``grader-<course>`` that owns the course directory and runs the course's
formgrader as a hub-managed service named after the course; the hub group
``formgrade-<course>`` (the course's instructors and its grader account) may open that
service and no other, ``nbgrader-<course>`` holds its learners. nbgrader's
``JupyterHubAuthPlugin`` reads these groups to show each person the courses they are in, and
``Exchange.path_includes_course`` gives every course a folder of its own in the exchange;
``exchange.PrivateSubmit`` keeps each submission there from every learner but its author.

Everyone's server is spawned by ``LocalProcessSpawner`` as their own Unix user, from the
course's Python environment (the one that runs ``autograder hub setup``).
"""
from __future__ import annotations

import sys
from pathlib import Path
from pprint import pformat

from autograder.hub.course_file import Course, Hub
from autograder.pipeline.plan import SECRET_ENV
from autograder.pipeline.sandbox import ISOLATION_ENV

BIN = Path(sys.executable).parent  # the course's environment: not resolved, a venv's bin/


def shared_config_dir(hub: Hub) -> Path:
    """Jupyter configuration every server and service on the hub reads (JUPYTER_CONFIG_PATH)."""
    return hub.root / "etc" / "jupyter"


def instructor_config_prefix(hub: Hub) -> Path:
    """The prefix under which ``set_instructor_mode`` writes the formgrader services' overrides."""
    return hub.root / "instructor"


def state_dir(hub: Hub) -> Path:
    """The hub's database, cookie secret and proxy pid: root's alone."""
    return hub.root / "state"


def course_directory(hub: Hub, course: Course) -> Path:
    """Where the course's sources, gradebook and secret live: the grader account's alone."""
    return hub.home / course.grader / course.id


def environment(hub: Hub, course: Course | None = None) -> dict[str, str]:
    """What every spawned server runs with; with ``course``, that course's formgrader service
    (its instructor tools, and the course's own secret for the hidden cases)."""
    config = [shared_config_dir(hub)]
    if course is not None:
        config.insert(0, instructor_config_prefix(hub) / "etc" / "jupyter")
    env = {"JUPYTER_CONFIG_PATH": ":".join(map(str, config)),
           "PATH": f"{BIN}:/usr/local/bin:/usr/bin:/bin",
           ISOLATION_ENV: "required"}  # grading (Validate, autograde) only in the sandbox
    if course is not None:
        env[SECRET_ENV] = str(course_directory(hub, course) / ".autograder" / "secret")
    return env


def nbgrader_config(hub: Hub) -> str:
    """The nbgrader_config.py every account on the hub reads (nbgrader's global config)."""
    return f'''\
# Written by `autograder hub setup`: nbgrader's settings for every account on this hub.
from nbgrader.auth import JupyterHubAuthPlugin

c = get_config()  # noqa: F821 (nbgrader provides it)
c.Exchange.root = {str(hub.exchange)!r}
c.Exchange.path_includes_course = True  # <exchange>/<course>/..., <home>/<course>/<assignment>
c.Authenticator.plugin_class = JupyterHubAuthPlugin  # courses from the groups nbgrader-<course>
# a submission readable by its learner and the course's graders only (autograder/hub/exchange.py)
c.ExchangeFactory.submit = "autograder.hub.exchange.PrivateSubmit"
'''


def _groups(hub: Hub) -> dict[str, dict]:
    groups = {}
    for course in hub.courses:
        groups[f"formgrade-{course.id}"] = {"users": [*course.instructors, course.grader]}
        groups[f"nbgrader-{course.id}"] = {"users": list(course.learners)}
    return groups


def _roles(hub: Hub) -> list[dict]:
    roles = [{
        # a person's server may ask the hub which groups its owner is in (nbgrader's
        # JupyterHubAuthPlugin), on top of JupyterHub's default server scopes; nothing more
        "name": "server",
        "scopes": ["users:activity!user", "access:servers!server", "read:users:groups!user",
                   "read:users:name!user"],
    }]
    for course in hub.courses:
        roles.append({"name": f"formgrade-{course.id}", "groups": [f"formgrade-{course.id}"],
                      "scopes": [f"access:services!service={course.id}", f"read:services!service={course.id}",
                                 "list:services"]})
        roles.append({"name": f"nbgrader-{course.id}", "groups": [f"nbgrader-{course.id}"],
                      "scopes": [f"read:services!service={course.id}", "list:services"]})
        # the formgrader runs as the grader account: nbgrader asks which courses that account
        # grades, and adding a learner in the formgrader adds them to nbgrader-<course>
        roles.append({"name": f"service-{course.id}", "services": [course.id],
                      "scopes": [f"read:users:groups!user={course.grader}", f"read:users:name!user={course.grader}",
                                 f"list:groups!group=nbgrader-{course.id}", f"groups!group=nbgrader-{course.id}"]})
    return roles


def _services(hub: Hub) -> list[dict]:
    return [{
        "name": course.id,
        "url": f"http://127.0.0.1:{course.formgrader_port}",
        "command": [str(BIN / "jupyterhub-singleuser")],
        "user": course.grader,
        "cwd": str(course_directory(hub, course)),
        "environment": environment(hub, course),
        "oauth_no_confirm": True,
        "display": True,
    } for course in hub.courses]


def jupyterhub_config(hub: Hub, source: Path) -> str:
    """The text of jupyterhub_config.py for ``hub`` (read from the course file ``source``)."""
    state = state_dir(hub)
    if hub.password is None:
        auth = 'c.JupyterHub.authenticator_class = "pam"  # people log in with their Unix password'
    else:
        auth = ('# a trial hub: every account logs in with the course file\'s password\n'
                'c.JupyterHub.authenticator_class = "dummy"\n'
                f'c.DummyAuthenticator.password = {hub.password!r}')
    users = sorted({*hub.people, *(c.grader for c in hub.courses)})
    return f'''\
# Written by `autograder hub setup {source}`: edit that file and run the command again.
# nbgrader's "Using nbgrader with JupyterHub", multiple classes: one grader account and one
# formgrader service per course (/services/<course>/formgrader), groups formgrade-<course>
# (who may open it) and nbgrader-<course> (who learns in it).
c = get_config()  # noqa: F821 (JupyterHub provides it)

c.JupyterHub.bind_url = {hub.url!r}
c.JupyterHub.hub_port = {hub.hub_port}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{hub.proxy_api_port}"
c.ConfigurableHTTPProxy.pid_file = {str(state / "proxy.pid")!r}
c.JupyterHub.db_url = {"sqlite:///" + str(state / "jupyterhub.sqlite")!r}
c.JupyterHub.cookie_secret_file = {str(state / "jupyterhub_cookie_secret")!r}

{auth}
c.Authenticator.allowed_users = {set(users)!r}

# each person's server runs as their own Unix user, from the course's environment
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [{str(BIN / "jupyterhub-singleuser")!r}]
c.Spawner.default_url = "/lab"
c.Spawner.environment = {pformat(environment(hub), indent=4, sort_dicts=False)}


def _own_secret(spawner):
    """Validate draws its hidden cases from a secret of the person's own, in their home (the
    installation's is not theirs to write; a course's formgrader uses the course's)."""
    import os
    import pwd
    return os.path.join(pwd.getpwnam(spawner.user.name).pw_dir, ".autograder", "secret")


c.Spawner.environment[{SECRET_ENV!r}] = _own_secret

c.JupyterHub.load_groups = {pformat(_groups(hub), indent=4, sort_dicts=False)}
c.JupyterHub.load_roles = {pformat(_roles(hub), indent=4, sort_dicts=False)}
c.JupyterHub.services = {pformat(_services(hub), indent=4, sort_dicts=False)}
'''
