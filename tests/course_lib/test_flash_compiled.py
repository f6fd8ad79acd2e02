"""course_lib.flash.compiled: the C++ tiles against the textbook attention (outputs and
gradients, causal or not, T_q != T_k, blocks that do not divide T, queries with no key, several
leading axes, one thread or two), the fallback to the torch tiles, and a build that fails."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

from course_lib import attention as att
from course_lib.flash import compiled
from course_lib.flash.cpu import tiled_attention
from helpers import REPO

# (lead, T_q, T_k, d_k, d_v, causal, block_q, block_k): blocks that do not divide T, T_q != T_k
# both ways (T_q > T_k with causal leaves the first queries without keys), the default blocks,
# and a size at which the backward's work is shared between threads
CASES = [((), 5, 5, 3, 3, False, 2, 2),
         ((2,), 7, 11, 4, 2, True, 3, 4),
         ((2, 3), 9, 4, 3, 5, True, 4, 3),
         ((2,), 6, 9, 2, 3, False, 4, 4),
         ((3,), 13, 13, 4, 4, True, 5, 6),
         ((2,), 100, 100, 20, 18, True, 48, 40),  # panels cut past 16 columns, padded
         ((1, 3), 300, 300, 64, 64, True, compiled.BLOCK_Q, compiled.BLOCK_K),
         ((2,), 70, 300, 16, 8, True, compiled.BLOCK_Q, compiled.BLOCK_K),
         # long enough that a second thread surely takes some of the backward's key blocks
         ((8,), 1024, 1024, 64, 64, True, compiled.BLOCK_Q, compiled.BLOCK_K)]

needs_compiler = pytest.mark.skipif(
    shutil.which(os.environ.get("CXX", "c++")) is None,
    reason="no C++ compiler (CXX, else c++): the compiled kernel cannot be built here")


def _textbook(lead, T_q, T_k, d_k, d_v, causal, seed=0):
    """Inputs (float64 numpy), dout, and notebook 02's out and (dq, dk, dv) for them."""
    rng = np.random.default_rng(seed)
    Q, K, V = (rng.standard_normal((*lead, T, d)) for T, d in ((T_q, d_k), (T_k, d_k), (T_k, d_v)))
    dout = rng.standard_normal((*lead, T_q, d_v))
    mask = att.causal_mask(T_q, T_k) if causal else None
    out, cache = att.attention_forward(Q, K, V, mask)
    return (Q, K, V), dout, out, att.attention_backward(dout, cache)


def _compiled(inputs, dout, causal, block_q, block_k):
    """out, dq, dk, dv of the compiled path on float32 copies of the inputs (float64 numpy)."""
    q, k, v = (torch.tensor(x, dtype=torch.float32, requires_grad=True) for x in inputs)
    out = compiled.compiled_attention(q, k, v, causal, block_q=block_q, block_k=block_k)
    out.backward(torch.tensor(dout, dtype=torch.float32))
    return [t.detach().double().numpy() for t in (out, q.grad, k.grad, v.grad)]


@needs_compiler
def test_the_kernel_builds():
    assert compiled.available(), compiled.reason()
    assert compiled.reason() == ""


@needs_compiler
@pytest.mark.parametrize("case", CASES)
def test_outputs_and_gradients_equal_the_textbook_path(case, threads):
    """Float32 kernel against the float64 textbook pass; keyless queries get 0 and 0 gradients.
    Two threads split the backward by key blocks and add dq from a copy per thread."""
    lead, T_q, T_k, d_k, d_v, causal, block_q, block_k = case
    inputs, dout, out, grads = _textbook(lead, T_q, T_k, d_k, d_v, causal)
    got = _compiled(inputs, dout, causal, block_q, block_k)
    for name, g, want in zip(("out", "dq", "dk", "dv"), got, (out, *grads)):
        np.testing.assert_allclose(g, want, atol=2e-5, rtol=1e-4, err_msg=name)
    if causal and T_q > T_k:  # the first T_q - T_k queries see no key
        assert not got[0][..., :T_q - T_k, :].any() and not got[1][..., :T_q - T_k, :].any()


@needs_compiler
def test_the_kernel_is_used_not_the_fallback():
    """Its result differs from the torch tiles' in the last bits (another order of sums), and it
    leaves a backward node of its own."""
    q, k, v = (torch.randn(2, 40, 8, requires_grad=True) for _ in range(3))
    out = compiled.compiled_attention(q, k, v, True)
    assert type(out.grad_fn).__name__ == "_CompiledAttentionBackward"
    torch.testing.assert_close(out, tiled_attention(q, k, v, True))


@pytest.mark.parametrize("kind", ["mask", "bfloat16", "float64"])
def test_what_the_kernel_does_not_support_gives_the_tiled_result(kind):
    gen = torch.Generator().manual_seed(0)
    dtype = {"bfloat16": torch.bfloat16, "float64": torch.float64}.get(kind, torch.float32)
    q, k, v = (torch.randn(2, 9, 4, generator=gen).to(dtype).requires_grad_() for _ in range(3))
    mask = torch.rand(9, 9, generator=gen) > 0.3 if kind == "mask" else None
    got = compiled.compiled_attention(q, k, v, True, mask)
    assert type(got.grad_fn).__name__ == "_TiledAttentionBackward"
    assert torch.equal(got, tiled_attention(q, k, v, True, mask))


FORCED_FAILURE = """
import torch
from course_lib.flash import compiled
from course_lib.flash.cpu import tiled_attention
print(compiled.available())
print(compiled.reason())
q, k, v = (torch.randn(2, 7, 4, requires_grad=True) for _ in range(3))
out = compiled.compiled_attention(q, k, v, causal=True)
out.sum().backward()
print(torch.equal(out, tiled_attention(q, k, v, True)), q.grad.abs().sum().item() > 0)
"""


def test_a_failed_build_says_why_and_falls_back(tmp_path):
    """CXX names a compiler that does not exist, in a fresh build folder: no build, a reason,
    and compiled_attention still works (by the torch tiles)."""
    env = {**os.environ, "CXX": str(tmp_path / "no-such-compiler"),
           "COURSE_KERNEL_BUILD_DIR": str(tmp_path / "build"),
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-c", FORCED_FAILURE], env=env, capture_output=True,
                         text=True, timeout=300, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    available, reason, result = run.stdout.strip().splitlines()
    assert available == "False"
    assert "no C++ compiler" in reason and "no-such-compiler" in reason
    assert result == "True True"


@needs_compiler
def test_the_kernel_runs_on_every_thread_torch_is_given(threads):
    # built without OpenMP, at::parallel_for ran the whole kernel on one thread (a build of
    # this course did: it then took 0.5-0.7x SDPA's time on 2 threads, 1.0-1.2x with OpenMP)
    assert compiled.available(), compiled.reason()
    assert torch.ops.course_flash.threads_used() == threads
