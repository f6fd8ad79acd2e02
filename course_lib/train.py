"""One trainer, one evaluator and one results table for every language model in the course.

Models follow ``forward(idx (B, T), targets (B, T) or None) -> (logits (B, T, vocab_size),
loss)`` with ``loss`` the mean cross-entropy in nats; the trainer knows nothing else about them.
The evaluator scores every model on the same validation chunks (``EVAL_BLOCK`` characters,
each starting from an empty context), so notebook 01's n-grams, RNN and LSTM and notebook
06's GPT land in one comparable table, stored as JSON in the data cache.
"""
from __future__ import annotations

import json
import math
import os

import numpy as np
import torch

from course_lib import runmode
from course_lib.data import cache_dir

EVAL_BLOCK = 128  # characters per validation chunk, for every model in the course


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def get_batch(ids: np.ndarray, batch_size: int, block_size: int, rng: np.random.Generator,
              device=None):
    """Random windows of the token stream: x (B, T) and y = x shifted by one (B, T).

    A window needs block_size + 1 tokens, so the starts run from 0 to len(ids) - block_size - 1
    inclusive: the last window ends on the last token, which is then a target too.
    """
    if len(ids) <= block_size:
        raise ValueError(f"{len(ids)} tokens cannot hold a window of {block_size} + 1")
    start = rng.integers(0, len(ids) - block_size, size=batch_size)  # high is exclusive
    window = start[:, None] + np.arange(block_size + 1)  # (B, T+1)
    chunk = torch.from_numpy(np.asarray(ids)[window]).to(device or default_device())
    return chunk[:, :-1], chunk[:, 1:]


@torch.no_grad()
def evaluate(model, ids: np.ndarray, batch_size: int = 64, device=None,
             block_size: int = EVAL_BLOCK) -> float:
    """Mean negative log-likelihood (nats per token) over consecutive chunks of ``ids``.

    The tail that does not fill a whole chunk is left out, the same for every model.
    """
    device = device or default_device()
    was_training = model.training
    model.eval()
    n_chunks = (len(ids) - 1) // block_size
    usable = np.asarray(ids)[: n_chunks * block_size + 1]
    x_all = usable[:-1].reshape(n_chunks, block_size)
    y_all = usable[1:].reshape(n_chunks, block_size)
    total = 0.0
    for i in range(0, n_chunks, batch_size):
        x = torch.from_numpy(x_all[i:i + batch_size]).to(device)
        y = torch.from_numpy(y_all[i:i + batch_size]).to(device)
        _, loss = model(x, y)
        total += loss.item() * y.numel()
    model.train(was_training)
    return total / (n_chunks * block_size)


def perplexity(nll: float) -> float:
    """exp(mean nats per token): the size of a fair die that is as surprised as the model."""
    return math.exp(nll)


def bits_per_char(nll: float) -> float:
    """The same mean loss in base 2."""
    return nll / math.log(2)


def train(model, train_ids: np.ndarray, *, steps: int, val_ids: np.ndarray | None = None,
          batch_size: int = 64, block_size: int | None = None, lr: float = 3e-3,
          eval_every: int = 100, eval_chars: int = 20_000, device=None, seed: int = 0,
          plot: bool = False) -> dict:
    """Mini-batch Adam on random windows of ``train_ids`` (seed 004, "Mini-Batch SGD").

    Every ``eval_every`` steps records the mean training loss since the last record and the
    validation loss on the first ``eval_chars`` of ``val_ids``; with ``plot`` a live loss
    plot updates in the notebook, and in full mode a progress bar shows the ETA. Gradients
    are clipped at norm 1, which keeps RNNs from the occasional exploding step.
    Returns {"step": [...], "train": [...], "val": [...]}.
    """
    device = device or default_device()
    block_size = block_size or model.block_size
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    model.to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    history, running = {"step": [], "train": [], "val": []}, []
    if plot:
        from course_lib.viz import LivePlot  # matplotlib only where a plot is asked for
    live = LivePlot({"loss (nats per token)": ["train", "val"]},
                    labels={"train": "train", "val": "validation"}) if plot else None
    for step in (bar := runmode.progress(range(1, steps + 1), desc=type(model).__name__)):
        x, y = get_batch(train_ids, batch_size, block_size, rng, device)
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        running.append(loss.item())
        if step % eval_every == 0 or step == steps:
            val = (evaluate(model, val_ids[:eval_chars], device=device)
                   if val_ids is not None else float("nan"))
            history["step"].append(step)
            history["train"].append(float(np.mean(running)))
            history["val"].append(val)
            running = []
            bar.set_postfix(train=f"{history['train'][-1]:.3f}", val=f"{val:.3f}")
            if live:
                live.update(history)
    return history


# --- the course's results table (notebook 01 writes it, notebook 06 adds the Transformer) ---

def results_path():
    """JSON of validation results for the current run mode (full, ci or grade runs never
    overwrite each other's numbers)."""
    return cache_dir() / f"lm_results_{runmode.mode()}.json"


def load_results() -> dict:
    """{model name: {"nll": nats/char, "ppl": ..., "bpc": ...}}; empty when none saved."""
    path = results_path()
    return json.loads(path.read_text()) if path.exists() else {}


def save_result(name: str, nll: float, **extra) -> dict:
    """Add (or replace) one model's validation loss in the results file; all results."""
    results = load_results()
    results[name] = {"nll": nll, "ppl": perplexity(nll), "bpc": bits_per_char(nll), **extra}
    path = results_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    # write beside, then rename: a notebook reading the table never sees half a file
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(results, indent=1))
    os.replace(tmp, path)
    return results


def results_table(results: dict) -> str:
    """A plain-text table, one row per model, in insertion order."""
    lines = [f"{'model':<16}{'perplexity':>12}{'bits/char':>12}"]
    lines += [f"{name:<16}{r['ppl']:>12.3f}{r['bpc']:>12.3f}" for name, r in results.items()]
    return "\n".join(lines)


def plot_results(results: dict):
    """Bar chart of validation bits per character (lower is better); returns the figure."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3))
    names = list(results)
    ax.bar(names, [results[n]["bpc"] for n in names], color="tab:blue")
    ax.set_xlabel("model")
    ax.set_ylabel("validation bits per character")
    ax.set_title("Lower is better; perplexity = 2 ** bits")
    fig.tight_layout()
    return fig
