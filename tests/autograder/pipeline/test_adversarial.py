"""A hostile learner against the grader, with the course's source in hand.

Each test grades one submission of notebook 00 (two exercises: ``softmax``, 2 points, is
attacked or broken; ``softmax_jvp``, 2 points, stays honest unless it is the target) once,
through the real pipeline, and asserts on that one result: the score, the message naming
the cause, the honest exercise's untouched marks, a sane total, and (fixture ``guarded``)
that no file of the course or the grader changed and no process outlived grading.

An attack that reaches the answer would score; each is written to use what it reaches.
"""
from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import numpy as np
import pytest
from nbformat.v4 import new_code_cell

from autograder.exercises import get
from autograder.pipeline.plan import secret_key, secret_path
from autograder.grading import grade_notebook
from helpers import REPO, SOLUTIONS, grade
from leaks import hidden_values, leaked_values, page_text, submitted_key

SOLUTION = SOLUTIONS / "00_start_here" / "start_here.ipynb"
MARKER = "agattack"  # in the command line of every process an attack starts
CANARY = Path("/tmp/autograder-canary.txt")
SITE = next(p for p in map(Path, sys.path) if p.name == "site-packages")
HONEST_SOFTMAX = ("def softmax(z, axis=-1):\n"
                  "    e = np.exp(z - np.max(z, axis=axis, keepdims=True))\n"
                  "    return e / np.sum(e, axis=axis, keepdims=True)\n")


def _tree_digest() -> str:
    h = hashlib.sha256()
    secret_key()  # make sure the secret exists before the snapshot
    for top in ("course_lib", "autograder", "solutions", "notebooks"):
        for path in sorted((REPO / top).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".html":
                h.update(str(path).encode() + path.read_bytes())
    h.update(secret_path().read_bytes())
    return h.hexdigest()


@pytest.fixture
def guarded():
    CANARY.write_text("intact")
    before = _tree_digest()
    yield
    assert _tree_digest() == before, "a file of the course or the grader changed"
    assert CANARY.read_text() == "intact"
    left = subprocess.run(["pgrep", "-f", MARKER], capture_output=True, text=True).stdout.split()
    assert not left, f"processes outlived grading: {left}"


def submission(tmp_path, softmax=None, jvp=None, after_softmax=(), before_softmax=(), edit=None) -> Path:
    """Notebook 00's solution with the softmax (or jvp) solution cell replaced, cells added."""
    nb = nbformat.read(SOLUTION, as_version=4)
    cells = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in nb.cells}
    if softmax is not None:
        cells["warmup_softmax"].source = softmax
    if jvp is not None:
        cells["warmup_softmax_jvp"].source = jvp
    i = nb.cells.index(cells["grade_warmup_softmax"])
    nb.cells[i + 1:i + 1] = [new_code_cell(s) for s in after_softmax]
    j = nb.cells.index(cells["warmup_softmax"])
    nb.cells[j:j] = [new_code_cell(s) for s in before_softmax]
    if edit:
        edit(nb)
    path = tmp_path / SOLUTION.name
    nbformat.write(nb, path)
    return path


def graded(path):
    result = grade(path)
    assert result.total <= result.max_total == 4
    assert all(0 <= e.points <= e.max_points for e in result.exercises)
    return result.by_id("warmup.softmax"), result.by_id("warmup.softmax_jvp"), result


def says(e, *words):
    text = " ".join(e.messages)
    return all(w in text for w in words)


