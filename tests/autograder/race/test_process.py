"""Where no sandbox starts, the race stops at once with one message, rather than rank the
class nowhere (``autograder/race/process.py``, ``Starts``).

A stand-in for bubblewrap plays such a machine: it passes the grader's probe (``bwrap ... --
true``), as a bubblewrap that may create namespaces but not the sandbox's would, and then
refuses each sandbox, or starts one whose process never comes up. No sandbox is needed here.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.pipeline.sandbox import SandboxUnavailable
from autograder.race import process
from autograder.race.leaderboard import race
from course_lib.data import generated_text
from race_entries import RULES, class_of

REPO = Path(__file__).resolve().parents[3]

FAKE_BWRAP = """#!{python}
# bubblewrap on a machine where no sandbox starts: it passes the grader's probe, then {how}
import os, subprocess, sys
with open(os.path.join(os.path.dirname(__file__), "calls"), "a") as f:
    f.write(" ".join(sys.argv[1:]) + "\\n")
if sys.argv[-2:] == ["--", "true"]:
    sys.exit(0)
if {silent}:
    child = subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    info = int(sys.argv[sys.argv.index("--info-fd") + 1])
    os.write(info, b'{{"child-pid": %d}}' % child.pid)
    os.close(info)
    os.close(1)
    child.wait()
print("bwrap: setting up uid map: Permission denied", file=sys.stderr)
sys.exit(1)
"""


def _fake_bwrap(folder: Path, silent: bool) -> Path:
    """A folder holding a stand-in ``bwrap`` (``silent``: it starts a sandbox whose process never
    comes up; else it refuses), which notes each call in ``calls`` beside it."""
    folder.mkdir()
    how = "starts a process that never comes up" if silent else "refuses every sandbox"
    (folder / "bwrap").write_text(FAKE_BWRAP.format(python=sys.executable, how=how, silent=silent))
    (folder / "bwrap").chmod(0o755)
    return folder


def test_a_race_whose_sandboxes_never_come_up_stops_after_three_starts(tmp_path, monkeypatch):
    fake = _fake_bwrap(tmp_path / "bin", silent=True)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    heldout = tmp_path / "unseen.txt"
    heldout.write_text(generated_text(12_000, seed=99))
    with pytest.raises(SandboxUnavailable, match="failed to start 3 times and never started .*before it asked"):
        race("06_gpt", class_of(tmp_path / "class", 4), tmp_path / "out", RULES, heldout, jobs=1,
             train_text=generated_text(40_000))
    assert len((fake / "calls").read_text().splitlines()) == process.STOP_AFTER  # not one start more


def test_where_bubblewrap_refuses_every_sandbox_the_command_stops_with_one_message(tmp_path):
    from course_lib.data import load_corpus

    try:
        load_corpus()  # the command trains on the course's text
    except FileNotFoundError:
        pytest.skip("no Shakespeare in the data cache (python -m course_lib.data)")
    fake = _fake_bwrap(tmp_path / "bin", silent=False)
    heldout = tmp_path / "unseen.txt"
    heldout.write_text(generated_text(12_000, seed=99))
    env = {k: v for k, v in os.environ.items() if k != "AUTOGRADER_ISOLATION"}
    env["PATH"] = f"{fake}:{env['PATH']}"
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", "leaderboard", "06_gpt",
                           str(class_of(tmp_path / "class", 2)), "--heldout", str(heldout), "--out",
                           str(tmp_path / "out"), "--seeds", "2"], capture_output=True, text=True, cwd=REPO, env=env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    said = [line for line in proc.stderr.splitlines() if line.startswith("autograder:")]
    assert len(said) == 1 and "the race stopped" in said[0] and "bubblewrap did not start the sandbox" in said[0]
    assert "ranked nowhere" not in proc.stdout
    calls = (fake / "calls").read_text().splitlines()
    assert calls[0].endswith("-- true") and len(calls) == 1 + process.STOP_AFTER  # the probe, then three
