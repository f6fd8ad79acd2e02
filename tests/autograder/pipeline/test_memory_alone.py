"""A memory limit counts every way to hold memory, run alone (``kernel/confine.py``).

Flash attention's long cases promise "never a (T_q, T_k) array". Each pass below builds the
whole matrix, computes every value right, and holds the matrix where Python's count in the
kernel (``tracemalloc``, which does not see ``mmap``) and ``RLIMIT_DATA`` (private writable
mappings only) do not: a shared or stack-like mapping, a file of ``/tmp`` or ``/dev/shm``, a
memfd, ``multiprocessing.shared_memory``, or forked children holding a sixteenth of it each,
all at once. The kernel passes every one; run again alone (``rerun``, here ``held_alone``:
``fresh.py`` in a plain process), each loses both long cases with the memory message.
"""
import numpy as np
import pytest

from exercise_bank import learner_verdict

# ``_held(n)``: a context giving a writable buffer of n bytes, held where the limit once did not look
HELD = {
    "an anonymous shared mapping": '''
import contextlib, mmap
def _held(n):
    return contextlib.closing(mmap.mmap(-1, n))
''',
    "a stack-like private mapping (MAP_GROWSDOWN)": '''
import contextlib, mmap
def _held(n):
    return contextlib.closing(mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x0100))
''',
    "np.memmap of a file in the temporary folder": '''
import contextlib, tempfile
@contextlib.contextmanager
def _held(n):
    with tempfile.NamedTemporaryFile() as f:
        yield np.memmap(f.name, dtype=np.uint8, mode="w+", shape=(n,))
''',
    "a file of /dev/shm": '''
import contextlib, mmap, os
@contextlib.contextmanager
def _held(n):
    path = f"/dev/shm/scores-{os.getpid()}"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.ftruncate(fd, n)
        yield mmap.mmap(fd, n)
    finally:
        os.close(fd)
        os.unlink(path)
''',
    "a memfd": '''
import contextlib, mmap, os
@contextlib.contextmanager
def _held(n):
    fd = os.memfd_create("scores")
    try:
        os.ftruncate(fd, n)
        yield mmap.mmap(fd, n)
    finally:
        os.close(fd)
''',
    "multiprocessing.shared_memory": '''
import contextlib
from multiprocessing import shared_memory
@contextlib.contextmanager
def _held(n):
    block = shared_memory.SharedMemory(create=True, size=n)
    try:
        yield block.buf
    finally:
        block.unlink()
''',
}

# the passes, the matrices in the buffer, a block of rows at a time where numpy would copy
WHOLE = {
    "flash.forward": '''
def flash_forward(Q, K, V, causal=False, block_q=16, block_k=16):
    T_q, T_k = Q.shape[-2], K.shape[-2]
    shape = Q.shape[:-2] + (T_q, T_k)
    with _held(int(np.prod(shape)) * 8) as buf:
        S = np.frombuffer(buf, dtype=np.float64, count=int(np.prod(shape))).reshape(shape)
        np.matmul(Q, np.swapaxes(K, -1, -2), out=S)
        S *= 1.0 / np.sqrt(Q.shape[-1])
        m = np.empty(shape[:-1] + (1,))
        for r in range(0, T_q, 64):
            rows = S[..., r:r + 64, :]
            if causal:
                rows[..., np.arange(T_k) > np.arange(r, r + rows.shape[-2])[:, None] + T_k - T_q] = -np.inf
            m[..., r:r + 64, :] = rows.max(-1, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        for r in range(0, T_q, 64):
            np.exp(S[..., r:r + 64, :] - m[..., r:r + 64, :], out=S[..., r:r + 64, :])
        l = S.sum(-1, keepdims=True)
        out = np.matmul(S, V) / np.where(l == 0, 1.0, l)
        del S, rows  # the views go before the buffer
    with np.errstate(divide="ignore"):
        return out, (m + np.log(l))[..., 0]
''',
    "flash.backward": '''
def flash_backward(dout, Q, K, V, out, lse, causal=False, block_q=16, block_k=16):
    T_q, T_k = Q.shape[-2], K.shape[-2]
    shape = Q.shape[:-2] + (T_q, T_k)
    size = int(np.prod(shape))
    scale = 1.0 / np.sqrt(Q.shape[-1])
    lse = np.where(np.isfinite(lse), lse, np.inf)[..., None]
    D = np.sum(dout * out, axis=-1)[..., None]
    with _held(2 * size * 8) as buf:
        both = np.frombuffer(buf, dtype=np.float64, count=2 * size)
        A, dS = both[:size].reshape(shape), both[size:].reshape(shape)
        np.matmul(Q, np.swapaxes(K, -1, -2), out=A)
        np.matmul(dout, np.swapaxes(V, -1, -2), out=dS)
        for r in range(0, T_q, 64):
            rows = A[..., r:r + 64, :]
            rows *= scale
            if causal:
                rows[..., np.arange(T_k) > np.arange(r, r + rows.shape[-2])[:, None] + T_k - T_q] = -np.inf
            np.exp(rows - lse[..., r:r + 64, :], out=rows)
            dS[..., r:r + 64, :] -= D[..., r:r + 64, :]
            dS[..., r:r + 64, :] *= rows
        dQ = np.matmul(dS, K) * scale
        dK = np.swapaxes(np.matmul(np.swapaxes(Q, -1, -2), dS), -1, -2) * scale
        dV = np.swapaxes(np.matmul(np.swapaxes(dout, -1, -2), A), -1, -2)
        del A, dS, both, rows  # the views go before the buffer
    return dQ, dK, dV
''',
}