# --- 1. reaching the answer: the reference, the grader, autograd -------------------------------
REACH = {
    "the library's softmax, imported in the function":
        "def softmax(z, axis=-1):\n    from course_lib.softmax import softmax as ready\n    return ready(z, axis)\n",
    "the library through importlib and an alias of sys.modules":
        "import importlib, sys\nmods = sys.modules\n"
        "def softmax(z, axis=-1):\n"
        "    lib = mods.get('course_lib.softmax') or importlib.import_module('course_lib.softmax')\n"
        "    return lib.softmax(z, axis)\n",
    "the grader's registry, through the check function's globals":
        "def softmax(z, axis=-1):\n"
        "    imp = check.__globals__['__builtins__']['__import__']\n"
        "    ex = imp('autograder.exercises', fromlist=['get']).get('warmup.softmax')\n"
        "    return ex.reference(z=z, axis=axis)\n",
    "the reference's source read from the repository":
        f"def softmax(z, axis=-1):\n    ns = {{}}\n"
        f"    exec(open({str(REPO / 'course_lib' / 'softmax.py')!r}).read(), ns)\n"
        "    return ns['softmax'](z, axis)\n",
    "the repository put first on sys.path":
        f"import sys\nsys.path.insert(0, {str(REPO)!r})\n"
        "for name in [m for m in sys.modules if m.startswith('course_lib')]:\n    del sys.modules[name]\n"
        "def softmax(z, axis=-1):\n    import course_lib.softmax as lib\n    return lib.softmax(z, axis)\n",
    "any softmax.py found on the file system":
        "import os\nfound = []\n"
        "for top in ('/work', '/root', '/home', '/tmp', '/opt', '/srv', '/usr/local', '/var'):\n"
        "    for d, _, files in os.walk(top):\n"
        "        found += [os.path.join(d, f) for f in files if f in ('softmax.py', 'gradebook.db')]\n"
        "def softmax(z, axis=-1):\n"
        "    for path in found:\n"
        "        ns = {}\n"
        "        try:\n            exec(open(path).read(), ns)\n            return ns['softmax'](z, axis)\n"
        "        except Exception:\n            pass\n"
        "    return z\n",
    "scipy's softmax":
        "def softmax(z, axis=-1):\n    from scipy.special import softmax as s\n    return s(z, axis=axis)\n",
    "a pip install of the course":
        f"import subprocess, sys\nsubprocess.run([sys.executable, '-m', 'pip', 'install', '--no-deps', {str(REPO)!r}],"
        " capture_output=True, timeout=10)\n"
        "def softmax(z, axis=-1):\n    import course_lib.softmax as lib\n    return lib.softmax(z, axis)\n",
}


@pytest.mark.parametrize("attack", REACH, ids=list(REACH))
def test_the_answer_is_out_of_reach(tmp_path, guarded, attack):
    softmax, jvp, _ = graded(submission(tmp_path, softmax=REACH[attack]))
    assert softmax.points == 0, softmax.messages
    assert jvp.points == 2, jvp.messages


def test_the_library_named_when_absent(tmp_path, guarded):
    softmax, jvp, _ = graded(submission(tmp_path, softmax=REACH["the library's softmax, imported in the function"]))
    assert softmax.points == 0 and says(softmax, "course_lib.softmax", "not available while this notebook is graded")


JVP_WITH_TORCH = ("def softmax_jvp(s, g, axis=-1):\n    import torch\n"
                  "    z = torch.log(torch.tensor(s)).requires_grad_()\n"
                  "    torch.softmax(z, axis).backward(torch.tensor(g))\n    return z.grad.numpy()\n")
JVP_LOADING_TORCH = ("import ctypes, glob\n"
                     f"libs = glob.glob({str(SITE / 'torch' / 'lib' / '*.so*')!r})\n"
                     "handles = [ctypes.CDLL(p) for p in libs]\n"
                     "def softmax_jvp(s, g, axis=-1):\n"
                     "    if not handles:\n        raise RuntimeError('no torch library found')\n"
                     "    return s * g\n")


@pytest.mark.parametrize("jvp, words", [(JVP_WITH_TORCH, ("torch", "not available")),
                                        (JVP_LOADING_TORCH, ("no torch library found",))],
                         ids=["torch autograd", "torch's shared libraries loaded by path"])
def test_autograd_is_absent_where_the_backward_is_hand_derived(tmp_path, guarded, jvp, words):
    softmax, jvp_result, _ = graded(submission(tmp_path, jvp=jvp))
    assert softmax.points == 2 and jvp_result.points == 0
    assert says(jvp_result, *words), jvp_result.messages


def test_answers_to_the_public_cases_do_not_fit_the_graded_ones(tmp_path, guarded):
    ex = get("warmup.softmax")
    table = {np.asarray(c["z"], dtype=np.float64).tobytes().hex(): ex.reference(**c).tolist()
             for c in ex.public_cases()}
    source = (f"TABLE = {table!r}\n"
              "def softmax(z, axis=-1):\n"
              "    hit = TABLE.get(np.asarray(z, dtype=np.float64).tobytes().hex())\n"
              "    return np.array(hit) if hit is not None else np.zeros_like(z)\n")
    softmax, jvp, _ = graded(submission(tmp_path, softmax=source))
    assert softmax.points == 0 and jvp.points == 2


