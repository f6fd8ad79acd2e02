"""The check cell's picture: yours, expected and the difference, for a wrong matrix output."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import PatchCollection, PathCollection  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from autograder.check_cell import check  # noqa: E402
from autograder.exercises import get  # noqa: E402
from autograder.picture import axis_names_for, difference_figure  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _softmax(S):
    e = np.exp(S - S.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _causal_weights(T=5, seed=0):
    S = np.random.default_rng(seed).normal(size=(T, T))
    mask = np.tril(np.ones((T, T), dtype=bool))
    return _softmax(np.where(mask, S, -np.inf)), mask


def _marked(ax):
    """(row, column) of the cells dotted as beyond tolerance."""
    dots = [c for c in ax.collections if isinstance(c, PathCollection) and c.get_gid() == "beyond tolerance"]
    if not dots:
        return set()
    return {(int(round(y)), int(round(x))) for x, y in dots[0].get_offsets()}


def _hatched(ax):
    """(row, column) of the cells hatched as masked (filled grey or outlined)."""
    cells = set()
    for c in ax.collections:
        if isinstance(c, PatchCollection) and c.get_gid() == "masked":
            for path in c.get_paths():
                x, y = path.vertices[:4].mean(axis=0)
                cells.add((int(round(y)), int(round(x))))
    return cells


def test_transposed_attention_matrix_shows_yours_expected_and_the_difference():
    want, _ = _causal_weights()
    got = want.T.copy()
    fig = difference_figure("A", got, want, rtol=1e-5, atol=1e-7)
    assert isinstance(fig, Figure)
    panels = [ax for ax in fig.axes if ax.get_images()]
    assert len(panels) == 3
    titles = [ax.get_title() for ax in panels]
    assert titles[0].startswith("your A") and titles[1].startswith("expected A")
    assert titles[2].startswith("difference (yours − expected)")
    assert panels[0].get_xlabel() == "T_k (keys)" and panels[0].get_ylabel() == "T_q (queries)"
    diff = panels[2].get_images()[0].get_array()
    np.testing.assert_allclose(np.ma.getdata(diff), got - want)
    assert panels[2].get_images()[0].norm.vmin == -panels[2].get_images()[0].norm.vmax  # centred at 0
    yours, expected = (ax.get_images()[0].norm for ax in panels[:2])
    assert (yours.vmin, yours.vmax) == (expected.vmin, expected.vmax)  # one colour scale
    beyond = ~np.isclose(got, want, rtol=1e-5, atol=1e-7)
    assert _marked(panels[2]) == set(zip(*map(lambda a: a.tolist(), np.nonzero(beyond))))
    assert _marked(panels[2])  # a transpose is wrong somewhere
    # a tiny error inside the tolerance is not marked
    fig = difference_figure("A", want + 1e-9, want, rtol=1e-5, atol=1e-7)
    assert _marked(fig.axes[2]) == set()


def test_a_4d_output_draws_its_first_slice_and_says_so():
    rng = np.random.default_rng(1)
    want = rng.random((2, 3, 4, 4))
    got = want.copy()
    got[0, 0, 1, 2] += 1.0
    got[1, 2, 0, 0] += 1.0  # not in the drawn slice
    fig = difference_figure("A", got, want)
    assert "[0, 0, :, :]" in fig.get_suptitle()
    assert "[0, 0, :, :]" in fig.axes[0].get_title()
    np.testing.assert_allclose(np.ma.getdata(fig.axes[1].get_images()[0].get_array()), want[0, 0])
    assert _marked(fig.axes[2]) == {(1, 2)}


def test_different_shapes_or_a_vector_draw_nothing():
    want, _ = _causal_weights(4)
    assert difference_figure("A", want[:3], want) is None
    assert difference_figure("s", np.ones(3), np.zeros(3)) is None


def test_masked_cells_are_hatched_and_nan_is_named():
    want, mask = _causal_weights(4)
    got = want.copy()
    got[0, 3] = 0.25          # weight on a masked key: hatched, yet keeps its colour
    got[2, 1] = np.nan
    fig = difference_figure("A", got, want, mask=mask)
    hidden = {(int(i), int(j)) for i, j in zip(*np.nonzero(~mask))}
    for ax in fig.axes[:3]:
        assert _hatched(ax) == hidden
    assert "NaN" in fig.axes[0].get_title() and "NaN" not in fig.axes[1].get_title()
    assert _marked(fig.axes[2]) == {(0, 3), (2, 1)}
    # a mask that broadcasts over leading axes
    fig = difference_figure("A", np.stack([got, got]), np.stack([want, want]), mask=mask)
    assert _hatched(fig.axes[1]) == hidden


def test_check_outside_ipython_prints_text_and_draws_nothing(capsys, monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda *a, **k: shown.append(a))
    check("warmup.softmax", {"softmax": lambda z, axis=-1: z})
    out = capsys.readouterr().out
    assert out.startswith("\u2718 softmax")
    assert shown == [] and plt.get_fignums() == []


class _FakeKernelShell:
    kernel = True


def _attention(Q, K, V, mask=None):
    S = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        S = np.where(mask, S, -np.inf)
    m = S.max(axis=-1, keepdims=True)
    e = np.exp(S - np.where(np.isfinite(m), m, 0.0))
    total = e.sum(axis=-1, keepdims=True)
    A = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return A @ V, A


def test_check_in_a_kernel_shows_one_figure_for_a_wrong_matrix(capsys, monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.get_ipython", lambda: _FakeKernelShell())
    monkeypatch.setattr("IPython.display.display", lambda obj, *a, **k: shown.append(obj))

    def transposed(Q, K, V, mask=None):
        out, A = _attention(Q, K, V, mask)
        return out, np.swapaxes(A, -1, -2)

    check("attention.forward", {"attention_forward": transposed})
    assert capsys.readouterr().out.startswith("\u2718 attention_forward")
    assert len(shown) == 1 and isinstance(shown[0], Figure)
    assert shown[0].axes[0].get_title().startswith("your A")
    assert plt.get_fignums() == []  # closed after display: not drawn a second time

    shown.clear()
    check("attention.forward", {"attention_forward": _attention})
    assert capsys.readouterr().out.startswith("\u2714 attention_forward")
    assert shown == []


def test_a_failing_picture_leaves_the_text_verdict(capsys, monkeypatch):
    import autograder.picture

    def broken(*a, **k):
        raise RuntimeError("no picture today")

    monkeypatch.setattr("IPython.get_ipython", lambda: _FakeKernelShell())
    monkeypatch.setattr(autograder.picture, "difference_figure", broken)
    check("attention.causal_mask", {"causal_mask": lambda T: np.ones((T, T), dtype=bool)})
    out = capsys.readouterr().out
    assert out.startswith("\u2718 causal_mask") and "no picture" not in out


@pytest.mark.parametrize("exercise_id, name, names", [
    ("attention.forward", "out", ("T_q (queries)", "d_v")),
    ("attention.forward", "A", ("T_q (queries)", "T_k (keys)")),          # the glossary's letter
    ("attention.backward", "dK", ("T_k (keys)", "d_k")),
    ("attention.backward_col", "dA", ("d_k", "d")),                      # a projection's gradient here
    ("gpt.forward", "logits", ("T", "vocab_size")),
    ("positional.rotation", "A", ("axis -2 (rows)", "axis -1 (columns)")),  # not attention weights
    ("layernorm.forward", "out", ("vector (a row of x)", "d_model")),    # declared: x (..., d_model)
])
def test_axes_are_named_in_the_glossarys_words(exercise_id, name, names):
    assert axis_names_for(name, get(exercise_id)) == names


def test_the_check_cells_picture_names_the_axes_of_out(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.get_ipython", lambda: _FakeKernelShell())
    monkeypatch.setattr("IPython.display.display", lambda obj, *a, **k: shown.append(obj))

    def doubled(Q, K, V, mask=None):
        out, A = _attention(Q, K, V, mask)
        return 2 * out, A

    check("attention.forward", {"attention_forward": doubled})
    (fig,) = shown
    panel = fig.axes[0]
    assert panel.get_title().startswith("your out")
    assert (panel.get_ylabel(), panel.get_xlabel()) == ("T_q (queries)", "d_v")


def test_every_panel_has_its_colour_scale():
    want, _ = _causal_weights()
    fig = difference_figure("A", want.T.copy(), want)
    images = [ax.get_images()[0] for ax in fig.axes if ax.get_images()]
    bars = [im.colorbar for im in images]
    assert len(images) == 3 and all(bar is not None for bar in bars)
    assert bars[0].mappable.norm.vmin == bars[1].mappable.norm.vmin  # yours and expected: one scale
    assert bars[0].mappable.norm.vmax == bars[1].mappable.norm.vmax


def test_a_large_count_stays_short_and_every_title_fits_its_panel():
    rng = np.random.default_rng(2)
    want = rng.random((300, 300))
    got = want + 1.0
    fig = difference_figure("S", got, want, title="attention_forward, public case 2: S")
    canvas = FigureCanvasAgg(fig)  # the figure is made without pyplot: it has no drawing canvas of its own
    canvas.draw()
    panels = [ax for ax in fig.axes if ax.get_images()]
    assert panels[2].get_title().endswith("beyond tolerance: 90k of 90k")
    renderer = canvas.get_renderer()
    for ax in panels:
        assert ax.title.get_window_extent(renderer).width <= ax.get_window_extent(renderer).width, ax.get_title()


def test_every_matrix_output_of_every_exercise_has_named_axes():
    """Where the exercise's shapes say which axis is which, the picture says it too: no exercise
    leaves a matrix output to "axis -2 / axis -1" (its declared ``axes`` or the glossary's)."""
    import copy

    from autograder.exercises import all_exercises
    from autograder.kernel.transport import as_outputs
    from autograder.picture import UNNAMED_AXES

    unnamed = []
    for ex in all_exercises():
        for case in ex.public_cases():
            for i, out in enumerate(as_outputs(ex.reference(**copy.deepcopy(case)))):
                if np.ndim(out) >= 2 and axis_names_for(ex.name_of(i), ex) == UNNAMED_AXES:
                    unnamed.append((ex.id, ex.name_of(i)))
    assert not unnamed, sorted(set(unnamed))
    assert all(set(ex.axes) <= set(ex.output_names) for ex in all_exercises())  # no name mistyped
