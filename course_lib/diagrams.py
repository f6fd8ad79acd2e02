"""Diagrams of the Transformer's parts, drawn by matplotlib (no image files, no network).

One function per diagram, each returning its ``Figure``:

    attention_computation   Q, K, V -> scores -> mask -> softmax over keys -> A V, with shapes
    masks                   causal and padding masks as boolean grids (queries x keys)
    multi_head              split into heads, attend per head, merge, W_o
    residual_blocks         Post-LN and Pre-LN side by side
    encoder_decoder         the 2017 Transformer: encoder stack, decoder, cross-attention
    gpt                     the decoder-only stack of GPT
    flash_tiles             the tiles of FlashAttention: visited, masked on the diagonal, skipped

Course notation: row form (a sequence is a matrix whose rows are tokens), B batch, T tokens,
d_model, n_heads, d_k = d_v = d_model / n_heads, vocab_size, T_src for a source. Every diagram is drawn on a grid of
data units (``_canvas``) from three helpers: ``_box``, ``_arrow`` and ``_matrix``.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Patch, Rectangle

from course_lib.attention import causal_mask, padding_mask

COLORS = {
    "data": "#dbe9f6",       # inputs and activations
    "attention": "#fbd9b0",
    "norm": "#fff1a6",
    "ffn": "#cdebc9",
    "output": "#e5d8f0",
    "masked": "#b0b0b0",     # also the colour of masked cells in course_lib.viz heatmaps
    "allowed": "#4c9a6a",
}
HEAD_COLORS = ["#e6735c", "#5c8ee6", "#e6c35c", "#8e5ce6"]


# ----------------------------------------------------------------------------- helpers
def _canvas(width, height, inches_per_unit=0.5):
    """A figure whose one axes spans width x height data units, with no ticks or frame."""
    fig = plt.figure(figsize=(width * inches_per_unit, height * inches_per_unit))
    ax = fig.add_axes([0, 0, 1, 1])
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig, ax


def _box(ax, x, y, w, h, text, color="white", fontsize=9, **text_kw):
    """A rounded box with lower-left corner (x, y) and centred text; returns its centre."""
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0,rounding_size=0.12",
                                facecolor=color, edgecolor="black", linewidth=1))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize, **text_kw)
    return x + w / 2, y + h / 2


def _arrow(ax, start, end, label=None, label_side="right", bend=0.0, fontsize=8, color="black"):
    """An arrow from start to end (data units), with an optional label beside its middle."""
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=11, linewidth=1.1,
                                 color=color, shrinkA=0, shrinkB=0,
                                 connectionstyle=f"arc3,rad={bend}"))
    if label:
        (x0, y0), (x1, y1) = start, end
        dx = 0.15 if label_side == "right" else -0.15
        ax.text((x0 + x1) / 2 + dx, (y0 + y1) / 2, label, fontsize=fontsize, va="center",
                ha="left" if label_side == "right" else "right", color=color)


def _plus(ax, x, y, r=0.22):
    """The residual addition: a circle with a plus sign."""
    ax.add_patch(Circle((x, y), r, facecolor="white", edgecolor="black", linewidth=1))
    ax.text(x, y, "+", ha="center", va="center", fontsize=11)


def _matrix(ax, x, y, rows, cols, name, shape, color, cell=0.45, grey=None):
    """A rows x cols grid with its top-left corner at (x, y), the name above and the shape
    below. ``grey``: boolean (rows, cols), True where a cell is drawn as masked (-inf).
    Returns (left, right, top, bottom) of the grid."""
    for i in range(rows):
        for j in range(cols):
            masked = grey is not None and grey[i, j]
            ax.add_patch(Rectangle((x + j * cell, y - (i + 1) * cell), cell, cell,
                                   facecolor=COLORS["masked"] if masked else color,
                                   edgecolor="white" if not masked else "#808080", linewidth=0.8))
            if masked:
                ax.text(x + (j + 0.5) * cell, y - (i + 0.5) * cell, "−∞", ha="center",
                        va="center", fontsize=6)
    right, bottom = x + cols * cell, y - rows * cell
    ax.add_patch(Rectangle((x, bottom), cols * cell, rows * cell, fill=False,
                           edgecolor="black", linewidth=1))
    ax.text((x + right) / 2, y + 0.15, name, ha="center", va="bottom", fontsize=10)
    ax.text((x + right) / 2, bottom - 0.15, shape, ha="center", va="top", fontsize=8)
    return x, right, y, bottom


def _operator(ax, x, y, text, fontsize=13):
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)


# ----------------------------------------------------------------------------- attention
def attention_computation(T_q=3, T_k=5, d_k=4, d_v=2):
    """Scaled dot-product attention in the row form, one matrix per step, drawn to scale.

    Q (T_q, d_k) times K^T (d_k, T_k), divided by sqrt(d_k), gives the scores S (T_q, T_k);
    the mask (here causal, ``causal_mask(T_q, T_k)``) puts -inf where a query may not look;
    the softmax over each row (over the keys) gives A (T_q, T_k); A V (T_q, d_v) is the output.
    """
    fig, ax = _canvas(20.6, 9.4)
    c = 0.5  # side of one matrix entry
    hidden = ~causal_mask(T_q, T_k)
    top, low = 8.3, 3.7  # top edges of the two rows of matrices
    mid_top, mid_low = top - T_q * c / 2, low - T_q * c / 2

    _, r, _, _ = _matrix(ax, 0.4, top, T_q, d_k, "Q", "(T_q, d_k)", COLORS["data"], c)
    _operator(ax, r + 0.5, mid_top, "×")
    _, r, _, _ = _matrix(ax, r + 1.0, top, d_k, T_k, "Kᵀ", "(d_k, T_k)", COLORS["data"], c)
    _operator(ax, r + 0.9, mid_top, "/ √d_k", fontsize=11)
    _operator(ax, r + 1.9, mid_top, "=")
    s_left, s_right, _, s_bottom = _matrix(ax, r + 2.5, top, T_q, T_k, "S = QKᵀ / √d_k",
                                           "(T_q, T_k)", COLORS["attention"], c)
    s_mid = (s_left + s_right) / 2
    ax.text(s_right + 0.3, mid_top, "row i: how well each\nkey matches query i",
            fontsize=7.5, va="center")

    _arrow(ax, (s_mid, s_bottom - 0.6), (s_mid, low + 0.75))
    ax.text(s_mid + 0.2, (s_bottom + low) / 2 + 0.1, "mask: −∞ where it is False\n"
            "(here: keys in the future of the query)", fontsize=7.5, va="center")
    _, r, _, _ = _matrix(ax, s_left, low, T_q, T_k, "S + M", "(T_q, T_k)", COLORS["attention"], c,
                         grey=hidden)
    _arrow(ax, (r + 0.2, mid_low), (r + 2.2, mid_low))
    ax.text(r + 1.2, mid_low + 0.2, "softmax over\nthe keys (rows)", ha="center", va="bottom",
            fontsize=7.5)
    a_left = r + 2.4
    _, r, _, a_bottom = _matrix(ax, a_left, low, T_q, T_k, "A", "(T_q, T_k), rows sum to 1",
                                COLORS["output"], c)
    for i, j in zip(*np.nonzero(hidden)):  # the weights of masked keys are exactly 0
        ax.text(a_left + (j + 0.5) * c, low - (i + 0.5) * c, "0", ha="center", va="center",
                fontsize=7)
    _operator(ax, r + 0.5, mid_low, "×")
    _, r, _, _ = _matrix(ax, r + 1.0, low + (T_k - T_q) * c / 2, T_k, d_v, "V", "(T_k, d_v)",
                         COLORS["data"], c)
    _operator(ax, r + 0.5, mid_low, "=")
    _, r, _, _ = _matrix(ax, r + 1.0, low, T_q, d_v, "out = A V", "(T_q, d_v)", COLORS["ffn"], c)

    ax.text(0.4, 3.6, "Q, K, V and out: one row per token.\nS, M and A: rows are queries,\n"
            "columns are keys.\nRow i of out is the average of\nthe rows of V, weighted by\n"
            "row i of A.", fontsize=8, va="top")
    ax.text(0.4, 0.3, f"drawn with T_q = {T_q}, T_k = {T_k}, d_k = {d_k}, d_v = {d_v}; leading "
            "axes (B, n_heads) ride along unchanged", fontsize=7.5, color="#555555")
    return fig


def masks(T=5, length=3):
    """Causal, padding and combined masks as boolean grids: True (coloured) = may attend.

    Rows are queries, columns keys. The padding mask is ``padding_mask([length], T)[0]``, shape
    (1, T), broadcast over the T query rows; the combined mask is the decoder's causal & padding.
    The three image arrays are exactly the boolean masks of ``course_lib.attention``.
    """
    causal = causal_mask(T)
    padding = np.broadcast_to(padding_mask([length], T)[0], (T, T))
    grids = [(causal, "causal_mask(T)\n(T, T)"),
             (padding, f"padding_mask([{length}], T): {length} real tokens,\n"
                       "(1, T) broadcast over the queries"),
             (causal & padding, "causal & padding\n(a decoder over a padded batch)")]
    fig, axes = plt.subplots(1, 3, figsize=(11, 4.3))
    cmap = ListedColormap([COLORS["masked"], COLORS["allowed"]])
    labels = [f"t{j}" for j in range(T)]
    for ax, (grid, title) in zip(axes, grids):
        ax.imshow(grid, cmap=cmap, vmin=0, vmax=1)
        for i in range(T):
            for j in range(T):
                ax.text(j, i, "T" if grid[i, j] else "F", ha="center", va="center", fontsize=8,
                        color="white" if grid[i, j] else "black")
        ax.set_xticks(range(T), labels)
        ax.set_yticks(range(T), labels)
        ax.set_xticks(np.arange(T + 1) - 0.5, minor=True)
        ax.set_yticks(np.arange(T + 1) - 0.5, minor=True)
        ax.grid(which="minor", color="white", linewidth=1.5)
        ax.tick_params(which="minor", length=0)
        ax.set_xlabel("key j")
        ax.set_ylabel("query i")
        ax.set_title(title, fontsize=9.5)
    axes[1].axvline(length - 0.5, color="black", linestyle="--", linewidth=1)
    fig.legend(handles=[Patch(color=COLORS["allowed"], label="True: may attend"),
                        Patch(color=COLORS["masked"], label="False: score set to −∞, weight 0")],
               loc="lower center", ncol=2, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig


def _tensor(ax, x, y, w, h, n_heads, layout, name, shape):
    """A (B, T, features) tensor drawn as one token-by-feature box, coloured by head.

    layout "flat": the n_heads groups as stripes of one d_model-wide box; "cut": the same
    stripes with borders (a reshape only relabels the features); "stacked": one d_k-wide box
    per head, drawn one behind the other (the head axis in front of T). Returns the right edge.
    """
    if layout == "stacked":
        step_x, step_y, width = 0.35, 0.22, w / n_heads
        for j in reversed(range(n_heads)):
            ax.add_patch(Rectangle((x + j * step_x, y + j * step_y), width, h,
                                   facecolor=HEAD_COLORS[j], edgecolor="black", linewidth=0.8))
        right, top = x + width + (n_heads - 1) * step_x, y + h + (n_heads - 1) * step_y
    else:
        stripe = w / n_heads
        for j in range(n_heads):
            ax.add_patch(Rectangle((x + j * stripe, y), stripe, h, facecolor=HEAD_COLORS[j],
                                   edgecolor="black" if layout == "cut" else "none",
                                   linewidth=0.6))
        ax.add_patch(Rectangle((x, y), w, h, fill=False, edgecolor="black", linewidth=1))
        right, top = x + w, y + h
    ax.text((x + right) / 2, top + 0.15, name, ha="center", va="bottom", fontsize=8.5)
    ax.text((x + right) / 2, y - 0.15, shape, ha="center", va="top", fontsize=8.5)
    return right


def _step(ax, x_from, x_to, y, label):
    """A horizontal arrow between two tensors with the operation written above it."""
    _arrow(ax, (x_from, y), (x_to, y))
    ax.text((x_from + x_to) / 2, y + 0.15, label, ha="center", va="bottom", fontsize=8)


def multi_head(n_heads=4):
    """Splitting into heads and merging back, with the shape after every step.

    x W_q (B, T, d_model) -> reshape (B, T, n_heads, d_k) -> swapaxes(1, 2)
    (B, n_heads, T, d_k) -> attention on every head at once -> (B, n_heads, T, d_k) ->
    swapaxes back (B, T, n_heads, d_k) -> reshape (B, T, n_heads·d_k = d_model) -> @ W_o
    (B, T, d_model). Head j owns features
    j·d_k .. (j+1)·d_k - 1 (one colour per head). Keys and values are split the same way.
    """
    fig, ax = _canvas(19, 9.6)
    w, h, gap = 2.4, 1.6, 2.0
    y1, y2 = 5.9, 1.5
    m1, m2 = y1 + h / 2, y2 + h / 2

    r = _tensor(ax, 0.4, y1, w, h, n_heads, "flat", "q = x_q W_q", "(B, T, d_model)")
    ax.text(0.25, m1, "T", ha="right", va="center", fontsize=8)
    _step(ax, r + 0.1, r + gap - 0.1, m1, "reshape")
    r = _tensor(ax, r + gap, y1, w, h, n_heads, "cut", "features cut in n_heads groups",
                "(B, T, n_heads, d_k)")
    _step(ax, r + 0.1, r + gap + 0.2, m1, "swapaxes(1, 2)")
    r = _tensor(ax, r + gap + 0.3, y1, w, h, n_heads, "stacked", "split_heads(q, n_heads)",
                "(B, n_heads, T, d_k)")
    _step(ax, r + 0.1, r + gap - 0.1, m1, "")
    x_att, w_att = r + gap, 4.4
    _box(ax, x_att, y1 - 0.1, w_att, h + 0.2, "attention_forward(q, k, v, mask)\n"
         "on every head at once: the\nleading axes (B, n_heads) ride along", COLORS["attention"],
         fontsize=8)
    ax.text(x_att + w_att / 2, y1 + h + 0.3, "k, v: split the same way\n(B, n_heads, T_k, d_k)",
            ha="center", va="bottom", fontsize=8)

    x_heads = x_att + w_att / 2 - 1.0
    _arrow(ax, (x_att + w_att / 2, y1 - 0.2), (x_att + w_att / 2, y2 + h + 1.1))
    _tensor(ax, x_heads, y2, w, h, n_heads, "stacked", "heads", "(B, n_heads, T, d_k)")
    x_cut = x_heads - gap - 0.3 - w
    _step(ax, x_heads - 0.1, x_cut + w + 0.1, m2, "swapaxes(1, 2)")
    _tensor(ax, x_cut, y2, w, h, n_heads, "cut", "", "(B, T, n_heads, d_k)")
    x_cat = x_cut - gap - w
    _step(ax, x_cut - 0.1, x_cat + w + 0.1, m2, "reshape")
    # named as notebook 02 writes it (course_lib's merge_heads comes in notebook 06)
    _tensor(ax, x_cat, y2, w, h, n_heads, "flat", "concat = Concat(head_1, …, head_n_heads)",
            "(B, T, n_heads·d_k) = (B, T, d_model)")
    x_out = x_cat - gap - w
    _step(ax, x_cat - 0.1, x_out + w + 0.1, m2, "@ W_o")
    _box(ax, x_out, y2, w, h, "out\n(B, T, d_model)", COLORS["ffn"], fontsize=8.5)
    ax.text(0.4, 0.3, f"Drawn with n_heads = {n_heads} and d_k = d_model / n_heads. Every box: one "
            "row per token, one column per feature; head j (one colour) owns features\n"
            "j·d_k … (j+1)·d_k − 1. Reshaping straight to (B, n_heads, T, d_k) would cut the memory in "
            "the wrong places. W_o mixes the heads' outputs.", fontsize=8, color="#555555")
    return fig


# ----------------------------------------------------------------------------- blocks
def _post_ln(ax, x0, sublayer):
    """Post-LN block in a column starting at x0: x -> F -> + -> LN -> y."""
    cx = x0 + 1.6
    ax.text(cx, 0.35, "x  (B, T, d_model)", ha="center", fontsize=9)
    _arrow(ax, (cx, 0.75), (cx, 1.6))
    _box(ax, cx - 1.3, 1.6, 2.6, 0.9, sublayer, COLORS["attention"])
    _arrow(ax, (cx, 2.5), (cx, 3.38))
    _plus(ax, cx, 3.6)
    ax.add_line(plt.Line2D([cx, cx + 1.9, cx + 1.9], [1.1, 1.1, 3.6], color="black", lw=1.1))
    _arrow(ax, (cx + 1.9, 3.6), (cx + 0.22, 3.6))
    ax.text(cx + 2.0, 2.3, "residual\n(identity)", fontsize=8, va="center")
    _arrow(ax, (cx, 3.82), (cx, 4.5))
    _box(ax, cx - 1.3, 4.5, 2.6, 0.9, "LayerNorm", COLORS["norm"])
    _arrow(ax, (cx, 5.4), (cx, 6.2))
    ax.text(cx, 6.3, "y", ha="center", va="bottom", fontsize=10)
    ax.text(cx + 0.4, 7.2, "Post-LN (2017 Transformer)\ny = LN(x + F(x))", ha="center",
            fontsize=10, fontweight="bold")
    ax.text(cx + 0.4, -0.5, "the norm sits on the main path:\nevery layer's output is normalised",
            ha="center", va="top", fontsize=8.5)


def _pre_ln(ax, x0, sublayer):
    """Pre-LN block in a column starting at x0: x -> LN -> F -> + (x added unnormalised)."""
    cx = x0 + 1.6
    ax.text(cx, 0.35, "x  (B, T, d_model)", ha="center", fontsize=9)
    _arrow(ax, (cx, 0.75), (cx, 1.5))
    _box(ax, cx - 1.3, 1.5, 2.6, 0.9, "LayerNorm", COLORS["norm"])
    _arrow(ax, (cx, 2.4), (cx, 3.1))
    _box(ax, cx - 1.3, 3.1, 2.6, 0.9, sublayer, COLORS["attention"])
    _arrow(ax, (cx, 4.0), (cx, 4.88))
    _plus(ax, cx, 5.1)
    ax.add_line(plt.Line2D([cx, cx + 1.9, cx + 1.9], [1.1, 1.1, 5.1], color="black", lw=1.1))
    _arrow(ax, (cx + 1.9, 5.1), (cx + 0.22, 5.1))
    ax.text(cx + 2.0, 3.0, "residual:\nx passes\nuntouched", fontsize=8, va="center")
    _arrow(ax, (cx, 5.32), (cx, 6.2))
    ax.text(cx, 6.3, "y", ha="center", va="bottom", fontsize=10)
    ax.text(cx + 0.4, 7.2, "Pre-LN (GPT-2 and most since)\ny = x + F(LN(x))", ha="center",
            fontsize=10, fontweight="bold")
    ax.text(cx + 0.4, -0.5, "only F's input is normalised; one final\nLayerNorm before the output"
            " layer", ha="center", va="top", fontsize=8.5)


def residual_blocks(sublayer="sublayer F\n(attention or FFN)"):
    """Post-LN, y = LN(x + F(x)), and Pre-LN, y = x + F(LN(x)), side by side (bottom to top).

    Both keep the shape (B, T, d_model). In Post-LN the LayerNorm is on the main path after the
    addition; in Pre-LN it only feeds the sublayer, and the residual path carries x unchanged.
    """
    fig, ax = _canvas(12.5, 9.8)
    ax.set_ylim(-1.6, 8.2)
    _post_ln(ax, 0.6, sublayer)
    _pre_ln(ax, 7.0, sublayer)
    ax.add_line(plt.Line2D([6.4, 6.4], [-1.4, 8.0], color="#999999", lw=1, ls=":"))
    return fig


def _layer_stack(ax, x, y, width, parts):
    """One Transformer layer: the parts (text, colour) stacked bottom-up inside a grey frame.
    Returns the frame's (left, bottom, right, top) and the centre height of every part."""
    h, gap = 0.72, 0.32
    top, centres = y + 0.3, []
    for text, color in parts:
        _box(ax, x + 0.3, top, width - 0.6, h, text, color, fontsize=8.5)
        centres.append(top + h / 2)
        top += h + gap
    ax.add_patch(FancyBboxPatch((x, y), width, top - y, boxstyle="round,pad=0,rounding_size=0.2",
                                facecolor="#f4f4f4", edgecolor="#666666", linewidth=1,
                                zorder=0))
    return (x, y, x + width, top), centres