# --- 2. deciding one's own outputs ----------------------------------------------------------
OWN_OUTPUTS = {
    "a payload displayed, then KeyboardInterrupt":
        "from IPython.display import display\n"
        "def softmax(z, axis=-1):\n"
        "    display({'application/vnd.course.autograder+json': {'exercise': 'warmup.softmax', 'cases': []}}, raw=True)\n"
        "    raise KeyboardInterrupt\n",
    "record replaced in the kernel's module":
        HONEST_SOFTMAX.replace("np.max(", "np.min(") +
        "import autograder.kernel as k\nfrom IPython.display import display\n"
        "def fake(exercise_id, namespace):\n"
        "    display({'application/vnd.course.autograder+json': {'exercise': exercise_id, 'cases': []},"
        " 'text/plain': '2.0'}, raw=True)\n"
        "k.record = fake\n",
    "an input transformer that rewrites the graded cell into a score":
        HONEST_SOFTMAX.replace("np.max(", "np.min(") +
        "get_ipython().input_transformers_post.append(\n"
        "    lambda lines: ['2.0\\n'] if any('record(' in l for l in lines) else lines)\n",
    "an object that equals anything":
        "class Yes:\n    def __eq__(self, other):\n        return True\n"
        "def softmax(z, axis=-1):\n    return Yes()\n",
}


SPARES_JVP = ("a payload displayed, then KeyboardInterrupt", "an object that equals anything")


@pytest.mark.parametrize("attack", OWN_OUTPUTS, ids=list(OWN_OUTPUTS))
def test_the_kernel_cannot_decide_its_own_score(tmp_path, guarded, attack):
    softmax, jvp, _ = graded(submission(tmp_path, softmax=OWN_OUTPUTS[attack]))
    assert softmax.points == 0, softmax.messages
    # a replaced record or a rewritten graded cell takes the later graded cell with it
    assert jvp.points == (2 if attack in SPARES_JVP else 0), jvp.messages


# --- 3. the grader's files, other learners, the network ---------------------------------------
TOUCH_FILES = (
    "import glob, os\n"
    f"targets = [{str(REPO / 'course_lib' / 'softmax.py')!r}, {str(REPO / 'solutions')!r},\n"
    f"           {str(secret_path())!r}, {str(CANARY)!r}, {str(REPO / 'gradebook.db')!r}]\n"
    "targets += glob.glob('/tmp/**/gradebook.db', recursive=True) + glob.glob('/tmp/autograder-*/**', recursive=True)\n"
    "import autograder.kernel as k, course_lib\n"
    "targets += [k.__file__, course_lib.__path__[0] + '/softmax.py']\n"
    "for t in targets:\n"
    "    for how in ('a', 'w'):\n"
    "        try:\n"
    "            with open(t, how) as f:\n"
    "                f.write('owned')\n"
    "        except OSError:\n"
    "            pass\n"
    "    try:\n        os.remove(t)\n    except OSError:\n        pass\n")


def test_files_outside_the_scratch_folder_cannot_be_changed(tmp_path, guarded):
    softmax, jvp, result = graded(submission(tmp_path, after_softmax=[TOUCH_FILES]))
    assert result.total == 4, [e.messages for e in result.exercises]


