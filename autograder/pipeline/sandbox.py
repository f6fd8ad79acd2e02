"""The grading sandbox: what the learner's kernel can see, reach and use while it is graded. [trusted]

The kernel of a graded notebook runs under bubblewrap (Debian's ``bwrap``):

- its own unprivileged uid (when the grader runs as root), no capabilities, no new privileges;
- no network, its own PID namespace (no process outlives the kernel), IPC and UTS namespaces;
- a file system built from a positive list: the system (``/usr``, ``/etc``), the Python
  installation and virtual environment, the course's data cache, all read-only; a private,
  size-limited ``/tmp`` for scratch; nothing else. The course directory (gradebook,
  ``solutions/``, other submissions, the grader's secret), home directories and the
  repository are simply not there;
- on ``PYTHONPATH``, a staged copy of ``course_lib`` without the modules that compute the
  notebook's answers, and of ``autograder``'s ``__init__`` and ``kernel/`` folder (the graded
  cell, the calls, the transport, the hints, the search for a fix of the learner's code),
  which hold no reference and no judge: ``KERNEL`` below, nothing else of ``autograder``;
- the packages an exercise forbids (``torch``, whose autograd would take a hand-derived
  backward's place, and with it the other autodiff packages) hidden under empty folders,
  with a stub that says why ``import torch`` fails;
- limits on address space, CPU time, processes, open files and file size (``prlimit``).

Where bubblewrap is missing (a learner's laptop running ``submit``), the kernel runs as a
plain process with the same staged path and environment, and the grader says plainly that
it ran without isolation.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from course_lib.data import cache_dir

AUTOGRADER = Path(__file__).resolve().parent.parent
COURSE_LIB = AUTOGRADER.parent / "course_lib"
KERNEL = AUTOGRADER / "kernel"  # staged whole, with autograder/__init__.py: see kernel/__init__.py
# A forbidden top-level package brings down its family: every autodiff package goes with torch.
HIDE_WITH = {"torch": ("torch", "functorch", "torchgen", "sympy", "jax", "jaxlib", "autograd",
                       "tensorflow")}
ISOLATION_ENV = "AUTOGRADER_ISOLATION"  # "auto" (default), "required" or "off"
KERNEL_NAME = "course-sandbox"


@dataclass(frozen=True)
class Limits:
    address_space: int = 3 << 30   # bytes of virtual memory for the kernel (MemoryError past it)
    cpu_seconds: int = 150         # the kernel is killed past this much CPU time
    processes: int = 64            # tasks (processes and threads) of the sandbox's uid
    open_files: int = 256
    file_size: int = 64 << 20      # largest file the kernel may write
    scratch: int = 256 << 20       # size of its /tmp


class SandboxUnavailable(RuntimeError):
    """Isolation was required and bubblewrap cannot run here; the message says why."""


@lru_cache(maxsize=1)
def _bwrap_problem() -> str | None:
    """None when bubblewrap can start a sandbox here, else why not."""
    exe = shutil.which("bwrap")
    if exe is None:
        return "bubblewrap (bwrap) is not installed"
    probe = [exe, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--", "true"]
    if os.geteuid() == 0:
        probe.remove("--unshare-all")
        probe[1:1] = ["--unshare-pid", "--unshare-net", "--unshare-ipc"]
    try:
        proc = subprocess.run(probe, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"bubblewrap did not start: {err}"
    if proc.returncode:
        return f"bubblewrap cannot create namespaces here: {proc.stderr.strip()[:200]}"
    return None


def isolation() -> tuple[bool, str]:
    """(isolated, a sentence for the learner) under the ``AUTOGRADER_ISOLATION`` setting."""
    setting = os.environ.get(ISOLATION_ENV, "auto")
    if setting not in ("auto", "required", "off"):
        raise SandboxUnavailable(f"{ISOLATION_ENV}={setting!r}; expected auto, required or off")
    if setting == "off":
        return False, f"Graded without isolation ({ISOLATION_ENV}=off)."
    problem = _bwrap_problem()
    if problem is None:
        return True, "Graded in a sandbox (bubblewrap)."
    if setting == "required":
        raise SandboxUnavailable(f"isolation is required but {problem}")
    return False, (f"Graded without isolation: {problem}. The score is right for honest work; "
                   "an instructor grades in a sandbox.")


def staged_kernel() -> list[Path]:
    """The files of ``autograder/kernel/`` that the sandbox stages: every module in it."""
    return sorted(KERNEL.glob("*.py"))


def hidden_packages(forbidden) -> tuple[list[str], list[str]]:
    """(course_lib modules, top-level packages) that ``forbidden`` keeps out of the sandbox."""
    modules, packages = set(), set()
    for name in forbidden:
        top, _, rest = name.partition(".")
        if top == "course_lib" and rest:
            modules.add(rest.split(".")[0])
        elif top != "course_lib":
            packages.update(HIDE_WITH.get(top, (top,)))
    return sorted(modules), sorted(packages)


def _stub(what: str) -> str:
    return (f"raise ImportError({what!r} ' is not available while this notebook is graded: the "
            "exercises ask you to write this yourself, with numpy.')\n")


class Sandbox:
    """A staging folder on the host, and the kernel command that shows the learner only it.

    ``root`` (a short path under /tmp, for the kernel's sockets) holds ``site/`` (the
    ``PYTHONPATH``), ``cases/`` (one JSON file per exercise, written by the grader; read-only
    inside) and ``comm/`` (connection file and sockets, shared with the kernel: writable by
    it only while it starts, ``open_comm`` and ``seal_comm``).
    """

    def __init__(self, forbidden=(), isolate: bool = True, limits: Limits = Limits()):
        self.isolate, self.limits = isolate, limits
        self.root = private_dir(SANDBOX_PREFIX, "/tmp")
        self.site, self.cases, self.comm = self.root / "site", self.root / "cases", self.root / "comm"
        self.work = self.root / "work"  # the kernel's scratch when it runs without isolation
        self.uid = 60000 + os.getpid() % 5000 if os.geteuid() == 0 else os.geteuid()
        self.hidden_modules, self.hidden_packages = hidden_packages(forbidden)
        for d in (self.site, self.cases, self.comm, self.work):
            d.mkdir()
        self._stage_site()
        os.chmod(self.root, 0o755)
        self.share(self.work)

    # --- staging ---------------------------------------------------------------------------
    def _stage_site(self) -> None:
        course = self.site / "course_lib"
        course.mkdir()
        for src in COURSE_LIB.glob("*.py"):
            hidden = src.stem in self.hidden_modules
            (course / src.name).write_text(_stub(f"course_lib.{src.stem}") if hidden else src.read_text())
        grader = self.site / "autograder"
        (grader / "kernel").mkdir(parents=True)
        shutil.copyfile(AUTOGRADER / "__init__.py", grader / "__init__.py")
        for src in staged_kernel():
            shutil.copyfile(src, grader / "kernel" / src.name)
        for package in self.hidden_packages:
            (self.site / package).mkdir()
            (self.site / package / "__init__.py").write_text(_stub(package))

    def share(self, path: Path) -> None:
        """Let the sandbox's uid use ``path`` (a folder or file the grader made)."""
        if os.geteuid() == 0:
            os.chown(path, self.uid, self.uid)

    def open_comm(self) -> None:
        """Let a kernel about to start make its sockets in ``comm/`` (where the host reaches them)."""
        self.share(self.comm)
        os.chmod(self.comm, 0o755)

    def seal_comm(self) -> None:
        """Once the kernel is up, ``comm/`` is the grader's again: the learner's code cannot write
        a byte into this folder of the host's disk (the sockets made, it needs nothing more).

        With a uid of its own (the grader runs as root) this holds; run as the same user (a
        learner's ``submit`` without root), the kernel owns the folder and could take it back.
        """
        if os.geteuid() == 0:
            os.chown(self.comm, 0, 0)
            os.chmod(self.comm, 0o755)
        else:  # a write now needs a chmod first
            os.chmod(self.comm, 0o555)

    def write_cases(self, exercise_id: str, payload: dict) -> None:
        (self.cases / f"{exercise_id}.json").write_text(json.dumps(payload))

    # --- the kernel --------------------------------------------------------------------------
    def environment(self) -> dict[str, str]:
        scratch = "/tmp" if self.isolate else str(self.work)
        env = {"PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
               "HOME": scratch, "TMPDIR": scratch, "LANG": "C.UTF-8",
               "PYTHONPATH": str(self.site), "PYTHONNOUSERSITE": "1",
               "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg",
               "MPLCONFIGDIR": f"{scratch}/.matplotlib", "IPYTHONDIR": f"{scratch}/.ipython",
               "COURSE_MODE": "grade", "NBGRADER_EXECUTION": "autograde",
               "AUTOGRADER_CASES": str(self.cases), "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = "1"
        for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # this machine's BLAS settings
            if var in os.environ:
                env[var] = os.environ[var]
        data = _data_dir()
        if data is not None:
            env["COURSE_DATA_DIR"] = str(data)
        return env

    def kernel_argv(self) -> list[str]:
        """The kernel command, with ``{connection_file}`` for jupyter_client to fill in."""
        kernel = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
                  "--IPKernelApp.log_level=ERROR"]
        if not self.isolate:
            return kernel
        lim = self.limits
        limits = ["prlimit", f"--as={lim.address_space}", f"--cpu={lim.cpu_seconds}",
                  f"--nofile={lim.open_files}", f"--fsize={lim.file_size}", "--core=0"]
        if os.geteuid() == 0:  # a uid of its own: the process limit counts its tasks only
            limits.append(f"--nproc={lim.processes}")
            drop = ["setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups",
                    "--no-new-privs", "--inh-caps=-all"]
        else:
            drop = ["setpriv", "--no-new-privs"]
        return [*self._bwrap(), "--", *limits, "--", *drop, *kernel]

    def _bwrap(self) -> list[str]:
        args = ["bwrap", "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net",
                "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        if os.geteuid() != 0:
            args.append("--unshare-user")
        for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            path = Path("/", top)
            if path.is_symlink():
                args += ["--symlink", os.readlink(path), str(path)]
            elif path.is_dir():
                args += ["--ro-bind", str(path), str(path)]
        # the private /tmp first: a tree bound below it (a virtual environment or a data cache
        # under the host's /tmp) is then mounted on top of it, not hidden under it
        args += ["--proc", "/proc", "--dev", "/dev",
                 "--perms", "1777", "--size", str(self.limits.scratch), "--tmpfs", "/tmp"]
        for path in _readable_trees():
            args += _bind("--ro-bind", path)
        for path in _package_locations(self.hidden_packages + ["course_lib", "autograder"]):
            args += (["--tmpfs", str(path)] if path.is_dir() else ["--ro-bind", "/dev/null", str(path)])
        args += [*_bind("--ro-bind", self.site), *_bind("--ro-bind", self.cases),
                 *_bind("--bind", self.comm), "--chdir", "/tmp", "--clearenv"]
        for key, value in self.environment().items():
            args += ["--setenv", key, value]
        return args

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` run inside this sandbox's file system and namespaces (without the limits and
        the uid of ``kernel_argv``): for checking what the kernel would see."""
        return [*self._bwrap(), "--", *argv]

    def kernel_spec_dir(self) -> Path:
        """A kernel-spec folder naming ``KERNEL_NAME`` (for jupyter_client's spec manager)."""
        spec = self.root / "kernels" / KERNEL_NAME
        spec.mkdir(parents=True, exist_ok=True)
        (spec / "kernel.json").write_text(json.dumps({
            "argv": self.kernel_argv(), "display_name": "Python (grading sandbox)",
            "language": "python", "interrupt_mode": "message",
            "env": {} if self.isolate else self.environment()}))
        return spec.parent

    def close(self) -> None:
        if self.comm.is_dir():
            os.chmod(self.comm, 0o755)  # sealed without root: its entries could not be removed
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


SANDBOX_PREFIX = "ag-sandbox-"  # + the pid of the process that made it


def private_dir(prefix: str, base: str | None = None) -> Path:
    """A new folder ``base/prefix<pid>-XXXX`` (mode 0700), after removing any such folder whose
    process is gone: a grader killed outright (SIGKILL, a power cut) cannot clean up after
    itself, so the next one does. ``base`` None is the system's temporary folder."""
    base = Path(base or tempfile.gettempdir())
    for old in base.glob(f"{prefix}*"):
        pid = old.name[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=base))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _bind(how: str, path: Path) -> list[str]:
    """Bind ``path`` at the same place, its missing parents made traversable first.

    bubblewrap would give them the modes of the host's folders (``/root`` is 0700), which
    the sandbox's uid could not pass through.
    """
    args = []
    for parent in reversed(path.parents[:-1]):
        args += ["--perms", "0755", "--dir", str(parent)]
    return args + [how, str(path), str(path)]


def _data_dir() -> Path | None:
    path = cache_dir()
    return path if path.is_dir() else None


def _readable_trees() -> list[Path]:
    """The folders bound read-only: system, Python, virtual environment, data cache."""
    trees = [Path("/usr"), Path("/etc")]
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}:
        trees.append(Path(prefix).resolve())
    data = _data_dir()
    if data is not None:
        trees.append(data.resolve())
    out = []
    for tree in sorted(set(trees), key=lambda p: len(p.parts)):
        if tree.exists() and not any(tree.is_relative_to(t) for t in out):
            out.append(tree)
    return out


def _package_locations(names) -> list[Path]:
    """Where the named packages are installed inside the bound trees (to cover them)."""
    trees, found = _readable_trees(), []
    for name in names:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is None:
            continue
        places = list(spec.submodule_search_locations or []) or [spec.origin]
        for place in places:
            if place and Path(place).exists():
                path = Path(place).resolve()
                if any(path.is_relative_to(t) for t in trees):
                    found.append(path)
    return found
