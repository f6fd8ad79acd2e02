"""Exercises of notebook 07 (making attention fast) [trusted; also the check cell]

The online softmax, and FlashAttention's tiled forward and backward passes.

Every case is float64. The references are ``course_lib.flash.reference``. The mistakes are
modelled by three tiled implementations below (``running_stats``, ``tiled_forward``,
``tiled_backward``) whose keyword-only switches each turn on one plausible bug, so a model
shares every other line with the right algorithm. With no switch set they equal the
references (``tests/autograder/exercises/test_flash_exercises.py`` checks).

Shapes (course glossary, row form): s (..., T_k); Q (..., T_q, d_k), K (..., T_k, d_k),
V (..., T_k, d_v); out and dout (..., T_q, d_v); lse (..., T_q). Causal attention uses
``causal_mask``'s alignment: query i sits at position i + T_k - T_q.
"""
from __future__ import annotations

import numpy as np

from autograder.judge.exercise import Exercise, Mistake, any_of, switchable, switched
from autograder.judge.features import shape_features
from course_lib.flash.reference import (FlashCache, finite_shift, flash_backward, flash_forward,
                                       online_softmax_stats)

FORBIDDEN = ("course_lib.flash", "course_lib.attention", "torch")  # torch would bring autograd


# ============================================================================ shared
def _swapT(x):
    return np.swapaxes(x, -1, -2)


# ============================================================================ online softmax
def running_stats(s, block_k, *, rescale=1, old_max=False, block_max=False, guard=True,
                  subtract_max=True, drop_last=False, equal_parts=False):
    """The running maximum m and normaliser l of s (..., T_k) read in blocks of ``block_k``,
    after every block: m, l (..., n_blocks). The last column is the whole row's.

    Per block: m' = max(m, max(block)); l' = exp(m - m') l + sum_j exp(s_j - m'). The
    keyword-only switches model mistakes: ``rescale`` is the power of the factor exp(m - m')
    (0: not rescaled, 2: twice), ``old_max`` exponentiates against m instead of m',
    ``block_max`` keeps the block's own maximum, ``guard`` False lets -inf - (-inf) make NaN,
    ``subtract_max`` False sums exp(s_j), ``drop_last`` skips a last, shorter block,
    ``equal_parts`` cuts the row into as many near-equal parts instead (``np.array_split``).
    """
    n = s.shape[-1]
    m = np.full(s.shape[:-1], -np.inf)
    l = np.zeros(s.shape[:-1])
    ms, ls = [], []
    starts = range(0, n - block_k + 1 if drop_last else n, block_k)
    bounds = [(start, start + block_k) for start in starts]
    if equal_parts:
        bounds = [(part[0], part[-1] + 1) for part in np.array_split(np.arange(n), len(bounds))]
    for start, end in bounds:
        block = s[..., start:end]
        m_new = block.max(axis=-1) if block_max else np.maximum(m, block.max(axis=-1))
        if subtract_max:
            shift = finite_shift(m_new) if guard else m_new
            alpha = np.exp(m - shift) ** rescale
        else:
            shift, alpha = np.zeros_like(m_new), 1.0
        l = alpha * l + np.exp(block - (m if old_max else shift)[..., None]).sum(axis=-1)
        m = m_new
        ms.append(m)
        ls.append(l)
    return np.stack(ms, axis=-1), np.stack(ls, axis=-1)


def _stats_reference(s, block_k):
    """course_lib's online_softmax_stats on every prefix that ends with a block."""
    n = s.shape[-1]
    stats = [online_softmax_stats(s[..., :min(end, n)], block_k)
             for end in range(block_k, n + block_k, block_k)]
    return np.stack([m for m, _ in stats], axis=-1), np.stack([l for _, l in stats], axis=-1)


def _scores(rng, shape, ramp=3.0):
    """Random scores that drift upwards along the row, so that the maximum keeps changing."""
    return rng.standard_normal(shape) * 2.0 + np.linspace(0.0, ramp, shape[-1])


def _jump(rng, shape, block_k, at=1):
    """Scores whose later blocks, from block ``at`` on, lie 1000 above the earlier ones: the
    factor exp(m_old - m_new) underflows to 0, while exp(x - m_old) of the new block would
    overflow (exp(1000) is inf): code must exponentiate against the new maximum."""
    s = _scores(rng, shape)
    s[..., at * block_k:] += 1000.0
    return {"s": s, "block_k": block_k}