FILL_WRITABLE = (  # every path the kernel can write, filled: the softmax is honest only if each is capped
    "import os, subprocess\n"
    "from ipykernel.connect import get_connection_file\n"
    "comm = os.path.dirname(get_connection_file())  # the host's folder of the connection file\n"
    "try:\n"
    "    os.chmod(comm, 0o755)  # its owner's right: the kernel's, were the folder its own\n"
    "except OSError:\n"
    "    pass\n"
    "try:\n"
    "    with open(os.path.join(comm, 'junk'), 'wb') as f:\n"
    "        f.write(b'x' * (1 << 20))\n"
    "    COMM_WRITTEN = True\n"
    "except OSError:\n"
    "    COMM_WRITTEN = False\n"
    "written = 0\n"
    "for n in range(6):  # 6 files of 60 MB: more than the scratch /tmp holds\n"
    "    try:\n"
    "        with open(f'/tmp/fill{n}', 'wb') as f:\n"
    "            for _ in range(60):\n"
    "                f.write(b'x' * (1 << 20))\n"
    "                written += 1 << 20\n"
    "    except OSError:\n"
    "        break\n"
    "for n in range(6):\n"
    "    if os.path.exists(f'/tmp/fill{n}'):\n"
    "        os.remove(f'/tmp/fill{n}')\n"
    "# a tmpfs of its own, in a user namespace of its own, filled past the size of /tmp\n"
    "own = subprocess.run(['unshare', '--user', '--map-root-user', '--mount', 'sh', '-c',\n"
    "                      'mount -t tmpfs none /tmp && for n in 1 2 3 4 5 6; do '\n"
    "                      'head -c 60000000 /dev/zero > /tmp/x$n || exit 1; done && echo filled'],\n"
    "                     capture_output=True, text=True)\n"
    "OWN_TMPFS = 'filled' in own.stdout\n"
    "CAPPED = not COMM_WRITTEN and not OWN_TMPFS and written <= 256 << 20\n")


# files by the hundred thousand, each an inode of the host's memory however empty: the loop
# stops at the cap with the system's message ("No space left on device"; the learner's cells'
# outputs stay out of the report, report.py); the next cell counts what it made and clears /tmp
# for the cells after
FILL_FILES = (
    "for n in range(200_000):\n"
    "    open(f'/tmp/many{n}', 'w').close()\n",
    "import glob, os\n"
    "made = glob.glob('/tmp/many*')\n"
    "for name in made:\n"
    "    os.remove(name)\n"
    "FILES_CAPPED = len(made) < 200_000\n")

# the rest of the sandbox's file system, and the capabilities of the learner's process
ELSEWHERE = (
    "def _writable(path):\n"
    "    try:\n"
    "        with open(path, 'w') as f:\n"
    "            f.write('x')\n"
    "    except OSError:\n"
    "        return False\n"
    "    os.remove(path)\n"
    "    return True\n"
    "WRITABLE = [p for p in ('/agattack', '/dev/agattack', '/dev/shm/agattack') if _writable(p)]\n"
    "CAPS = {k: int(v, 16) for k, v in (line.split(':') for line in open('/proc/self/status')\n"
    "                                   if line.startswith('Cap'))}\n"
    "HELD = [k for k, v in CAPS.items() if v]\n"
    "CAPPED = CAPPED and FILES_CAPPED and not WRITABLE and not HELD\n"
    "print('checks:', dict(CAPPED=CAPPED, FILES_CAPPED=FILES_CAPPED, WRITABLE=WRITABLE, HELD=HELD))\n")


def test_every_path_the_kernel_can_write_is_capped(tmp_path, guarded):
    """The kernel's connection file is in a folder of the host's disk bound read-only, its
    sockets in its scratch /tmp, a tmpfs of 256 MB and 20,000 files; the rest of its file
    system is read-only, it holds no capability, and it can make no user namespace where it
    would mount a tmpfs of its own. Filling all costs nothing and lands nowhere."""
    sabotaged = HONEST_SOFTMAX.replace("    return e /", "    return (1 if CAPPED else 2) * e /")
    path = submission(tmp_path, softmax=sabotaged, before_softmax=[FILL_WRITABLE, *FILL_FILES, ELSEWHERE])
    softmax, jvp, result = graded(path)
    assert result.total == 4, [e.messages for e in result.exercises]


