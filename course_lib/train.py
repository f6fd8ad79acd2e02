"""One trainer, one evaluator and one results table for every language model in the course.

Models follow ``forward(idx (B, T), targets (B, T) or None) -> (logits (B, T, vocab_size),
loss)`` with ``loss`` the mean cross-entropy in nats; the trainer knows nothing else about them.
The evaluator scores every model on the same validation chunks (``EVAL_BLOCK`` characters,
each starting from an empty context), so notebook 01's n-grams, RNN and LSTM and notebook
06's GPT land in one comparable table, stored as JSON in the data cache.

The trainer's defaults (Adam, constant learning rate) are notebook 01's; notebook 06 trains
GPT with nanoGPT's additions as keyword options: warm-up and cosine decay (``lr_at``), AdamW
with weight decay on the weight matrices only (``make_optimizer``), a fixed set of random
validation batches (``val_batches``) and a time budget.
"""
from __future__ import annotations

import json
import math
import os
import time

import numpy as np
import torch

from course_lib import runmode
from course_lib.data import cache_dir

EVAL_BLOCK = 128  # characters per validation chunk, for every model in the course
RUN = f"{os.getpid()}-{time.time_ns()}"  # this process (a notebook's kernel), in the results file


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
    x, y = (torch.from_numpy(np.asarray(ids)[w]).to(device or default_device())
            for w in (window[:, :-1], window[:, 1:]))  # each laid out densely: a model may view it
    return x, y


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


def make_optimizer(model, lr: float, weight_decay: float = 0.0, betas=(0.9, 0.999),
                   fused: bool = False) -> torch.optim.AdamW:
    """Adam with decoupled weight decay (AdamW; Loshchilov and Hutter 2019) on the 2-D
    parameters only: weight matrices and embeddings shrink towards 0, biases and layer-norm
    gains and shifts do not (nanoGPT's ``configure_optimizers``). With ``weight_decay=0`` this
    is plain Adam. ``fused`` does the whole update in one kernel per device (fewer passes
    over memory, same numbers up to rounding).
    """
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW([g for g in groups if g["params"]], lr=lr, betas=betas,
                             fused=fused or None)


def lr_at(step: int, lr: float, steps: int, warmup: int = 0, min_lr: float | None = None) -> float:
    """Learning rate of optimiser step ``step`` = 1 .. ``steps``: a linear warm-up from
    lr / warmup to lr over the first ``warmup`` steps, then constant (``min_lr`` None) or a
    half cosine from lr down to ``min_lr`` at the last step (nanoGPT's ``get_lr``):

        lr_t = min_lr + (lr - min_lr) * (1 + cos(pi * (t - warmup) / (steps - warmup))) / 2.
    """
    if step <= warmup:
        return lr * step / warmup
    if min_lr is None or steps <= warmup:
        return lr
    progress = min(1.0, (step - warmup) / (steps - warmup))
    return min_lr + (lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))


def train_steps(model, train_ids: np.ndarray, *, steps: int, batch_size: int = 64,
                block_size: int | None = None, lr: float = 3e-3, warmup: int = 0,
                min_lr: float | None = None, weight_decay: float = 0.0, betas=(0.9, 0.999),
                fused: bool = False, grad_clip: float = 1.0, device=None, seed: int = 0):
    """The training loop itself, as a generator: each ``next`` does one optimiser step on a
    random batch (``get_batch``) and yields ``(step, lr, loss)`` (loss: that batch's mean
    nats per token). ``train`` drives it; a benchmark can drive two of them in turns.
    The learning rate follows ``lr_at``; gradients are clipped at norm ``grad_clip``.
    """
    device = device or default_device()
    block_size = block_size or model.block_size
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    model.to(device).train()
    opt = make_optimizer(model, lr, weight_decay, betas, fused)
    for step in range(1, steps + 1):
        step_lr = lr_at(step, lr, steps, warmup, min_lr)
        for group in opt.param_groups:
            group["lr"] = step_lr
        x, y = get_batch(train_ids, batch_size, block_size, rng, device)
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        opt.step()
        yield step, step_lr, loss.item()