def encoder_decoder():
    """The encoder–decoder Transformer (Vaswani et al. 2017), Post-LN as in the paper.

    Encoder: n_layers blocks of (self-attention, FFN), each with Add & Norm, over the source
    (B, T_src, d_model). Decoder: n_layers blocks of (masked self-attention, cross-attention whose
    keys and values come from the encoder output, FFN), then a linear layer to vocab_size and a
    softmax: next-token probabilities (B, T, vocab_size).
    """
    fig, ax = _canvas(16.4, 14.2)
    w = 4.6
    ex, dx = 2.0, 9.4  # left edges of the encoder and decoder stacks
    for x, text in ((ex, "source tokens (B, T_src)"), (dx, "target tokens, shifted right (B, T)")):
        ax.text(x + w / 2, 0.3, text, ha="center", fontsize=9)
        _arrow(ax, (x + w / 2, 0.65), (x + w / 2, 1.0))
        _box(ax, x, 1.0, w, 0.8, "embedding + positional encoding", COLORS["data"], fontsize=8.5)
        _arrow(ax, (x + w / 2, 1.8), (x + w / 2, 2.6))

    enc, _ = _layer_stack(ax, ex, 2.6, w, [
        ("multi-head self-attention", COLORS["attention"]), ("Add & Norm", COLORS["norm"]),
        ("feed-forward network", COLORS["ffn"]), ("Add & Norm", COLORS["norm"])])
    dec, centres = _layer_stack(ax, dx, 2.6, w, [
        ("masked multi-head\nself-attention (causal)", COLORS["attention"]),
        ("Add & Norm", COLORS["norm"]),
        ("cross-attention\nQ: decoder · K, V: encoder", COLORS["attention"]),
        ("Add & Norm", COLORS["norm"]),
        ("feed-forward network", COLORS["ffn"]), ("Add & Norm", COLORS["norm"])])
    ax.text(ex - 0.15, (enc[1] + enc[3]) / 2, "encoder\nn_layers ×", ha="right", va="center",
            fontsize=10)
    ax.text(dx + w + 0.15, (dec[1] + dec[3]) / 2 + 1.5, "decoder\nn_layers ×", ha="left", va="center",
            fontsize=10)
    ax.text(dx + w + 0.15, centres[0], "query i sees\ntargets ≤ i", ha="left", va="center",
            fontsize=8)

    # the encoder's output feeds the cross-attention of every decoder layer
    _arrow(ax, (ex + w / 2, enc[3]), (ex + w / 2, enc[3] + 1.2))
    ax.text(ex + w / 2, enc[3] + 1.3, "encoder output\n(B, T_src, d_model)", ha="center",
            va="bottom", fontsize=8.5)
    channel, y_out, y_cross = ex + w + 1.4, enc[3] + 0.6, centres[2]
    ax.add_line(plt.Line2D([ex + w / 2, channel, channel], [y_out, y_out, y_cross],
                           color="#c0392b", lw=1.4))
    _arrow(ax, (channel, y_cross), (dx + 0.3, y_cross), color="#c0392b")
    ax.text((channel + dx) / 2 + 0.15, y_cross + 0.12, "K, V", ha="center", va="bottom",
            fontsize=9, color="#c0392b")

    x, y = dx + w / 2, dec[3]
    _arrow(ax, (x, y), (x, y + 0.5))
    _box(ax, dx, y + 0.5, w, 0.75, "linear: d_model → vocab_size", COLORS["output"], fontsize=8.5)
    _arrow(ax, (x, y + 1.25), (x, y + 1.75))
    _box(ax, dx, y + 1.75, w, 0.75, "softmax over the vocabulary", COLORS["output"], fontsize=8.5)
    _arrow(ax, (x, y + 2.5), (x, y + 2.95))
    ax.text(x, y + 3.0, "next-token probabilities\n(B, T, vocab_size)", ha="center",
            va="bottom", fontsize=9)
    ax.text(0.2, 14.0, "Encoder–decoder Transformer (2017; Post-LN: Add & Norm = LN(x + F(x)))",
            fontsize=10.5, fontweight="bold", va="top")
    return fig


