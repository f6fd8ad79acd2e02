"""Plots and widgets for looking at attention: heatmaps and an explorer that works offline.

The explorer itself lives in ``course_lib.explorer`` (its JavaScript ships in the package);
``attention_explorer`` below opens it on a few named examples.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

from course_lib.attention import causal_mask, mha_forward
from course_lib.style import MASKED_COLOR


def plot_attention(A, query_tokens, key_tokens, ax=None, title=None, highlight=None, mask=None,
                   colorbar=True):
    """Heatmap of weights A (T_q, T_k): one row per query, one column per key.

    ``mask``: boolean, broadcastable to A, True where a query may attend. Masked cells are
    drawn grey and hatched, so that they cannot be mistaken for weights that are merely small.
    ``highlight``: index of a query whose row is outlined. ``colorbar``: add a colour bar for
    this axes. Returns the image.
    """
    ax = ax or plt.gca()
    cmap = plt.get_cmap("viridis").with_extremes(bad=MASKED_COLOR)
    hidden = None if mask is None else ~np.broadcast_to(mask, np.shape(A))
    im = ax.imshow(np.ma.masked_array(A, mask=hidden), cmap=cmap, vmin=0.0, vmax=1.0)
    xlabel = "key"
    if hidden is not None and hidden.any():
        for i, j in zip(*np.nonzero(hidden)):
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="///",
                                   edgecolor="#707070", linewidth=0))
        xlabel = "key   (grey, hatched: masked)"
    ax.set_xticks(range(len(key_tokens)), key_tokens, rotation=60)
    ax.set_yticks(range(len(query_tokens)), query_tokens)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("query")
    if highlight is not None:
        ax.add_patch(Rectangle((-0.5, highlight - 0.5), len(key_tokens), 1,
                               fill=False, edgecolor="red", linewidth=2))
    if title:
        ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="attention weight")
    return im


def plot_heads(A, query_tokens, key_tokens, title=None, mask=None):
    """All heads side by side, one colour bar for all. A: (n_heads, T_q, T_k)."""
    n_heads = A.shape[0]
    fig, axes = plt.subplots(1, n_heads, figsize=(3.4 * n_heads + 1, 3.6), squeeze=False,
                             layout="constrained")
    for j, ax in enumerate(axes[0]):
        im = plot_attention(A[j], query_tokens, key_tokens, ax, title=f"head {j}", mask=mask,
                            colorbar=False)
    fig.colorbar(im, ax=list(axes[0]), shrink=0.85, label="attention weight")
    if title:
        fig.suptitle(title)
    return fig


def plot_alignment(alignment, A, target_tokens, source_tokens, predicted=None, title=None):
    """A hand-made alignment beside a head's cross-attention, row for row (notebook 05, §10).

    alignment: (T, T_src), row t spread over the source tokens that target token t comes
    from; A: (T_q, T_src), the head's weights, whose query t (the decoder's input up to token
    t - 1) predicts target token t. Both panels draw the T rows of the target, so row t is
    token t in each: A's later rows (the query that predicts </s>) have no hand-made
    counterpart and are left out, and rows A lacks (an output shorter than the target) are grey.
    predicted: the model's output, one token per row of A, shown as "→token" (default: the
    target). Returns the figure.
    """
    n, (T_q, T_src) = len(target_tokens), np.shape(A)
    weights = np.full((n, T_src), np.nan)  # (T, T_src)
    weights[:min(n, T_q)] = np.asarray(A)[:n]
    predicted = list(predicted or target_tokens)[:min(n, T_q)]
    fig, axes = plt.subplots(1, 2, figsize=(9, 4.2), layout="constrained")
    plot_attention(alignment, target_tokens, source_tokens, axes[0], title="hand-made alignment (§2)",
                   colorbar=False)
    plot_attention(weights, [f"→{t}" for t in predicted] + ["(no query)"] * (n - len(predicted)),
                   source_tokens, axes[1], title=title, mask=np.isfinite(weights))
    return fig


def attention_explorer(examples, masks=None):
    """The attention explorer (``course_lib.explorer``) over ``examples``: {name: (A (n_heads,
    T_q, T_k), query_tokens, key_tokens, Q (n_heads, T_q, d_k), K (n_heads, T_k, d_k))}, one
    layer each (Q and K, for the query-key view, may be left out). ``masks``: optional {name:
    boolean (T_q, T_k)}, drawn grey. Returns the widget; for a course model with every layer,
    use ``course_lib.explorer.explore``.
    """
    from course_lib.explorer import explore  # lazy: anywidget (0.2 s), for the explorer alone

    field = lambda i: {name: ex[i] for name, ex in examples.items() if len(ex) > i}  # noqa: E731
    return explore(field(0), tokens={name: ex[1:3] for name, ex in examples.items()},
                   q=field(3), k=field(4), masks=masks or {})


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
    cross-attention). Returns {name: (A (2, T_q, T_k), query_tokens, key_tokens, Q (2, T_q, 8),
    K (2, T_k, 8))}: the weights, the tokens, and each head's queries and keys.
    """
    beta = sharpness * np.sqrt(_HALF)  # a match scores beta / sqrt(d_k) = sharpness
    identity, previous = np.eye(_HALF), np.eye(_HALF, k=-1)  # e_t @ previous = e_{t-1}
    W_k = W_v = W_o = np.eye(2 * _HALF)

    def weights(x_q, x_kv, position_map, mask=None):
        W_q = beta * np.block([[identity, np.zeros_like(identity)],
                               [np.zeros_like(identity), position_map]])
        _, cache = mha_forward(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads=2, mask=mask)
        heads = cache.attention
        return heads.A[0], heads.Q[0], heads.K[0]  # (2, T_q, T_k), (2, T_q, 8), (2, T_k, 8)

    en, de = _embed(ENGLISH), _embed(GERMAN)
    def example(x_q, x_kv, position_map, query_tokens, key_tokens, mask=None):
        A, Q, K = weights(x_q, x_kv, position_map, mask)
        return A, query_tokens, key_tokens, Q, K

    return {
        "self": example(en, en, previous, ENGLISH, ENGLISH),
        "causal": example(en, en, previous, ENGLISH, ENGLISH, causal_mask(len(ENGLISH))),
        "cross": example(de, en, identity, GERMAN, ENGLISH),
    }


