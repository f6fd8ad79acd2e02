"""course_lib.layernorm's compiled layer norm (layernorm_kernel.cpp, built by course_lib.cpu_kernels):
dx, dgamma, dbeta against the numpy ``layernorm_backward`` and the torch backward (1-D to 3-D
inputs, d_model not a multiple of 8, fewer vectors than threads, enough for every thread, a
transposed or an expanded dout, one thread or two), what goes to the torch backward (float64,
bfloat16, another device), and what happens where set-up did not build the kernels, where the
build fails, and in the grading sandbox."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from autograder.pipeline.sandbox import Sandbox, isolation
from course_lib import cpu_kernels
from course_lib import layernorm as ln
from helpers import REPO

COMPILED_NODE = "torch::autograd::CppNode<(anonymous namespace)::LayerNormFunction>"
# (B, T, d_model) and smaller: one vector; d_model 5 and 13 (not a multiple of the 8 floats of a
# vector register); fewer vectors than threads; (3, 2000, 13), enough work for two threads
SHAPES = [(5,), (1, 128), (3, 13), (2, 7, 5), (4, 16, 128), (3, 2000, 13)]


@pytest.fixture(scope="module")
def kernels():
    """The kernels, built here where set-up did not build them (a minute, once per machine)."""
    if shutil.which(os.environ.get("CXX", "c++")) is None:
        pytest.skip("no C++ compiler (CXX, else c++): the kernels cannot be built here")
    assert cpu_kernels.loaded(build_if_missing=True), cpu_kernels.reason()


def _inputs(shape, seed=0):
    """x, gamma, beta, dout as float64 numpy: x off-centre and spread, gamma around 1."""
    rng = np.random.default_rng(seed)
    return (rng.normal(size=shape) * 3 + 1, rng.normal(1.0, 0.5, size=shape[-1]),
            rng.normal(size=shape[-1]), rng.normal(size=shape))


def _run(x, gamma, beta, dout, compiled, dtype=torch.float32):
    """out, dx, dgamma, dbeta (float64 numpy) of ``layer_norm_torch``, the name of its backward
    node, and whether the dout that reached the node was contiguous. dout: a numpy array, or a
    tensor passed on as it is (strides and all)."""
    leaves = [torch.tensor(a, dtype=dtype, requires_grad=True) for a in (x, gamma, beta)]
    out = ln.layer_norm_torch(*leaves, compiled=compiled)
    contiguous = []
    out.register_hook(lambda grad: contiguous.append(grad.is_contiguous()))
    out.backward(dout if torch.is_tensor(dout) else torch.tensor(dout, dtype=dtype))
    got = [t.detach().double().numpy() for t in (out, *(t.grad for t in leaves))]
    return got, out.grad_fn.name(), contiguous[0]


def _assert_float32_close(got, want):
    for name, g, w in zip(("out", "dx", "dgamma", "dbeta"), got, want):
        # dgamma, dbeta add up to 6000 float32 products: their error grows with the count
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=2e-4, err_msg=name)


@pytest.mark.parametrize("shape", SHAPES)
def test_compiled_backward_equals_numpy_and_torch(kernels, shape, threads):
    x, gamma, beta, dout = _inputs(shape)
    out, cache = ln.layernorm_forward(x, gamma, beta)
    want = [out, *ln.layernorm_backward(dout, cache)]
    got, node, _ = _run(x, gamma, beta, dout, compiled=True)
    in_torch, torch_node, _ = _run(x, gamma, beta, dout, compiled=False)
    assert node == COMPILED_NODE and torch_node == "_LayerNormFunctionBackward"
    _assert_float32_close(got, want)
    _assert_float32_close(got, in_torch)


def test_dgamma_and_dbeta_over_many_rows_are_summed_without_drift(kernels, threads):
    """40,000 rows, a dout off zero: dgamma and dbeta sum 40,000 float32 shares each. Summed
    in float32 along each thread's chunk they were 4e-6 and 6e-6 off (relative to their
    largest number); in blocks of rows added into double totals they are within 5e-7, as
    close as torch's own reductions come (2e-7)."""
    x, gamma, beta, dout = _inputs((40_000, 64), seed=3)
    dout = dout + 2.0
    _, dgamma_want, dbeta_want = ln.layernorm_backward(dout, ln.layernorm_forward(x, gamma, beta)[1])
    (_, _, dgamma, dbeta), node, _ = _run(x, gamma, beta, dout, compiled=True)
    assert node == COMPILED_NODE
    for got, want in ((dgamma, dgamma_want), (dbeta, dbeta_want)):
        assert np.abs(got - want).max() <= 5e-7 * np.abs(want).max()


@pytest.mark.parametrize("kind", ["transposed", "expanded"])
def test_a_dout_that_is_not_contiguous(kernels, kind):
    """A dout read through strides: the transpose of a (d_model, N) array, and ones expanded
    from one number (stride 0), as ``out.sum().backward()`` sends."""
    x, gamma, beta, _ = _inputs((40, 13))
    if kind == "transposed":
        dout = torch.randn(13, 40).t()  # (40, 13)
    else:
        dout = torch.ones(()).expand(40, 13)
    got, node, contiguous = _run(x, gamma, beta, dout, compiled=True)
    assert node == COMPILED_NODE and not contiguous
    out, cache = ln.layernorm_forward(x, gamma, beta)
    _assert_float32_close(got, [out, *ln.layernorm_backward(dout.double().numpy(), cache)])


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_other_dtypes_take_the_torch_backward(kernels, dtype):
    """float64 (as in every gradcheck) and bfloat16: the torch node, and its numbers."""
    x, gamma, beta, dout = _inputs((3, 4, 6))
    got, node, _ = _run(x, gamma, beta, dout, compiled=True, dtype=dtype)
    assert node == "_LayerNormFunctionBackward"
    assert str(dtype) in ln.kernel_reason(torch.zeros(1, dtype=dtype))
    out, cache = ln.layernorm_forward(x, gamma, beta)
    tolerance = {torch.float64: 1e-12, torch.bfloat16: 0.1}[dtype]
    for g, w in zip(got, [out, *ln.layernorm_backward(dout, cache)]):
        np.testing.assert_allclose(g, w, rtol=tolerance, atol=tolerance)


