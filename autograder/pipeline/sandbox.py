"""The grading sandbox: what the learner's kernel can see, reach and use while it is graded. [trusted]

The kernel of a graded notebook runs under bubblewrap (Debian's ``bwrap``):

- its own unprivileged uid (when the grader runs as root), no capabilities (none permitted,
  none in its bounding set), no new privileges;
- no network, its own PID namespace (no process outlives the kernel), IPC and UTS namespaces;
- a file system built from a positive list: the system (``/usr``, ``/etc``), the Python
  installation and virtual environment (or the user's site-packages, for a system Python with
  ``pip install --user``), the course's data cache, a ``/dev`` of a few devices, all
  read-only, as is the sandbox's own root; a private ``/tmp`` for scratch, limited in bytes
  and in files (``_scratch_tmpfs`` where the grader runs as root, else bubblewrap's, whose
  files ``kernel/scratch.py`` caps), which also holds the kernel's sockets (the host reaches
  them through ``/proc/<pid>/root``); nothing else is writable inside. The course directory
  (gradebook, ``solutions/``, other submissions, the grader's secret), home directories and
  the repository are simply not there;
- on ``PYTHONPATH``, a staged copy of ``course_lib`` without the modules that compute the
  notebook's answers, and of ``autograder``'s ``__init__`` and ``kernel/`` folder (the graded
  cell, the calls, the transport, the hints, the search for a fix of the learner's code),
  which hold no reference and no judge: ``KERNEL`` below, nothing else of ``autograder``;
- the packages an exercise forbids (``torch``, whose autograd would take a hand-derived
  backward's place, and with it the other autodiff packages) hidden under empty folders,
  with a stub that says why ``import torch`` fails;
- limits on address space, CPU time, processes, open files and file size (``prlimit``);
  no new user namespace, where a fresh tmpfs would escape the size of ``/tmp`` (``seccomp.py``).

Where bubblewrap is missing (a learner's laptop running ``submit``), the kernel runs as a
plain process with the same staged path and environment, and the grader says plainly that
it ran without isolation.
"""
from __future__ import annotations

import importlib.util
import json
import os
import secrets
import select
import shutil
import signal
import site
import stat
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from autograder.kernel import wire
from autograder.pipeline.seccomp import no_new_user_namespaces
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
    scratch_files: int = 20_000    # files and folders its /tmp may hold


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


def isolation_setting() -> str:
    """``AUTOGRADER_ISOLATION``: "auto" (the default: the sandbox where it runs, else without it,
    with a note), "required" or "off"."""
    setting = os.environ.get(ISOLATION_ENV, "auto")
    if setting not in ("auto", "required", "off"):
        raise SandboxUnavailable(f"{ISOLATION_ENV}={setting!r}; expected auto, required or off")
    return setting


def isolation() -> tuple[bool, str]:
    """(isolated, a sentence for the learner) under ``isolation_setting()``."""
    setting = isolation_setting()
    if setting == "off":
        return False, f"Graded without isolation ({ISOLATION_ENV}=off)."
    problem = _bwrap_problem()
    if problem is None:
        return True, "Graded in a sandbox (bubblewrap)."
    if setting == "required":
        raise SandboxUnavailable(f"isolation is required but {problem}")
    return False, unisolated(problem)