def gpt():
    """The decoder-only stack of GPT (Pre-LN, as in GPT-2 and GPT-3).

    Token ids (B, T) -> token embedding + position embedding (B, T, d_model) -> n_layers blocks of
    x + MaskedSelfAttention(LN(x)), then x + FFN(LN(x)) -> final LayerNorm -> linear to
    vocab_size: logits (B, T, vocab_size). No encoder, hence no cross-attention.
    """
    fig, ax = _canvas(11, 13.2)
    bw, cx = 4.2, 3.4           # width and centre of the boxes
    x0 = cx - bw / 2
    ax.text(cx, 0.3, "token ids (B, T)", ha="center", fontsize=9)
    _arrow(ax, (cx, 0.65), (cx, 1.0))
    _box(ax, x0, 1.0, bw, 0.8, "token + position embedding", COLORS["data"], fontsize=8.5)
    ax.text(x0 + bw + 0.15, 1.4, "(B, T, d_model)", fontsize=8, va="center")
    _arrow(ax, (cx, 1.8), (cx, 2.85))

    h, y, frame_bottom = 0.7, 2.85, 2.35
    branch, skips = 2.6, []  # where each residual leaves the main path, and its "+"
    for text, color, add in (("LayerNorm", COLORS["norm"], False),
                             ("masked multi-head self-attention", COLORS["attention"], True),
                             ("LayerNorm", COLORS["norm"], False),
                             ("feed-forward network", COLORS["ffn"], True)):
        _box(ax, x0, y, bw, h, text, color, fontsize=8.5)
        y += h
        if add:
            _arrow(ax, (cx, y), (cx, y + 0.38))
            _plus(ax, cx, y + 0.6)
            skips.append((branch, y + 0.6))
            branch = y + 1.0
            y += 0.82
        if text != "feed-forward network":  # the last part's arrow leaves the frame below
            _arrow(ax, (cx, y), (cx, y + 0.35))
            y += 0.35
    for k, (start, plus_y) in enumerate(skips):
        skip_x = x0 + bw + 0.3 + 0.3 * k
        ax.add_line(plt.Line2D([cx, skip_x, skip_x], [start, start, plus_y], color="black",
                               lw=1.1))
        _arrow(ax, (skip_x, plus_y), (cx + 0.22, plus_y))
    frame_top, frame_right = y + 0.15, x0 + bw + 0.9
    ax.add_patch(FancyBboxPatch((x0 - 0.3, frame_bottom), frame_right - x0 + 0.3,
                                frame_top - frame_bottom, boxstyle="round,pad=0,rounding_size=0.2",
                                facecolor="#f4f4f4", edgecolor="#666666", linewidth=1, zorder=0))
    ax.text(x0 - 0.45, (frame_bottom + frame_top) / 2, "n_layers ×", ha="right", va="center",
            fontsize=10)
    ax.text(frame_right + 0.2, (frame_bottom + frame_top) / 2,
            "one GPT block (Pre-LN):\nx = x + attn(LN(x))\nx = x + FFN(LN(x))\n\n"
            "causal mask: the\ntoken at t sees\ntokens ≤ t", fontsize=8, va="center")
    _arrow(ax, (cx, y), (cx, frame_top + 0.3))
    y = frame_top
    _box(ax, x0, y + 0.3, bw, 0.7, "final LayerNorm", COLORS["norm"], fontsize=8.5)
    _arrow(ax, (cx, y + 1.0), (cx, y + 1.4))
    _box(ax, x0, y + 1.4, bw, 0.7, "linear: d_model → vocab_size", COLORS["output"], fontsize=8.5)
    _arrow(ax, (cx, y + 2.1), (cx, y + 2.5))
    ax.text(cx, y + 2.55, "logits (B, T, vocab_size):\nrow t scores the token at t + 1",
            ha="center", va="bottom", fontsize=9)
    ax.text(0.2, 13.0, "GPT: a decoder-only Transformer\n(no encoder, no cross-attention)",
            fontsize=10.5, fontweight="bold", va="top")
    return fig


