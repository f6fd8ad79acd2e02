"""course_lib.viz: the toy heads do what they claim; plots carry colour bars, labels and masks;
the explorer builds and updates."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from course_lib import viz  # noqa: E402
from course_lib.attention import causal_mask  # noqa: E402


def test_toy_examples_show_the_advertised_heads():
    examples = viz.toy_attention_examples()
    assert set(examples) == {"self", "causal", "cross"}
    for A, q_tokens, k_tokens, *_ in examples.values():
        assert A.shape == (2, len(q_tokens), len(k_tokens))
        assert np.allclose(A.sum(-1), 1.0)
    A_self, words, *_ = examples["self"]
    assert A_self[1, 3].argmax() == 2  # head 1: the previous token
    assert np.allclose(A_self[0, 0, [0, 4]].sum(), A_self[0, 0].max() * 2)  # "the" finds both "the"s
    A_causal = examples["causal"][0]
    assert np.allclose(np.triu(A_causal, 1), 0.0) and A_causal[0, 0, 0] == 1.0
    A_cross, german, english, *_ = examples["cross"]
    assert german.index("der") == 4 and A_cross[1, 4].argmax() == 4  # head 1: same position
    assert {english[j] for j in np.argsort(A_cross[0, 4])[-2:]} == {"the"}  # head 0: meaning


def test_plots_draw_without_error():
    A, q, k, *_ = viz.toy_attention_examples()["cross"]
    fig = viz.plot_heads(A, q, k, title="cross")
    assert len(fig.axes) == 3  # two heads and their colour bar
    im = viz.plot_attention(A[0], q, k, highlight=2)
    assert im.get_array().shape == A[0].shape


def test_explorer_keeps_head_and_query_in_range_for_each_example():
    examples = viz.toy_attention_examples()
    examples["one head"] = (examples["cross"][0][:1, :3], ["a", "b", "c"], examples["cross"][2])
    ex = viz.attention_explorer(examples)
    ex.kind = "cross"
    ex.head, ex.query = 1, 4
    assert (ex.current.shape[1], ex.current.shape[2]) == (2, 6)
    ex.kind = "one head"  # one head and three queries: both are clamped into range
    assert ex.head == 0 and ex.query <= 2

def test_heatmaps_have_a_colour_bar_and_draw_masked_cells_apart():
    A, q, k, *_ = viz.toy_attention_examples()["causal"]
    mask = causal_mask(len(q))
    fig, ax = plt.subplots()
    im = viz.plot_attention(A[0], q, k, ax, mask=mask)
    assert im.colorbar is not None and im.colorbar.ax.get_ylabel() == "attention weight"
    shown = im.get_array()
    assert np.array_equal(np.ma.getmaskarray(shown), ~mask)  # masked cells are 'bad' ...
    bad = im.cmap(np.ma.masked_invalid([np.nan]))[0]
    assert np.allclose(bad, matplotlib.colors.to_rgba(viz.MASKED_COLOR))  # ... and drawn grey
    assert not np.allclose(im.cmap(0.0), bad)  # a zero weight looks different from a masked cell
    hatched = [p for p in ax.patches if p.get_hatch()]
    assert len(hatched) == (~mask).sum()
    assert "masked" in ax.get_xlabel()
    plt.close(fig)
    # without a mask nothing is greyed out, and small weights stay colours of the map
    fig, ax = plt.subplots()
    im = viz.plot_attention(A[0], q, k, ax)
    assert not np.ma.getmaskarray(im.get_array()).any() and ax.get_xlabel() == "key"
    plt.close(fig)


def test_plot_heads_has_one_shared_colour_bar():
    A, q, k, *_ = viz.toy_attention_examples()["cross"]
    fig = viz.plot_heads(A, q, k, mask=np.ones((len(q), len(k)), bool))
    bars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert len(bars) == 1 and len(fig.axes) == 3
    plt.close(fig)


def test_explorer_bar_chart_has_axis_labels_and_shows_masks():
    examples = viz.toy_attention_examples()
    box = viz.attention_explorer(examples, masks={"causal": causal_mask(6)})
    assert box is not None  # drawing happens in the Output widget; check the figure directly:
    A, q, k, *_ = examples["causal"]
    fig, ax = plt.subplots()
    im = viz.plot_attention(A[0], q, k, ax, mask=causal_mask(6), colorbar=False)
    assert im.colorbar is None and np.ma.getmaskarray(im.get_array()).sum() == 15
    plt.close(fig)


def test_positional_encoding_plot_labels_its_columns():
    from course_lib.positional import sinusoidal_encoding

    P = sinusoidal_encoding(np.arange(1, 101), 64)
    fig = viz.plot_positional_encoding(P, dims=(8, 17))
    (colorbar,) = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    heat, curves = [ax for ax in fig.axes if ax is not colorbar]
    assert heat.images and colorbar.get_ylabel() == "P[t, i]"
    labels = [line.get_label() for line in curves.get_lines()]
    assert labels == ["i = 8 (sin, period 20)", "i = 17 (cos, period 63)"]
    assert curves.get_xlabel() == "position t" and curves.get_ylabel() == "P[t, i]"
    assert np.allclose(curves.get_lines()[1].get_ydata(), P[:, 17])
    plt.close(fig)


def test_depth_profile_plots_every_model_and_kind():
    norms = {"post-LN": {"attention": [1, 2, 3], "ffn": [2, 3, 4]},
             "pre-LN": {"attention": [1, 1, 1], "ffn": [1, 1, 0.5]}}
    fig = viz.plot_depth_profile(norms)
    assert [ax.get_title() for ax in fig.axes] == ["attention weights", "ffn weights"]
    assert fig.axes[0].get_ylabel() == "gradient norm at initialisation"
    assert all(ax.get_xlabel() == "layer (1 = next to the input)" for ax in fig.axes)
    assert list(fig.axes[1].get_lines()[0].get_ydata()) == [2, 3, 4]
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["post-LN", "pre-LN"]
    plt.close(fig)


def test_results_bar_chart_has_axis_labels():
    from course_lib.train import plot_results

    fig = plot_results({"1-gram": {"bpc": 4.0}, "LSTM": {"bpc": 2.0}})
    ax = fig.axes[0]
    assert ax.get_xlabel() == "model" and ax.get_ylabel() == "validation bits per character"
    plt.close(fig)


def test_live_plot_redraws_one_figure_in_place():
    """In an IPython session: the first update displays a figure, later ones update the same
    output with the longer curves; outside IPython it draws nothing."""
    from IPython.core.interactiveshell import InteractiveShell

    from course_lib.viz import LivePlot

    outside = LivePlot({"loss": ["train"]})
    outside.update({"step": [1], "train": [2.0]})
    assert outside.fig is None
    InteractiveShell.instance()
    try:
        live = LivePlot({"loss": ["train", "val"], "accuracy": ["acc"]})
        history = {"step": [1], "train": [2.0], "val": [2.5], "acc": [0.1]}
        live.update(history)
        first_handle = live.handle
        history = {"step": [1, 2, 3], "train": [2.0, 1.5, 1.2], "val": [2.5, 2.0, 1.8],
                   "acc": [0.1, 0.4, 0.6]}
        live.update(history)
        assert live.handle is first_handle and first_handle is not None
        loss_ax, acc_ax = live.axes
        assert [list(line.get_ydata()) for line in loss_ax.lines] == [[2.0, 1.5, 1.2], [2.5, 2.0, 1.8]]
        assert list(acc_ax.lines[0].get_xdata()) == [1, 2, 3]
        assert acc_ax.get_ylabel() == "accuracy"
    finally:
        InteractiveShell.clear_instance()


def test_toy_examples_carry_the_queries_and_keys_behind_their_weights():
    """The query-key view of notebook 02's hand-set heads rebuilds exactly their weights."""
    from course_lib.explorer.static import query_key

    ex = viz.attention_explorer(viz.toy_attention_examples(), masks={"causal": causal_mask(6)})
    for kind, m in ex.maps.items():
        for head in range(2):
            for query in range(6):
                _, _, weights = query_key(m, 0, head, query)
                np.testing.assert_allclose(weights, m.weights[0, head, query], atol=1e-6, err_msg=kind)


