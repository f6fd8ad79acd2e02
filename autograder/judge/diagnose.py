"""Generic diagnoses: how wrong outputs relate to the reference. [trusted; also the check cell]

A registered ``Mistake`` names one bug its author foresaw. The diagnoses here name bugs no
one listed, from the learner's outputs, the reference and the case inputs alone (computed in
the trusted judge; nothing here runs learner code). In the order tried:

1. which outputs are wrong, when some are right ("dQ and dV match; dK differs");
2. for a backward pass, a term of the derivation left out: the gradients match the ones
   computed with one quantity of the forward held constant (``Exercise.held_constant``);
3. the output itself transformed: times a factor, sign flipped, two axes swapped, shifted by
   one step along an axis;
4. the reference computed on changed inputs: one input scaled by a named factor (sqrt(d_k),
   2, 1/T ...), negated, transposed, a mask ignored or inverted, integer inputs shifted by one;
5. where the error is: only at the first or last index of an axis, only at masked positions,
   only for queries whose keys are all masked, NaN or inf where the reference is finite;
6. which cases fail: the cases sharing a feature (masks, T_q ≠ T_k, batch axes, float32, very
   large values) fail and the others pass.
"""
from __future__ import annotations

import itertools
import math
import time

import numpy as np

from autograder.judge.exercise import Exercise
from autograder.kernel.transport import as_outputs

RTOL, ATOL = 1e-6, 1e-8  # matching a hypothesis: looser than grading, still far from chance


def _same(g: np.ndarray, w: np.ndarray) -> bool:
    if g.dtype == bool or w.dtype == bool:
        return g.shape == w.shape and bool(np.array_equal(g, w))
    return g.shape == w.shape and bool(np.allclose(g, w, rtol=RTOL, atol=ATOL, equal_nan=True))


def safe_outputs(fn, case) -> tuple | None:
    """A trusted model's outputs on ``case`` (a mistake's or a hypothesis's); None where it
    does not apply (it raises)."""
    try:
        with np.errstate(all="ignore"):
            return as_outputs(fn(**case))
    except Exception:
        return None


def close_per_output(ex: Exercise, got: tuple, want: tuple, equal_nan: bool = False) -> list[bool]:
    """Per output: same shape and equal within the exercise's tolerance."""
    return [g.shape == w.shape and bool(np.allclose(g, w, rtol=ex.rtol, atol=ex.atol, equal_nan=equal_nan))
            for g, w in zip(got, want)]


# ----------------------------------------------------------------------------- named factors
def _sizes(ex: Exercise, case: dict) -> dict[str, float]:
    """Named sizes of a case: ``Exercise.dims`` or, failing that, the inputs' axis lengths;
    then its small float arguments and their squares (a step ``eps``: a bracket around
    ``2 * eps`` dropped gives a factor eps^2)."""
    small = {}
    for name, value in case.items():
        if isinstance(value, (float, np.floating)) and 0 < abs(value) < 1e-2:
            small.update({f"1/{name}": 1 / value, f"1/{name}^2": 1 / value ** 2,
                          f"{name}^2": value ** 2})
    if ex.dims is not None:
        return {**{k: int(v) for k, v in ex.dims(case).items()}, **small}
    sizes = dict(small)
    for name, value in case.items():
        if isinstance(value, np.ndarray) and value.ndim:
            for axis in range(-1, -value.ndim - 1, -1):
                sizes.setdefault(f"{name}.shape[{axis}]", int(value.shape[axis]))
    return sizes