def toy_explorer(examples=None):
    """The explorer of notebook 02 §9: ``attention_explorer`` over ``examples`` (default
    ``toy_attention_examples()``), the causal example's masked weights grey. The grader's
    report, which draws no widgets, shows it as a picture (``autograder/pipeline/pictures.py``)."""
    examples = examples or toy_attention_examples()
    return attention_explorer(examples, masks={"causal": causal_mask(len(ENGLISH))})


# ----------------------------------------------------------------------------- other notebooks
def plot_positional_encoding(P, dims, base=10000.0):
    """P (T, d_model) as a heatmap with a colour bar, and the columns ``dims`` against the
    position t = 1..T, each labelled sin or cos with its period 2*pi / omega_i, where
    omega_i = base^(-2i/d_model) and i = dim // 2 (notebook 03, eqs. 10-11). Returns the figure.
    """
    T, d_model = P.shape
    positions = np.arange(1, T + 1)
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(13, 4.2), layout="constrained",
                                   gridspec_kw={"width_ratios": [1.3, 1]})
    im = ax0.imshow(P, aspect="auto", cmap="RdBu", vmin=-1, vmax=1,
                    extent=(-0.5, d_model - 0.5, T + 0.5, 0.5))
    ax0.set(xlabel="dimension i", ylabel="position t", title=f"P for T = {T}, d_model = {d_model}")
    fig.colorbar(im, ax=ax0, label="P[t, i]")
    for n, i in enumerate(dims):
        color = f"C{n}"
        period = 2 * np.pi * base ** (2 * (i // 2) / d_model)
        ax0.axvline(i, color=color, linewidth=2.5)
        ax1.plot(positions, P[:, i], color=color,
                 label=f"i = {i} ({'sin' if i % 2 == 0 else 'cos'}, period {period:.0f})")
    ax1.set(xlabel="position t", ylabel="P[t, i]", ylim=(-1.1, 1.6),
            title="the marked columns: lower frequency to the right")
    ax1.legend(fontsize=8, ncol=2, loc="upper center")
    return fig


def plot_depth_profile(norms, ylabel="gradient norm at initialisation"):
    """One curve per model across depth: norms {model name: {kind: values per layer}}, one
    panel per kind (e.g. "attention", "ffn"), layers numbered from the input. Returns the figure."""
    kinds = list(next(iter(norms.values())))
    fig, axes = plt.subplots(1, len(kinds), figsize=(5.5 * len(kinds), 3.4), sharey=True,
                             squeeze=False, layout="constrained")
    for (name, by_kind), style in zip(norms.items(), ("o-", "s--", "^:", "d-.")):
        for ax, kind in zip(axes[0], kinds):
            values = by_kind[kind]
            ax.plot(range(1, len(values) + 1), values, style, label=name)
            ax.set(title=f"{kind} weights", xlabel="layer (1 = next to the input)")
            ax.set_xticks(range(1, len(values) + 1))
    axes[0, 0].set_ylabel(ylabel)
    axes[0, 0].set_ylim(bottom=0)
    axes[0, 0].legend()
    return fig


def plot_dice(dice, names, n_faces=12, ax=None):
    """Several dice over one vocabulary as grouped bars (notebook 06, temperature, top-k, top-p).

    dice: {label: probabilities (vocab_size,)}; the ``n_faces`` likeliest faces of the first die
    are drawn, likeliest first, each named by ``names`` (one display name per token id, e.g.
    ``course_lib.explorer.token_names``, which shows a space as ␣ and a new line as ⏎: a blank
    tick would hide the likeliest face of a text model). The legend says how many faces each
    die keeps (probability above 0). Returns the axes.
    """
    ax = ax or plt.gca()
    top = np.argsort(-np.asarray(next(iter(dice.values()))))[:n_faces]
    width = 0.8 / len(dice)
    for j, (label, p) in enumerate(dice.items()):
        p = np.asarray(p)
        ax.bar(np.arange(len(top)) + j * width, p[top], width, label=f"{label} ({int((p > 0).sum())} faces kept)")
    ax.set_xticks(np.arange(len(top)) + 0.4 - width / 2, [names[i] for i in top])
    ax.set(xlabel="next token", ylabel="probability")
    ax.legend(fontsize=8)
    return ax


def plot_decoding_tree(logp, names, paths=None, bos=1, eos=2, min_prob=0.01, ax=None):
    """Every continuation of a table model as a tree, left to right (notebook 05, decoding).

    logp: (max_len + 1, V, V), log p(next token | last token, step), the table that the
    decoding exercises are graded on; names: a display name per token id. Edges carry the
    probability of the token, finished outputs (ending in ``eos``) the probability of the
    whole output. paths: {label: (tokens after bos, colour)}, drawn as thick coloured edges
    (e.g. what greedy decoding and beam search chose). Branches below ``min_prob`` are left out.
    """
    ax = ax or plt.gca()
    probs = np.exp(logp)
    leaves, pos, edges = [], {}, []

    def grow(prefix, p):
        step, last = len(prefix) - 1, prefix[-1]
        children = [] if last == eos and step > 0 or step >= len(probs) else \
            [t for t in range(probs.shape[-1]) if probs[step, last, t] >= min_prob]
        if not children:
            leaves.append(prefix)
            pos[prefix] = (step, -len(leaves), p)
            return
        for t in children:
            q = probs[step, last, t]
            edges.append((prefix, prefix + (t,), q))
            grow(prefix + (t,), p * q)
        ys = [pos[prefix + (t,)][1] for t in children]
        pos[prefix] = (step, float(np.mean(ys)), p)

    grow((bos,), 1.0)
    chosen = {}
    for label, (tokens, color) in (paths or {}).items():
        seq = (bos,) + tuple(int(t) for t in tokens)
        for i in range(1, len(seq)):
            chosen.setdefault(seq[:i + 1], []).append((label, color))
    for parent, child, q in edges:
        (x0, y0, _), (x1, y1, _) = pos[parent], pos[child]
        styles = chosen.get(child, [])
        for k, (_, color) in enumerate(styles):
            offset = 0.06 * (k - (len(styles) - 1) / 2)
            ax.plot([x0, x1], [y0 + offset, y1 + offset], color=color, lw=3.5, alpha=0.8, zorder=1)
        ax.plot([x0, x1], [y0, y1], color="#888888", lw=1, zorder=2)
        ax.text((x0 + x1) / 2, (y0 + y1) / 2 + 0.08, f"{q:.2f}", ha="center", va="bottom",
                fontsize=8, color="#444444")
    for node, (x, y, p) in pos.items():
        ax.text(x, y, names[node[-1]], ha="center", va="center", fontsize=9, zorder=3,
                bbox=dict(boxstyle="round,pad=0.25", fc="white", ec="#555555"))
        if node[-1] == eos and len(node) > 1:
            ax.text(x + 0.22, y, f"p = {p:.3f}", ha="left", va="center", fontsize=8.5)
    for label, (_, color) in (paths or {}).items():
        ax.plot([], [], color=color, lw=3.5, label=label)
    if paths:
        ax.legend(loc="lower left", fontsize=8.5, frameon=False)
    depth = max(x for x, _, _ in pos.values())
    ax.set_xlim(-0.4, depth + 0.9)
    ax.set_ylim(-len(leaves) - 0.7, -0.3)
    ax.set_xticks(range(depth + 1), ["start"] + [f"token {s}" for s in range(1, depth + 1)])
    ax.set_yticks([])
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    return ax


class LivePlot:
    """Training curves that redraw in place in a notebook while a loop runs.

    panels: {y-axis label: [history key, ...]}, one subplot per entry, e.g.
    ``{"loss (nats per token)": ["train", "val"]}``. ``update(history)`` (history: {"step":
    [...], key: [...]}) draws the first time and replaces the same output afterwards, so a
    long training shows one figure that grows, not one figure per update. ``title`` names the
    figure (which model it shows, when a notebook trains several). Outside IPython (a script, a
    terminal) it draws nothing.
    """

    def __init__(self, panels: dict[str, list[str]], labels: dict[str, str] | None = None,
                 x: str = "step", logy: bool = False, title: str | None = None):
        self.panels, self.labels, self.x, self.logy, self.title = panels, labels or {}, x, logy, title
        self.fig = self.handle = None

    def update(self, history: dict) -> None:
        try:
            # lazy: IPython, in a notebook only (the one place a live plot is drawn)
            from IPython import get_ipython
            from IPython.display import display
        except ImportError:  # pragma: no cover - IPython comes with jupyterlab
            return
        if get_ipython() is None:
            return
        if self.fig is None:
            self.fig, axes = plt.subplots(1, len(self.panels), squeeze=False,
                                          figsize=(5.5 * len(self.panels), 3), layout="constrained")
            self.axes = axes[0]
            if self.title:
                self.fig.suptitle(self.title)
            plt.close(self.fig)  # shown through the display handle only, not again at cell end
        for ax, (ylabel, keys) in zip(self.axes, self.panels.items()):
            ax.clear()
            for key in keys:
                ax.plot(history[self.x], history[key], "o-", ms=3, label=self.labels.get(key, key))
            ax.set(xlabel=self.x, ylabel=ylabel, yscale="log" if self.logy and "loss" in ylabel
                   else "linear")
            if len(keys) > 1:
                ax.legend()
        if self.handle is None:
            self.handle = display(self.fig, display_id=True)
        else:
            self.handle.update(self.fig)