def test_every_path_the_kernel_can_write_is_capped_without_root(tmp_path, guarded, learner):
    """The same, graded by a learner without root: ``submit`` in the sandbox, on a system Python
    whose packages are in the learner's user site. The kernel runs as the learner's own uid, the
    owner of any folder of theirs it could reach; none is writable inside. bubblewrap's /tmp
    holds 20,000 files here too (``kernel/scratch.py``), and its root and /dev, which that uid
    owns, are read-only. (Before, the loop made its 200,000 files, and / and /dev took any.)"""
    where = ("import os, sys\n"
             f"HERE = (os.getuid(), sys.prefix) == ({learner.uid}, {str(Path(learner.python).parents[1])!r})\n")
    sabotaged = HONEST_SOFTMAX.replace("    return e /", "    return (1 if CAPPED and HERE else 2) * e /")
    notebook = learner.clone / "notebooks" / "00_start_here" / SOLUTION.name
    shutil.copyfile(submission(tmp_path, softmax=sabotaged,
                               before_softmax=[FILL_WRITABLE, *FILL_FILES, ELSEWHERE, where]), notebook)
    shutil.chown(notebook, learner.user, learner.user)
    proc, result = learner.submit(notebook, AUTOGRADER_ISOLATION="required")
    assert result is not None, proc.stderr[-2000:]
    assert not result["notes"], result["notes"]  # graded in the sandbox
    report = Path(result["feedback_html"]).read_text()
    assert (result["total"], result["max_total"]) == (4, 4), re.findall(r"checks: [^\n<]*", report)
    assert proc.returncode == 0 and Path(result["feedback_html"]).is_relative_to(learner.clone)
    assert not [p for p in ("/agattack", "/dev/agattack", "/dev/shm/agattack", *glob.glob("/tmp/many*"))
                if os.path.exists(p)]  # the host's


def test_no_network_not_even_the_loopback(tmp_path, guarded):
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(60)
    port, seen = server.getsockname()[1], []
    thread = threading.Thread(target=lambda: seen.append(_accept(server)), daemon=True)
    thread.start()
    cell = ("import socket\ntry:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=3).sendall(b'out')\n"
            "except OSError:\n    pass\n")
    _, _, result = graded(submission(tmp_path, after_softmax=[cell]))
    server.close()
    thread.join(5)
    assert result.total == 4 and seen in ([], [None])


def _accept(server):
    try:
        conn, _ = server.accept()
        return conn.recv(10)
    except OSError:
        return None


# --- 4. limits, and faults that cost only what they touch -------------------------------------
FAULTS = {
    "memory bomb in the function":
        ("def softmax(z, axis=-1):\n    return np.ones(2**33)\n", ("MemoryError",)),
    # np.empty: the address-space limit stops the growth without writing gigabytes first
    # (zeroing 3 GB of pages takes 9 s of CPU on some machines, past the 5 s per case)
    "memory growing until the limit":
        ("def softmax(z, axis=-1):\n    hoard = []\n    while True:\n"
         "        hoard.append(np.empty(2**25))\n", ("MemoryError",)),
    "an endless loop":
        ("def softmax(z, axis=-1):\n    while True:\n        pass\n", ("did not finish within",)),
    "an endless loop that swallows every exception":
        ("def softmax(z, axis=-1):\n    while True:\n        try:\n            while True:\n"
         "                pass\n        except BaseException:\n            pass\n", ("ran longer than",)),
    "os._exit in the function":
        ("import os\ndef softmax(z, axis=-1):\n    os._exit(0)\n", ("kernel died",)),
    "os._exit before the function is defined":
        ("import os\nos._exit(3)\n" + HONEST_SOFTMAX, ("not defined", "kernel died")),
    "input() in the function":
        ("def softmax(z, axis=-1):\n    return float(input('z?'))\n", ("StdinNotImplementedError",)),
    "sys.exit in the function":
        ("import sys\ndef softmax(z, axis=-1):\n    sys.exit(0)\n", ("SystemExit",)),
    "an output too large to carry":
        ("def softmax(z, axis=-1):\n    return np.zeros(5 * 10**7)\n", ()),
}


@pytest.mark.parametrize("fault", FAULTS, ids=list(FAULTS))
def test_a_fault_costs_only_its_exercise(tmp_path, guarded, fault):
    source, words = FAULTS[fault]
    softmax, jvp, _ = graded(submission(tmp_path, softmax=source))
    assert softmax.points == 0 and says(softmax, *words), softmax.messages
    assert jvp.points == 2, jvp.messages


