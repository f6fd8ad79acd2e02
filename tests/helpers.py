"""Shared test tools: run a notebook, grade one, make a mutant of a solution notebook, grade as
a learner without root on a system Python, start a Jupyter server and a headless browser."""
from __future__ import annotations

import functools
import inspect
import json
import os
import pwd
import re
import shutil
import socket
import stat
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from autograder.grading import Result, grade_notebook

REPO = Path(__file__).resolve().parent.parent
SOLUTIONS = REPO / "solutions"
NOTEBOOKS = REPO / "notebooks"

# The run modes in which the tests of a notebook's text check it: full mode trains for minutes,
# so it runs only when asked for (COURSE_TEST_FULL=1 python -m pytest tests/notebooks/...).
FULL = pytest.param("full", marks=pytest.mark.skipif(
    not os.environ.get("COURSE_TEST_FULL"), reason="full mode takes minutes: set COURSE_TEST_FULL=1"))
MODES = ["ci", FULL]


def run_notebook(path: str | Path, mode: str = "ci", timeout: int = 300,
                 values: bool = False) -> nbformat.NotebookNode:
    """Execute a notebook top to bottom in COURSE_MODE=mode; any cell error fails the test.

    With ``values`` one more cell at the end shows the notebook's final variables as JSON
    (``final_values`` reads them), so a test can check what the text says about them.
    """
    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    if values:
        nb.cells.append(nbformat.v4.new_code_cell(
            inspect.getsource(_json_values)
            + "\nfrom IPython.display import display as _display\n"
            "_display({'application/json': _json_values(globals())}, raw=True)"))
    old = os.environ.get("COURSE_MODE")
    os.environ["COURSE_MODE"] = mode
    try:
        NotebookClient(nb, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()
    finally:
        if old is None:
            os.environ.pop("COURSE_MODE", None)
        else:
            os.environ["COURSE_MODE"] = old
    return nb


def _json_values(namespace: dict, max_size: int = 10_000) -> dict:
    """{name: value} for the globals that JSON can carry: numbers, strings, numpy arrays, and
    dicts, lists and tuples of these, each of at most ``max_size`` elements and nested at most
    four deep (arrays as lists; NaN and inf become None). Runs inside the kernel, so it
    imports what it uses."""
    import numbers

    import numpy as np

    def plain(value, depth=0):  # ... (Ellipsis) for what JSON cannot carry
        if isinstance(value, (np.ndarray, np.generic)):
            return plain(value.tolist(), depth) if value.size <= max_size else ...
        if isinstance(value, (str, list, tuple, dict)) and (len(value) > max_size or depth > 4):
            return ...
        if isinstance(value, (bool, str)) or value is None:
            return value
        if isinstance(value, numbers.Integral):
            return int(value)
        if isinstance(value, numbers.Real):
            return float(value) if np.isfinite(value) else None
        if isinstance(value, (list, tuple)):
            items = [plain(v, depth + 1) for v in value]
            return ... if any(v is ... for v in items) else items
        if isinstance(value, dict) and all(isinstance(k, (str, int)) for k in value):
            items = {str(k): plain(v, depth + 1) for k, v in value.items()}
            return ... if any(v is ... for v in items.values()) else items
        return ...

    kept = {name: plain(value) for name, value in namespace.items() if not name.startswith("_")}
    return {name: value for name, value in kept.items() if value is not ...}


def final_values(nb: nbformat.NotebookNode) -> dict:
    """The variables the last cell of ``run_notebook(..., values=True)`` showed."""
    (output,) = nb.cells[-1].outputs
    return output["data"]["application/json"]


def solution_run(assignment: str, mode: str = "ci") -> tuple[nbformat.NotebookNode, dict]:
    """The solution notebook of ``assignment`` executed once per test session and mode, and its
    final variables: the test that it runs and the tests of what its text says share one run."""
    return _solution_run(assignment, mode)  # one cache key however the mode is passed


@functools.cache
def _solution_run(assignment: str, mode: str) -> tuple[nbformat.NotebookNode, dict]:
    (path,) = (SOLUTIONS / assignment).glob("*.ipynb")
    nb = run_notebook(path, mode, timeout=300 if mode != "full" else 3600, values=True)
    return nb, final_values(nb)


def claim(path: str | Path, sentence: str) -> None:
    """``sentence`` as it stands in a markdown cell of the notebook (whitespace may differ):
    a test that checks a sentence against the numbers fails when the sentence is rewritten."""
    words = re.escape(" ".join(sentence.split())).replace(r"\ ", r"\s+")
    cells = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown"]
    assert any(re.search(words, source) for source in cells), f"{Path(path).name} no longer says: {sentence}"


def grade(path: str | Path, assignment: str | None = None) -> Result:
    """Grade a notebook through the real nbgrader pipeline."""
    return grade_notebook(path, assignment)


@functools.cache
def graded_with_feedback(path: Path) -> tuple[Result, str]:
    """A committed notebook (``solutions/`` or ``notebooks/``) graded once per test session, with
    its feedback report: the tests of its score and of what the report shows share one grading."""
    with tempfile.TemporaryDirectory() as tmp:
        result = grade_notebook(path, feedback_to=Path(tmp) / "feedback.html")
        return result, Path(result.feedback_html).read_text(encoding="utf-8")


def with_cells(solution_path: str | Path, after: str, sources: list[str], tmp_path: Path) -> Path:
    """A copy of a solution notebook with code cells of ``sources`` right after the cell whose
    grade_id is ``after``; the copy keeps the solution's file name (its assignment)."""
    nb = nbformat.read(solution_path, as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == after)
    nb.cells[at + 1:at + 1] = [nbformat.v4.new_code_cell(s) for s in sources]
    out = tmp_path / Path(solution_path).name
    nbformat.write(nb, out)
    return out


def mutant(solution_path: str | Path, grade_id: str, old: str, new: str, tmp_path: Path,
           base: str | Path | None = None) -> Path:
    """A copy of a solution notebook with ``old`` replaced by ``new`` in one solution cell.

    ``base`` lets several mutants (in different cells) pile up in one file; the result keeps
    the solution notebook's file name, so the grader finds its assignment.
    """
    src = Path(base or solution_path)
    nb = nbformat.read(src, as_version=4)
    cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id]
    assert len(cells) == 1, f"no single cell with grade_id {grade_id!r} in {src}"
    assert old in cells[0].source, f"{old!r} not in cell {grade_id!r}"
    cells[0].source = cells[0].source.replace(old, new)
    out = tmp_path / Path(solution_path).name
    nbformat.write(nb, out)
    return out


