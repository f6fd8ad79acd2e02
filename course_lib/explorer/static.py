"""The explorer's current picture drawn by matplotlib, for places where widgets cannot run
(the autograder's feedback report, a terminal, a saved notebook without widget state).

One figure per view, for the explorer's selection: the head view as the heatmap of the
selected layer and head (or the mean of the heads) with the query's row outlined and its
weights as bars; the model view as one image of all layers x heads; the query-key view as
the products q_i * k_j, their sums and the softmax. Figures are made without pyplot, so
they appear only where they are displayed or saved.
"""
from __future__ import annotations

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from course_lib.style import MASKED_COLOR

MAX_TICKS = 48  # more tokens than this: label every n-th position only
TILE = 48  # pixels per layer/head heatmap in the model view


def _ticks(ax, axis, tokens):
    """Every token's name when there are few; else positions 0, 10, 20, ... (or 100, ...)."""
    step = 1 if len(tokens) <= MAX_TICKS else 10 ** int(np.log10(len(tokens) / 5))
    positions = range(0, len(tokens), step)
    names = [tokens[i] if step == 1 else str(i) for i in positions]
    if axis == "x":
        ax.set_xticks(positions, names, rotation=60 if step == 1 else 0, fontsize=8)
    else:
        ax.set_yticks(positions, names, fontsize=8)


def _heatmap(ax, A, mask, query_tokens, key_tokens, highlight=None):
    """Weights A (T_q, T_k), masked cells grey; returns the image."""
    cmap = matplotlib.colormaps["viridis"].with_extremes(bad=MASKED_COLOR)
    shown = A if mask is None else np.ma.masked_array(A, mask=~mask)
    im = ax.imshow(shown, cmap=cmap, vmin=0.0, vmax=1.0, interpolation="nearest", aspect="auto")
    _ticks(ax, "x", key_tokens)
    _ticks(ax, "y", query_tokens)
    ax.set_xlabel("key" + ("   (grey: masked)" if mask is not None and not mask.all() else ""))
    ax.set_ylabel("query")
    if highlight is not None:
        ax.add_patch(Rectangle((-0.5, highlight - 0.5), A.shape[1], 1, fill=False,
                               edgecolor="red", linewidth=2))
    return im


def _head_view(fig, ex, m):
    A = m.weights[ex.layer].mean(0) if ex.head < 0 else m.weights[ex.layer, ex.head]
    left, right = fig.subplots(1, 2, width_ratios=[1.2, 1])
    im = _heatmap(left, A, m.mask, m.query_tokens, m.key_tokens, highlight=ex.query)
    fig.colorbar(im, ax=left, fraction=0.046, pad=0.04, label="attention weight")
    head = "mean of the heads" if ex.head < 0 else f"head {ex.head}"
    left.set_title(f"{m.title or ex.kind}, layer {ex.layer + 1}, {head}")
    if A.shape[1] <= MAX_TICKS:
        right.bar(range(A.shape[1]), A[ex.query])
    else:  # bars thinner than a pixel would vanish
        right.vlines(range(A.shape[1]), 0, A[ex.query], linewidth=1)
    _ticks(right, "x", m.key_tokens)
    right.set(ylim=(0, 1), xlabel="key", ylabel="attention weight",
              title=f"weights of query {ex.query} '{m.query_tokens[ex.query]}'")


def _tiles(m, size=TILE):
    """All (layer, head) maps as one image: each reduced to at most size x size cells by the
    largest weight of each block (sharp heads stay visible), NaN between tiles and where masked."""
    L, H, T_q, T_k = m.shape
    rows, cols = np.arange(T_q) * min(T_q, size) // T_q, np.arange(T_k) * min(T_k, size) // T_k
    n, k = rows[-1] + 1, cols[-1] + 1
    image = np.full((L * (n + 1) - 1, H * (k + 1) - 1), np.nan)
    open_ = None
    if m.mask is not None:
        open_ = np.zeros((n, k))
        np.add.at(open_, (rows[:, None], cols[None, :]), m.mask)
    for layer in range(L):
        for head in range(H):
            tile = np.zeros((n, k))
            np.maximum.at(tile, (rows[:, None], cols[None, :]), m.weights[layer, head])
            if open_ is not None:
                tile[open_ == 0] = np.nan
            image[layer * (n + 1):layer * (n + 1) + n, head * (k + 1):head * (k + 1) + k] = tile
    return image, n, k