def _recognisable() -> dict[str, float]:
    """Factors a learner's slip produces, by name: small integers, natural constants, the
    bases of logarithms, powers of ten, and units (bytes, bits, time, percent)."""
    named = {"2": 2.0, "3": 3.0, "4": 4.0, "ln 2": math.log(2), "ln 10": math.log(10),
             "log10(2)": math.log10(2), "(ln 2)^2": math.log(2) ** 2, "e": math.e, "π": math.pi,
             "2π": 2 * math.pi, "8 (bits per byte)": 8.0, "100 (a percentage)": 100.0,
             "2^10 = 1024 (KiB vs kB)": 1024.0, "2^20 (bytes per MiB)": 2.0 ** 20,
             "2^30 (bytes per GiB)": 2.0 ** 30, "2^40 (bytes per TiB)": 2.0 ** 40,
             "10^9 / 2^30 (GB vs GiB)": 1e9 / 2 ** 30, "60": 60.0, "24 (hours per day)": 24.0,
             "3600 (seconds per hour)": 3600.0, "86400 (seconds per day)": 86400.0,
             "365 (days per year)": 365.0}
    named.update({f"10^{k}": 10.0 ** k for k in (1, 2, 3, 6, 9, 12, 15, 18)})
    named.update({f"10^{3 * k} / 2^{10 * k} (decimal vs binary {unit})": 10.0 ** (3 * k) / 2 ** (10 * k)
                  for k, unit in ((2, "mega"), (3, "giga"), (4, "tera"), (5, "peta"))})
    named.update({"86400^2 (seconds per day, squared: a missing bracket?)": 86400.0 ** 2,
                  "3600^2 (seconds per hour, squared: a missing bracket?)": 3600.0 ** 2})
    out = {}
    for label, value in named.items():
        out[label] = value
        inverse = label[1:] if label.startswith("1/") else f"1/{label}" if " " not in label else f"1/({label})"
        out.setdefault(inverse, 1 / value)
    return out


CONSTANTS = _recognisable()


SMALL = {k: CONSTANTS[k] for k in ("2", "1/2", "3", "1/3", "4", "1/4", "ln 2", "1/(ln 2)")}


def _factors(ex: Exercise, case: dict, constants: dict = CONSTANTS) -> dict[str, float]:
    """label -> value: each named size as itself, its square root and their inverses, then
    ``constants``."""
    out = {}
    for name, n in _sizes(ex, case).items():
        if "/" in name or "^" in name:  # a small argument's powers, already named
            out[name] = n
        elif n > 1:
            out.update({name: n, f"sqrt({name})": math.sqrt(n), f"1/{name}": 1 / n,
                        f"1/sqrt({name})": 1 / math.sqrt(n)})
    out.update(constants)
    return out


def _common_label(per_case: list[dict[str, float]], ok) -> str | None:
    """The first label whose value satisfies ``ok(case index, value)`` in every case."""
    labels = [k for k in per_case[0] if all(k in d for d in per_case)]
    for label in labels:
        if all(ok(i, d[label]) for i, d in enumerate(per_case)):
            return label
    return None


# ----------------------------------------------------------------------------- 1. which outputs
def _wrong_outputs(ex: Exercise, failing: list) -> list[int]:
    n = len(failing[0][2])
    return [k for k in range(n) if any(
        len(got) == n and not close_per_output(ex, got, want)[k] for _, got, want in failing)]


def which_outputs(ex: Exercise, failing: list, wrong: list[int]) -> str | None:
    n = len(failing[0][2])
    if n < 2 or len(wrong) == n or not wrong:
        return None
    right = [k for k in range(n) if k not in wrong]
    return (f"{_listed(ex, right)} match{'es' if len(right) == 1 else ''} the reference; "
            f"{_listed(ex, wrong)} {'differs' if len(wrong) == 1 else 'differ'}.")


def _listed(ex: Exercise, ks: list[int]) -> str:
    names = [f"`{ex.name_of(k)}`" for k in ks]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


# ----------------------------------------------------------------------------- 2. held constant
def held_constant(ex: Exercise, failing: list, wrong: list[int]) -> str | None:
    for quantity, fn in ex.held_constant.items():
        if all(_matches(got, safe_outputs(fn, case), wrong, rtol=1e-4, atol=1e-6)
               for case, got, _ in failing):
            return (f"Your gradients match the derivation with {quantity} held constant: the "
                    f"term that flows back through {quantity} is missing.")
    return None


