"""A real JupyterHub for the hub tests, brought up by the commands docs/instructor.md gives,
and what both test files do on it.

``running_hub`` writes a course file (two courses; three learners, one of them in both; one
instructor per course), runs the documented commands (``autograder hub setup``, then
``jupyterhub -f``), waits until the hub answers, and on the way out stops everything it
started and runs ``autograder hub remove`` (users, homes, folders), even when a test failed.
Every account name carries this process's id, so two runs on one machine never share one.

``Person`` is someone's browser tab on the hub. ``refused`` and ``missed`` try a learner's
attacks from their terminal; ``AFTER_CLASS`` and ``GUESSES`` are those that need what a class
leaves behind (test_hub_class.py tries them at its end; test_hub_people_apart.py the rest).
"""
from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from autograder.hub.course_file import Hub, load
from helpers import REPO, free_port, shown_to_all_users

BIN = Path(sys.executable).parent
DOCS = REPO / "docs" / "instructor.md"
PASSWORD = "trial-password-of-the-test"
ASSIGNMENT = "02_attention"


def documented_commands() -> list[str]:
    """The shell lines of the block that follows ``<!-- hub-commands -->`` in the docs."""
    text = DOCS.read_text()
    match = re.search(r"<!-- hub-commands[^>]*-->\s*```bash\n(.*?)```", text, re.S)
    assert match, f"{DOCS} has no ```bash block after <!-- hub-commands -->"
    lines = [line.split("#", 1)[0].strip() for line in match.group(1).splitlines()]
    return [line for line in lines if line]


def _here(command: str, course_file: Path, hub: Hub) -> str:
    """A documented line with this machine's paths: the checkout, its environment, the file."""
    command = re.sub(r"(/opt/transformer-course/)?\.venv/bin/", f"{BIN}/", command)
    return (command.replace("/opt/transformer-course", str(REPO)).replace("hub.toml", str(course_file))
            .replace("/srv/jupyterhub", str(hub.root)))


@dataclass
class Site:
    hub: Hub
    url: str
    course_file: Path
    learners: dict[str, str]      # role in the test (honest, mistake, blank) -> user name
    course: str                   # the course the three learners take
    other_course: str             # the second course (only the honest learner takes it too)
    instructor: str               # instructor of ``course``
    other_instructor: str         # instructor of ``other_course`` only
    log: Path

    def course_dir(self, course: str | None = None) -> Path:
        course = course or self.course
        return self.hub.home / f"grader-{course}" / course

    def home(self, user: str) -> Path:
        return self.hub.home / user


def _course_file(top: Path, tag: str) -> str:
    ada, bo, cy, ins, inb = (f"h{tag}{n}" for n in ("ada", "bo", "cy", "ins", "inb"))
    return f'''\
[hub]
url = "http://127.0.0.1:{free_port()}"
root = "{top}/jupyterhub"
exchange = "{top}/exchange"
home = "{top}/home"
password = "{PASSWORD}"
hub_port = {free_port()}
proxy_api_port = {free_port()}

[courses.tf{tag}]
instructors = ["{ins}"]
learners = ["{ada}", "{bo}", "{cy}"]
formgrader_port = {free_port()}
[[courses.tf{tag}.assignments]]
name = "{ASSIGNMENT}"
due = 2030-06-30T23:59:00Z

[courses.nlp{tag}]
instructors = ["{inb}"]
learners = ["{ada}"]
formgrader_port = {free_port()}
[[courses.nlp{tag}.assignments]]
name = "{ASSIGNMENT}"
'''