def val_batches(ids: np.ndarray, n_batches: int, batch_size: int, block_size: int,
                device=None, seed: int = 0) -> list:
    """``n_batches`` random windows (x, y), each (batch_size, block_size), of ``ids``: the
    validation estimate of nanoGPT (``eval_iters`` batches), drawn once from ``seed`` so that
    every evaluation, and every model given the same arguments, sees the same text.
    """
    rng = np.random.default_rng(seed)
    return [get_batch(ids, batch_size, block_size, rng, device) for _ in range(n_batches)]


@torch.no_grad()
def evaluate_batches(model, batches) -> float:
    """Mean loss (nats per token) of ``model`` over ``val_batches``' equal-sized batches."""
    was_training = model.training
    model.eval()
    total = sum(model(x, y)[1].item() for x, y in batches)
    model.train(was_training)
    return total / len(batches)


def train(model, train_ids: np.ndarray, *, steps: int, val_ids: np.ndarray | None = None,
          batch_size: int = 64, block_size: int | None = None, lr: float = 3e-3,
          eval_every: int = 100, eval_chars: int = 20_000, device=None, seed: int = 0,
          plot: bool = False, warmup: int = 0, min_lr: float | None = None,
          weight_decay: float = 0.0, betas=(0.9, 0.999), fused: bool = False,
          eval_batches: int | None = None, minutes: float | None = None, name: str | None = None) -> dict:
    """Mini-batch Adam on random windows of ``train_ids`` (CS182 slides,
    "SGD and Mini-batch SGD").

    Every ``eval_every`` steps records the mean training loss since the last record and the
    validation loss: on the first ``eval_chars`` of ``val_ids`` (``evaluate``), or, with
    ``eval_batches``, on that many fixed random batches of batch_size x block_size windows
    (``val_batches``, as nanoGPT estimates it; needed by models whose context is shorter
    than ``EVAL_BLOCK``). With ``plot`` a live loss plot updates in the notebook, and in full
    mode a progress bar shows the ETA. Gradients are clipped at norm 1, which keeps RNNs from
    the occasional exploding step.

    The defaults are plain Adam at a constant ``lr``. For a Transformer, nanoGPT's recipe adds
    a ``warmup`` of a few hundred steps, a cosine decay to ``min_lr`` (``lr_at``), AdamW's
    ``weight_decay`` on the weight matrices (``make_optimizer``) and ``betas=(0.9, 0.99)``;
    ``fused`` runs the optimiser as one kernel. ``minutes`` stops training once that much
    training time has passed (the schedule is still planned for ``steps``). ``name`` is what the
    progress bar and the plot's title call the model (default: its class name).
    Returns {"step": [...], "seconds": [...], "lr": [...], "train": [...], "val": [...]},
    where "seconds" is training time so far, evaluation excluded.
    """
    device = device or default_device()
    block_size = block_size or model.block_size
    batches = (val_batches(val_ids, eval_batches, batch_size, block_size, device)
               if val_ids is not None and eval_batches else None)
    history = {"step": [], "seconds": [], "lr": [], "train": [], "val": []}
    running, seconds = [], 0.0
    name = name or type(model).__name__
    if plot:
        from course_lib.viz import LivePlot  # matplotlib only where a plot is asked for
    live = LivePlot({"loss (nats per token)": ["train", "val"]}, labels={"train": "train", "val": "validation"},
                    title=f"{name}: loss while training") if plot else None
    loop = train_steps(model, train_ids, steps=steps, batch_size=batch_size,
                       block_size=block_size, lr=lr, warmup=warmup, min_lr=min_lr,
                       weight_decay=weight_decay, betas=betas, fused=fused, device=device,
                       seed=seed)
    tick = time.perf_counter()
    for step, step_lr, loss in (bar := runmode.progress(loop, total=steps, desc=name)):
        seconds += time.perf_counter() - tick
        running.append(loss)
        out_of_time = minutes is not None and seconds > 60 * minutes
        if step % eval_every == 0 or step == steps or out_of_time:
            if batches is not None:
                val = evaluate_batches(model, batches)
            elif val_ids is not None:
                val = evaluate(model, val_ids[:eval_chars], device=device)
            else:
                val = float("nan")
            for key, value in zip(history, (step, seconds, step_lr, float(np.mean(running)), val)):
                history[key].append(value)
            running = []
            bar.set_postfix(train=f"{history['train'][-1]:.3f}", val=f"{val:.3f}")
            if live:
                live.update(history)
        if out_of_time:
            break
        tick = time.perf_counter()
    return history