def _matches(got: tuple, other: tuple | None, ks: list[int], rtol=RTOL, atol=ATOL) -> bool:
    return other is not None and len(other) == len(got) and all(
        got[k].shape == other[k].shape and np.allclose(got[k], other[k], rtol=rtol, atol=atol,
                                                       equal_nan=True) for k in ks)


# ----------------------------------------------------------------------------- 4. changed inputs
def _input_changes(ex: Exercise, case: dict) -> dict[str, dict]:
    """label -> changed case: the inputs a bug may have changed before the right formula."""
    changes = {}
    factors = _factors(ex, case, SMALL)  # an input scaled by 10^18 would not finish
    arrays = [(n, v) for n, v in case.items() if isinstance(v, np.ndarray) and v.dtype.kind == "f"]
    for (a, x), (b, y) in itertools.combinations(arrays, 2):
        if x.shape == y.shape:
            changes[f"`{a}` and `{b}` swapped"] = {**case, a: y, b: x}
    scalars_first = sorted(case.items(), key=lambda item: isinstance(item[1], np.ndarray))
    for name, value in scalars_first:
        if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
            kind = int if isinstance(value, (int, np.integer)) else float
            for step in (1, -1):
                changes[f"`{name}` {'+' if step > 0 else '-'} 1 in place of `{name}`"] = \
                    {**case, name: kind(value + step)}
            if kind is int:  # an axis or a count fixed in the code instead of the argument
                for fixed in (0, -1):
                    changes[f"{fixed} in place of `{name}`"] = {**case, name: fixed}
            for label, f in factors.items():
                scaled = value * f
                changes[f"`{name}` multiplied by {label}"] = \
                    {**case, name: kind(scaled) if float(scaled).is_integer() else float(scaled)}
            continue
        if value is None and name == "mask":
            continue
        if isinstance(value, np.ndarray) and value.dtype == bool:
            changes[f"`{name}` ignored"] = {**case, name: None} if name == "mask" else None
            changes[f"`{name}` inverted (True and False swapped)"] = {**case, name: ~value}
        elif isinstance(value, np.ndarray) and value.dtype.kind == "f":
            changes[f"`{name}` negated"] = {**case, name: -value}
            changes[f"`{name}` left out (all zeros)"] = {**case, name: np.zeros_like(value)}
            changes[f"`{name}` replaced by ones"] = {**case, name: np.ones_like(value)}
            if value.ndim >= 2:
                changes[f"`{name}` with its last two axes swapped"] = \
                    {**case, name: np.swapaxes(value, -1, -2)}
            for label, f in factors.items():
                changes[f"`{name}` multiplied by {label}"] = {**case, name: value * f}
        elif isinstance(value, np.ndarray) and value.dtype.kind in "iu":  # ids, lengths, tables
            changes[f"`{name}` shifted by +1"] = {**case, name: value + 1}
            changes[f"`{name}` shifted by -1"] = {**case, name: value - 1}
    return {k: v for k, v in changes.items() if v is not None}


