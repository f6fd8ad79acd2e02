"""course_lib.flash.triton_kernels: the Triton kernels against the numpy reference.

Without a GPU the kernels run in Triton's interpreter, which is chosen when the kernels are
defined (``TRITON_INTERPRET=1`` before the module is imported). So that no other test shares
an interpreted triton, those checks run in a child process: this file run as a script. The
interpreter cannot do bfloat16 arithmetic (its ``tl.dot`` multiplies the raw bits:
triton-lang/triton#11584, "we just don't support it yet"), so bfloat16 is checked on CUDA
only; float16 runs the same code path and is checked here. A second child compiles the kernels
for an H100 (sm_90, through ptxas) without one, which catches what the interpreter forgives.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

try:
    import triton
except ImportError:
    triton = None

needs_triton = pytest.mark.skipif(triton is None, reason="no triton (pip install -e '.[triton]')")
needs_cuda = pytest.mark.skipif(triton is None or not torch.cuda.is_available()
                                or os.environ.get("TRITON_INTERPRET") == "1",
                                reason="needs triton and a CUDA GPU")

# (id, T_q, T_k, d_k, d_v, causal, dtype); leading axes (B, n_heads) = (2, 2). The
# interpreter's tiles are 16 x 32 or 32 x 16, so T = 37 ends in a partial tile. Causal tiles are
# skipped or masked by where the diagonal crosses them, so the offsets T_k - T_q cover the
# residues mod 16 at which an off-by-one in those bounds changes the result (0, 1, 14, 15, 17,
# 25, 30, -1, -2, -25).
CASES = [
    ("full", 37, 37, 16, 16, False, "float32"),
    ("cross", 45, 20, 32, 16, False, "float32"),
    ("causal", 37, 37, 16, 16, True, "float32"),
    ("causal-d64", 33, 33, 64, 64, True, "float32"),
    ("causal-d_v-32", 20, 35, 16, 32, True, "float32"),  # T_q < T_k: the last T_q positions
    *[(f"causal-offset-{T_k - 20}", 20, T_k, 16, 16, True, "float32")
      for T_k in (21, 34, 37, 45, 50)],
    ("causal-offset--1", 38, 37, 16, 16, True, "float32"),  # query 0 sees no key
    ("causal-offset--2", 39, 37, 16, 16, True, "float32"),
    ("causal-no-keys", 45, 20, 32, 16, True, "float32"),  # the first 25 queries see no key
    ("one-query", 1, 30, 16, 16, True, "float32"),
    ("causal-float16", 37, 37, 16, 16, True, "float16"),
]
TOL = {"float32": 1e-4, "float16": 1e-2}  # max |triton - reference|, inputs ~ N(0, 1)
QUANTITIES = ("out", "lse", "dQ", "dK", "dV")


def _inputs(T_q, T_k, d_k, d_v, dtype, seed=0):
    """Random q, k, v, dout (B, n_heads, T, d) in ``dtype``, laid out (B, T, n_heads, d) as
    ``split_heads`` leaves them (not contiguous), so the wrapper's reshaping is tested too."""
    rng = np.random.default_rng(seed)
    shapes = ((T_q, d_k), (T_k, d_k), (T_k, d_v), (T_q, d_v))
    return [torch.from_numpy(rng.standard_normal((2, T, 2, d))).to(getattr(torch, dtype))
            .transpose(1, 2) for T, d in shapes]


def _errors(T_q, T_k, d_k, d_v, causal, dtype):
    """Max |triton - reference| of out, lse, dQ, dK, dV; the reference runs in float64 on the
    same (rounded) inputs. lse must be -inf exactly where the reference's is."""
    from course_lib.flash import reference, triton_kernels

    q, k, v, dout = _inputs(T_q, T_k, d_k, d_v, dtype)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    out, lse = triton_kernels.flash_forward_triton(q, k, v, causal)
    triton_kernels.flash_attention_triton(q, k, v, causal).backward(dout)
    as64 = [t.detach().double().numpy() for t in (q, k, v, dout)]
    ref_out, cache = reference.flash_forward(*as64[:3], causal=causal)
    ref_grads = reference.flash_backward(as64[3], cache)
    lse, no_keys = lse.numpy(), np.isinf(cache.lse)
    same_no_keys = np.array_equal(np.isinf(lse), no_keys)
    lse_error = np.abs(lse - cache.lse)[~no_keys].max() if same_no_keys else np.inf
    mine = [out] + [t.grad for t in (q, k, v)]
    errors = [np.abs(a.detach().double().numpy() - b).max()
              for a, b in zip(mine, [ref_out, *ref_grads])]
    return dict(zip(QUANTITIES, map(float, [errors[0], lse_error, *errors[1:]])))


