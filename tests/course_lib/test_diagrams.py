"""course_lib.diagrams: every figure carries the labels and shapes it teaches and renders to PNG."""
import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from course_lib import diagrams  # noqa: E402
from course_lib.attention import causal_mask, padding_mask  # noqa: E402


def texts(fig):
    """Every string drawn on the figure: text artists, titles, axis labels, legend entries."""
    found = [t.get_text() for t in fig.findobj(matplotlib.text.Text)]
    return "\n".join(found)


EXPECTED = {
    "attention_computation": ["Q", "(T_q, d_k)", "Kᵀ", "(d_k, T_k)", "V", "(T_k, d_v)",
                              "S = QKᵀ / √d_k", "(T_q, T_k)", "S + M", "−∞", "softmax over",
                              "out = A V", "(T_q, d_v)"],
    "masks": ["causal_mask(T)", "padding_mask([3], T)", "causal & padding", "query i", "key j",
              "True: may attend", "False"],
    "multi_head": ["(B, T, d_model)", "(B, T, n_heads, d_k)", "(B, n_heads, T, d_k)", "split_heads",
                   "swapaxes(1, 2)", "reshape", "attention_forward", "Concat(head_1, …, head_n_heads)",
                   "@ W_o"],
    "residual_blocks": ["Post-LN", "y = LN(x + F(x))", "Pre-LN", "y = x + F(LN(x))", "LayerNorm",
                        "(B, T, d_model)"],
    "encoder_decoder": ["encoder", "decoder", "n_layers ×", "masked multi-head", "cross-attention",
                        "K, V", "(B, T_src, d_model)", "vocab_size", "Add & Norm"],
    "flash_tiles": ["S = QKᵀ / √d_k", "block_q × block_k", "query i", "key j", "−∞",
                    "lse = m + log l", "visited: every key visible", "skipped: wholly in the future"],
    "gpt": ["token ids (B, T)", "masked multi-head self-attention", "final LayerNorm",
            "(B, T, vocab_size)", "n_layers ×", "no cross-attention", "d_model → vocab_size"],
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_diagram_shows_its_labels_and_renders(name):
    fig = getattr(diagrams, name)()
    drawn = texts(fig)
    missing = [label for label in EXPECTED[name] if label not in drawn]
    assert not missing, f"{name} lacks {missing}"
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    assert buffer.getvalue()[:8] == b"\x89PNG\r\n\x1a\n" and len(buffer.getvalue()) > 10_000
    plt.close(fig)


def test_multi_head_names_no_function_notebook_02_does_not_show():
    """Notebook 02 writes the merge as swapaxes and reshape inside multi_head_attention;
    course_lib's merge_heads is first met in notebook 06."""
    fig = diagrams.multi_head()
    assert "merge_heads" not in texts(fig)
    plt.close(fig)


def test_every_diagram_is_tested():
    public = {n for n in diagrams.__dict__ if not n.startswith("_") and callable(getattr(diagrams, n))
              and getattr(getattr(diagrams, n), "__module__", "") == diagrams.__name__}
    assert public == set(EXPECTED)


def test_mask_grids_are_the_course_masks():
    T, length = 6, 4
    fig = diagrams.masks(T=T, length=length)
    grids = [ax.images[0].get_array() for ax in fig.axes if ax.images]
    causal = causal_mask(T)
    padding = np.broadcast_to(padding_mask([length], T)[0], (T, T))
    for grid, expected in zip(grids, (causal, padding, causal & padding)):
        assert np.array_equal(np.asarray(grid, dtype=bool), expected)
    assert len(grids) == 3
    # the cell letters agree with the colours: "T" where the mask is True
    letters = [t.get_text() for t in fig.axes[0].texts]
    assert letters == ["T" if v else "F" for v in causal.ravel()]
    plt.close(fig)


def test_attention_diagram_greys_exactly_the_masked_scores():
    T_q, T_k = 3, 5
    fig = diagrams.attention_computation(T_q=T_q, T_k=T_k)
    n_minus_inf = sum(t.get_text() == "−∞" for t in fig.axes[0].texts)
    assert n_minus_inf == (~causal_mask(T_q, T_k)).sum()
    plt.close(fig)


def test_multi_head_draws_one_colour_per_head():
    fig = diagrams.multi_head(n_heads=3)
    colours = {tuple(p.get_facecolor()) for p in fig.axes[0].patches
               if isinstance(p, matplotlib.patches.Rectangle) and p.get_fill()}
    head_colours = {matplotlib.colors.to_rgba(c) for c in diagrams.HEAD_COLORS[:3]}
    assert head_colours <= colours
    assert matplotlib.colors.to_rgba(diagrams.HEAD_COLORS[3]) not in colours
    assert "n_heads = 3" in texts(fig)
    plt.close(fig)


@pytest.mark.parametrize("T_q,T_k,block_q,block_k", [(12, 12, 4, 4), (6, 10, 4, 4), (7, 3, 4, 2), (5, 9, 2, 4)])
def test_flash_tiles_visits_the_tiles_the_reference_visits(T_q, T_k, block_q, block_k):
    from course_lib.flash.reference import _key_blocks

    kinds = diagrams._tile_kinds(T_q, T_k, block_q, block_k)
    for i, q0 in enumerate(range(0, T_q, block_q)):
        rows = min(block_q, T_q - q0)
        visited = {k0 // block_k for k0 in _key_blocks(q0, rows, T_q, T_k, block_k, True)}
        assert visited == {j for j in range(kinds.shape[1]) if kinds[i, j] != "skipped"}
    fig = diagrams.flash_tiles(T_q, T_k, block_q, block_k)
    numbers = [t.get_text() for t in fig.axes[0].texts if t.get_text().isdigit()]
    assert numbers == [str(n) for n in range(1, (kinds != "skipped").sum() + 1)]
    plt.close(fig)