def test_under_autocast_to_bfloat16_a_linear_layers_output_takes_the_torch_backward(kernels):
    """As on a GPU with autocast, on the CPU: a Linear hands layer norm bfloat16 activations, so
    the torch node runs, and its gradients match F.layer_norm's under the same autocast."""
    torch.manual_seed(0)
    linear, x = torch.nn.Linear(6, 6), torch.randn(8, 6)
    gamma, beta = torch.randn(6, requires_grad=True), torch.randn(6, requires_grad=True)
    grads, nodes = [], []
    for norm in (ln.layer_norm_torch, lambda h, g, b: F.layer_norm(h, (6,), g, b, ln.EPS)):
        linear.zero_grad()
        gamma.grad = beta.grad = None
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = linear(x)
            out = norm(h, gamma, beta)
        nodes.append((h.dtype, out.grad_fn.name()))
        (out.float() ** 2).sum().backward()
        grads.append([t.grad.float() for t in (linear.weight, gamma, beta)])
    assert nodes[0] == (torch.bfloat16, "_LayerNormFunctionBackward")
    for ours, theirs in zip(*grads):
        torch.testing.assert_close(ours, theirs, rtol=0.05, atol=0.05)


def test_kernel_reason_names_what_the_kernel_does_not_take(kernels):
    assert ln.kernel_reason() == ""
    assert ln.kernel_reason(torch.zeros(2, 3), torch.ones(3)) == ""
    assert "meta tensors" in ln.kernel_reason(torch.zeros(2, 3, device="meta"))
    assert "empty" in ln.kernel_reason(torch.zeros(0, 3))


def _python(code, env_extra, cwd):
    env = {**os.environ, **env_extra,
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300, cwd=cwd)
    assert run.returncode == 0, run.stderr
    return run.stdout.strip().splitlines()


TRAIN = """
import torch
from course_lib import cpu_kernels, layernorm as ln
print(ln.kernel_reason())
torch.manual_seed(0)
norm, x, target = ln.LayerNorm(6), torch.randn(32, 6), torch.randn(6) * 2 + 1
optimizer = torch.optim.SGD(norm.parameters(), lr=0.2)
losses = []
for _ in range(30):
    out = norm(x)
    loss = ((out - target) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
print(out.grad_fn.name())
print(losses[-1] < 0.5 * losses[0])
print(cpu_kernels.reason())
"""


FLASH_ONCE = """
from course_lib.flash import flash_attention
q = torch.randn(2, 8, 4, requires_grad=True)
out = flash_attention(q, q, q, causal=True)
out.sum().backward()
print(type(out.grad_fn).__name__)
"""


def test_a_training_step_never_builds_the_kernels(tmp_path):
    """Where set-up built nothing, layer norm trains by the torch backward and says why; its
    first backward does not start a build (the build folder stays empty); nor does flash
    attention's first call on float32 CPU tensors, which takes the torch tiles."""
    build = tmp_path / "build"
    env = {"COURSE_KERNEL_BUILD_DIR": str(build)}
    reason, node, learned, still, flash_node = _python(TRAIN + FLASH_ONCE, env, tmp_path)
    assert reason.startswith("the C++ kernels are not loaded") and "not built" in reason
    assert (node, learned) == ("_LayerNormFunctionBackward", "True")
    assert "not built" in still
    assert flash_node == "_TiledAttentionBackward"
    assert not build.exists() or not any(build.iterdir())


def test_a_failed_build_says_why_and_layer_norm_still_trains(tmp_path):
    """CXX names a compiler that does not exist, in a fresh build folder: set-up's build step
    says in one line why there are no kernels, and layer norm trains by the torch backward."""
    code = TRAIN + "cpu_kernels.main()\n"
    env = {"CXX": str(tmp_path / "no-such-compiler"), "COURSE_KERNEL_BUILD_DIR": str(tmp_path / "b")}
    _, node, learned, _, building, failed = _python(code, env, tmp_path)
    assert (node, learned) == ("_LayerNormFunctionBackward", "True")
    assert building.startswith("building the course's C++ kernels")
    assert failed.startswith("C++ kernels not built (RuntimeError: no C++ compiler")
    assert "no-such-compiler" in failed and "the course uses the torch code instead" in failed


def test_in_the_grading_sandbox_layer_norm_trains_by_the_torch_backward():
    """The sandbox stages course_lib's modules without the C++ sources and without .cache, all
    read-only: layer norm says why it has no kernel, builds nothing and trains in torch."""
    if not isolation()[0]:
        pytest.skip("no bubblewrap here")
    with Sandbox() as box:
        run = subprocess.run(box.command([sys.executable, "-c", TRAIN]), capture_output=True,
                             text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    reason, node, learned, _ = run.stdout.strip().splitlines()
    assert reason.startswith("the C++ kernels are not loaded") and "cpu_kernel.cpp" in reason
    assert (node, learned) == ("_LayerNormFunctionBackward", "True")