def _run_child(mode, env, tmp_path):
    proc = subprocess.run([sys.executable, __file__, mode], env={**os.environ, **env}, cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.splitlines()[-1])


def _interpreter_fails_on_this_numpy() -> str:
    """Why Triton's CPU interpreter cannot run here, or '': before Triton 3.9 (the course's
    minimum, pyproject's ``triton`` extra) it turns a one-element array into an int in a way
    numpy 2.4 and later refuse (triton-lang/triton#9171). A GPU image with an older Triton
    failed so (Triton 3.6, numpy 2.5), while its compiled kernels passed."""
    old_triton = tuple(int(x) for x in triton.__version__.split(".")[:2]) < (3, 9)
    new_numpy = tuple(int(x) for x in np.__version__.split(".")[:2]) >= (2, 4)
    return (f"triton {triton.__version__} (the course asks for 3.9 or later) cannot interpret "
            f"with numpy {np.__version__}: triton-lang/triton#9171") if old_triton and new_numpy else ""


@needs_triton
def test_interpreted_kernels_match_the_reference(tmp_path):
    """Every case of CASES, in one child under TRITON_INTERPRET=1 (one test, so that pytest-xdist
    does not start the slow child once per worker)."""
    if _interpreter_fails_on_this_numpy():
        pytest.skip(_interpreter_fails_on_this_numpy())
    errors = _run_child("interpret", {"TRITON_INTERPRET": "1"}, tmp_path)
    failed = {case[0]: errors[case[0]] for case in CASES
              if not all(error < TOL[case[-1]] for error in errors[case[0]].values())}  # NaN fails
    assert not failed, failed


@needs_triton
def test_kernels_compile_for_an_h100_without_one(tmp_path):
    """bfloat16 causal d_k 64 and float32 non-causal d_k 128, first candidate tile of each."""
    if "nvidia" not in triton.backends.backends:
        pytest.skip("this triton has no NVIDIA backend")
    env = {"TRITON_INTERPRET": "0", "TRITON_CACHE_DIR": str(tmp_path)}
    compiled = _run_child("compile", env, tmp_path)
    for name, shared in compiled.items():
        assert shared <= 227 * 1024, (name, shared)  # an H100 block has 227 KiB of shared memory


@needs_triton
def test_supports_what_the_kernels_handle(monkeypatch):
    from course_lib.flash.triton_kernels import supports

    monkeypatch.setenv("TRITON_INTERPRET", "1")  # lets CPU tensors count as a device
    q, k, v = (torch.zeros(2, 3, T, d) for T, d in ((5, 64), (7, 64), (7, 128)))
    assert supports(q, k, v, causal=True)
    assert not supports(q, k, v, mask=torch.ones(5, 7, dtype=torch.bool))
    assert not supports(q.double(), k.double(), v.double())
    assert not supports(q.half(), k, v)
    assert not supports(q[..., :48], k[..., :48], v)  # d_k not a power of two
    assert not supports(q, k, v[..., :8])  # d_v below tl.dot's 16
    assert not supports(q[:1], k, v)  # different leading axes
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert not supports(q, k, v)  # CPU tensors, no interpreter


@needs_triton
def test_available_needs_cuda_or_the_interpreter(monkeypatch):
    from course_lib.flash.triton_kernels import available

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert available()
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert available() == torch.cuda.is_available()


def test_module_imports_without_triton():
    code = ("import sys; sys.modules['triton'] = None\n"  # makes `import triton` raise ImportError
            "from course_lib.flash import triton_kernels as tk\n"
            "print(tk.available())")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "False", proc.stderr[-2000:]


