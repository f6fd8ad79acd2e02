"""autograder.pipeline.sandbox: its private folders (what a grader killed outright leaves, the next
removes), what it hides, and the places it works from: a data cache or a whole virtual
environment under /tmp, in folders named with spaces and accents."""
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from autograder.pipeline.sandbox import Sandbox, isolation, private_dir
from helpers import REPO, SOLUTIONS, linked_copy, mutant, submit_with


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_private_dir_removes_folders_of_dead_processes_only(tmp_path):
    dead, alive = _dead_pid(), os.getpid()
    left = tmp_path / f"ag-x-{dead}-abc"
    left.mkdir()
    (left / "gradebook.db").write_text("stale")
    kept = [tmp_path / f"ag-x-{alive}-def", tmp_path / "ag-x-oldstyle", tmp_path / f"other-{dead}-x"]
    for folder in kept:
        folder.mkdir()
    new = private_dir("ag-x-", str(tmp_path))
    assert not left.exists()
    assert all(folder.is_dir() for folder in kept)
    assert new.name.startswith(f"ag-x-{alive}-") and new.parent == tmp_path
    assert oct(new.stat().st_mode & 0o777) == "0o700"


def test_every_reference_in_course_lib_is_hidden_while_its_exercise_is_graded():
    """A learner who imports the reference would score full marks: each exercise whose
    reference (or a course function that reference calls first) lives in course_lib forbids
    that module, so the sandbox stages a stub in its place."""
    from autograder.exercises import all_exercises
    from autograder.judge.mutation import hosts

    for ex in all_exercises():
        for fn in hosts(ex.reference, ex.helpers)[:2]:  # the reference, or what it wraps
            module = fn.__module__
            if module.startswith("course_lib.") and fn.__name__ == ex.function:
                assert any(module == f or module.startswith(f + ".") for f in ex.forbidden), \
                    (ex.id, module, ex.forbidden)


def test_a_data_cache_or_environment_under_tmp_is_seen_inside(monkeypatch):
    """The sandbox mounts its own /tmp: what the kernel needs from the host's /tmp (a virtual
    environment or a data cache someone put there, in a path with a space and an accent)
    is bound on top of it, not hidden under it."""
    from autograder.pipeline.sandbox import Sandbox

    if not isolation()[0]:
        pytest.skip("no bubblewrap here")
    cache = Path(tempfile.mkdtemp(prefix="course data é ", dir="/tmp"))
    try:
        os.chmod(cache, 0o755)  # as a real cache is: the sandbox's uid reads it
        (cache / "probe.txt").write_text("seen")
        os.chmod(cache / "probe.txt", 0o644)
        monkeypatch.setenv("COURSE_DATA_DIR", str(cache))
        with Sandbox() as box:
            env = box.environment()
            probe = ("import os, sys; d = os.environ['COURSE_DATA_DIR']; "
                     "print(open(os.path.join(d, 'probe.txt')).read(), os.access('/tmp', os.W_OK))")
            proc = subprocess.run(box.command([sys.executable, "-c", probe]), capture_output=True,
                                  text=True, timeout=60)
        assert env["COURSE_DATA_DIR"] == str(cache)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split() == ["seen", "True"]  # the cache, and a writable scratch /tmp
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def test_a_whole_virtual_environment_under_tmp_grades_a_notebook_in_a_folder_with_accents(tmp_path):
    """The grader run by a virtual environment under /tmp (its sys.prefix and interpreter there,
    in a folder named with a space and an accent: a hard-linked copy of the tests' own) grades
    a notebook in such a folder in the sandbox, whose kernel runs that same environment."""
    if sys.prefix == sys.base_prefix:
        pytest.skip("the tests do not run in a virtual environment")
    if not isolation()[0]:
        pytest.skip("no bubblewrap here")
    place = Path(tempfile.mkdtemp(prefix="course env é ", dir="/tmp"))
    try:
        venv = place / "venv"
        linked_copy(Path(sys.prefix), venv)
        folder = tmp_path / "my course ü é" / "00_start_here"
        folder.mkdir(parents=True)
        inside = f"sys.prefix == {str(venv)!r} and sys.executable.startswith({str(venv)!r})"
        notebook = mutant(SOLUTIONS / "00_start_here" / "start_here.ipynb", "warmup_softmax", "    return e /",
                          f"    import sys\n    return (1 if {inside} else 2) * e /", folder)
        proc, result = submit_with(venv / "bin" / "python", notebook, {
            "HOME": os.environ["HOME"], "PATH": f"{venv / 'bin'}:/usr/bin:/bin", "LANG": "C.UTF-8",
            "PYTHONPATH": str(REPO), "AUTOGRADER_ISOLATION": "required"})
        assert result is not None, proc.stderr[-2000:]
        assert not result["notes"], result["notes"]  # in the sandbox
        assert (result["total"], result["max_total"]) == (4, 4), result["exercises"]
        assert proc.returncode == 0 and Path(result["feedback_html"]).parent == folder
    finally:
        shutil.rmtree(place, ignore_errors=True)


def test_a_root_graders_scratch_tmpfs_is_the_kernels_alone_and_goes_with_the_sandbox():
    """The scratch /tmp a root grader mounts is on the host too: no other local user may read or
    write it (mode 0700, the kernel's uid), and closing the sandbox unmounts it."""
    if os.geteuid() != 0 or not isolation()[0]:
        pytest.skip("a root grader with bubblewrap mounts its own scratch tmpfs (CI runs as root)")
    box = Sandbox()
    try:
        info = os.stat(box.scratch)
        assert box.scratch.is_mount() and (info.st_mode & 0o777, info.st_uid) == (0o700, box.uid)
    finally:
        box.close()
    assert not box.root.exists()


def test_the_cpu_count_of_a_tree_survives_a_process_that_goes_while_it_is_read(monkeypatch):
    """A process ending while ``/proc`` is walked can leave a stat file that reads empty or cut;
    that one is left out of the count, the rest are counted, and nothing is raised."""
    import builtins
    import io

    from autograder.pipeline import sandbox

    me = os.getpid()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        real_open = builtins.open
        ruined = {f"/proc/{child.pid}/stat": "", f"/proc/{os.getppid()}/stat": f"{os.getppid()} (cut"}

        def open_(path, *args, **kwargs):
            return io.StringIO(ruined[path]) if path in ruined else real_open(path, *args, **kwargs)

        monkeypatch.setattr(sandbox, "open", open_, raising=False)
        assert sandbox.tree_cpu(me) is not None and sandbox.tree_cpu(me) >= 0
        assert sandbox.tree_cpu(child.pid) is None  # read empty: as if it had gone
    finally:
        child.kill()
        child.wait()