# ----------------------------------------------------------------------------- FlashAttention
TILE_COLORS = {"full": "#9cc3e6", "diagonal": "#fbd9b0", "skipped": "#eeeeee"}


def _tile_kinds(T_q, T_k, block_q, block_k, causal=True):
    """(n_q_blocks, n_k_blocks) array of "full", "diagonal" or "skipped": what the tiled pass
    does with each tile of S. Causal alignment is ``causal_mask(T_q, T_k)``'s."""
    visible = causal_mask(T_q, T_k) if causal else np.ones((T_q, T_k), dtype=bool)
    kinds = np.empty((-(-T_q // block_q), -(-T_k // block_k)), dtype=object)
    for i in range(kinds.shape[0]):
        for j in range(kinds.shape[1]):
            tile = visible[i * block_q:(i + 1) * block_q, j * block_k:(j + 1) * block_k]
            kinds[i, j] = "full" if tile.all() else "diagonal" if tile.any() else "skipped"
    return kinds


def flash_tiles(T_q=12, T_k=12, block_q=4, block_k=4, causal=True):
    """The scores S (T_q, T_k) cut into tiles of block_q queries x block_k keys, coloured by
    what FlashAttention does with each (``_tile_kinds``), with the order of the visits.

    Only one tile of scores exists at a time; per query block the pass keeps the running
    maximum m, the normaliser l (block_q,) and the running output (block_q, d_v).
    """
    kinds = _tile_kinds(T_q, T_k, block_q, block_k, causal)
    visible = causal_mask(T_q, T_k) if causal else np.ones((T_q, T_k), dtype=bool)
    c = 0.45
    fig, ax = _canvas(max(T_k * c + 11.5, 16.0), max(T_q * c, 4.6) + 3.6)
    x0, y0 = 1.6, max(T_q * c, 4.6) + 2.4  # top-left corner of S
    step = 0
    for i in range(kinds.shape[0]):
        for j in range(kinds.shape[1]):
            rows = min(block_q, T_q - i * block_q)
            cols = min(block_k, T_k - j * block_k)
            left, top = x0 + j * block_k * c, y0 - i * block_q * c
            ax.add_patch(Rectangle((left, top - rows * c), cols * c, rows * c,
                                   facecolor=TILE_COLORS[kinds[i, j]], edgecolor="black",
                                   linewidth=1.4))
            if kinds[i, j] != "skipped":
                step += 1
                ax.text(left + cols * c / 2, top - rows * c / 2, str(step), ha="center",
                        va="center", fontsize=11, fontweight="bold")
    for q, k in zip(*np.nonzero(~visible)):  # the masked scores of the diagonal tiles
        if kinds[q // block_q, k // block_k] == "diagonal":
            ax.text(x0 + (k + 0.5) * c, y0 - (q + 0.5) * c, "−∞", ha="center", va="center",
                    fontsize=5.5, color="#555555")
    ax.text(x0 + T_k * c / 2, y0 + 0.35, f"S = QKᵀ / √d_k   (T_q, T_k) = ({T_q}, {T_k}), never "
            "held whole", ha="center", va="bottom", fontsize=9)
    ax.text(x0 - 0.25, y0 - T_q * c / 2, "query i  →", rotation=-90, ha="right", va="center",
            fontsize=8.5)
    ax.text(x0 + T_k * c / 2, y0 - T_q * c - 0.25, "key j  →", ha="center", va="top", fontsize=8.5)
    right = x0 + T_k * c + 0.6
    ax.text(right, y0, f"one tile: block_q × block_k = {block_q} × {block_k} scores\n"
            "numbers: the order of the visits\n(outer loop: query blocks,\n inner loop: key blocks)\n\n"
            "per query block, kept while\nits key blocks go by:\n"
            "  m, l      (block_q,)    running max, normaliser\n"
            "  acc       (block_q, d_v)  running output\n"
            "saved for the backward:\n  out (T_q, d_v), lse = m + log l (T_q,)",
            fontsize=8.5, va="top", family="monospace")
    ax.legend(handles=[Patch(color=TILE_COLORS["full"], label="visited: every key visible"),
                       Patch(color=TILE_COLORS["diagonal"], label="visited, masked: on the diagonal"),
                       Patch(color=TILE_COLORS["skipped"], label="skipped: wholly in the future")],
              loc="lower center", ncol=3, fontsize=8.5, frameon=False)
    return fig