def grade_mutant_bank(solution: Path, edits, tmp_path: Path) -> None:
    """Apply ``edits`` to a solution notebook, grade it once, and check the verdicts.

    ``edits``: (grade_id, old, new, exercise_id, name) tuples. Each named exercise loses
    points and, when ``name`` is given, its feedback contains it (``exercise_id`` None: an
    edit that only sets up another one). Exercises no edit touched keep full marks, unless
    they run a touched function (``helpers``): then their feedback says so.
    """
    from autograder.exercises import get

    path = None
    for grade_id, old, new, *_ in edits:
        path = mutant(solution, grade_id, old, new, tmp_path, base=path)
    result = {e.id: e for e in grade(path).exercises}
    for _, _, _, exercise_id, name in edits:
        if exercise_id is None:
            continue
        verdict = result[exercise_id]
        assert verdict.points < verdict.max_points, (exercise_id, verdict.messages)
        if name:
            assert any(name in m for m in verdict.messages), (exercise_id, name, verdict.messages)
    touched = {e[3] for e in edits}
    broken = {get(i).function for i in touched if i}
    for i in set(result) - touched:
        if set(get(i).helpers) & broken and result[i].points < result[i].max_points:
            assert any("fix that first" in m for m in result[i].messages), (i, result[i].messages)
        else:
            assert result[i].points == result[i].max_points, (i, result[i].messages)