# ----------------------------------------------------------------------------- CUDA
def _errors_against_float64(T, d_k, causal, dtype):
    """Max |x - x64| of out, dQ, dK, dV from the Triton kernels and from SDPA, both in ``dtype``,
    against SDPA in float64: {quantity: (triton error, sdpa error, max |x64|)}; B = 2, n_heads = 4.
    """
    from course_lib.flash.triton_kernels import flash_attention_triton

    sdpa = torch.nn.functional.scaled_dot_product_attention
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, dout = (torch.randn(2, 4, T, d_k, device="cuda", generator=gen) for _ in range(4))
    results = {}
    for name, inputs_dtype in (("ref", torch.float64), ("sdpa", dtype), ("triton", dtype)):
        # copy=True: in float32, .to() would hand back q itself, and the gradients of two paths
        # would then add up in the same q.grad
        leaves = [t.to(inputs_dtype, copy=True).requires_grad_() for t in (q, k, v)]
        if name == "triton":
            out = flash_attention_triton(*leaves, causal)
        else:
            out = sdpa(*leaves, is_causal=causal)
        out.backward(dout.to(inputs_dtype))
        results[name] = [out.double()] + [t.grad.double() for t in leaves]
    return {name: (*((results[path][i] - ref).abs().max().item() for path in ("triton", "sdpa")),
                   ref.abs().max().item())
            for i, (name, ref) in enumerate(zip(("out", "dQ", "dK", "dV"), results["ref"]))}


@needs_cuda
@pytest.mark.parametrize("d_k", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_bfloat16_matches_sdpa_on_cuda(d_k, causal):
    """As FlashAttention's own tests: our bfloat16 error at most twice SDPA's bfloat16 error."""
    errors = _errors_against_float64(1024, d_k, causal, torch.bfloat16)
    for name, (ours, theirs, scale) in errors.items():
        assert ours <= 2 * theirs + 1e-3 * scale, (name, ours, theirs)


@needs_cuda
def test_float32_matches_sdpa_on_cuda():
    """float32 through tf32x3 keeps about float32's precision (T = 1000 ends in a partial tile)."""
    errors = _errors_against_float64(1000, 64, True, torch.float32)
    for name, (ours, theirs, scale) in errors.items():
        assert ours <= 1e-5 * scale, (name, ours, theirs, scale)


# ----------------------------------------------------------------------------- child processes
def _compiled_shared_memory():
    """Compile the kernels for sm_90 (no GPU needed) and return each one's shared memory in bytes."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from course_lib.flash import triton_kernels as tk

    pointers = {"Lse2": "*fp32", "Delta": "*fp32"}
    scalars = {"T_q": "i32", "T_k": "i32", "scale": "fp32", "scale2": "fp32"}
    shared = {}
    for dtype, d, causal, size in (("bf16", 64, True, 2), ("fp32", 128, False, 4)):
        key = tk._tiles_key(size, d, d)
        kernels = [(tk._forward_kernel, tk._FORWARD_TILES, ("BLOCK_M", "BLOCK_N")),
                   (tk._delta_kernel, None, ("BLOCK_M", None)),
                   (tk._backward_kernel, tk._BACKWARD_TILES, ("BLOCK", "STEP"))]
        for kernel, tiles, names in kernels:
            fn = kernel.fn if tiles else kernel  # the jitted function under the autotuner
            a, b, warps, stages = tiles[key][0] if tiles else (tk._DELTA_BLOCK, None, 4, 1)
            constants = {"D_K": d, "D_V": d, "CAUSAL": causal, **dict(zip(names, (a, b)))}
            constants = {name: value for name, value in constants.items() if name in fn.arg_names}
            signature = {name: "constexpr" if name in constants
                         else scalars.get(name) or pointers.get(name) or f"*{dtype}"
                         for name in fn.arg_names}
            binary = triton.compile(ASTSource(fn, signature, constexprs=constants),
                                    target=GPUTarget("cuda", 90, 32),
                                    options={"num_warps": warps, "num_stages": stages})
            shared[f"{fn.__name__}-{dtype}"] = binary.metadata.shared
    return shared


if __name__ == "__main__":
    if sys.argv[1] == "interpret":
        print(json.dumps({case[0]: _errors(*case[1:]) for case in CASES}))
    else:
        print(json.dumps(_compiled_shared_memory()))