def changed_inputs(ex: Exercise, failing: list, wrong: list[int], deadline: float | None = None,
                   passing: list = ()) -> str | None:
    """The change of one input (a scale, a transpose, a shift) that turns the reference's
    outputs into the learner's on every failing case and keeps them on every ``passing`` case
    (a change that would break a case the learner gets right is not the learner's); None when
    changes of different inputs fit, and also past ``deadline`` (``time.monotonic``).

    Failing cases where the learner's outputs hold NaN or inf say little about a formula
    (inf - inf): when they are at most half, the change is looked for on the others, and the
    message says that those cases are not explained when the change does not explain them."""
    ok = [all(np.isfinite(f[1][k]).all() for k in wrong) for f in failing]
    overflowed = []
    if sum(ok) * 2 >= len(failing):
        overflowed = [f for f, fine in zip(failing, ok) if not fine]
        failing = [f for f, fine in zip(failing, ok) if fine]
    per_case = [_input_changes(ex, case) for case, _, _ in failing]
    kept = [(safe_outputs(ex.reference, case), _input_changes(ex, case)) for case in passing]
    fits = []
    for label in per_case[0]:
        if deadline is not None and time.monotonic() > deadline:
            return None
        if not all(label in changes for changes in per_case):
            continue
        if all(_matches(got, safe_outputs(ex.reference, changes[label]), wrong)
               for (case, got, _), changes in zip(failing, per_case)) and \
                all(_keeps(ex, right, changes.get(label), wrong) for right, changes in kept):
            fits.append(label)
    if not fits or len({label.split("`")[1] for label in fits if "`" in label}) > 1:
        return None
    label = fits[0]
    verb = "is" if len(wrong) == 1 else "are"
    message = (f"Your {_listed(ex, wrong)} {verb} what the right formula gives with "
               f"{' or with '.join(fits[:2])}: look at where your code uses {label.split('`')[1]}.")
    unexplained = [f for f in overflowed
                   if not _matches(f[1], safe_outputs(ex.reference, _input_changes(ex, f[0]).get(label)), wrong)]
    if unexplained:
        n = len(unexplained)
        values = [f[1][k][~np.isfinite(f[1][k]) & np.isfinite(f[2][k])] for f in unexplained for k in wrong
                  if f[1][k].shape == f[2][k].shape]
        found, cause = nonfinite_words(values)
        message += (f" On {n} other failing case{'s' * (n > 1)} your {_listed(ex, wrong)} "
                    f"{'has' if len(wrong) == 1 else 'have'} {found} where the reference is finite, "
                    f"which that change does not explain: {cause}.")
    return message


def nonfinite_words(values: list) -> tuple[str, str]:
    """What the learner's non-finite entries are (``values``: arrays of them, where the reference
    is finite) and what can make them, said only as far as the values show: ``-inf`` alone is a
    starting value never updated or a log of 0, ``inf`` alone an overflow or a division by 0,
    NaN one of the few operations that make it."""
    flat = np.concatenate([np.ravel(v) for v in values]) if values else np.array([np.nan])
    kinds = [w for w, there in (("NaN", np.isnan(flat).any()), ("inf", (flat == np.inf).any()),
                                ("-inf", (flat == -np.inf).any())) if there]
    if kinds == ["-inf"]:
        return "-inf", ("a value still at its starting -inf (a running maximum never updated, "
                        "a block with nothing in it) or the log of 0")
    if kinds == ["inf"]:
        return "inf", "an overflow (exp of a large number?) or a division by zero"
    if "NaN" not in kinds:
        return "inf and -inf", ("an overflow, a division by zero, or a value still at its "
                                "starting -inf")
    return " and ".join(kinds), ("NaN comes only from inf - inf, 0 * inf, 0 / 0 or the log or square "
                                 "root of a negative number, often after an overflow or a starting -inf")


def _keeps(ex: Exercise, right: tuple | None, changed_case: dict | None, wrong: list[int]) -> bool:
    """Whether a passing case's ``right`` outputs stay right under a change of its inputs
    (``changed_case``); True where the change does not apply to it or the reference raises."""
    if right is None or changed_case is None:
        return True
    changed = safe_outputs(ex.reference, changed_case)
    return changed is None or _matches(right, changed, wrong)


# ----------------------------------------------------------------------------- 3. output transformed
def _factor_words(label: str) -> str:
    """"multiplied by n" said as a learner's slip would be: a division by a size too many is
    often a mean where a sum belongs (and the other way round)."""
    size = label[2:] if label.startswith("1/") else label
    if not size.isidentifier() or label in CONSTANTS:  # sqrt(d_k), 2, e: no mean or sum in sight
        return f"multiplied by {label}: a factor {label} is missing or extra"
    if label.startswith("1/"):  # a size of the case: T, d_model, n
        return f"divided by {size}: a division by {size} too many (a mean where a sum belongs?)"
    return (f"multiplied by {size}: a division by {size} missing (a sum where a mean "
            f"belongs?), or a factor {size} too many")