def unisolated(problem: str) -> str:
    """The sentence for a notebook graded without the sandbox because of ``problem``."""
    return (f"Graded without isolation: {problem}. The score is right for honest work; "
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

    ``root`` (a short path under /tmp) holds ``site/`` (the ``PYTHONPATH``), ``cases/`` (one
    JSON file per exercise, written by the grader) and ``comm/`` (the connection file), all
    read-only inside. The kernel makes its sockets at ``sockets`` (``sockets-1`` to
    ``sockets-5``) in its own ``/tmp``, where whatever it writes counts against the size of
    that tmpfs; without isolation, in ``comm/``.
    """

    def __init__(self, forbidden=(), isolate: bool = True, limits: Limits = Limits()):
        self.isolate, self.limits = isolate, limits
        self.root = private_dir(SANDBOX_PREFIX, "/tmp")
        self.site, self.cases, self.comm = self.root / "site", self.root / "cases", self.root / "comm"
        self.work = self.root / "work"  # the kernel's scratch when it runs without isolation
        # unguessable: before bwrap's child has entered its own root, /proc/<pid>/root is the host's
        self.sockets = f"/tmp/.kernel-{secrets.token_hex(8)}" if isolate else str(self.comm / "k")
        self.uid = 60000 + os.getpid() % 5000 if os.geteuid() == 0 else os.geteuid()
        self.hidden_modules, self.hidden_packages = hidden_packages(forbidden)
        for d in (self.site, self.cases, self.comm, self.work):
            d.mkdir()
        self._stage_site()
        os.chmod(self.root, 0o755)
        self.share(self.work)
        self.scratch = _scratch_tmpfs(self.root / "scratch", limits, self.uid) if isolate else None

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

    @contextmanager
    def launch(self, argv: list[str]):
        """``argv`` (``kernel_argv``, filled in) with bwrap's seccomp filter (``seccomp.py``) and
        its ``--info-fd``: yields (argv, the file descriptors the process must inherit, the read
        end of the info pipe, for ``reach``). The parent's copies of the others are closed after."""
        assert argv[0] == "bwrap", argv[:1]
        info, write = os.pipe()
        keep, extra = [write], ["--info-fd", str(write)]
        rules = no_new_user_namespaces()
        if rules is not None:
            read, fill = os.pipe()
            os.write(fill, rules)  # a few hundred bytes: the pipe holds them
            os.close(fill)
            keep.append(read)
            extra += ["--seccomp", str(read)]
        try:
            yield [argv[0], *extra, *argv[1:]], tuple(keep), info
        except BaseException:
            os.close(info)
            raise
        finally:
            for fd in keep:
                os.close(fd)

    def reach(self, info_fd: int) -> str:
        """``sockets`` as the host reaches them, once bwrap has written to ``info_fd`` (the read
        end of the pipe ``launch`` made; closed here) the pid of the sandbox's first process.

        Through ``/proc/<pid>/root`` the grader, root or the same user as the kernel, connects to
        the sockets without any folder of its own disk being writable inside.
        """
        return f"/proc/{_child_pid(info_fd)}/root{self.sockets}"

    def write_cases(self, exercise_id: str, payload: dict) -> None:
        (self.cases / f"{exercise_id}.json").write_text(wire.dumps(payload))  # what record reads

    # --- the kernel --------------------------------------------------------------------------
    def environment(self) -> dict[str, str]:
        scratch = "/tmp" if self.isolate else str(self.work)
        env = {"PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
               "HOME": scratch, "TMPDIR": scratch, "LANG": "C.UTF-8",
               "PYTHONPATH": str(self.site),
               "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg",
               "MPLCONFIGDIR": f"{scratch}/.matplotlib", "IPYTHONDIR": f"{scratch}/.ipython",
               "COURSE_MODE": "grade", "NBGRADER_EXECUTION": "autograde",
               "AUTOGRADER_CASES": str(self.cases), "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
        user_site = _user_site()
        if user_site is None:
            env["PYTHONNOUSERSITE"] = "1"
        else:  # the kernel's HOME is its scratch: tell it where the grader's packages are
            env["PYTHONUSERBASE"] = site.getuserbase()
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
        return self.contained([sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
                               "--IPKernelApp.log_level=ERROR"])

    @contextmanager
    def alone(self, argv: list[str]):
        """``argv`` started as the kernel runs (``contained``: this sandbox, its limits, its uid,
        the seccomp filter of ``launch``), with pipes for its standard input and output; its
        standard error goes nowhere. Yields (the process, a function that kills it and all it
        started), and kills them on leaving. The process's ``sandbox_pid`` is the sandbox's first
        process (``tree_cpu``), where it could be known."""
        argv = self.contained(argv)
        pipes = dict(stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        if not self.isolate:  # a session of its own: its process group goes with it
            with subprocess.Popen(argv, env=self.environment(), cwd=self.work, start_new_session=True,
                                  **pipes) as process:
                process.sandbox_pid = process.pid
                def stop():  # once reaped, its pid and group may be another's
                    if process.returncode is None:
                        _kill(process.pid, group=True)
                try:
                    yield process, stop
                finally:
                    stop()
            return
        with self.launch(argv) as (argv, fds, info):  # closes ``info`` if the start fails
            process = subprocess.Popen(argv, pass_fds=fds, **pipes)
        try:  # read whole: bwrap dies of a pipe closed before it writes
            pid = _child_pid(info)
            first = _pidfd(pid, parent=process.pid)
            process.sandbox_pid = pid  # for ``tree_cpu``
        except OSError:
            first = None

        def stop():
            if first is not None:  # the namespace's first process takes every other along
                try:
                    signal.pidfd_send_signal(first, signal.SIGKILL)
                except ProcessLookupError:
                    pass  # gone already
            process.kill()
        with process:
            try:
                yield process, stop
            finally:
                stop()
                if first is not None:
                    os.close(first)

    def contained(self, command: list[str]) -> list[str]:
        """``command`` in this sandbox, with its limits, dropped to its uid (as is, without
        isolation)."""
        if not self.isolate:
            return command
        lim = self.limits
        limits = ["prlimit", f"--as={lim.address_space}", f"--cpu={lim.cpu_seconds}",
                  f"--nofile={lim.open_files}", f"--fsize={lim.file_size}", "--core=0"]
        drop = ["setpriv", "--no-new-privs", "--bounding-set=-all", "--inh-caps=-all", "--ambient-caps=-all"]
        first = []
        if os.geteuid() == 0:  # a uid of its own: the process limit counts its tasks only
            limits.append(f"--nproc={lim.processes}")
            drop += [f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups"]
        elif _lends_capabilities():  # cap /tmp's files with what bubblewrap lends; setpriv drops it
            first = [sys.executable, "-I", "-S", str(self.site / "autograder" / "kernel" / "scratch.py"),
                     str(lim.scratch), str(lim.scratch_files), "--"]
        return [*self._bwrap(lend=bool(first)), "--", *first, *limits, "--", *drop, "--", *command]

    def _bwrap(self, lend: bool = False) -> list[str]:
        """bubblewrap's options; ``lend``: the capabilities ``kernel/scratch.py`` needs, lent to
        the command's first process in the sandbox's user namespace (see ``kernel_argv``)."""
        args = ["bwrap", "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net",
                "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        if os.geteuid() != 0:
            args.append("--unshare-user")
        if lend:
            args += ["--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP"]
        for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            path = Path("/", top)
            if path.is_symlink():
                args += ["--symlink", os.readlink(path), str(path)]
            elif path.is_dir():
                args += ["--ro-bind", str(path), str(path)]
        # the private /tmp first: a tree bound below it (a virtual environment or a data cache
        # under the host's /tmp) is then mounted on top of it, not hidden under it
        args += ["--proc", "/proc", *_devices()]
        args += (["--bind", str(self.scratch), "/tmp"] if self.scratch else
                 ["--perms", "1777", "--size", str(self.limits.scratch), "--tmpfs", "/tmp"])
        for path in readable_trees():
            args += _bind("--ro-bind", path)
        for path in _package_locations(self.hidden_packages + ["course_lib", "autograder"]):
            args += (["--tmpfs", str(path)] if path.is_dir() else ["--ro-bind", "/dev/null", str(path)])
        args += [*_bind("--ro-bind", self.site), *_bind("--ro-bind", self.cases),
                 *_bind("--ro-bind", self.comm), "--remount-ro", "/", "--chdir", "/tmp", "--clearenv"]
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
        _unmount(self.root / "scratch")
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


SANDBOX_PREFIX = "ag-sandbox-"  # + the pid of the process that made it


def _child_pid(info_fd: int) -> int:
    """The pid, as the host sees it, of the sandbox's first process, which bwrap writes to its
    ``--info-fd`` (``info_fd``: the pipe's read end, read whole and closed here)."""
    with os.fdopen(info_fd, "rb") as info:  # bwrap writes it whole and closes it, or dies
        select.select([info], [], [], 30)
        text = info.read().decode(errors="replace")
    try:
        pid = wire.loads(text)["child-pid"]
    except (ValueError, KeyError, TypeError):  # ``wire.Unreadable`` is a ValueError
        pid = None
    if type(pid) is not int or pid <= 0:
        raise OSError(f"bubblewrap did not say which process it started ({text[:200]!r})")
    return pid


def tree_cpu(pid: int) -> float | None:
    """CPU seconds (user and system, every thread's, and those of the children it waited for)
    of process ``pid`` and every live process under it, read from ``/proc`` as the kernel
    counts them (None where ``pid`` is gone). bubblewrap's outer process never waits for the
    sandbox's first one, so no count reaches the grader when they end: read it while they live."""
    parents, times = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:  # "pid (name) state ppid ...": the name may hold spaces
                fields = f.read().rsplit(")", 1)[1].split()
            parent, ticks = int(fields[1]), sum(int(v) for v in fields[11:15])  # utime stime cutime cstime
        except (OSError, IndexError, ValueError):
            continue  # ended meanwhile: its file gone, or read empty or cut while it went
        parents[int(entry)], times[int(entry)] = parent, ticks
    if pid not in times:
        return None
    tree, grew = {pid}, True
    while grew:
        more = {p for p, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    return sum(times[p] for p in tree) / os.sysconf("SC_CLK_TCK")


def _pidfd(pid: int, parent: int) -> int:
    """A file descriptor that refers to process ``pid`` for as long as it is open (a signal
    sent through it cannot reach another process that got the number later), if ``pid`` is
    still the child of ``parent``; else ``ProcessLookupError``."""
    fd = os.pidfd_open(pid)
    try:
        with open(f"/proc/{pid}/stat") as f:  # "pid (name) state ppid ...": the name may hold spaces
            ppid = int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        ppid = None
    if ppid != parent:  # the pid was taken again between bwrap's word and the open
        os.close(fd)
        raise ProcessLookupError(pid)
    return fd


def _kill(pid: int | None, group: bool = False) -> None:
    """SIGKILL to ``pid`` (``group``: to its process group) if it is still there: the first
    process of a PID namespace takes every other process of it along."""
    if pid is not None:
        try:
            (os.killpg if group else os.kill)(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def private_dir(prefix: str, base: str | None = None) -> Path:
    """A new folder ``base/prefix<pid>-XXXX`` (mode 0700), after removing any such folder whose
    process is gone: a grader killed outright (SIGKILL, a power cut) cannot clean up after
    itself, so the next one does. ``base`` None is the system's temporary folder."""
    base = Path(base or tempfile.gettempdir())
    for old in base.glob(f"{prefix}*"):
        pid = old.name[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            _unmount(old / "scratch")
            shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=base))


def _scratch_tmpfs(path: Path, limits: Limits, uid: int) -> Path | None:
    """A tmpfs of ``limits.scratch`` bytes and ``limits.scratch_files`` inodes mounted at
    ``path``, for the kernel's ``/tmp``; None where this process may not mount one.

    bubblewrap's own ``--size --tmpfs`` bounds the bytes only: its tmpfs takes the kernel's
    default of inodes, half the machine's pages (about three million here), each a few hundred
    bytes of the host's memory that a loop of empty files can take. A grader running as root
    (a grading server, CI, class grading) mounts this one on the host and binds it; a learner's
    ``submit`` without root keeps bubblewrap's, whose inodes ``kernel/scratch.py`` limits from
    inside the sandbox. The mount is the kernel's uid's
    alone (mode 0700): bubblewrap's lives only in the sandbox, but this one is also on the host,
    where another local user must not read the learner's scratch or plant files in it (an
    IPython start-up file under ``$IPYTHONDIR``, say).
    """
    if os.geteuid() != 0:
        return None
    path.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={limits.scratch},"
                           f"nr_inodes={limits.scratch_files},mode=0700,uid={uid},gid={uid},nosuid,nodev",
                           "tmpfs", str(path)], capture_output=True)
    if done.returncode != 0:  # a container without the right to mount: bubblewrap's then
        path.rmdir()
        return None
    return path


def _unmount(path: Path) -> None:
    """Unmount ``path`` if something is mounted there (lazily: a process may still hold it)."""
    if path.is_mount():
        subprocess.run(["umount", "--lazy", str(path)], capture_output=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _lends_capabilities() -> bool:
    """Whether bubblewrap may lend capabilities to a sandbox of this user's: not where it is
    installed setuid (older distributions), where it lends them to root alone; there the files
    of ``/tmp`` stay unbounded without root."""
    exe = shutil.which("bwrap")
    return exe is not None and not os.stat(exe).st_mode & stat.S_ISUID


DEVICES = ("null", "zero", "full", "random", "urandom", "tty")


def _devices() -> list[str]:
    """A ``/dev`` of the devices a kernel uses, bound from the host, in the sandbox's root
    (read-only). bubblewrap's own ``--dev`` mounts a tmpfs there, which the user of a grader
    without root owns: writable and unbounded; and, for its pseudo-terminals, it nests a second
    user namespace, in which ``kernel/scratch.py`` may not remount ``/tmp``."""
    args = ["--dir", "/dev", "--dir", "/dev/shm"]  # as --dev's: there, but no one's to write in
    for name in DEVICES:
        if Path("/dev", name).exists():
            args += ["--dev-bind", f"/dev/{name}", f"/dev/{name}"]
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
        args += ["--symlink", target, f"/dev/{name}"]
    return args


def _bind(how: str, path: Path) -> list[str]:
    """Bind ``path`` at the same place, its missing parents made traversable first.

    bubblewrap would give them the modes of the host's folders (``/root`` is 0700), which
    the sandbox's uid could not pass through.
    """
    args = []
    for parent in reversed(path.parents[:-1]):
        args += ["--perms", "0755", "--dir", str(parent)]
    return args + [how, str(path), str(path)]


def _present(path: Path, is_dir: bool = False) -> bool:
    """Whether ``path`` is there to bind; True where the grader may not even look (a folder of
    another user's): bubblewrap then says in its one line why it cannot bind it."""
    try:
        return path.is_dir() if is_dir else path.exists()
    except PermissionError:
        return True


def _data_dir() -> Path | None:
    path = cache_dir()
    return path if _present(path, is_dir=True) else None


def _user_site() -> Path | None:
    """The user's site-packages when the grader's Python uses it (a system Python whose packages
    were installed with ``pip install --user``), else None."""
    if not site.ENABLE_USER_SITE:  # a virtual environment, python -s, PYTHONNOUSERSITE
        return None
    path = Path(site.getusersitepackages())
    return path if str(path) in sys.path and path.is_dir() else None


def readable_trees() -> list[Path]:
    """The folders bound read-only: system, Python, virtual environment or user site, data cache."""
    trees = [Path("/usr"), Path("/etc")]
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}:
        trees.append(Path(prefix).resolve())
    user_site = _user_site()
    if user_site is not None:
        trees.append(user_site.resolve())
    data = _data_dir()
    if data is not None:
        trees.append(data.resolve())
    out = []
    for tree in sorted(set(trees), key=lambda p: len(p.parts)):
        if _present(tree) and not any(tree.is_relative_to(t) for t in out):
            out.append(tree)
    return out


def _package_locations(names) -> list[Path]:
    """Where the named packages are installed inside the bound trees (to cover them)."""
    trees, found = readable_trees(), []
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