def _with_neg_inf(rng, rows, n, block_k):
    """Rows: -inf everywhere; -inf over the first block; scattered -inf; none."""
    s = _scores(rng, (rows, n))
    s[0] = -np.inf
    s[1, :block_k] = -np.inf
    s[2, rng.permutation(n)[: n // 2]] = -np.inf
    return s


def _stats_cases(rng, hidden):
    if not hidden:
        return [{"s": _scores(rng, (3, 10)), "block_k": 4},
                {"s": _scores(rng, (2, 3, 8)), "block_k": 2},
                {"s": _with_neg_inf(rng, 4, 9, 3), "block_k": 3},
                {"s": 1000.0 + 50.0 * rng.standard_normal((2, 12)), "block_k": 5},
                {"s": _scores(rng, (2, 5)), "block_k": 8},
                {"s": _scores(rng, (2, 6)), "block_k": 1},
                _jump(rng, (2, 8), 2, at=2)]
    return [{"s": _scores(rng, (4, 13)), "block_k": 4},
            {"s": _scores(rng, (2, 1, 3, 9)), "block_k": 3},  # lead (2, 1, 3): s.shape[:-3]
            # would broadcast wrongly or fail, so only the leading axes s.shape[:-1] pass
            {"s": _with_neg_inf(rng, 3, 10, 4), "block_k": 4},
            {"s": -1000.0 + 80.0 * rng.standard_normal((3, 11)), "block_k": 3},
            {"s": _scores(rng, (3, 4)), "block_k": 6},
            {"s": _scores(rng, (2, 7)), "block_k": 1},
            _jump(rng, (3, 9), 3)]


STATS_FEATURES = shape_features(**{
    "more than one leading axis": lambda c: c["s"].ndim > 2,
    "block_k does not divide n": lambda c: c["s"].shape[-1] % c["block_k"] != 0,
    "a single block (block_k >= n)": lambda c: c["block_k"] >= c["s"].shape[-1],
    "block_k = 1": lambda c: c["block_k"] == 1,
    "a row that is -inf everywhere": lambda c: np.isneginf(c["s"]).all(axis=-1).any(),
    "a later block 1000 above the first (exp(1000) overflows)":
        lambda c: c["s"].shape[-1] > c["block_k"] and np.isfinite(c["s"]).all() and bool(
            (c["s"][..., c["block_k"]:].max(-1) - c["s"][..., :c["block_k"]].max(-1) > 700).all()),
    "a row whose first block is all -inf": lambda c: np.isneginf(
        c["s"][..., :c["block_k"]]).all(axis=-1).any()})


_stats_with = switched(running_stats)  # two of its mistakes at once: ``verdict.identify_pair``


STATS_MISTAKES = (
    Mistake(name="normaliser not rescaled when the maximum changes",
            hint="l holds sum_j exp(s_j - m) for the old maximum m; when a block raises it to m', "
                 "multiply l by exp(m - m') before adding the block's terms.", wrong=_stats_with(rescale=0)),
    Mistake(name="normaliser rescaled twice",
            hint="multiply l by exp(m - m') once per block: look for a second `l *= ...` or a factor "
                 "applied both before and inside the update.", wrong=_stats_with(rescale=2)),
    Mistake(name="running maximum not updated before exponentiating",
            hint="compute the new maximum m' = max(m, max(block)) first, then exponentiate the block "
                 "against m' (exp(s_j - m')), not against the old m (which starts at -inf).",
            wrong=_stats_with(old_max=True)),
    Mistake(name="the block's own maximum instead of the running maximum",
            hint="m must be the maximum of everything read so far: m' = np.maximum(m, block.max(-1)). "
                 "With the block's maximum alone, exp(s_j - m) overflows when an earlier block "
                 "was larger.", wrong=_stats_with(block_max=True)),
    Mistake(name="a row that is -inf so far gives NaN",
            hint="while a row has seen only -inf, m is -inf and -inf - (-inf) is NaN: subtract "
                 "0 instead where m' is not finite (np.where(np.isfinite(m_new), m_new, 0)); "
                 "such a row keeps m = -inf and l = 0.", wrong=_stats_with(guard=False)),
    Mistake(name="normaliser without the maximum subtracted",
            hint="l = sum_j exp(s_j) overflows for large scores; keep l = sum_j exp(s_j - m) "
                 "relative to the running maximum.", wrong=_stats_with(subtract_max=False)),
    Mistake(name="last, shorter block skipped",
            hint="when block_k does not divide n the last block is shorter: loop with "
                 "range(0, n, block_k) and slice s[..., start:start + block_k].",
            wrong=_stats_with(drop_last=True)),
    Mistake(name="the row cut into equal parts, not blocks of block_k",
            hint="np.array_split(..., n_blocks) makes parts of near-equal length; the blocks are "
                 "block_k keys each, with only the last one shorter: s[..., start:start + block_k] "
                 "for start in range(0, n, block_k).", wrong=_stats_with(equal_parts=True)),
)

# Mutants of the reference that no case can tell apart (``autograder.exercises.adequacy``). The reference
# calls course_lib's online_softmax_stats on every prefix s[..., :end] and keeps its final m, l.
STATS_EQUIVALENT = {
    "_stats_reference: block_k -> n in `stats = …`":
        "a prefix's final m and l do not depend on the block size it is read in (rounding only)",
    "online_softmax_stats: a line that updates `s` is missing":
        "the line is s = np.asarray(s); every case passes s as an ndarray already",
    "online_softmax_stats: m -> m_new in `return …`":
        "in `return m, l`: the loop ends with m = m_new, and it runs at least once (n >= 1)",
    "online_softmax_stats: 1 -> 0 in `m = np.full(s.shape[:-1], -np.inf, dtype=s.dtype)`":
        "m starts as np.full(s.shape[:0], -inf), a 0-d array that broadcasts to s.shape[:-1] "
        "at the first block (n >= 1)",
    "online_softmax_stats: 1 -> 0 in `l = np.zeros(s.shape[:-1], dtype=s.dtype)`":
        "l starts as np.zeros(s.shape[:0]), a 0-d array that broadcasts to s.shape[:-1] at the "
        "first block (n >= 1)",
    "online_softmax_stats: block -> s in `m_new = …`":
        "the max of the whole prefix taken from its first block on gives the same final m and "
        "l = sum_j exp(s_j - m) of that prefix, which is all the reference reads",
}

ONLINE_SOFTMAX = Exercise(
    id="flash.online_softmax",
    search_sites=5000,  # benchmarks/repair_search.py: about 3 s of edits
    function="online_softmax_stats",
    signature="online_softmax_stats(s, block_k) -> (m, l), each (..., n_blocks)",
    cases=_stats_cases,
    reference=_stats_reference,
    points=2,
    output_names=("m", "l"),
    axes={"m": ("row of s (a query)", "block b (after reading it)"),
          "l": ("row of s (a query)", "block b (after reading it)")},
    forbidden=FORBIDDEN,
    features=STATS_FEATURES,
    dims=lambda c: {"n": c["s"].shape[-1], "block_k": c["block_k"]},
    mistakes=STATS_MISTAKES,
    equivalent=STATS_EQUIVALENT,
)


# ============================================================================ tiled forward
def _key_stop(q0, rows, T_q, T_k, causal, offset, diagonal_skipped=False):
    """One past the last key the query rows q0 .. q0+rows-1 can see (causal: none later)."""
    if not causal:
        return T_k
    return max(min(T_k, (q0 if diagonal_skipped else q0 + rows) + offset), 0)


def _causal_tile(S, q0, k0, offset):
    """Tile S (..., rows, cols) with -inf where key k0 + c is after query q0 + r + offset."""
    rows, cols = S.shape[-2:]
    visible = np.arange(k0, k0 + cols)[None, :] <= np.arange(q0, q0 + rows)[:, None] + offset
    return np.where(visible, S, -np.inf)


def tiled_forward(Q, K, V, causal=False, block_q=4, block_k=4, *, rescale_out=True,
                  rescale_l=1, alpha_after_update=False, old_max=False, divide_inside=False,
                  lse_early=None, lse_without_max=False, diagonal_skipped=False,
                  top_left=False, guard_max=True, guard_l=True, scaled=True):
    """FlashAttention's forward, tile by tile: out (..., T_q, d_v) and lse (..., T_q).

    The keyword-only switches model mistakes (see FORWARD_MISTAKES for each in words).
    ``lse_early`` (a number): lse is taken at the top of each key step, before that step's
    update, and is this number for queries whose key loop never runs (how lse was
    initialised). ``guard_max`` False exponentiates against a -inf maximum; ``guard_l``
    False divides by l = 0; ``top_left`` "mask" aligns the mask top-left and the loop's causal
    stop right.
    """
    T_q, T_k, d_k = Q.shape[-2], K.shape[-2], Q.shape[-1]
    offset = 0 if top_left is True else T_k - T_q  # "mask": the tiles' mask alone top-left
    scale = 1.0 / np.sqrt(d_k) if scaled else 1.0
    lead = Q.shape[:-2]
    out = np.zeros(lead + (T_q, V.shape[-1]))
    lse = np.zeros(lead + (T_q,))
    for q0 in range(0, T_q, block_q):
        Qi = Q[..., q0:q0 + block_q, :]
        rows = Qi.shape[-2]
        m, l = np.full(lead + (rows,), -np.inf), np.zeros(lead + (rows,))
        acc = np.zeros(lead + (rows, V.shape[-1]))
        lse_i = np.full(lead + (rows,), np.nan if lse_early is None else lse_early)
        stop = _key_stop(q0, rows, T_q, T_k, causal, offset, diagonal_skipped)
        for k0 in range(0, stop, block_k):
            if lse_early is not None:
                with np.errstate(divide="ignore"):
                    lse_i = m + np.log(l)
            S = Qi @ _swapT(K[..., k0:k0 + block_k, :]) * scale
            S = _causal_tile(S, q0, k0, 0 if top_left else offset) if causal else S
            m_new = np.maximum(m, S.max(axis=-1))
            shift = finite_shift(m_new) if guard_max else m_new
            alpha = np.ones_like(m) if alpha_after_update else np.exp(m - shift)
            A_tilde = np.exp(S - (m if old_max else shift)[..., None])
            l = alpha ** rescale_l * l + A_tilde.sum(axis=-1)
            rescale = alpha[..., None] if rescale_out else 1.0
            acc = rescale * acc + A_tilde @ V[..., k0:k0 + block_k, :]
            if divide_inside:
                acc = acc / (np.where(l == 0, 1.0, l) if guard_l else l)[..., None]
            m = m_new
        if not divide_inside:
            acc = acc / (np.where(l == 0, 1.0, l) if guard_l else l)[..., None]
        out[..., q0:q0 + rows, :] = acc
        if lse_early is None:
            with np.errstate(divide="ignore"):  # log(0) = -inf: a query with no keys
                lse_i = np.log(l) if lse_without_max else m + np.log(l)
        lse[..., q0:q0 + rows] = lse_i
    return out, lse


def _forward_reference(Q, K, V, causal, block_q, block_k):
    out, cache = flash_forward(Q, K, V, causal, block_q, block_k)
    return out, cache.lse


def _forward_case(rng, lead, T_q, T_k, d_k, d_v, causal, block_q, block_k, scale=1.0):
    return {"Q": rng.standard_normal(lead + (T_q, d_k)) * scale,
            "K": rng.standard_normal(lead + (T_k, d_k)) * scale,
            "V": rng.standard_normal(lead + (T_k, d_v)),
            "causal": causal, "block_q": block_q, "block_k": block_k}


# (lead, T_q, T_k, d_k, d_v, causal, block_q, block_k, scale): shared by forward and backward
PUBLIC_SHAPES = [((), 8, 8, 4, 4, False, 4, 4, 1.0),
                 ((2,), 10, 10, 4, 3, True, 4, 4, 1.0),
                 ((2, 2), 5, 9, 3, 2, True, 2, 4, 1.0),   # queries are the last 5 positions
                 ((), 7, 3, 4, 4, True, 4, 2, 1.0),       # queries 0..3 see no key
                 ((), 6, 6, 8, 8, False, 4, 2, 10.0),     # scores in the hundreds
                 ((), 3, 5, 4, 2, False, 8, 8, 1.0),      # one tile
                 ((), 2048, 2048, 4, 4, False, 256, 256, 1.0)]  # long: held to a memory limit
HIDDEN_SHAPES = [((3,), 12, 12, 4, 4, True, 4, 4, 1.0),
                 ((2,), 6, 11, 5, 3, True, 4, 4, 1.0),
                 ((), 9, 4, 3, 3, True, 2, 2, 1.0),
                 ((2, 3), 7, 7, 8, 8, False, 3, 5, 1.0),
                 ((), 8, 8, 8, 4, True, 4, 4, 10.0),
                 ((), 4, 6, 2, 2, False, 8, 8, 1.0),
                 # causal, with block_q, block_k and d_k all above T_q = 2: the key loop must
                 # still reach key 8 (a stop computed with one of them in place of T_q does not)
                 ((), 2, 9, 6, 3, True, 4, 4, 1.0),
                 # not causal, T_q > T_k: every query block sees every key block
                 ((), 6, 3, 4, 4, False, 2, 2, 1.0),
                 ((), 2048, 3072, 4, 4, True, 256, 256, 1.0)]  # long, causal: a memory limit


def _signed_rows_case(rng):
    """Causal, batch of 2, T_q = 5 < T_k = 7, d_k = 4, d_v = 3, block_q = 2, block_k = 3. Every
    entry of K lies in [20, 30] and every row of Q has entries of one sign, + for even rows and
    - for odd ones: the scores are between 800 and 1800 in the even rows and between -1800 and
    -800 in the odd ones, so every query tile holds rows of both signs. A running maximum that
    starts from a positive number instead of m (np.maximum(T_k, S.max(-1)), ...) or one taken
    over the whole tile (S.max()) makes exp(S - m) underflow to 0 in the odd rows."""
    sign = np.where(np.arange(5) % 2 == 0, 1.0, -1.0)[:, None]
    return {"Q": sign * rng.uniform(20.0, 30.0, (2, 5, 4)),
            "K": rng.uniform(20.0, 30.0, (2, 7, 4)),
            "V": rng.standard_normal((2, 7, 3)),
            "causal": True, "block_q": 2, "block_k": 3}


def _forward_cases(rng, hidden):
    cases = [_forward_case(rng, *shape) for shape in (HIDDEN_SHAPES if hidden else PUBLIC_SHAPES)]
    return cases + [_signed_rows_case(rng)] if hidden else cases


def _T(c):
    return c["Q"].shape[-2], c["K"].shape[-2]


LONG = 2048  # from T_q x T_k = LONG^2 on, a case holds the learner's call to a quarter of one
             # (..., T_q, T_k) float64 array: a pass in tiles of 256 keeps a few MiB, the
             # textbook pass (S, then A) three or more of those arrays


def _memory(arrays: str):
    """``Exercise.memory`` of a pass that the text asks to run in tiles, never building
    ``arrays`` whole."""
    def memory(c):
        T_q, T_k = _T(c)
        if T_q * T_k < LONG * LONG:
            return None
        whole = int(np.prod(c["Q"].shape[:-2], dtype=np.int64)) * T_q * T_k * 8
        return whole // 4, (f"one ({T_q}, {T_k}) array of float64 is {whole / 2**20:.0f} MiB here, and "
                            f"the exercise asks for one tile at a time, never the whole {arrays}")
    return memory


TILE_FEATURES = shape_features(**{
    "causal": lambda c: c["causal"],
    "T_q ≠ T_k": lambda c: _T(c)[0] != _T(c)[1],
    "causal with T_q < T_k (the queries are the last positions)":
        lambda c: c["causal"] and _T(c)[0] < _T(c)[1],
    "causal with T_q > T_k (the first queries see no key)":
        lambda c: c["causal"] and _T(c)[0] > _T(c)[1],
    "blocks that do not divide T": lambda c: _T(c)[0] % c["block_q"] or _T(c)[1] % c["block_k"],
    "block_q ≠ block_k": lambda c: c["block_q"] != c["block_k"],
    "a single tile (blocks as long as the sequences)":
        lambda c: c["block_q"] >= _T(c)[0] and c["block_k"] >= _T(c)[1],
    "batch axes": lambda c: c["Q"].ndim > 2,
    "two batch axes": lambda c: c["Q"].ndim > 3,
    "d_k ≠ d_v": lambda c: c["Q"].shape[-1] != c["V"].shape[-1],
    f"long sequences (T_q · T_k ≥ {LONG}²), held to a memory limit":
        lambda c: _T(c)[0] * _T(c)[1] >= LONG * LONG,
    "large scores (|Q K^T| / sqrt(d_k) above 30)":
        lambda c: np.abs(c["Q"] @ _swapT(c["K"])).max() / np.sqrt(c["Q"].shape[-1]) > 30})


def _tile_dims(c):
    return {"d_k": c["Q"].shape[-1], "T_q": c["Q"].shape[-2], "T_k": c["K"].shape[-2],
            "d_v": c["V"].shape[-1], "block_q": c["block_q"], "block_k": c["block_k"]}


@switchable
def _forward_with(**switches):
    def wrong(Q, K, V, causal, block_q, block_k):
        return tiled_forward(Q, K, V, causal, block_q, block_k, **switches)
    return wrong


FORWARD_MISTAKES = (
    Mistake(name="running output not rescaled",
            hint="the running output holds sum_j exp(s_j - m) v_j for the old maximum m: multiply it "
                 "by alpha = exp(m - m') too, as you do l, before adding A_tilde @ V.",
            wrong=_forward_with(rescale_out=False)),
    Mistake(name="rescaling factor taken after the maximum was overwritten (alpha = 1)",
            hint="compute alpha = exp(m - m_new) while m still holds the old maximum; set m = m_new "
                 "only at the end of the step.", wrong=_forward_with(alpha_after_update=True)),
    Mistake(name="running maximum not updated before exponentiating",
            hint="compute m_new = max(m, rowmax(S)) first, then A_tilde = exp(S - m_new), not "
                 "exp(S - m) with the old maximum (which starts at -inf).",
            wrong=_forward_with(old_max=True)),
    Mistake(name="normaliser rescaled twice",
            hint="l becomes alpha * l + rowsum(A_tilde): one factor alpha per step.",
            wrong=_forward_with(rescale_l=2)),
    Mistake(name="output divided by l inside the loop",
            hint="divide the running output by l once, after the last key block; dividing at every "
                 "step divides the early blocks' terms several times.",
            wrong=_forward_with(divide_inside=True)),
    Mistake(name="log-sum-exp saved before the last block",
            hint="lse = m + log(l) must use m and l after the last key block: compute it after "
                 "the loop.", wrong=_forward_with(lse_early=-np.inf),
            detect=any_of(*(_forward_with(lse_early=v) for v in (-np.inf, 0.0)))),
    Mistake(name="log-sum-exp saved as log(l), without the maximum",
            hint="l sums exp(s_j - m), so log(sum_j exp(s_j)) = m + log(l).",
            wrong=_forward_with(lse_without_max=True)),
    Mistake(name="causal key loop stops one block early (the diagonal block is skipped)",
            hint="query rows q0 .. q0 + rows - 1 see keys up to q0 + rows - 1 + T_k - T_q: loop "
                 "over key blocks up to min(T_k, q0 + rows + T_k - T_q), not up to q0 + T_k - T_q.",
            wrong=_forward_with(diagonal_skipped=True)),
    Mistake(name="causal mask aligned top-left instead of bottom-right",
            hint="with T_q ≠ T_k the queries are the last T_q positions: query i sits at position "
                 "i + T_k - T_q and sees keys j <= i + T_k - T_q (as causal_mask(T_q, T_k) in "
                 "notebook 02).", wrong=_forward_with(top_left=True),
            detect=any_of(*(_forward_with(top_left=v) for v in (True, "mask")))),  # the loop's stop right, or not
    Mistake(name="scores not scaled", hint="S = Q_i K_j^T / sqrt(d_k), as in notebook 02: without the "
            "scale the softmax is too peaked for large d_k.", wrong=_forward_with(scaled=False)),
    Mistake(name="a query with no key gives NaN",
            hint="a query that sees no key has m = -inf and l = 0: exponentiate against 0 where "
                 "m_new is -inf, divide by 1 where l is 0, so that it gets out = 0 and lse = -inf.",
            wrong=_forward_with(guard_max=False, guard_l=False),
            detect=any_of(*(_forward_with(guard_max=g_max, guard_l=g_l)
                             for g_max, g_l in ((False, False), (False, True), (True, False))))),
)

# Mutants of the references that no case can tell apart (``autograder.exercises.adequacy``). Visiting
# more key blocks than needed changes nothing: every key of such a tile is in the future of
# every query of the block, so _mask_tile sets it to -inf and the tile adds exactly 0 (alpha
# = 1 where m is finite; l and acc stay 0 where it is not), or, in the backward, A = 0.
_EXTRA_TILES = ("only visits more key blocks, never past T_k: their keys are all masked "
                "(-inf), so those tiles add exactly nothing")
_TILE_EQUIVALENT = {
    "_key_blocks: T_q -> causal": "causal stop q0 + rows + T_k - 1 >= the right one (T_q >= 1): "
                                  + _EXTRA_TILES,
    "_key_blocks: T_q -> q0": "causal stop q0 + rows + T_k - q0 >= the right one (q0 < T_q): "
                              + _EXTRA_TILES,
    "_key_blocks: T_q -> rows": "causal stop q0 + rows + T_k - rows >= the right one "
                                "(rows <= T_q): " + _EXTRA_TILES,
}
# _mask_tile with k0 and T_q swapped keeps key k0 + c for query q0 + r where
# T_q + c <= q0 + r + T_k - k0, which is k0 + c <= q0 + r + T_k - T_q in integers: the same mask
_SWAPPED_MASK = ("_mask_tile(S, q0, T_q, k0, T_k, causal) keeps T_q + c <= q0 + r + T_k - k0, "
                 "the right mask's k0 + c <= q0 + r + T_k - T_q rearranged (exact in integers)")
FORWARD_EQUIVALENT = {
    **_TILE_EQUIVALENT,
    "flash_forward: causal -> False in `for k0 in …`": "the key loop then visits the blocks wholly in the future "
        "too, and _mask_tile sets every score there to -inf: they add exactly nothing",
    "_forward_reference: block_q -> block_k":
        "out and lse do not depend on the tile sizes (rounding only): any blocks give softmax(S) V",
    "_forward_reference: block_k -> block_q":
        "out and lse do not depend on the tile sizes (rounding only): any blocks give softmax(S) V",
    "flash_forward: T_q -> causal in `for k0 in …`": "causal stop q0 + rows + T_k - 1 >= the right one "
                                       "(T_q >= 1): " + _EXTRA_TILES,
    "flash_forward: T_q -> q0 in `for k0 in …`": "causal stop q0 + rows + T_k - q0 >= the right one "
                                   "(q0 < T_q): " + _EXTRA_TILES,
    "flash_forward: T_q -> rows in `for k0 in …`": "causal stop q0 + rows + T_k - rows >= the right one "
                                     "(rows <= T_q): " + _EXTRA_TILES,
    "flash_forward: T_q -> scale in `for k0 in …`": "causal stop q0 + rows + T_k - 1/sqrt(d_k) >= T_k "
                                      "(q0 + rows >= 1 >= scale), so min gives T_k: "
                                      + _EXTRA_TILES,
    "_key_blocks: min(T_k, q0 + rows + T_k - T_q) -> max(T_k, q0 + rows + T_k - T_q)":
        "q0 + rows <= T_q, so the max is T_k, the stop without causality: " + _EXTRA_TILES,
    "_key_blocks: stop -> T_k": "the stop without causality: " + _EXTRA_TILES,
    "flash_forward: _mask_tile(S, q0, k0, T_q, T_k, causal) -> "
    "_mask_tile(S, q0, T_q, k0, T_k, causal)": _SWAPPED_MASK,
    "flash_forward: m_new -> shift in `m = m_new`":
        "m = shift differs from m = m_new only where m_new = -inf (0 there): a row whose keys "
        "so far are all masked, so key 0 is masked and, the visible keys being a prefix, every "
        "later key too; such a row then gets m_new = 0, shift 0, alpha 1 instead of 0, times "
        "l = 0 and acc = 0, and lse = 0 + log(0) = -inf, out = 0 as the reference's",
}

FORWARD = Exercise(
    id="flash.forward",
    search_sites=3000,  # benchmarks/repair_search.py: about 3 s of edits
    function="flash_forward",
    signature="flash_forward(Q, K, V, causal=False, block_q=16, block_k=16) -> (out, lse)",
    cases=_forward_cases,
    reference=_forward_reference,
    points=3,
    output_names=("out", "lse"),
    axes={"out": ("T_q (queries)", "d_v"), "lse": ("leading axis (B or n_heads)", "T_q (queries)")},
    forbidden=FORBIDDEN,
    features=TILE_FEATURES,
    dims=_tile_dims,
    mistakes=FORWARD_MISTAKES,
    equivalent=FORWARD_EQUIVALENT,
    memory=_memory("matrix of scores or weights"),
)


# ============================================================================ tiled backward
def tiled_backward(dout, Q, K, V, out, lse, causal=False, block_q=4, block_k=4, *,
                   D_from_tile=False, use_D=True, tile_softmax=False, mask=True,
                   scale_twice=None, dk_transpose=True, dv_transpose=True, scaled=True,
                   guard=True, diagonal_skipped=False, top_left=False, lse_by_key=False):
    """FlashAttention's backward, tile by tile: dQ, dK, dV shaped like Q, K, V.

    Per tile: A = exp(S - lse); dV_j += A^T dout_i; dA = dout_i V_j^T; dS = A * (dA - delta_i);
    dQ_i += dS K_j / sqrt(d_k); dK_j += dS^T Q_i / sqrt(d_k), with delta = rowsum(dout * out).
    The keyword-only switches model mistakes (see BACKWARD_MISTAKES); ``scale_twice`` is
    "dK" (Q scaled before the scores, and dK scaled again) or "both" (dS and dQ, dK scaled);
    ``top_left`` True (the causal tiles and the key loop's stop aligned top-left) or "mask"
    (the tiles' mask alone); ``tile_softmax`` is "guarded" (a row of -inf gets weights 0) or "plain" (NaN there);
    ``scaled`` False leaves dQ and dK unscaled, "dQ" or "dK" scales that one alone;
    ``lse_by_key`` slices lse by the key block, a row along the keys (it raises where that
    slice and the tile's columns do not broadcast).
    """
    T_q, T_k = Q.shape[-2], K.shape[-2]
    offset = 0 if top_left is True else T_k - T_q  # "mask": the tiles' mask alone top-left
    scale = 1.0 / np.sqrt(Q.shape[-1])
    delta = (dout * out).sum(axis=-1)  # (..., T_q)
    lse = np.where(np.isfinite(lse), lse, np.inf) if guard else lse
    dQ, dK, dV = np.zeros_like(Q), np.zeros_like(K), np.zeros_like(V)
    for q0 in range(0, T_q, block_q):
        Qi, dOi = Q[..., q0:q0 + block_q, :], dout[..., q0:q0 + block_q, :]
        rows = Qi.shape[-2]
        Qk = Qi * scale if scale_twice == "dK" else Qi  # what multiplies dS^T in dK
        stop = _key_stop(q0, rows, T_q, T_k, causal, offset, diagonal_skipped)
        for k0 in range(0, stop, block_k):
            Kj, Vj = K[..., k0:k0 + block_k, :], V[..., k0:k0 + block_k, :]
            S = Qi @ _swapT(Kj) * scale
            S = _causal_tile(S, q0, k0, 0 if top_left else offset) if causal and mask else S
            if tile_softmax:  # "guarded": 0 for a row of -inf, as notebook 02's softmax
                row_max = S.max(axis=-1, keepdims=True)
                e = np.exp(S - (finite_shift(row_max) if tile_softmax == "guarded" else row_max))
                total = e.sum(axis=-1, keepdims=True)
                A = e / (np.where(total == 0, 1.0, total) if tile_softmax == "guarded" else total)
            else:
                A = np.exp(S - (lse[..., None, k0:k0 + block_k] if lse_by_key else lse[..., q0:q0 + rows, None]))
            dV[..., k0:k0 + block_k, :] += (_swapT(A) if dv_transpose else A) @ dOi
            dA = dOi @ _swapT(Vj)
            Di = (dA * A).sum(axis=-1) if D_from_tile else delta[..., q0:q0 + rows]
            dS = A * (dA - Di[..., None]) if use_D else A * dA
            s = scale if scale_twice == "both" else 1.0
            s_q = s * (scale if scaled in (True, "dQ") else 1.0)
            s_k = s * (scale if scaled in (True, "dK") else 1.0)
            dQ[..., q0:q0 + rows, :] += dS @ Kj * s_q
            dK[..., k0:k0 + block_k, :] += (_swapT(dS) if dk_transpose else dS) @ Qk * s_k
    return dQ, dK, dV


def _backward_reference(dout, Q, K, V, out, lse, causal, block_q, block_k):
    return flash_backward(dout, FlashCache(Q, K, V, out, lse, causal, block_q, block_k))


def _backward_case(rng, *shape):
    case = _forward_case(rng, *shape)
    out, lse = _forward_reference(**case)
    return {"dout": rng.standard_normal(out.shape), **case, "out": out, "lse": lse}


def _backward_cases(rng, hidden):
    return [_backward_case(rng, *shape) for shape in (HIDDEN_SHAPES if hidden else PUBLIC_SHAPES)]


@switchable
def _backward_with(**switches):
    def wrong(dout, Q, K, V, out, lse, causal, block_q, block_k):
        return tiled_backward(dout, Q, K, V, out, lse, causal, block_q, block_k, **switches)
    return wrong


BACKWARD_MISTAKES = (
    Mistake(name="delta computed from the tile's weights instead of rowsum(dout ∘ out)",
            hint="the softmax backward subtracts sum_j dA_ij A_ij over ALL keys of query i; one "
                 "tile holds only some of them. That sum equals delta_i = rowsum(dout_i * out_i): "
                 "compute delta once, before the loops.", wrong=_backward_with(D_from_tile=True)),
    Mistake(name="softmax backward missing the delta term",
            hint="dS = A * (dA - delta), with delta = rowsum(dout * out) broadcast along the keys.",
            wrong=_backward_with(use_D=False)),
    Mistake(name="weights recomputed by a softmax over the tile",
            hint="a tile's weights are A = exp(S - lse), with lse saved by the forward for the "
                 "whole row; a softmax over one tile normalises over the wrong keys.",
            wrong=_backward_with(tile_softmax="guarded"),
            detect=any_of(*(_backward_with(tile_softmax=v) for v in ("guarded", "plain")))),
    Mistake(name="causal mask missing in the recomputed weights",
            hint="the tiles on the diagonal hold future keys too: set their scores to -inf "
                 "before exp(S - lse), as in the forward.", wrong=_backward_with(mask=False)),
    Mistake(name="scale applied twice in the backward",
            hint="the scores are Q K^T / sqrt(d_k), so dQ = dS K / sqrt(d_k) and "
                 "dK = dS^T Q / sqrt(d_k), one factor each. If you scaled Q (or dS) already, do "
                 "not multiply by the scale again.", wrong=_backward_with(scale_twice="dK"),
            detect=any_of(_backward_with(scale_twice="dK"), _backward_with(scale_twice="both"))),
    Mistake(name="dQ and dK not scaled",
            hint="the scores are divided by sqrt(d_k), so dQ and dK are too.",
            wrong=_backward_with(scaled=False)),
    Mistake(name="dK not scaled",
            hint="dK_j += dS^T Q_i / sqrt(d_k): the scale of the scores reaches dK as it reaches dQ.",
            wrong=_backward_with(scaled="dQ")),
    Mistake(name="dQ not scaled",
            hint="dQ_i += dS K_j / sqrt(d_k): the scale of the scores reaches dQ as it reaches dK.",
            wrong=_backward_with(scaled="dK")),
    Mistake(name="dK accumulated without the transpose",
            hint="dK_j += dS^T Q_i / sqrt(d_k): one row per key. dS @ Q_i only has the right shape "
                 "when the tile is square (block_q = block_k, full blocks), and is wrong there too.",
            wrong=_backward_with(dk_transpose=False)),
    Mistake(name="dV accumulated without the transpose",
            hint="out = A V, so dV_j += A^T dout_i: one row per key. A @ dout_i only has the right "
                 "shape for a square tile.", wrong=_backward_with(dv_transpose=False)),
    Mistake(name="causal key loop stops one block early (the diagonal block is skipped)",
            hint="the backward visits the same tiles as the forward: key blocks up to "
                 "min(T_k, q0 + rows + T_k - T_q).", wrong=_backward_with(diagonal_skipped=True)),
    Mistake(name="causal mask aligned top-left instead of bottom-right",
            hint="the backward masks the tiles as the forward does: with T_q ≠ T_k query i sits at "
                 "position i + T_k - T_q and sees keys j <= i + T_k - T_q.",
            wrong=_backward_with(top_left=True),
            detect=any_of(_backward_with(top_left=True), _backward_with(top_left="mask"))),
    Mistake(name="a query with no key gives NaN",
            hint="a query that sees no key has lse = -inf, and exp(-inf - (-inf)) is NaN: use "
                 "lse = +inf there (its weights are then exp(S - inf) = 0).",
            wrong=_backward_with(guard=False)),
    Mistake(name="lse sliced by the key block",
            hint="A_ij = exp(S_ij - lse_i): each row of a tile subtracts its query's log-sum-exp. "
                 "Slice lse by the query block, as a column along the keys: lse[..., q0:q0 + rows, None].",
            wrong=_backward_with(lse_by_key=True)),
)

BACKWARD_EQUIVALENT = {
    **_TILE_EQUIVALENT,
    "_backward_reference: block_q -> block_k":
        "dQ, dK and dV do not depend on the tile sizes (rounding only)",
    "_backward_reference: block_k -> block_q":
        "dQ, dK and dV do not depend on the tile sizes (rounding only)",
    # _key_blocks(q0, rows, T_q, ...) in the backward's key loop, as in the forward's
    "flash_backward: T_q -> causal in `for k0 in …`": "causal stop q0 + rows + T_k - 1 >= the right one "
                                        "(T_q >= 1): " + _EXTRA_TILES,
    "flash_backward: T_q -> q0 in `for k0 in …`": "causal stop q0 + rows + T_k - q0 >= the right one "
                                    "(q0 < T_q): " + _EXTRA_TILES,
    "flash_backward: T_q -> rows in `for k0 in …`": "causal stop q0 + rows + T_k - rows >= the right one "
                                      "(rows <= T_q): " + _EXTRA_TILES,
    "flash_backward: T_q -> scale in `for k0 in …`": "causal stop q0 + rows + T_k - 1/sqrt(d_k) >= T_k "
                                       "(q0 + rows >= 1 >= scale), so min gives T_k: "
                                       + _EXTRA_TILES,
    "flash_backward: _mask_tile(Qi @ np.swapaxes(Kj, -1, -2) * scale, q0, k0, T_q -> "
    "_mask_tile(Qi @ np.swapaxes(Kj, -1, -2) * scale, q0, T_q, k0": _SWAPPED_MASK,
}

BACKWARD = Exercise(
    id="flash.backward",
    search_sites=3200,  # benchmarks/repair_search.py: about 3 s of edits
    function="flash_backward",
    signature="flash_backward(dout, Q, K, V, out, lse, causal=False, block_q=16, block_k=16) "
              "-> (dQ, dK, dV)",
    cases=_backward_cases,
    reference=_backward_reference,
    points=3,
    output_names=("dQ", "dK", "dV"),
    axes={"dQ": ("T_q (queries)", "d_k"), "dK": ("T_k (keys)", "d_k"), "dV": ("T_k (keys)", "d_v")},
    forbidden=FORBIDDEN,
    features=TILE_FEATURES,
    dims=_tile_dims,
    mistakes=BACKWARD_MISTAKES,
    equivalent=BACKWARD_EQUIVALENT,
    memory=_memory("matrix of weights or of their gradients"),
)


EXERCISES = [ONLINE_SOFTMAX, FORWARD, BACKWARD]
