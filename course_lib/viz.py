"""Plots and widgets for looking at attention: heatmaps and an explorer that works offline.

The explorer is built from ipywidgets' own controls and a matplotlib figure drawn into an
``Output`` widget, so it needs no JavaScript from the network: JupyterLab ships all of it.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

from course_lib.attention import causal_mask, mha_forward


def plot_attention(A, query_tokens, key_tokens, ax=None, title=None, highlight=None):
    """Heatmap of weights A (T_q, T_k): one row per query, one column per key.

    ``highlight``: index of a query whose row is outlined. Returns the image.
    """
    ax = ax or plt.gca()
    im = ax.imshow(A, cmap="viridis", vmin=0.0, vmax=1.0)
    ax.set_xticks(range(len(key_tokens)), key_tokens, rotation=60)
    ax.set_yticks(range(len(query_tokens)), query_tokens)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    if highlight is not None:
        ax.add_patch(Rectangle((-0.5, highlight - 0.5), len(key_tokens), 1,
                               fill=False, edgecolor="red", linewidth=2))
    if title:
        ax.set_title(title)
    return im


def plot_heads(A, query_tokens, key_tokens, title=None):
    """All heads side by side. A: (n_heads, T_q, T_k)."""
    n_heads = A.shape[0]
    fig, axes = plt.subplots(1, n_heads, figsize=(3.2 * n_heads, 3.2), squeeze=False)
    for j, ax in enumerate(axes[0]):
        plot_attention(A[j], query_tokens, key_tokens, ax, title=f"head {j}")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def attention_explorer(examples):
    """An explorer over ``examples``: {name: (A (n_heads, T_q, T_k), query_tokens, key_tokens)}.

    Buttons choose the example, sliders the head and the query token; the heatmap outlines
    that query's row and a bar chart shows its weights over the keys.
    """
    import ipywidgets as widgets

    kind = widgets.ToggleButtons(options=list(examples), description="attention")
    head = widgets.IntSlider(value=0, min=0, max=0, description="head")
    query = widgets.IntSlider(value=0, min=0, max=0, description="query token")
    out = widgets.Output()

    def draw(_=None):
        A, q_tokens, k_tokens = examples[kind.value]
        head.max, query.max = A.shape[0] - 1, len(q_tokens) - 1
        weights = A[head.value, query.value]
        with out:
            out.clear_output(wait=True)
            fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
            plot_attention(A[head.value], q_tokens, k_tokens, left,
                           title=f"{kind.value}, head {head.value}", highlight=query.value)
            right.bar(range(len(k_tokens)), weights)
            right.set_xticks(range(len(k_tokens)), k_tokens, rotation=60)
            right.set_ylim(0, 1)
            right.set_title(f"weights of query '{q_tokens[query.value]}' (sum {weights.sum():.2f})")
            fig.tight_layout()
            plt.show()

    for control in (kind, head, query):
        control.observe(draw, names="value")
    draw()
    return widgets.VBox([kind, widgets.HBox([head, query]), out])


# ----------------------------------------------------------------------------- a toy example
ENGLISH = ["the", "cat", "sat", "on", "the", "mat"]
GERMAN = ["die", "Katze", "saß", "auf", "der", "Matte"]
_MEANING = {"the": 0, "cat": 1, "sat": 2, "on": 3, "mat": 4,
            "die": 0, "Katze": 1, "saß": 2, "auf": 3, "der": 0, "Matte": 4}
_HALF = 8  # d_model = 16: features 0-7 say what a word means, 8-15 where it stands


def _embed(words):
    """(1, T, 16): one-hot meaning in the first half, one-hot position in the second."""
    x = np.zeros((1, len(words), 2 * _HALF))
    for t, word in enumerate(words):
        x[0, t, _MEANING[word]] = 1.0
        x[0, t, _HALF + t] = 1.0
    return x


def toy_attention_examples(sharpness=4.0):
    """Self, causal and cross attention of two heads whose weights were set by hand.

    Head 0 matches meanings (a word finds the same word, or its translation); head 1 looks
    at positions (the previous token in self-attention, the same position in
    cross-attention). Returns {name: (A (2, T_q, T_k), query_tokens, key_tokens)}.
    """
    beta = sharpness * np.sqrt(_HALF)  # a match scores beta / sqrt(d_k) = sharpness
    identity, previous = np.eye(_HALF), np.eye(_HALF, k=-1)  # e_t @ previous = e_{t-1}
    W_k = W_v = W_o = np.eye(2 * _HALF)

    def weights(x_q, x_kv, position_map, mask=None):
        W_q = beta * np.block([[identity, np.zeros_like(identity)],
                               [np.zeros_like(identity), position_map]])
        _, cache = mha_forward(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads=2, mask=mask)
        return cache.attention.A[0]  # (2, T_q, T_k)

    en, de = _embed(ENGLISH), _embed(GERMAN)
    return {
        "self": (weights(en, en, previous), ENGLISH, ENGLISH),
        "causal": (weights(en, en, previous, causal_mask(len(ENGLISH))), ENGLISH, ENGLISH),
        "cross": (weights(de, en, identity), GERMAN, ENGLISH),
    }