# --- the sandbox's failure, feigned: graded again without it? ---------------------------------
FEIGNED = {  # each fails the grading in the sandbox only, where the reference is out of reach
    "its words in nbgrader's log (a message type nbclient logs as unhandled)":
        "    k = get_ipython().kernel\n"
        "    k.session.send(k.iopub_socket, 'SandboxUnavailable: bubblewrap is not installed', {},\n"
        "                   parent=k.get_parent())\n"
        "    k.session.send(k.iopub_socket, 'display_data', {'transient': 'fails nbclient', 'data': {},\n"
        "                   'metadata': {}}, parent=k.get_parent())\n",
    "a kernel that cannot start again (its sockets' paths taken)": pytest.param(
        "    import glob, os\n"
        "    for path in glob.glob('/tmp/.kernel-*'):\n"
        "        os.remove(path)\n"
        "        os.makedirs(path + '/taken')\n"
        "    os._exit(1)\n",
        marks=pytest.mark.skipif(os.geteuid() != 0, reason="a sandbox's /tmp outlives its kernel "
                                 "only where the grader is root (sandbox._scratch_tmpfs)")),
}


@pytest.mark.parametrize("feign", FEIGNED.values(), ids=list(FEIGNED))
def test_a_notebook_cannot_pass_its_own_failure_off_as_the_sandboxs(tmp_path, guarded, monkeypatch, feign):
    """Where the sandbox cannot start a kernel, a learner's ``submit`` grades without it
    (isolation "auto", ``grading.grade_notebook``). A notebook that fails in the sandbox looking
    like that, to be graded again outside it and use the reference there, is not graded, or is
    graded in the sandbox (a message nbclient cannot read is dropped: ``messages.py``), where
    the reference is out of reach."""
    from autograder.pipeline.course import GradingError, SandboxError
    from autograder.pipeline.sandbox import ISOLATION_ENV, isolation

    monkeypatch.setenv(ISOLATION_ENV, "auto")
    if not isolation()[0]:
        pytest.skip("no sandbox here: the notebook is graded without it anyway")
    softmax = ("try:  # outside the sandbox only\n"
               f"    ns = {{}}\n    exec(open({str(REPO / 'course_lib' / 'softmax.py')!r}).read(), ns)\n"
               "    ready = ns['softmax']\n"
               "except OSError:\n" + feign +
               "def softmax(z, axis=-1):\n    return ready(z, axis)\n")
    try:
        result = grade(submission(tmp_path, softmax=softmax))
    except GradingError as failed:
        assert not isinstance(failed, SandboxError), failed
    else:
        assert result.by_id("warmup.softmax").points == 0, result.by_id("warmup.softmax").messages
        assert not any("without isolation" in note for note in result.notes), result.notes


BYSTANDER_FAULTS = {
    "an endless loop in a cell of its own": "while True:\n    pass\n",
    "IPython's exit()": "exit()\n",
    "every process the kernel can signal killed": "import os, signal\nos.kill(-1, signal.SIGKILL)\n",
    "a fork bomb": "import os\ntry:\n    while True:\n        os.fork()\nexcept OSError:\n    pass\nwhile True:\n    pass\n",
    "daemons started with setsid":
        "import os, subprocess, sys\n"
        "for _ in range(5):\n"
        f"    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', '{MARKER}'], start_new_session=True)\n"
        "if os.fork() == 0:\n    os.setsid()\n"
        f"    os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(600)', '{MARKER}'])\n",
    "fifty megabytes printed": "print('x' * 50_000_000)\n",
    "the scratch disk filled": "with open('/tmp/fill', 'wb') as f:\n    for _ in range(2000):\n        f.write(b'0' * 2**20)\n",
    "ten thousand files opened": "handles = [open('/dev/null') for _ in range(10_000)]\n",
}


@pytest.mark.parametrize("fault", BYSTANDER_FAULTS, ids=list(BYSTANDER_FAULTS))
def test_a_fault_in_a_cell_of_its_own_costs_nothing(tmp_path, guarded, fault):
    _, _, result = graded(submission(tmp_path, after_softmax=[BYSTANDER_FAULTS[fault]]))
    assert result.total == 4, [e.messages for e in result.exercises]


def test_the_graders_helpers_in_a_learners_own_cells_cost_nothing(tmp_path, guarded):
    """show_case and the registry in cells of one's own: no effect while graded, no lost marks."""
    path = submission(tmp_path, after_softmax=[
        "case = show_case('warmup.softmax', 2)\nsoftmax(**case)",
        "from autograder.exercises import get\nget('warmup.softmax').public_cases()",
        "import autograder.judge.verdict as j\nprint(j)"])
    softmax, jvp, result = graded(path)
    assert result.total == 4, [e.messages for e in result.exercises]