def _answers(url: str, proc: subprocess.Popen, timeout: float) -> bool:
    """Whether ``url`` answers within ``timeout`` s while ``proc`` (that serves it) runs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            urllib.request.urlopen(url, timeout=2)
            return True
        except OSError:
            time.sleep(0.5)
    return False


def _processes_of(users: set[str]) -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["username"]) if p.info["username"] in users]


@contextmanager
def running_hub():
    """A ``Site`` with its hub up; everything removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("a hub makes Unix users: it needs root (CI runs as root)")
    if not shutil.which("configurable-http-proxy"):
        pytest.skip("configurable-http-proxy is not installed (npm install -g configurable-http-proxy; "
                    ".ci/run installs it)")
    tag = str(os.getpid() % 100000)
    top = Path(tempfile.mkdtemp(prefix="aghub-", dir="/tmp"))
    top.chmod(0o755)  # the homes and the exchange lie below: every user passes through
    course_file = top / "hub.toml"
    course_file.write_text(_course_file(top, tag))
    hub = load(course_file)
    site = Site(hub, hub.url, course_file, {"honest": f"h{tag}ada", "mistake": f"h{tag}bo", "blank": f"h{tag}cy"},
                f"tf{tag}", f"nlp{tag}", f"h{tag}ins", f"h{tag}inb", top / "hub.log")
    cd, setup, start = documented_commands()
    assert cd == "cd /opt/transformer-course" and "autograder hub setup hub.toml" in setup, (cd, setup)
    assert start.endswith("jupyterhub -f jupyterhub_config.py"), start
    proc = None
    try:
        done = subprocess.run(_here(setup, course_file, hub), shell=True, cwd=REPO, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        # root's alone: every learner's server writes into it, and nbgrader's submit names the
        # submission's folder in the exchange there (docs/instructor.md: keep the hub's log private)
        with open(os.open(site.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as log:
            proc = subprocess.Popen([*shown_to_all_users(), "bash", "-c", _here(start, course_file, hub)],
                                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        if not _answers(f"{site.url}/hub/api/", proc, 240):
            pytest.fail(f"the hub did not answer within 240 s (or stopped):\n{site.log.read_text()[-4000:]}")
        yield site
    finally:
        _stop(proc, hub)
        subprocess.run([str(BIN / "autograder"), "hub", "remove", str(course_file)], capture_output=True,
                       timeout=120)
        shutil.rmtree(top, ignore_errors=True)


def _stop(proc: subprocess.Popen | None, hub: Hub) -> None:
    """Stop the servers the hub started for the test's accounts, then the hub and its proxy."""
    made = hub.root / "state" / "accounts"
    accounts = set(made.read_text().split()) if made.exists() else set()
    for p in _processes_of(accounts):
        with contextlib.suppress(psutil.NoSuchProcess):  # it may end between the listing and the signal
            p.terminate()
    psutil.wait_procs(_processes_of(accounts), timeout=30)
    if proc is not None and proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)  # the session the test started the hub in
            proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        except ProcessLookupError:
            pass
    for p in _processes_of(accounts):
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()


class Person:
    """One person's browser tab on the hub, logged in."""

    def __init__(self, browser, site, user: str, artifacts: Path):
        self.site, self.user, self.artifacts = site, user, artifacts
        self.page = browser.new_page(viewport={"width": 1400, "height": 1000})
        self.page.set_default_timeout(120_000)
        self.page.goto(f"{site.url}/hub/login")
        self.page.fill("#username_input", user)
        self.page.fill("#password_input", PASSWORD)
        self.page.click("#login_submit")
        self.page.wait_for_url(re.compile(r".*/lab.*"), timeout=240_000)  # the hub spawns the server

    def shot(self, step: str) -> None:
        self.page.screenshot(path=str(self.artifacts / f"{step}-{self.user}.png"), full_page=True)

    # --- a learner's JupyterLab ---
    @property
    def lab(self) -> str:
        return f"{self.site.url}/user/{self.user}"

    def assignment_list(self, course: str):
        """Open Nbgrader > Assignment List on a fresh Lab and choose ``course``; returns the panel."""
        page = self.page
        page.goto(f"{self.lab}/lab?reset")
        page.locator(".jp-Launcher").wait_for()  # the reset layout is in place: it would close the panel
        page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").click()
        page.locator(".lm-Menu-itemLabel", has_text="Assignment List").click()
        panel = page.locator("#assignments")
        panel.locator("#course_list li a", has_text=re.compile(f"^{course}$")).wait_for(state="attached")
        if panel.locator("#course_list_default").inner_text().strip() != course:
            panel.locator("#course_list_dropdown").click()
            # the menu's item, clicked as the open menu would (it may still be closing or fading in)
            panel.locator("#course_list li a", has_text=re.compile(f"^{course}$")).dispatch_event("click")
        try:
            page.wait_for_function("c => document.querySelector('#course_list_default')?.textContent.trim() == c",
                                   arg=course)
        except Exception:
            self.shot("failed-course-choice")
            raise
        return panel

    def courses(self) -> list[str]:
        return self.page.locator("#course_list li a").all_inner_texts()

    def save(self, path: str, nb: dict) -> None:
        """Save a notebook into the learner's server, as JupyterLab's save does (contents API)."""
        status = self.page.evaluate("""async ([url, nb]) => {
            const xsrf = document.cookie.split('; ').find(c => c.startsWith('_xsrf=')).split('=')[1];
            const r = await fetch(url, {method: 'PUT', headers: {'X-XSRFToken': decodeURIComponent(xsrf),
                'Content-Type': 'application/json'}, body: JSON.stringify({type: 'notebook', format: 'json',
                content: nb})});
            return r.status; }""", [f"{self.lab}/api/contents/{path}", nb])
        assert status == 200, status

    def validate(self, path: str) -> str:
        """Open the notebook, press Validate, return the dialog's text (and close it)."""
        page = self.page
        page.goto(f"{self.lab}/lab/tree/{path}?reset")
        notebook = page.locator(".jp-NotebookPanel:visible")
        notebook.locator(".jp-Notebook .jp-Cell").first.wait_for()
        notebook.locator(".validate-button").click()
        text = page.wait_for_selector(".jp-Dialog", timeout=300_000).inner_text()
        self.shot("3-validate")
        page.locator(".jp-Dialog .jp-mod-accept").click()
        return text

    # --- the formgrader ---
    def formgrader(self, course: str, view: str = "manage_assignments"):
        return self.page.goto(f"{self.site.url}/services/{course}/formgrader/{view}")

    def assignment_action(self, course: str, column: str) -> None:
        """Press the button in ``column`` of the assignment's row (Manage Assignments)."""
        self.formgrader(course)
        self.page.locator("#main-table tr", has_text=ASSIGNMENT).locator(f"td.{column} a").click()
        self.outcome(f"formgrader-{column}")

    def outcome(self, step: str) -> None:
        """Wait for the formgrader's dialog that says how an action went; fail on an error."""
        page = self.page
        dialog = page.locator("#success-modal, #error-modal").first
        dialog.wait_for(timeout=300_000)
        self.shot(step)
        message = dialog.inner_text()
        assert dialog.get_attribute("id") == "success-modal", message
        dialog.locator(".modal-footer button").first.click()
        dialog.wait_for(state="detached")


# --- a learner's attacks from their terminal (the attacker takes the first course only; the
# victim, both) ---

# what exists only once a class has gone (nbgrader makes the exchange's folders as it releases,
# collects and returns feedback; the first grading makes the secret; a submission names its
# folder in the servers' log): test_hub_class.py tries these at its end, with ``refused``
AFTER_CLASS = {
    "another learner's notebook": "cat {victim_home}/{course}/{assignment}/attention.ipynb",
    "the exchange's inbound folder (everyone's submissions)": "ls {inbound}",
    "the released feedback folder": "ls {exchange}/{course}/feedback",
    "the course secret": "cat {course_dir}/.autograder/secret",
    "a file planted in the course's release": "touch {exchange}/{course}/outbound/{assignment}/planted.ipynb",
    "another learner's submission, by its whole name": "cat {submission}/attention.ipynb",
    "the secret that names another learner's feedback, by its whole name": "cat {submission}/submission_secret.txt",
    "another learner's submission removed, by its whole name": "rm -f {submission}/attention.ipynb",
    # inbound is sticky (autograder hub setup): no learner renames or removes another's folder
    "another learner's submission renamed, by its whole name": "mv -T {submission} {submission}.moved",
}
# what a learner who knows the victim's login, the assignment and the very time of their
# submission tries, not knowing the 12 random characters that end its folder's name
# (nbgrader/exchange/default/submit.py): tried at the end of test_hub_class.py, with ``missed``
GUESSES = {
    "another learner's submission, by its name less the random part": "cat {stem}/attention.ipynb",
    "another learner's submission, by a glob over the random part": "cat {stem}*/attention.ipynb",
    "another learner's submission, by a glob over the time": "cat {inbound}/{victim}+{assignment}+*/attention.ipynb",
    "another learner's submission, found by find": "find {inbound} -name {victim}'+*'",
}


def placeholders(site: Site) -> dict[str, str]:
    """The values of the attempts' {placeholders}, quoted for ``sh`` (nbgrader's folder names
    hold spaces), except where a template adds a glob's ``*``."""
    victim = site.learners["honest"]
    inbound = site.hub.exchange / site.course / "inbound"
    found = sorted(inbound.glob(f"{victim}+{ASSIGNMENT}+*"))  # as root, who may list it
    submission = str(found[-1] if found else inbound / f"{victim}+{ASSIGNMENT}+(not submitted)")
    values = {"victim_home": site.home(victim), "victim": victim, "course": site.course, "assignment": ASSIGNMENT,
              "exchange": site.hub.exchange, "inbound": inbound, "course_dir": site.course_dir(),
              "root": site.hub.root, "log": site.log, "submission": submission}
    return {k: shlex.quote(str(v)) for k, v in values.items()} | {"stem": shlex.quote(submission.rsplit("+", 1)[0])}


def _as_learner(name: str, command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["runuser", "-u", name, "--", "sh", "-c", command], capture_output=True, text=True,
                          timeout=60)


REFUSALS = ("Permission denied", "Operation not permitted")  # EACCES; EPERM: a sticky folder


def refused(site: Site, name: str, command: str) -> str | None:
    """None if the learner ``name`` is refused ``command`` (a template of the attempts) for want
    of permission; else what happened. A target that is not there is not a refusal."""
    command = command.format(**placeholders(site))
    target = Path(shlex.split(command)[-1])
    there = target.parent if command.startswith(("touch", "mv")) else target
    if not there.exists():
        return f"{there} is not there, so {command!r} proves nothing"
    tried = _as_learner(name, command)
    if tried.returncode != 0 and any(e in tried.stderr for e in REFUSALS):
        return None
    return f"{command!r}: exit {tried.returncode}, {tried.stdout[:300]!r} {tried.stderr!r}"


def missed(site: Site, name: str, command: str) -> str | None:
    """None if ``command`` (a template of GUESSES), run by the learner ``name`` while the
    victim's submission is there, fails and shows nothing of it; else what happened."""
    values = placeholders(site)
    submission = Path(shlex.split(values["submission"])[0])
    if not (submission / "attention.ipynb").exists():
        return f"{submission} has no attention.ipynb, so guessing at it proves nothing"
    command = command.format(**values)
    tried = _as_learner(name, command)
    errors = ("Permission denied", "No such file or directory")
    if tried.returncode != 0 and any(e in tried.stderr for e in errors) and submission.name not in tried.stdout:
        return None
    return f"{command!r}: exit {tried.returncode}, {tried.stdout[:300]!r} {tried.stderr!r}"
