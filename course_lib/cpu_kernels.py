"""The course's C++ kernels for the CPU: one torch extension, built once at set-up, loaded cheaply.

Two sources, each next to the Python it speeds up, compiled into one library (ninja compiles
them in parallel, so set-up waits for the longer one, not for both):

    flash/cpu_kernel.cpp     FlashAttention's tiles, forward and backward  (torch.ops.course_flash)
    layernorm_kernel.cpp     layer norm's hand-derived backward         (torch.ops.course_layernorm)

    build() -> seconds       compile (g++ -O3 -march=native, 20-60 s) and load; raises on failure
    loaded(build_if_missing=False)
                             whether the library is loaded in this process: loads one already
                             built (a few ms); compiles only if asked to; never raises
    reason() -> str          why ``loaded()`` is False ('' when it is True)
    why_not_usable() -> str  why a call may not take the kernels now ('' when it may): not
                             loaded, or torch.compile tracing it (it cannot see into C++)

Set-up (``python -m course_lib.data``) runs ``main()``, which builds the library or says in one
line why it cannot; the course then runs the torch code the kernels replace. Each build lives in
``.cache/cpu_kernels/<key>/`` in the repository (git-ignored; ``COURSE_KERNEL_BUILD_DIR`` moves
it). The key hashes what the binary fits and is made of: the CPU model and instruction set
(-march=native code is for the CPU that built it), the torch version, the flags and both
sources. So a changed source is never loaded stale: it has no build until set-up runs again (or
notebook 07's compiled attention, which builds what is missing, runs); older builds stay beside
it until deleted.
``CXX`` names the compiler, as for any torch extension.

Outside a checkout (the grading sandbox stages course_lib's modules without the sources or
``.cache``) nothing is found, and every kernel's caller uses its torch code.
"""
from __future__ import annotations

import hashlib
import os
import platform
import shutil
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
SOURCES = (HERE / "flash" / "cpu_kernel.cpp", HERE / "layernorm_kernel.cpp")
NAME = "course_cpu_kernels"  # the library: NAME.so
# where builds go; COURSE_KERNEL_BUILD_DIR moves it (a test builds in a folder of its own)
BUILD_ROOT = Path(os.environ.get("COURSE_KERNEL_BUILD_DIR") or HERE.parent / ".cache" / "cpu_kernels")
CFLAGS = ["-O3", "-march=native", "-ffast-math", "-fopenmp"]  # -fopenmp: at::parallel_for runs serially without it

_state: dict = {}  # "loaded" once loaded, else "reason"; "looked", "tried_build" once done


def loaded(build_if_missing: bool = False) -> bool:
    """Whether the kernels are loaded in this process. The first call loads the library that
    set-up built (a few milliseconds); none compiles unless ``build_if_missing`` (then once per
    process, a minute). Never raises: ``reason()`` says what went wrong."""
    if _state.get("loaded"):  # never twice: a second copy's operators would abort the process
        return True
    if "looked" not in _state:
        _state["looked"] = True
        _attempt(_load_built)
    if build_if_missing and not _state.get("loaded") and "tried_build" not in _state:
        _state["tried_build"] = True
        _attempt(build)
    return bool(_state.get("loaded"))


def reason() -> str:
    """Why ``loaded()`` is False ('' when it is True); asks ``loaded()`` first."""
    loaded()
    return _state.get("reason", "")


def why_not_usable() -> str:
    """Why a call may not take the kernels now ('' when it may), for every kernel's caller: they
    are not loaded (``loaded()``: never builds, so a first training step does not wait a
    minute), or torch.compile is tracing the call, which cannot see into C++; the caller then
    runs its torch twin, the same derivation, which is traced into the graph."""
    if torch.compiler.is_compiling():  # first: loaded() looks at files, which dynamo cannot trace
        return "torch.compile traces the torch code instead (it cannot see into the C++ kernels)"
    if not loaded():
        return f"the C++ kernels are not loaded: {reason()}"
    return ""


def build(verbose: bool = False) -> float:
    """Compile the library unless this key's build is finished, and load it; returns seconds
    taken. Raises on failure (no compiler, a compile error)."""
    start = time.perf_counter()
    if _state.get("loaded"):  # this process has it (never load a second copy: see loaded())
        return 0.0
    folder = _folder()
    if (folder / f"{NAME}.so").exists():
        _load_built(folder)
        return time.perf_counter() - start
    from torch.utils import cpp_extension  # imports setuptools machinery: only when compiling

    compiler = os.environ.get("CXX", "c++")
    if shutil.which(compiler) is None:
        raise RuntimeError(f"no C++ compiler: {compiler!r} (CXX, else c++) is not on PATH")
    # built in a folder of its own, renamed when complete: a process that loads the library
    # meanwhile never finds it half written
    scratch = folder.with_name(f"{folder.name}.building-{os.getpid()}")
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        cpp_extension.load(name=NAME, sources=[str(s) for s in SOURCES], extra_cflags=CFLAGS,
                           build_directory=str(scratch), is_python_module=False, verbose=verbose)
        try:
            scratch.rename(folder)
        except OSError:  # another process finished the same build first: keep its folder
            pass
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    # cpp_extension.load has loaded the library: loading the renamed copy (or another process's)
    # as well would register its operators twice
    _now_loaded()
    return time.perf_counter() - start


def _load_built(folder: Path | None = None) -> None:
    """Load this key's library (from ``folder``, its build folder, when known); raise if there
    is none."""
    library = (folder or _folder()) / f"{NAME}.so"
    if not library.exists():
        raise FileNotFoundError(f"not built ({library.parent} holds no build of the current "
                                "sources; python -m course_lib.data builds it)")
    torch.ops.load_library(str(library))
    _now_loaded()


def _now_loaded() -> None:
    _state["loaded"] = True
    _state.pop("reason", None)


def _attempt(step) -> None:
    try:
        step()
    except Exception as error:  # no compiler, a failed compile, an unloadable library, no sources
        _state["reason"] = _one_line(error)


def _folder() -> Path:
    """This machine's and these sources' build folder (raises OSError when a source is missing)."""
    key = hashlib.sha1(_machine().encode())
    key.update(" ".join(CFLAGS).encode())
    for source in SOURCES:
        key.update(source.read_bytes())
    return BUILD_ROOT / key.hexdigest()[:16]


def _machine() -> str:
    """The CPU model and instruction set, the architecture, and torch's version (what the
    binary fits)."""
    seen = {}
    try:
        with open("/proc/cpuinfo") as f:  # the first core's model and flags stand for all
            for line in f:
                key = line.split(":")[0].strip()
                if key in ("model name", "flags"):
                    seen.setdefault(key, line)
    except OSError:
        pass
    return f"{platform.machine()} {''.join(seen.values())} {torch.__version__}"


def _one_line(error: Exception) -> str:
    """The first line of an error, cut to 200 characters, after its type."""
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0][:200]}" if text else type(error).__name__


def main() -> None:
    """Set-up step: build the kernels and say how long it took, or say why the course runs
    the torch code instead."""
    print("building the course's C++ kernels for the CPU (compiled attention, layer norm's "
          "backward; about a minute, once) ...", flush=True)
    try:
        seconds = build()
    except Exception as error:
        _state["reason"] = _one_line(error)
        print(f"C++ kernels not built ({_state['reason']}); the course uses the torch code "
              "instead (course_lib.flash.cpu's tiles, layer norm's torch backward)")
        return
    print(f"C++ kernels ready ({seconds:.0f} s)")


if __name__ == "__main__":
    main()
