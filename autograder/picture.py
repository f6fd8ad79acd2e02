"""Where a matrix output is wrong, as a picture. [trusted; also the check cell]

When a public case fails and an output is a matrix (attention weights, masks, scores,
gradients ...), ``difference_figure`` draws the learner's output, the expected output and their
difference side by side, so that a shifted diagonal, a transposed block or a wrong masked region
is seen at once. Cells that differ beyond the exercise's tolerance carry a dot; cells the case's
mask hides are grey and hatched as in ``course_lib.viz.plot_attention``.

Two places draw it, never the grading sandbox: the check cell, in the learner's own kernel
(``show_first_failure``: the first failing case), and the grader's trusted process, for the
report (``autograder.pipeline.pictures``: each failing public case, from the outputs the
graded cell recorded for them). Nothing here decides a grade; figures are made without pyplot
(no global state, safe in a grader's threads), and matplotlib is imported only when there is a
failing matrix to draw.
"""
from __future__ import annotations

import copy
import warnings

import numpy as np

from autograder.judge.diagnose import close_per_output
from autograder.kernel.transport import as_outputs

NONFINITE_COLOR = "#ff00ff"  # magenta: NaN or inf, outside every colour map used here
MARK_COLOR = "black"         # the dot on a cell beyond tolerance
MASKED_FALLBACK = "#b0b0b0"  # course_lib.style.MASKED_COLOR, when course_lib is not importable

# rows, columns of a 2-D slice, for outputs the course glossary (course_lib/README.md) names;
# an exercise's own ``Exercise.axes`` come first
_QUERIES_KEYS = ("T_q (queries)", "T_k (keys)")
GLOSSARY_AXES = {
    "A": _QUERIES_KEYS, "S": _QUERIES_KEYS, "mask": _QUERIES_KEYS,
    "dA": _QUERIES_KEYS, "dS": _QUERIES_KEYS,  # a gradient has the shape of what it differentiates
    "P": ("position t", "d_model"),
}
UNNAMED_AXES = ("axis -2", "axis -1")
# outputs laid out like the scores (..., T_q, T_k), on which a case's attention mask applies
MASKABLE = frozenset({"A", "S", "dA", "dS"})


def axis_names_for(name: str, ex=None) -> tuple[str, str]:
    """Labels for the rows and columns of a 2-D slice of output ``name`` of exercise ``ex``
    (an ``Exercise``, or None): its declared ``axes``, else the glossary's, else axis -2, -1."""
    declared = ex.axes if ex is not None else {}
    return tuple(declared.get(name) or GLOSSARY_AXES.get(name, UNNAMED_AXES))


def _masked_color() -> str:
    try:
        from course_lib.style import MASKED_COLOR  # lazy and guarded: this module works without course_lib
        return MASKED_COLOR
    except Exception:  # course_lib absent or its import fails: the same grey, stated here
        return MASKED_FALLBACK


def _as_float(x) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype.kind == "c":
        x = np.abs(x)
    return x.astype(float)


def _slice_of(shape: tuple) -> tuple[tuple, str]:
    """Index of the first 2-D slice (0 on the leading axes) and how to write it."""
    lead = (0,) * (len(shape) - 2)
    return lead, "[" + ", ".join([*map(str, lead), ":", ":"]) + "]"


def _nonfinite_note(x: np.ndarray) -> str:
    nan, inf = int(np.isnan(x).sum()), int(np.isinf(x).sum())
    parts = [f"{_count(n)} {what}" for n, what in ((nan, "NaN"), (inf, "inf")) if n]
    return f"\n({', '.join(parts)}: magenta)" if parts else ""


def _count(n: int) -> str:
    """A count of cells, short enough for a title: 435, 12.3k, 1.05M."""
    if n < 10_000:
        return str(n)
    return f"{n / 1e3:.3g}k" if n < 999_500 else f"{n / 1e6:.3g}M"  # not "1e+03k"