def _model_view(fig, ex, m):
    L, H = m.shape[:2]
    image, n, k = _tiles(m)
    ax = fig.subplots()
    cmap = matplotlib.colormaps["viridis"].with_extremes(bad="white")
    im = ax.imshow(np.ma.masked_invalid(image), cmap=cmap, vmin=0, vmax=1, interpolation="nearest")
    ax.set_xticks([h * (k + 1) + (k - 1) / 2 for h in range(H)], [f"head {h}" for h in range(H)], fontsize=8)
    ax.set_yticks([layer * (n + 1) + (n - 1) / 2 for layer in range(L)],
                  [f"layer {layer + 1}" for layer in range(L)], fontsize=8)
    for head in (range(H) if ex.head < 0 else [ex.head]):
        ax.add_patch(Rectangle((head * (k + 1) - 0.5, ex.layer * (n + 1) - 0.5), k, n, fill=False,
                               edgecolor="red", linewidth=2))
    ax.set_title(f"{m.title or ex.kind}: every layer and head (query rows, key columns)")
    fig.colorbar(im, ax=ax, fraction=0.03, pad=0.02, label="attention weight (largest in each block)")


def query_key(m, layer, head, query):
    """Products q_i * k_j (T_k, d_k), scores s_j = q_i . k_j / sqrt(d_k) (-inf where masked)
    and weights softmax(s) (T_k,) of one head and query: the formula of notebook 02."""
    q, k = m.q[layer, head, query].astype(np.float64), m.k[layer, head].astype(np.float64)
    products = q * k  # (T_k, d_k)
    scores = products.sum(-1) / np.sqrt(q.shape[-1])
    if m.mask is not None:
        scores = np.where(m.mask[query], scores, -np.inf)
    weights = np.exp(scores - scores.max())
    return products, scores, weights / weights.sum()


def _query_key_view(fig, ex, m):
    head = max(ex.head, 0)
    products, scores, weights = query_key(m, ex.layer, head, ex.query)
    left, middle, right = fig.subplots(1, 3, sharey=True, width_ratios=[2, 1, 1])
    limit = np.abs(products).max() or 1.0
    im = left.imshow(products, cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto", interpolation="nearest")
    fig.colorbar(im, ax=left, fraction=0.046, pad=0.04, label="q_i * k_j (per dimension)")
    _ticks(left, "y", m.key_tokens)
    left.set(xlabel="dimension of q and k", ylabel="key",
             title=f"query {ex.query} '{m.query_tokens[ex.query]}', layer {ex.layer + 1}, head {head}")
    keys = np.arange(len(scores))
    finite = np.isfinite(scores)
    middle.barh(keys[finite], scores[finite], color=np.where(scores[finite] >= 0, "C3", "C0"))
    middle.set(xlabel="s_j = sum / sqrt(d_k)", title="scores")
    right.barh(keys, weights)
    right.set(xlim=(0, 1), xlabel="softmax(s)_j", title="weights")


def figure(ex, view: str) -> Figure:
    """The explorer ``ex``'s picture for ``view`` ("head", "model" or "qk")."""
    m = ex.current
    L, H, T_q, T_k = m.shape
    if view == "model":
        fig = Figure(figsize=(min(2 + 1.3 * H, 16), min(1 + 1.3 * L, 16)), layout="constrained")
        _model_view(fig, ex, m)
    elif view == "qk" and m.q is not None:
        fig = Figure(figsize=(12, min(2.5 + 0.22 * T_k, 12)), layout="constrained")
        _query_key_view(fig, ex, m)
    else:
        fig = Figure(figsize=(12, min(3 + 0.25 * max(T_q, T_k), 8)), layout="constrained")
        _head_view(fig, ex, m)
    fig.suptitle("attention explorer (a static picture: run the notebook in JupyterLab to explore)",
                 fontsize=9, color="#555")
    return fig