def outputs_in_wrong_order(ex: Exercise, failing: list, wrong: list[int]) -> str | None:
    n = len(failing[0][2])
    for i, j in itertools.combinations(wrong, 2):
        if all(len(got) == n and _same(got[i], want[j]) and _same(got[j], want[i])
               for _, got, want in failing):
            return (f"`{ex.name_of(i)}` and `{ex.name_of(j)}` are swapped: return them in the "
                    "order of the signature.")
    return None


def transformed_output(ex: Exercise, failing: list, k: int) -> str | None:
    name = f"`{ex.name_of(k)}`"
    pairs = [(case, got[k], want[k]) for case, got, want in failing
             if len(got) > k and not (got[k].shape == want[k].shape and np.allclose(got[k], want[k], rtol=ex.rtol, atol=ex.atol))]
    if not pairs:
        return None
    if all(g.shape == w.shape for _, g, w in pairs):
        ratios = [_ratio(g, w) for _, g, w in pairs]
        if all(r is not None for r in ratios) and sum(w.size for _, _, w in pairs) > 1:
            if all(abs(r + 1) < 1e-6 for r in ratios):
                return f"{name} has the right size but the opposite sign: a sign is flipped."
            label = _common_label([_factors(ex, c) for c, _, _ in pairs],
                                  lambda i, v: abs(ratios[i] - v) <= 1e-6 * abs(v))
            if label:
                return f"{name} equals the reference {_factor_words(label)}."
            if len(ratios) > 1 and all(abs(r - ratios[0]) <= 1e-6 * abs(ratios[0]) for r in ratios) \
                    and abs(ratios[0] - 1) > 1e-3:
                return f"{name} equals the reference multiplied by {ratios[0]:.4g}: a constant factor is off."
    if all(g.shape == w.shape and np.isfinite(g).all() and np.isfinite(w).all() for _, g, w in pairs):
        offsets = [(g.astype(np.float64) - w).ravel() for _, g, w in pairs]
        if all(np.allclose(o, o[0], rtol=0, atol=1e-9 + 1e-6 * abs(o[0])) and o[0] != 0 for o in offsets):
            values = {round(float(o[0]), 6) for o in offsets}
            if len(values) == 1 and sum(o.size for o in offsets) > 1:  # one number proves nothing
                return f"every entry of {name} is off by {values.pop():+g}: check an offset or a count."
    swap = _axes_swapped(pairs)
    if swap:
        return f"{name} has {swap}: check a transpose or the order of a reshape."
    shift = _shifted(pairs)
    if shift:
        return f"{name} is {shift}: check an index or a range that is off by one."
    order = _reordered(pairs)
    if order:
        return (f"{name} holds the right values in the wrong order along {order}: check how "
                "you interleave, concatenate or index that axis.")
    return None


def _reordered(pairs) -> str | None:
    # the last two axes only, where there are more: the leading ones are the batch and the heads,
    # whose first or last index is no boundary (the padded sequence was the last one, say)
    ndim = min(min(w.ndim for _, _, w in pairs), 2)
    for axis in range(-1, -ndim - 1, -1):
        if all(g.shape == w.shape and w.shape[axis] > 1 and
               _same(np.sort(g, axis=axis), np.sort(w, axis=axis)) for _, g, w in pairs):
            return f"axis {axis}"
    return None


def _ratio(g: np.ndarray, w: np.ndarray) -> float | None:
    g, w = g.astype(np.float64), w.astype(np.float64)  # an int64 dot product would wrap around
    ok = np.isfinite(g) & np.isfinite(w)
    if not ok.all() or not np.any(w):
        return None
    r = float(np.vdot(g, w) / np.vdot(w, w))
    return r if r != 0 and np.allclose(g, r * w, rtol=RTOL, atol=ATOL * abs(r) + ATOL) else None