def padded_notebook(path: Path, source: Path, edit, **pads) -> Path:
    """``source``, its JSON ``edit``ed, written to ``path``, each string ``"@name@"`` in it
    replaced by the bytes ``pads[name]`` holds: a list of pieces, written one at a time (the
    file may reach hundreds of MB; it is never held whole)."""
    nb = json.loads(Path(source).read_text())
    edit(nb)
    parts = re.split(rb'"@(\w+)@"', json.dumps(nb, indent=1).encode())
    with path.open("wb") as f:
        for i, part in enumerate(parts):
            for piece in pads[part.decode()] if i % 2 else [part]:
                f.write(piece)
    return path


def saved_outputs(nb) -> None:
    """An ``edit`` for ``padded_notebook``: ``"@outputs@"`` as every code cell's outputs."""
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"] = "@outputs@"


def outputs_as_saved(lines: int, images: int) -> bytes:
    """A code cell's outputs as JupyterLab saves them: ``lines`` thousand lines of text printed
    (about 1 MB a thousand) and ``images`` PNG images (about 3 MB each), as JSON."""
    text = {"output_type": "stream", "name": "stdout", "text": ["loss 0.123456789 " * 60 + "\n"] * 1000}
    image = {"output_type": "display_data", "metadata": {}, "data": {"image/png": "iVBORw0KGgo=" * 200_000}}
    return json.dumps([text] * lines + [image] * images).encode()

def linked_copy(src: Path, dest: Path) -> None:
    """``src`` (a folder: a whole virtual environment) copied to ``dest`` as hard links: seconds,
    no space. Skips the test where the two are on different file systems."""
    proc = subprocess.run(["cp", "-al", str(src), str(dest)], capture_output=True, text=True)
    if "cross-device" in proc.stderr:
        pytest.skip(f"{src} and {dest.parent} are on different file systems: no hard links")
    assert proc.returncode == 0, proc.stderr


def submit_with(python: str | Path, notebook: Path, env: dict[str, str], user: str | None = None,
                cwd: Path | None = None) -> tuple[subprocess.CompletedProcess, dict | None]:
    """``autograder submit --json notebook`` run by ``python`` with only ``env`` (as ``user``,
    if given): the process and the result it printed (None if it printed none)."""
    command = ["env", "-i", *(f"{k}={v}" for k, v in env.items()),
               str(python), "-m", "autograder.cli", "submit", "--json", str(notebook)]
    if user:
        command = ["runuser", "-u", user, "--", *command]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=cwd)
    start = proc.stdout.find("{")
    return proc, json.loads(proc.stdout[start:]) if start >= 0 else None


def system_python() -> str | None:
    """A Python of this version installed in /usr or /usr/local, not a virtual environment."""
    version = "%d.%d" % sys.version_info[:2]
    for python in dict.fromkeys([f"{sys.base_prefix}/bin/python{version}", f"/usr/bin/python{version}",
                                 f"/usr/local/bin/python{version}"]):
        if not os.access(python, os.X_OK):
            continue
        said = subprocess.run([python, "-c", "import sys; print(sys.prefix, sys.base_prefix)"],
                              capture_output=True, text=True).stdout.split()
        if len(set(said)) == 1 and said[0] in ("/usr", "/usr/local"):
            return python
    return None