# --- 5. the same score on a busy machine ------------------------------------------------------
# An honest softmax that is slow once: its first call (the first graded case: the check cell,
# a teaching cell, is not run when grading) spends 1.5 s of CPU time building something it
# throws away, then answers right. The per-case limit is 5 s of CPU time; on a core shared with
# three spinning processes, those 1.5 s take some 6 s on the clock.
SLOW_HONEST_SOFTMAX = ("import time\nslow_first = [True]\n" + HONEST_SOFTMAX.replace(
    "    e = ", "    if slow_first.pop() if slow_first else False:\n"
               "        start = time.process_time()\n"
               "        while time.process_time() - start < 1.5:\n"
               "            sum(i * i for i in range(1000))\n"
               "    e = ", 1))
MEMORY_HUNGRY_JVP = FAULTS["memory growing until the limit"][0].replace("softmax(z, axis=-1)",
                                                                       "softmax_jvp(s, g, axis=-1)")


@contextlib.contextmanager
def _a_busy_core():
    """This process, and so the grader's kernel it starts, on one core kept busy by three
    spinning processes, until the context ends. Each spins in a session of its own: Linux's
    autogroup scheduler shares a core between sessions first, so spinners in the test's own
    session would hardly slow the kernel. One core rather than all, so that tests running
    beside this one (pytest-xdist) keep the others."""
    cores = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cores)})
    hogs = [subprocess.Popen([sys.executable, "-c", "while True:\n    pass\n"], start_new_session=True)
            for _ in range(3)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
        os.sched_setaffinity(0, cores)


def test_a_busy_machine_gives_the_same_scores_and_messages(tmp_path, guarded):
    """Graded once as it comes and once on a busy core: the limits count CPU time, so a slow but
    honest answer keeps its marks and a memory-hungry one is told the same thing. (With the
    limits on the clock, as before, the busy grading gave the slow answer 1.857 of 2 points.)"""
    path = submission(tmp_path, softmax=SLOW_HONEST_SOFTMAX, jvp=MEMORY_HUNGRY_JVP)
    idle = graded(path)
    with _a_busy_core():
        busy = graded(path)
    for quiet, loaded in zip(idle[:2], busy[:2]):
        assert (loaded.points, loaded.messages) == (quiet.points, quiet.messages)
    softmax, jvp, _ = idle
    assert softmax.points == 2, softmax.messages
    assert jvp.points == 0 and says(jvp, "MemoryError"), jvp.messages


# --- 6. what the learner's text and metadata reach: the report, the grade cells -------------
LOUD = ("<img src=x onerror=alert(1)> [y](javascript:alert(2)) $\\href{javascript:alert(3)}{x}$ "
        "<script>alert(4)</script> \x1b[31m")


def test_a_learners_error_text_is_shown_as_text_in_the_report(tmp_path, guarded):
    """The function raises an exception whose message is HTML, a markdown link, a formula with
    ``\\href`` and a terminal escape: the verdict quotes it, and the report shows it as text."""
    path = submission(tmp_path, softmax=f"def softmax(z, axis=-1):\n    raise ValueError({LOUD!r})\n")
    result = grade_notebook(path, feedback_to=tmp_path / "report.html")
    softmax, jvp = result.by_id("warmup.softmax"), result.by_id("warmup.softmax_jvp")
    assert (softmax.points, jvp.points, result.max_total) == (0, 2, 4), softmax.messages
    assert says(softmax, "ValueError", "<img src=x onerror=alert(1)>"), softmax.messages
    page = (tmp_path / "report.html").read_text()
    assert "ValueError: &lt;img src=x onerror=alert(1)&gt; [y](javascript:alert(2))" in page
    tags = _Tags()
    tags.feed(page)
    assert not [a for a in tags.attributes if "javascript:" in (a[1] or "") or a[0].startswith("on")]
    assert ("img", "src", "x") not in tags.found and not any("alert(" in s for s in tags.scripts)


KEEP_INPUTS = "SEEN = []\n" + HONEST_SOFTMAX.replace("    e = ", "    SEEN.append(np.array(z, dtype=float))\n    e = ")
DIGITS = "' '.join(repr(float(x)) for s in SEEN for x in np.ravel(s))"  # every value, all 17 digits


def test_nothing_the_learners_code_saw_of_a_hidden_case_reaches_the_report(tmp_path, guarded):
    """The learner's code sees each hidden case's inputs; three ways to send them back in the
    report: a later cell of the learner's prints them; the jvp raises an exception whose
    message holds them, which the verdict quotes; a cell of the learner's raises them as a
    ``GradingFault``, the grader's own name for a stopped cell, which the verdict of the next
    graded cell used to quote as "Cell n above it was ...". None gets there (tests/leaks.py
    looks for the hidden values in the page); the instructor's autograded notebook keeps what
    the learner's cells printed, and the verdicts still name the error."""
    path = submission(tmp_path, softmax=KEEP_INPUTS,
                      jvp=f"def softmax_jvp(*args, **kwargs):\n    raise ValueError({DIGITS})\n",
                      after_softmax=[f"print({DIGITS})",
                                     f"class GradingFault(Exception):\n    pass\nraise GradingFault({DIGITS})"])
    result = grade_notebook(path, feedback_to=tmp_path / "report.html")
    softmax, jvp = result.by_id("warmup.softmax"), result.by_id("warmup.softmax_jvp")
    assert (softmax.points, jvp.points) == (2, 0), (softmax.messages, jvp.messages)
    assert says(jvp, "raised an error", "ValueError") and not says(jvp, "above it was"), jvp.messages
    page = (tmp_path / "report.html").read_text()
    assert not leaked_values(page_text(page), hidden_values(nbformat.reads(result.autograded, as_version=4),
                                                            submitted_key(result)))
    kept = [o for c in nbformat.reads(result.autograded, as_version=4).cells for o in c.get("outputs", [])]
    assert any(o.get("ename") == "GradingFault" for o in kept) and any(o.get("name") == "stdout" for o in kept)


class _Tags(HTMLParser):
    """Every (tag, attribute, value) and every script's text of a page, as a browser parses it."""

    def __init__(self):
        super().__init__()
        self.found, self.attributes, self.scripts, self._in_script = set(), [], [], False

    def handle_starttag(self, tag, attrs):
        self.found |= {(tag, name, value) for name, value in attrs}
        self.attributes += attrs
        self._in_script = tag == "script"

    def handle_data(self, data):
        if self._in_script:
            self.scripts.append(data)


def _tamper(nb):
    """Unlock the softmax's graded cell (a bogus checksum, 100 points) and make it print a full
    score; make the learner's own cell a graded one worth 100; give a markdown cell the other
    graded cell's metadata; ask for a bash kernel and claim another assignment."""
    by_id = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in nb.cells}
    graded = by_id["grade_warmup_softmax"]
    graded.metadata["nbgrader"].update(locked=False, checksum="0" * 32, points=100)
    graded.source = 'print("warmup.softmax: 2 / 2 points")\n2.0'
    by_id["warmup_softmax"].metadata["nbgrader"].update(grade=True, points=100, locked=True)
    claim = {**by_id["grade_warmup_softmax_jvp"].metadata["nbgrader"], "points": 100}
    nb.cells.insert(nb.cells.index(by_id["grade_warmup_softmax_jvp"]),
                    nbformat.v4.new_markdown_cell("2.0", metadata={"nbgrader": claim}))
    nb.metadata.kernelspec = {"name": "bash", "display_name": "Bash", "language": "bash"}
    nb.metadata["nbgrader"] = {"assignment": "02_attention"}


def test_tampered_nbgrader_metadata_and_cell_ids_change_no_score(tmp_path, guarded):
    """``_tamper``, and every cell given the graded cell's id: the metadata is the assignment's,
    the graded cell's source is restored, the kernel is the sandbox's, and the score is the code's."""
    path = submission(tmp_path, softmax="def softmax(z, axis=-1):\n    return z\n", edit=_tamper)
    raw = json.loads(path.read_text())  # nbformat.write makes ids unique: the file, as a learner can
    for cell in raw["cells"]:
        cell["id"] = "grade_warmup_softmax"
    path.write_text(json.dumps(raw))
    softmax, jvp, result = graded(path)
    assert (softmax.points, jvp.points, result.max_total) == (0, 2, 4), softmax.messages
    assert not says(softmax, "2 / 2 points"), softmax.messages