def test_dice_name_every_face_a_space_as_a_visible_blank():
    """Notebook 06's five dice: the likeliest face of Shakespeare's next character is often a
    space, whose tick was blank; token_names shows it as ␣ (and a new line as ⏎)."""
    from course_lib.explorer import token_names
    from course_lib.tokenize import CharTokenizer

    tokenizer = CharTokenizer.from_text("ab c\nd")
    chance = {" ": 0.4, "\n": 0.2, "c": 0.15, "a": 0.11, "b": 0.09, "d": 0.05}
    p = np.array([chance[tokenizer.decode([i])] for i in range(tokenizer.vocab_size)])
    dice = {"temperature 1": p, "top-k 2": np.where(p >= np.sort(p)[-2], p, 0) / np.sort(p)[-2:].sum()}
    fig, ax = plt.subplots()
    viz.plot_dice(dice, token_names(tokenizer, range(tokenizer.vocab_size)), n_faces=4, ax=ax)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["␣", "⏎", "c", "a"]
    assert [len(c) for c in ax.containers] == [4, 4]  # four faces, one bar per die
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["temperature 1 (6 faces kept)",
                                                                 "top-k 2 (2 faces kept)"]
    plt.close(fig)


def test_alignment_and_cross_attention_are_drawn_on_the_same_rows():
    """Notebook 05 §10: the hand-made alignment has a row per target token (10); the head's
    weights have one more, the query that predicts </s> (11). Row t of both is target token t."""
    target, source = list("1994-03-21"), ["Mon", " 2", "1", " Mar", " 9", "4"]
    alignment = np.full((len(target), len(source)), 1 / len(source))
    rng = np.random.default_rng(0)
    A = rng.dirichlet(np.ones(len(source)), size=len(target) + 1)  # (11, 6): the target, then </s>
    fig = viz.plot_alignment(alignment, A, target, source, predicted=target + ["</s>"], title="head")
    left, right = fig.axes[:2]
    rows = [ax.images[0].get_array().shape[0] for ax in (left, right)]
    assert rows == [len(target), len(target)]
    assert np.allclose(right.images[0].get_array(), A[:len(target)])
    labels = [[t.get_text() for t in ax.get_yticklabels()] for ax in (left, right)]
    assert labels[1] == [f"→{t}" for t in labels[0]] and labels[0] == target
    short = viz.plot_alignment(alignment, A[:7], target, source)  # an output that stopped early
    drawn = short.axes[1].images[0].get_array()
    assert drawn.shape == alignment.shape and np.ma.getmaskarray(drawn)[7:].all()
    assert [t.get_text() for t in short.axes[1].get_yticklabels()][7:] == ["(no query)"] * 3
    plt.close("all")