def _ticks(ax, rows: int, cols: int) -> None:
    if cols <= 16:
        ax.set_xticks(range(cols))
    if rows <= 16:
        ax.set_yticks(range(rows))


def _hatch(ax, cells: np.ndarray, fill: str | None):
    """Hatch ``cells`` (boolean, 2-D); fill them with ``fill`` (None: outline only)."""
    # lazy: matplotlib (0.5 s) only when a figure is drawn, as in ``difference_figure``
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Rectangle

    rects = [Rectangle((j - 0.5, i - 0.5), 1, 1) for i, j in zip(*np.nonzero(cells))]
    if not rects:
        return None
    patches = PatchCollection(rects, facecolor=fill or "none", edgecolor="#707070",
                              hatch="///", linewidth=0, zorder=2)
    patches.set_gid("masked")
    ax.add_collection(patches)
    return patches


def difference_figure(name, got, want, axis_names=None, mask=None, title=None,
                      rtol: float = 1e-5, atol: float = 1e-7):
    """Three heatmaps of output ``name``: the learner's, the expected one, and got − want.

    ``got``, ``want``: arrays of the same shape, ndim >= 2 (for ndim > 2 the first 2-D slice,
    index 0 on the leading axes, is drawn and the title says which). ``axis_names``: labels of
    the rows and columns; default from the course glossary (``axis_names_for``). ``mask``:
    the case's boolean mask, True where a query may attend, broadcastable to ``want``: cells
    where it is False are hatched, and grey where the value is what the mask forces (always in
    the expected panel). ``rtol``, ``atol``: the exercise's tolerance; cells beyond it get a
    dot in the difference panel. Each panel has its colour bar (yours and expected share one
    scale). Returns the matplotlib Figure (the caller shows and closes it), or None when the
    shapes differ or the output is not a matrix.
    """
    # lazy: matplotlib (0.5 s), only when a check has a matrix to draw
    import matplotlib
    from matplotlib.figure import Figure

    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or want.ndim < 2:
        return None
    lead, where = _slice_of(want.shape)
    g, w = _as_float(got[lead]), _as_float(want[lead])
    rows, cols = w.shape
    hidden = None
    if mask is not None:
        try:
            hidden = ~np.broadcast_to(np.asarray(mask, dtype=bool), want.shape)[lead]
        except ValueError:  # the mask does not lay over this output
            hidden = None
    with np.errstate(all="ignore"):
        close = np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
        diff = g - w
    diff = np.where(close & ~np.isfinite(w), 0.0, diff)  # the same inf (or NaN) on both sides
    beyond = ~close

    finite = np.concatenate([g[np.isfinite(g)], w[np.isfinite(w)]])
    vmin, vmax = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if vmin == vmax:
        vmin, vmax = vmin - 0.5, vmax + 0.5
    finite_diff = np.abs(diff[np.isfinite(diff)])
    span = float(finite_diff.max()) if finite_diff.size and finite_diff.max() > 0 else 1.0

    values = matplotlib.colormaps["viridis"].with_extremes(bad=NONFINITE_COLOR)
    diverging = matplotlib.colormaps["RdBu_r"].with_extremes(bad=NONFINITE_COLOR)
    rows_name, cols_name = axis_names or axis_names_for(name)
    ratio = cols / max(rows, 1)
    aspect = "equal" if 0.25 <= ratio <= 4 else "auto"
    fig = Figure(figsize=(12 if ratio <= 1.5 else 15, 4.0), layout="constrained")
    axes = fig.subplots(1, 3)
    grey = _masked_color()

    shown = f"{name}{where}" if want.ndim > 2 else name
    panels = ((g, f"your {shown}" + _nonfinite_note(g), values, vmin, vmax),
              (w, f"expected {shown}" + _nonfinite_note(w), values, vmin, vmax),
              (diff, "difference (yours − expected)", diverging, -span, span))
    images = []
    for k, (ax, (data, label, cmap, lo, hi)) in enumerate(zip(axes, panels)):
        im = ax.imshow(np.ma.masked_invalid(data), cmap=cmap, vmin=lo, vmax=hi,
                       interpolation="nearest", aspect=aspect)
        images.append(im)
        ax.set_title(label, fontsize=10)
        ax.set_xlabel(cols_name)
        ax.set_ylabel(rows_name)
        _ticks(ax, rows, cols)
        if hidden is not None and hidden.any():
            # expected: grey and hatched, as plot_attention draws masked weights; yours: grey
            # only where it agrees with the expected value, so a weight the mask should have
            # removed keeps its colour under the hatching; difference: hatching only
            fill_cells = {0: hidden & close, 1: hidden, 2: None}[k]
            if fill_cells is not None:
                _hatch(ax, fill_cells, grey)
                _hatch(ax, hidden & ~fill_cells, None)
            else:
                _hatch(ax, hidden, None)
    if beyond.any():
        i, j = np.nonzero(beyond)
        axes[2].scatter(j, i, s=max(8.0, 150.0 / max(rows, cols)), c=MARK_COLOR, marker="o",
                        edgecolors="white", linewidths=0.5, zorder=3, gid="beyond tolerance")
    axes[2].set_title(f"difference (yours − expected)\n• beyond tolerance: {_count(int(beyond.sum()))} "
                      f"of {_count(beyond.size)}", fontsize=10)
    scale = f"{name} (1 = True, 0 = False)" if want.dtype == bool else name
    for ax, im, label in zip(axes, images, (scale, scale, "yours − expected")):
        fig.colorbar(im, ax=ax, shrink=0.85, label=label)  # yours and expected: the same scale

    heading = title or f"{name}: where yours differs"
    if want.ndim > 2:
        heading += f"\nfirst slice {name}{where} of shape {want.shape}"
    if hidden is not None and hidden.any():
        heading += "   (grey, hatched: masked)"
    fig.suptitle(heading, fontsize=11)
    return fig


