"""course_lib.viz: the toy heads do what they claim; plots and the explorer build and update."""
import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402

from course_lib import viz  # noqa: E402


def test_toy_examples_show_the_advertised_heads():
    examples = viz.toy_attention_examples()
    assert set(examples) == {"self", "causal", "cross"}
    for A, q_tokens, k_tokens in examples.values():
        assert A.shape == (2, len(q_tokens), len(k_tokens))
        assert np.allclose(A.sum(-1), 1.0)
    A_self, words, _ = examples["self"]
    assert A_self[1, 3].argmax() == 2  # head 1: the previous token
    assert np.allclose(A_self[0, 0, [0, 4]].sum(), A_self[0, 0].max() * 2)  # "the" finds both "the"s
    A_causal = examples["causal"][0]
    assert np.allclose(np.triu(A_causal, 1), 0.0) and A_causal[0, 0, 0] == 1.0
    A_cross, german, english = examples["cross"]
    assert german.index("der") == 4 and A_cross[1, 4].argmax() == 4  # head 1: same position
    assert {english[j] for j in np.argsort(A_cross[0, 4])[-2:]} == {"the"}  # head 0: meaning


def test_plots_draw_without_error():
    A, q, k = viz.toy_attention_examples()["cross"]
    fig = viz.plot_heads(A, q, k, title="cross")
    assert len(fig.axes) == 2
    im = viz.plot_attention(A[0], q, k, highlight=2)
    assert im.get_array().shape == A[0].shape


def test_explorer_updates_its_sliders_for_each_example():
    examples = viz.toy_attention_examples()
    examples["one head"] = (examples["cross"][0][:1, :3], ["a", "b", "c"], examples["cross"][2])
    box = viz.attention_explorer(examples)
    kind, (head, query), out = box.children[0], box.children[1].children, box.children[2]
    assert (head.max, query.max) == (1, 5)
    kind.value = "one head"
    assert (head.max, query.max) == (0, 2)
    kind.value = "cross"
    head.value, query.value = 1, 4
    assert (head.max, query.max) == (1, 5)