# --- the course's results table (notebook 01 writes it, notebook 06 adds the Transformer) ---

def results_path():
    """JSON of validation results for the current run mode (full, ci or grade runs never
    overwrite each other's numbers)."""
    return cache_dir() / f"lm_results_{runmode.mode()}.json"


def load_results() -> dict:
    """{model name: {"nll": nats/char, "ppl": ..., "bpc": ..., "run": ..., "saved": ...}};
    empty when none saved."""
    path = results_path()
    return json.loads(path.read_text()) if path.exists() else {}


def save_result(name: str, nll: float, **extra) -> dict:
    """Add (or replace) one model's validation loss in the results file; all results. Each row
    records the run (this Python process: a notebook's kernel) and the time that saved it."""
    results = load_results()
    results[name] = {"nll": nll, "ppl": perplexity(nll), "bpc": bits_per_char(nll), "run": RUN,
                     "saved": time.time(), **extra}
    path = results_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    # write beside, then rename: a notebook reading the table never sees half a file
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(results, indent=1))
    os.replace(tmp, path)
    return results


def from_this_run(row: dict) -> bool:
    """Whether a results row was saved by this run (rows of older files carry no run: earlier)."""
    return row.get("run") == RUN


def results_table(results: dict) -> str:
    """A plain-text table, one row per model, in insertion order. The last column says which
    rows this run saved and when the others were: the file keeps every model a notebook of the
    same mode ever scored (notebook 01's RNN and LSTM, notebook 06's GPT), so a row may be older
    than the cells above it, and a note under the table says so."""
    def saved(row):
        if from_this_run(row):
            return "this run"
        when = time.strftime(", %d %b %H:%M", time.localtime(row["saved"])) if "saved" in row else ""
        return "earlier run" + when

    lines = [f"{'model':<16}{'perplexity':>12}{'bits/char':>12}   saved by"]
    lines += [f"{name:<16}{r['ppl']:>12.3f}{r['bpc']:>12.3f}   {saved(r)}" for name, r in results.items()]
    if not all(map(from_this_run, results.values())):
        lines.append(f"(rows of an earlier run come from {results_path()}: run their notebook's cells "
                     "again to replace them)")
    return "\n".join(lines)


def plot_results(results: dict):
    """Bar chart of validation bits per character (lower is better), rows saved by an earlier
    run hatched and pale; returns the figure."""
    import matplotlib.pyplot as plt  # lazy: matplotlib only where a plot is asked for

    fig, ax = plt.subplots(figsize=(7, 3))
    names = list(results)
    earlier = [not from_this_run(results[n]) for n in names]
    bars = ax.bar(names, [results[n]["bpc"] for n in names], color="tab:blue")
    for bar, old in zip(bars, earlier):
        if old:
            bar.set(alpha=0.45, hatch="//", label="saved by an earlier run")
    if any(earlier):
        ax.legend(handles=[bars[earlier.index(True)]], fontsize=8)
    ax.set_xlabel("model")
    ax.set_ylabel("validation bits per character")
    ax.set_title("Lower is better; perplexity = 2 ** bits")
    fig.tight_layout()
    return fig
