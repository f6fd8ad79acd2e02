"""FlashAttention on the CPU as a compiled C++ kernel (``cpu_kernel.cpp``), built once at set-up.

The algorithm of ``course_lib.flash.cpu`` (tiles, online softmax, the hand-derived backward
that recomputes each tile's weights from the saved log-sum-exp), with every tile's element-wise
steps done in C++ loops while the tile is in cache: the torch tile loop dispatches a dozen
small ops per tile from Python, and on a 2-core CPU those cost as much as the tiles' products.
The tile products are a hand-written register-blocked GEMM (``cpu_kernel.cpp`` says why).

    compiled_attention(q, k, v, causal=False, mask=None) -> out (..., T_q, d_v)
    available() -> bool        whether the extension built and loaded; ``reason()`` says why not

Supported by the kernel: float32 CPU tensors, ``causal`` or not (query i at position
i + T_k - T_q, as ``cpu``), any leading axes. Everything else (a ``mask``, float16, bfloat16,
float64, CUDA tensors, an empty axis) and every call when the build failed fall back to
``cpu.tiled_attention``, which gives the same result more slowly.

The build (``torch.utils.cpp_extension``, g++ with -O3 -march=native, about a minute) happens
on first use or at set-up (``python -m course_lib.flash.compiled``, which ``python -m
course_lib.data`` runs); its output lives in ``.cache/flash_cpu_ext/<machine>/`` in the
repository (git-ignored): -march=native code is for the CPU that built it, so each machine
gets its own folder (``COURSE_FLASH_BUILD_DIR`` moves them). ``CXX`` names the compiler, as for
any torch extension.

Shapes (course glossary): q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v);
out (..., T_q, d_v).
"""
from __future__ import annotations

import hashlib
import os
import platform
import shutil
import time
from pathlib import Path

import torch

from course_lib.flash.cpu import tiled_attention

SOURCE = Path(__file__).with_name("cpu_kernel.cpp")
# where builds go; COURSE_FLASH_BUILD_DIR moves it (the tests build in a folder of their own)
BUILD_ROOT = Path(os.environ.get("COURSE_FLASH_BUILD_DIR")
                  or Path(__file__).resolve().parents[2] / ".cache" / "flash_cpu_ext")
CFLAGS = ["-O3", "-march=native", "-ffast-math", "-fopenmp"]  # -fopenmp: at::parallel_for runs serially without it
# tile sizes: rows of queries x columns of keys; benchmarks/flash_cpu.py measured them
BLOCK_Q, BLOCK_K = 128, 256

_state: dict = {}  # "ops" once built, or "reason" once failed


def available() -> bool:
    """Whether the compiled kernel is usable (builds it on first call; never raises)."""
    return _ops() is not None


def reason() -> str:
    """Why ``available()`` is False ('' when it is True)."""
    _ops()
    return _state.get("reason", "")


def compiled_attention(q, k, v, causal=False, mask=None, block_q=BLOCK_Q, block_k=BLOCK_K):
    """softmax(q k^T / sqrt(d_k) + M) v by the compiled tiles, differentiable through the
    compiled hand-derived backward; ``cpu.tiled_attention`` where the kernel does not apply."""
    if not _supported(q, k, v, mask) or _ops() is None:
        return tiled_attention(q, k, v, causal, mask)
    return _CompiledAttention.apply(q, k, v, causal, block_q, block_k)


class _CompiledAttention(torch.autograd.Function):
    """The kernel's forward, whose backward is the kernel's backward (the derivation)."""

    @staticmethod
    def forward(ctx, q, k, v, causal, block_q, block_k):
        lead, T_q = q.shape[:-2], q.shape[-2]
        q3, k3, v3 = (x.reshape(-1, *x.shape[-2:]).contiguous() for x in (q, k, v))
        out, lse = _ops().forward(q3, k3, v3, causal, block_q, block_k)
        ctx.save_for_backward(q3, k3, v3, out, lse)
        ctx.settings = causal, block_q, block_k, q.shape, k.shape, v.shape
        return out.reshape(*lead, T_q, v.shape[-1])

    @staticmethod
    def backward(ctx, dout):
        q3, k3, v3, out, lse = ctx.saved_tensors
        causal, block_q, block_k, *shapes = ctx.settings
        do = dout.reshape(out.shape).contiguous()
        grads = _ops().backward(do, q3, k3, v3, out, lse, causal, block_q, block_k)
        return (*(g.reshape(s) for g, s in zip(grads, shapes)), None, None, None)


def _supported(q, k, v, mask):
    tensors = (q, k, v)
    return (mask is None and all(x.dtype == torch.float32 and x.device.type == "cpu"
                                 for x in tensors)
            and q.ndim >= 2 and all(x.numel() > 0 for x in tensors))


def _ops():
    """torch.ops.course_flash once the extension is loaded, else None (reason in _state)."""
    if "ops" not in _state and "reason" not in _state:
        try:
            build()
        except Exception as error:  # no compiler, failed compile, missing headers: use torch
            _state["reason"] = _one_line(error)
    return _state.get("ops")


def _one_line(error):
    """The first line of an error, cut to 200 characters, after its type."""
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0][:200]}" if text else type(error).__name__


def build(verbose=False):
    """Compile (or reuse) and load the extension; returns seconds taken. Raises on failure."""
    from torch.utils import cpp_extension  # imports setuptools machinery: only when building

    compiler = os.environ.get("CXX", "c++")
    if shutil.which(compiler) is None:
        raise RuntimeError(f"no C++ compiler: {compiler!r} (CXX, else c++) is not on PATH")
    folder = BUILD_ROOT / _machine()
    folder.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    cpp_extension.load(name="course_flash_cpu", sources=[str(SOURCE)], extra_cflags=CFLAGS,
                       build_directory=str(folder), is_python_module=False, verbose=verbose)
    _state["ops"] = torch.ops.course_flash
    _state.pop("reason", None)
    return time.perf_counter() - start


def _machine():
    """A folder name per CPU model and instruction set, and torch version (what the binary fits)."""
    seen = {}
    try:
        with open("/proc/cpuinfo") as f:  # the first core's model and flags stand for all
            for line in f:
                key = line.split(":")[0].strip()
                if key in ("model name", "flags"):
                    seen.setdefault(key, line)
    except OSError:
        pass
    flags = "".join(seen.values())
    text = f"{platform.machine()} {flags} {torch.__version__}"
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def main() -> None:
    """Set-up step: build the kernel, say how long it took, or say why the course uses the
    torch tiles instead."""
    print("building the compiled FlashAttention kernel for the CPU (about a minute, once) ...",
          flush=True)
    try:
        seconds = build()
    except Exception as error:
        _state["reason"] = _one_line(error)
        print(f"compiled FlashAttention kernel not built ({_state['reason']}); the course uses "
              "the torch tiles (course_lib.flash.cpu) instead")
        return
    print(f"compiled FlashAttention kernel ready ({seconds:.0f} s)")


if __name__ == "__main__":
    main()