@dataclass
class Learner:
    """A user without root with a clone of the course it owns (its folder named with a space and
    an accent), on a system Python whose packages are in its user site (``pip install --user``)."""
    user: str
    uid: int
    home: Path
    python: str
    clone: Path

    def submit(self, notebook: Path, **env: str):
        """``submit_with`` as this learner, from its home, ``env`` added to its own."""
        base = {"HOME": str(self.home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
                "PYTHONPATH": str(self.clone)}
        return submit_with(self.python, notebook, {**base, **env}, user=self.user, cwd=self.home)


@contextmanager
def learner_without_root():
    """A ``Learner``, made for the test (``useradd``) and removed after it."""
    if os.geteuid() != 0:
        pytest.skip("making a user takes root (CI runs as root)")
    python = system_python()
    if python is None:
        pytest.skip("no system Python %d.%d in /usr or /usr/local" % sys.version_info[:2])
    user = f"aglearner{os.getpid()}"  # one per pytest worker
    subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", user], check=True)
    try:
        account = pwd.getpwnam(user)
        home = Path(account.pw_dir)
        site = home / ".local" / "lib" / ("python%d.%d" % sys.version_info[:2]) / "site-packages"
        site.parent.mkdir(parents=True)
        linked_copy(Path(sysconfig.get_paths()["purelib"]), site)
        (home / ".local" / "share").mkdir()
        if (Path(sys.prefix) / "share" / "jupyter").is_dir():  # nbconvert's templates
            linked_copy(Path(sys.prefix) / "share" / "jupyter", home / ".local" / "share" / "jupyter")
        clone = home / "transformer course é"
        for top in ("autograder", "course_lib", "solutions", "notebooks"):
            shutil.copytree(REPO / top, clone / top, ignore=shutil.ignore_patterns("__pycache__", "*.html"))
        subprocess.run(["chown", "-R", f"{user}:{user}", str(clone)], check=True)
        yield Learner(user, account.pw_uid, home, python, clone)
    finally:
        subprocess.run(["userdel", "--remove", user], capture_output=True)


# --- other Unix users running the course's Python ---------------------------------------------
def _hidden_ancestor(path: Path) -> Path | None:
    """The outermost folder, ``path`` itself included, that other users cannot enter (/root, or
    the 0700 folder mktemp makes for a CI checkout, or holds it), if any."""
    return next((p for p in (*reversed(path.parents), path) if not p.stat().st_mode & stat.S_IXOTH), None)


def shown_to_all_users() -> list[str]:
    """A command prefix (as root) under which every user can run the course's Python.

    On a hub the Python installation, the environment and the checkout are readable by all
    (docs/instructor.md). Where one lies in a folder closed to others (a pyenv under /root, a
    checkout in a 0700 temporary folder), bubblewrap makes each such folder an empty tmpfs with
    the entries on the way to those trees bound back, read-only (a closed folder that is itself
    one of them is bound back entry by entry, since a bind keeps its mode); nothing else
    changes. Empty where nothing is closed."""
    needed = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), REPO.resolve()}
    needed = {p for p in needed if not any(q in p.parents for q in needed)}  # outermost only
    hidden = {p: _hidden_ancestor(p) for p in needed}
    if not any(hidden.values()):
        return []
    args = ["bwrap", "--dev-bind", "/", "/"]
    for folder in sorted({h for h in hidden.values() if h}):
        args += ["--perms", "0755", "--tmpfs", str(folder)]
    for path in sorted(p for p, h in hidden.items() if h):
        # the entry of the closed folder on the way to ``path``: a deeper bind would make the
        # folders between them anew, closed as the originals (bubblewrap copies their modes)
        below = hidden[path] / path.relative_to(hidden[path]).parts[0] if path != hidden[path] else None
        for shown in (sorted(path.iterdir()) if below is None else [below]):
            args += ["--ro-bind", str(shown), str(shown)]
    return [*args, "--"]


# --- a Jupyter server and a browser, for the tests that drive them -----------------------------
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# A browser test's JupyterLab: no token or password, no news or update check (no network)
OPEN_LAB = ("--IdentityProvider.token=", "--ServerApp.password=", "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate")


@contextmanager
def jupyter_server(app: str, root: Path, *flags: str, env: dict | None = None, ready: str = "/api/status",
                   cwd: Path | None = None):
    """``jupyter <app>`` ("lab" or "server") serving ``root`` on a free local port, with this
    environment's extensions; yields its URL once ``ready`` (a path, with its query) answers.

    ``flags``: more command-line options (the token, say); ``env``: variables for the server and
    its kernels on top of this process's. Fails the test if it does not answer within 60 s.
    """
    port = free_port()
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("jupyter")), app, "--no-browser", "--allow-root",
         f"--port={port}", "--ip=127.0.0.1", f"--ServerApp.root_dir={root}", *flags],
        cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url + ready, timeout=1)
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"jupyter {app} did not answer {ready} within 60 s")
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@contextmanager
def chromium():
    """Debian's headless Chromium through Playwright (whose own browser download cannot work here)."""
    from playwright.sync_api import sync_playwright  # lazy: only the browser tests need it

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        try:
            yield browser
        finally:
            browser.close()