def _axes_swapped(pairs) -> str | None:
    """Axes counted from the end, so that one label fits cases with and without batch axes."""
    ndim = min(min(g.ndim, w.ndim) for _, g, w in pairs)
    options = [(f"axes {i} and {j} swapped", lambda g, i=i, j=j: np.swapaxes(g, i, j))
               for j, i in itertools.combinations(range(-1, -ndim - 1, -1), 2)]
    options.append(("all its axes reversed (.T transposes every axis of a batched array)",
                    lambda g: g.T))
    for label, undo in options:
        if all(g.ndim == w.ndim and _same(undo(g), w) for _, g, w in pairs):
            return label
    return None


def _shifted(pairs) -> str | None:
    # the last two axes only, where there are more: the leading ones are the batch and the heads,
    # whose first or last index is no boundary (the padded sequence was the last one, say)
    ndim = min(min(w.ndim for _, _, w in pairs), 2)
    for axis in range(-1, -ndim - 1, -1):
        for step, words in ((1, "one step late"), (-1, "one step early")):
            def ok(g, w):
                n = w.shape[axis]
                if g.shape != w.shape or n < 2:
                    return False
                later, earlier = np.arange(1, n), np.arange(n - 1)
                a, b = (later, earlier) if step == 1 else (earlier, later)
                return _same(g.take(a, axis=axis), w.take(b, axis=axis))
            if all(ok(g, w) for _, g, w in pairs):
                return f"shifted {words} along axis {axis}"
    return None


# ----------------------------------------------------------------------------- 5. where
def where_wrong(ex: Exercise, failing: list, k: int) -> str | None:
    name = f"`{ex.name_of(k)}`"
    pairs = [(c, got[k], want[k]) for c, got, want in failing
             if len(got) > k and got[k].shape == want[k].shape]
    if len(pairs) != len(failing) or not pairs:
        return None
    bad = [~np.isclose(g, w, rtol=ex.rtol, atol=ex.atol) for _, g, w in pairs]
    if not all(b.any() for b in bad):
        return None
    if all((~np.isfinite(g) & np.isfinite(w)).any() for _, g, w in pairs):
        found, cause = nonfinite_words([g[~np.isfinite(g) & np.isfinite(w)] for _, g, w in pairs])
        return f"{name} has {found} where the reference is finite: {cause}."
    masked = _mask_region(pairs, bad)
    if masked:
        return f"{name} is wrong only {masked}; elsewhere it matches."
    # the last two axes only, where there are more: the leading ones are the batch and the heads,
    # whose first or last index is no boundary (the padded sequence was the last one, say)
    ndim = min(min(w.ndim for _, _, w in pairs), 2)
    for axis in range(-1, -ndim - 1, -1):
        for index, words in ((0, "first"), (-1, "last")):
            def only(b, axis=axis, index=index):  # a length-1 axis: its one index is both
                return not np.delete(b, index % b.shape[axis], axis=axis).any()
            # evidence: every case has more than one index there, or two cases at least do
            longer = sum(b.shape[axis] > 1 for b in bad)
            if all(only(b) for b in bad) and (longer == len(bad) or longer >= 2):
                size = _axis_size(ex, [(c, b) for (c, _, _), b in zip(pairs, bad)], axis)
                return (f"{name} is wrong only at the {words} index of axis {axis}"
                        f"{f' (the axis of length {size})' if size else ''}; "
                        "elsewhere it matches: check how that boundary is handled.")
    return None


def _axis_size(ex: Exercise, cases: list, axis: int) -> str | None:
    """The one named size (``Exercise.dims``) that is the length of ``axis`` in every case,
    T, say: the words for an axis that a learner knows by name; None where none or several is."""
    if ex.dims is None:
        return None
    names = None
    for case, b in cases:
        here = {k for k, v in ex.dims(case).items() if int(v) == b.shape[axis]}
        names = here if names is None else names & here
    return next(iter(names)) if names and len(names) == 1 else None