def failing_matrices(ex, results: list, wants: list):
    """(case number, counted from 1, and output index) of each case whose outcome in ``results``
    has a wrong matrix of the expected shape (``wants``: the reference's outputs), in order; of
    a case with several, its first."""
    for number, (got, want) in enumerate(zip(results, wants), start=1):
        if not isinstance(got, tuple) or len(got) != len(want):
            continue  # it raised, or ran out of memory: no output to draw
        for i, ok in enumerate(close_per_output(ex, got, want)):
            if not ok and np.ndim(want[i]) >= 2 and np.shape(got[i]) == np.shape(want[i]):
                yield number, i
                break


def case_figure(ex, number: int, case: dict, got: tuple, want: tuple, i: int):
    """``difference_figure`` of output ``i`` of public case ``number`` of exercise ``ex``."""
    name = ex.name_of(i)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return difference_figure(name, got[i], want[i], axis_names=axis_names_for(name, ex),
                                 mask=case.get("mask") if name in MASKABLE else None,
                                 title=f"{ex.function}, public case {number}: {name}",
                                 rtol=ex.rtol, atol=ex.atol)


def show_first_failure(ex, cases: list, results: list) -> None:
    """In a notebook, draw the first public case whose output is a wrong matrix of the right
    shape (``difference_figure``); elsewhere (plain Python, a terminal) nothing. Only a
    picture: the check cell's text is the verdict, so a failure here stays silent."""
    try:
        from IPython import get_ipython  # lazy: IPython (0.1 s outside a kernel) only to find one
        shell = get_ipython()
        if shell is None or not hasattr(shell, "kernel"):
            return  # no display: the text alone
        from IPython.display import display  # lazy: as above

        wants = [as_outputs(ex.reference(**copy.deepcopy(case))) for case in cases]
        for number, i in failing_matrices(ex, results, wants):
            fig = case_figure(ex, number, cases[number - 1], results[number - 1], wants[number - 1], i)
            if fig is not None:
                display(fig)
            return
    except Exception:
        pass
