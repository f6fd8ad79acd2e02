"""The course in JupyterLab: a Validate button that asks the grader; who sees which tools. [trusted]

**Validate.** nbgrader's toolbar button posts the notebook's path to ``/assignments/validate``.
This server extension serves that URL (nbgrader's own ``validate_assignment`` extension is
disabled) and answers with ``autograder validate --json``, run as a child process: grading
takes seconds, so the server stays responsive, and nbgrader's global state while it grades
(working directory, environment, logging) stays out of the server.

**Learner or instructor.** The set-up installs ``jupyter-config/`` into the environment
(``pyproject.toml``, ``shared-data``): the course's extension on, nbgrader's validate off, and
the instructor's tools (formgrader, course list, "Create Assignment") off. Learners keep the
assignment list and Validate. ``autograder instructor-mode on`` writes two files beside those
that turn the instructor's tools back on (they sort after the learner's, so they win);
``off`` removes them.
"""
from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.utils import url_path_join
from nbgrader.server_extensions.validate_assignment.handlers import NbGraderVersionHandler
from tornado import web

INSTRUCTOR_SERVER_EXTENSIONS = ["nbgrader.server_extensions.formgrader",
                                "nbgrader.server_extensions.course_list"]
INSTRUCTOR_LAB_PLUGINS = ["@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
                          "@jupyter/nbgrader:course-list"]
# where the learner's files are installed, and the instructor's written (under sys.prefix)
SERVER_CONFIG_D = Path("etc/jupyter/jupyter_server_config.d")
LAB_CONFIG_D = Path("etc/jupyter/labconfig/page_config.d")
INSTRUCTOR_FILE = "transformer_course_instructor.json"


class ValidateHandler(JupyterHandler):
    """``POST /assignments/validate?path=...``: nbgrader's reply format, the grader's verdict."""

    @web.authenticated
    async def post(self):
        path = self.get_argument("path", None) or self.get_json_body()["path"]
        root = Path(self.contents_manager.root_dir).resolve()
        notebook = (root / path).resolve()
        if not notebook.is_relative_to(root):
            raise web.HTTPError(403, "Access denied: path outside the served directory")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "autograder.cli", "validate", "--json", str(notebook),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
        if proc.returncode in (0, 1):  # the verdict: full marks, or not
            reply = {"success": True, "value": json.loads(out)}
        else:  # the grader could not grade it (not a course notebook, no sandbox, ...)
            message = err.decode(errors="replace").strip() or f"exit status {proc.returncode}"
            reply = {"success": False, "value": message.removeprefix("autograder: ")}
        self.finish(json.dumps(reply))


def _jupyter_server_extension_points():
    return [{"module": "autograder.lab"}]


def _load_jupyter_server_extension(serverapp):
    base_url = serverapp.web_app.settings["base_url"]
    serverapp.web_app.add_handlers(".*$", [
        (url_path_join(base_url, "assignments/validate"), ValidateHandler),
        (url_path_join(base_url, "nbgrader_version"), NbGraderVersionHandler),  # the button asks first
    ])


def _instructor_files(prefix: Path) -> dict[Path, dict]:
    return {
        prefix / SERVER_CONFIG_D / INSTRUCTOR_FILE:
            {"ServerApp": {"jpserver_extensions": {name: True for name in INSTRUCTOR_SERVER_EXTENSIONS}}},
        prefix / LAB_CONFIG_D / INSTRUCTOR_FILE:
            {"disabledExtensions": {name: False for name in INSTRUCTOR_LAB_PLUGINS}},
    }


def set_instructor_mode(on: bool, prefix: Path = Path(sys.prefix)) -> list[Path]:
    """Write (on) or remove (off) the instructor's overrides; returns the files touched."""
    files = _instructor_files(prefix)
    for path, content in files.items():
        if on:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(content, indent=2) + "\n")
        else:
            path.unlink(missing_ok=True)
    return list(files)


def instructor_mode(prefix: Path = Path(sys.prefix)) -> bool:
    return all(path.exists() for path in _instructor_files(prefix))