def _mask_region(pairs, bad) -> str | None:
    regions = []
    for (case, g, w), b in zip(pairs, bad):
        mask = case.get("mask")
        if not isinstance(mask, np.ndarray) or mask.dtype != bool:
            return None
        try:
            keep = np.broadcast_to(mask, b.shape)
            regions.append(("at masked positions (where the mask is False)", b & keep))
            continue
        except ValueError:
            pass
        empty = ~mask.any(axis=-1)  # (..., T_q): queries with no visible key
        try:
            rows = np.broadcast_to(empty[..., None], b.shape)
        except ValueError:
            return None
        regions.append(("for queries whose keys are all masked", b & ~rows))
    label = regions[0][0]
    if all(r[0] == label and not r[1].any() for r in regions):
        return label
    return None


# ----------------------------------------------------------------------------- 6. which cases
def which_cases(ex: Exercise, failing: list, passing: list) -> str | None:
    if len(passing) < 2:  # one passing case (often the trivial one) proves nothing
        return None
    fail_features = [set(ex.describe(c)) for c, _, _ in failing]
    pass_features = set().union(*(set(ex.describe(c)) for c in passing))
    shared = set.intersection(*fail_features) - pass_features
    if shared:
        ordered = [f for f in ex.describe(failing[0][0]) if f in shared]
        return (f"The failing cases all have {' and '.join(ordered)}; the cases without "
                f"{'it' if len(ordered) == 1 else 'them'} pass: look at how your code handles "
                f"{'that' if len(ordered) == 1 else 'those'}.")
    return None


ROUNDING = 3e-6  # relative to the output's largest entry: float32 arithmetic, not a formula


def rounding(ex: Exercise, failing: list) -> str | None:
    """A message when every wrong output is off by rounding-sized amounts only (float32
    arithmetic, another order of sums): no formula is wrong, so no other diagnosis applies."""
    worst = 0.0
    for _, got, want in failing:
        if len(got) != len(want):
            return None
        for g, w in zip(got, want):
            if g.shape != w.shape or g.dtype == bool or w.dtype == bool or w.size == 0:
                return None
            if not (np.isfinite(g).all() and np.isfinite(w).all()):
                return None
            scale = float(np.max(np.abs(w.astype(np.float64))))
            err = float(np.max(np.abs(g.astype(np.float64) - w)))
            if scale == 0 or err > ROUNDING * scale:
                return None
            worst = max(worst, err / scale)
    return (f"Your outputs differ from the reference by rounding-sized amounts only (at most "
            f"{worst:.1g} of the largest entry), more than the tolerance allows: is something "
            "computed in float32 (an input cast with `astype`, `np.float32`)? Keep float64 throughout.")


def diagnose(ex: Exercise, failing: list, passing: list, raised: list = (),
             deadline: float | None = None) -> tuple[list[str], str | None]:
    """Messages about the ``failing`` (case, got, want) triples, and their kind: "specific"
    (what the mistake is), "pinpoint" (where it is: which output, position or kind of case),
    or None when nothing applies.

    ``passing``: the cases that matched, for the comparison of features; ``raised``: the
    cases that raised an error (they count as failing when saying which kind of case fails);
    ``deadline`` (``time.monotonic``, the check cell): the slowest step stops there.
    """
    failing = [f for f in failing if len(f[1]) == len(f[2])]
    if not failing:
        return [], None
    wrong = _wrong_outputs(ex, failing)
    messages = [m for m in [which_outputs(ex, failing, wrong)] if m]
    kind = "pinpoint" if messages else None
    if not wrong:
        return messages, kind
    steps = [lambda: held_constant(ex, failing, wrong), lambda: outputs_in_wrong_order(ex, failing, wrong)]
    steps += [lambda k=k: transformed_output(ex, failing, k) for k in wrong[:2]]
    steps += [lambda: changed_inputs(ex, failing, wrong, deadline, passing)]
    for step in steps:
        found = step()
        if found:
            return messages + [found], "specific"
    steps = [lambda k=k: where_wrong(ex, failing, k) for k in wrong[:2]]
    steps += [lambda: which_cases(ex, failing + [(c, None, None) for c in raised], passing)]
    for step in steps:
        found = step()
        if found:
            return messages + [found], "pinpoint"
    return messages, kind