# sixteen children, each the textbook pass on a sixteenth of the queries, all holding their
# rows of the matrix until the parent has every part
FORKED = '''
import os, pickle

def _children(part, T_q, parts=16):
    """[part(a, b)[1] for each block a:b of the T_q rows], each in a forked child that holds
    part(a, b)[0] meanwhile."""
    kids, (hold_r, hold_w) = [], os.pipe()
    for i in range(parts):
        a, b = T_q * i // parts, T_q * (i + 1) // parts
        r, w = os.pipe()
        if os.fork() == 0:
            os.close(r)
            held = part(a, b)  # the child's rows of the matrix, and what it sends
            with os.fdopen(w, "wb") as f:
                pickle.dump(held[1], f)
            os.close(hold_w)
            os.read(hold_r, 1)  # hold the rows until the parent has read every part
            os._exit(0)
        os.close(w)
        kids.append(os.fdopen(r, "rb"))
    got = [pickle.load(f) for f in kids]
    os.close(hold_w)
    os.close(hold_r)
    for f in kids:
        f.close()
        os.wait()
    return got

def _weights(Q, K, a, b, causal, lse=None):
    """The textbook weights of queries a:b, and the scale: (..., b - a, T_k)."""
    T_q, T_k = Q.shape[-2], K.shape[-2]
    scale = 1.0 / np.sqrt(Q.shape[-1])
    S = Q[..., a:b, :] @ np.swapaxes(K, -1, -2) * scale
    if causal:
        S = np.where(np.arange(T_k) <= np.arange(a, b)[:, None] + T_k - T_q, S, -np.inf)
    if lse is not None:
        return np.exp(S - np.where(np.isfinite(lse), lse, np.inf)[..., a:b, None]), scale
    m = S.max(-1, keepdims=True)
    return np.exp(S - np.where(np.isfinite(m), m, 0.0)), m
'''
FORKED_PASS = {
    "flash.forward": '''
def flash_forward(Q, K, V, causal=False, block_q=16, block_k=16):
    def part(a, b):
        E, m = _weights(Q, K, a, b, causal)
        l = E.sum(-1, keepdims=True)
        with np.errstate(divide="ignore"):
            return E, (E @ V / np.where(l == 0, 1.0, l), (np.where(np.isfinite(m), m, 0.0) + np.log(l))[..., 0])
    got = _children(part, Q.shape[-2])
    return np.concatenate([o for o, _ in got], axis=-2), np.concatenate([s for _, s in got], axis=-1)
''',
    "flash.backward": '''
def flash_backward(dout, Q, K, V, out, lse, causal=False, block_q=16, block_k=16):
    def part(a, b):
        A, scale = _weights(Q, K, a, b, causal, lse)
        dS = A * (dout[..., a:b, :] @ np.swapaxes(V, -1, -2) - np.sum(dout[..., a:b, :] * out[..., a:b, :], -1)[..., None])
        return (A, dS), (dS @ K * scale, np.swapaxes(dS, -1, -2) @ Q[..., a:b, :] * scale,
                         np.swapaxes(A, -1, -2) @ dout[..., a:b, :])
    got = _children(part, Q.shape[-2])
    return (np.concatenate([g[0] for g in got], axis=-2), sum(g[1] for g in got), sum(g[2] for g in got))
''',
}

ATTACKS = {**{(where, exercise_id): held + WHOLE[exercise_id]
              for where, held in HELD.items() for exercise_id in WHOLE},
           **{("forked children", exercise_id): FORKED + source for exercise_id, source in FORKED_PASS.items()}}


@pytest.mark.parametrize("where,exercise_id", sorted(ATTACKS), ids=[f"{e}: {w}" for w, e in sorted(ATTACKS)])
def test_a_whole_matrix_held_outside_the_count_loses_the_long_cases_run_alone(where, exercise_id):
    verdict = learner_verdict(exercise_id, [ATTACKS[where, exercise_id]], {"np": np})
    assert verdict.passed == verdict.total - 2, verdict.messages  # every value right, but
    told = [m for m in verdict.messages if "MiB this case allows, run alone in a fresh process" in m]
    assert len(told) == 2 and all("one tile at a time" in m for m in told), verdict.messages
