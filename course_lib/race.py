"""The class race: a training entry, its run under a CPU-time budget, and its score.

Notebook 06's last section asks for an *entry*: one cell that defines

    build(vocab_size) -> torch.nn.Module
        whose forward(idx (B, T) int64) returns logits (B, T, vocab_size), or a tuple whose
        first element they are (every course model returns (logits, loss));
    RECIPE = {"lr": ..., "batch_size": ..., ...}
        how to train it (``RECIPE_KEYS``; any key left out takes its ``DEFAULTS`` value).

``train_entry`` trains it for ``budget`` CPU seconds of this process (every thread counted,
``time.process_time``) with AdamW, a linear warm-up and a cosine decay over the budget, on
random windows of the training text; ``bits_per_char`` scores logits. The learner runs both in
the notebook; ``autograder leaderboard`` runs the same ``train_entry`` in the grading sandbox,
and scores the trained model on text the sandbox never sees (``autograder/race``).

Scored text comes in windows of ``CONTEXT`` characters, each from an empty context (as
``course_lib.train.evaluate`` scores every model of the course), so a model must accept
``CONTEXT`` positions. Shapes: B batch, T positions, vocab_size characters.
"""
from __future__ import annotations

import json
import math
import time

import numpy as np
import torch
import torch.nn.functional as F

from course_lib import runmode
from course_lib.data import cache_dir
from course_lib.train import get_batch, make_optimizer

CONTEXT = 128  # characters of every scored window; every model must take this many positions
DEFAULTS = {"lr": 1e-3, "batch_size": 32, "block_size": CONTEXT, "warmup": 0.05, "min_lr": 1e-4,
            "weight_decay": 0.0, "beta2": 0.99, "grad_clip": 1.0}
RECIPE_KEYS = {  # name -> (what it is, the smallest and largest value taken)
    "lr": ("the peak learning rate", 1e-6, 1.0),
    "batch_size": ("windows per optimiser step", 1, 512),
    "block_size": ("characters per training window", 2, 1024),
    "warmup": ("the share of the budget spent warming the learning rate up", 0.0, 0.5),
    "min_lr": ("the learning rate at the end of the cosine decay", 0.0, 1.0),
    "weight_decay": ("AdamW's decay of the weight matrices", 0.0, 1.0),
    "beta2": ("Adam's second-moment decay", 0.5, 0.99999),
    "grad_clip": ("the largest gradient norm", 0.0, 1e6),
}
INTEGER_KEYS = ("batch_size", "block_size")
CURVE_POINTS = 40  # points of the training curve over the budget
BUDGET = 300.0     # CPU seconds of training in the class race, one thread
PARAMS = 2_000_000  # numbers a trained model may hold
WINDOWS = 256      # held-out windows scored


def recipe_of(recipe) -> dict:
    """``recipe`` checked and completed with ``DEFAULTS``; ValueError naming what is wrong."""
    if not isinstance(recipe, dict):
        raise ValueError(f"RECIPE must be a dict, not {type(recipe).__name__}")
    unknown = sorted(str(k) for k in recipe if k not in RECIPE_KEYS)
    if unknown:
        raise ValueError(f"RECIPE has unknown keys {unknown}; it takes {sorted(RECIPE_KEYS)}")
    out = dict(DEFAULTS)
    for key, value in recipe.items():
        what, low, high = RECIPE_KEYS[key]
        number = type(value) in (int, float) and math.isfinite(value)
        if not number or key in INTEGER_KEYS and type(value) is not int or not low <= value <= high:
            raise ValueError(f"RECIPE[{key!r}] ({what}) must be a{'n integer' if key in INTEGER_KEYS else ' number'} "
                             f"from {low} to {high}, not {value!r}")
        out[key] = value
    return out


def logits_of(output) -> torch.Tensor:
    """The logits a model's forward returned: the output itself, or its first element."""
    if isinstance(output, (tuple, list)) and output:
        output = output[0]
    if not isinstance(output, torch.Tensor):
        raise TypeError(f"the model returned {type(output).__name__}, not a tensor of logits")
    return output


def lr_at(progress: float, recipe: dict) -> float:
    """The learning rate at ``progress`` (0 to 1) of the budget: linear warm-up over the first
    ``warmup`` share, then a half cosine from ``lr`` down to ``min_lr``."""
    lr, warmup, low = recipe["lr"], recipe["warmup"], min(recipe["min_lr"], recipe["lr"])
    if progress < warmup:
        return lr * (progress / warmup)
    rest = (progress - warmup) / (1.0 - warmup)
    return low + (lr - low) * 0.5 * (1.0 + math.cos(math.pi * min(1.0, rest)))


def train_entry(model: torch.nn.Module, recipe, train_ids: np.ndarray, budget: float, seed: int = 0,
                clock=time.process_time) -> list[tuple[float, float]]:
    """Train ``model`` in place until ``budget`` seconds of ``clock`` have passed since the call;
    the curve: (seconds spent, mean training loss in bits per character since the last point),
    ``CURVE_POINTS`` points over the budget. ``train_ids`` (N,) ints; ``seed`` draws the batches."""
    recipe = recipe_of(recipe)
    rng = np.random.default_rng(seed)
    model.train()
    opt = make_optimizer(model, recipe["lr"], recipe["weight_decay"], (0.9, recipe["beta2"]))
    start, curve, losses = clock(), [], []
    next_point = budget / CURVE_POINTS
    while True:
        spent = clock() - start
        if spent >= budget:
            break
        for group in opt.param_groups:
            group["lr"] = lr_at(spent / budget, recipe)
        x, y = get_batch(train_ids, recipe["batch_size"], recipe["block_size"], rng, device="cpu")
        logits = logits_of(model(x))
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if recipe["grad_clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), recipe["grad_clip"])
        opt.step()
        losses.append(loss.item() / math.log(2))
        if clock() - start >= next_point:
            curve.append((clock() - start, float(np.mean(losses))))
            losses, next_point = [], next_point + budget / CURVE_POINTS
    if losses:
        curve.append((clock() - start, float(np.mean(losses))))
    return curve


def windows(ids: np.ndarray, n: int | None = None) -> np.ndarray:
    """Consecutive windows of ``CONTEXT + 1`` characters of ``ids`` (the inputs are the first
    ``CONTEXT``, the targets the last): (n, CONTEXT + 1), all of them if ``n`` is None."""
    ids = np.asarray(ids, dtype=np.int64)
    count = (len(ids) - 1) // CONTEXT
    count = count if n is None else min(n, count)
    return np.stack([ids[i * CONTEXT: i * CONTEXT + CONTEXT + 1] for i in range(count)])


def window_bits(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Cross-entropy in bits of each window, (N,): ``logits`` (N, T, vocab_size) against ``targets`` (N, T)."""
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    picked = np.take_along_axis(logp, np.asarray(targets)[..., None], axis=-1)[..., 0]
    return -picked.mean(axis=-1) / math.log(2)


def bits_per_char(logits: np.ndarray, targets: np.ndarray) -> float:
    """Mean cross-entropy in bits of ``logits`` (N, T, vocab_size) against ``targets`` (N, T)."""
    return float(window_bits(logits, targets).mean())  # windows of one length: the mean of theirs


@torch.no_grad()
def score(model: torch.nn.Module, ids: np.ndarray, n: int | None = None) -> float:
    """``model``'s bits per character on ``windows(ids, n)``, one window at a time."""
    model.eval()
    w = windows(ids, n)
    logits = np.stack([logits_of(model(torch.from_numpy(row[None, :-1])))[0].float().numpy() for row in w])
    model.train()
    return bits_per_char(logits, w[:, 1:])


def run_entry(build, recipe, train_ids: np.ndarray, val_ids: np.ndarray, vocab_size: int, budget: float,
              seed: int = 0, windows_scored: int = WINDOWS) -> dict:
    """Build and train an entry as the race does (one thread, ``budget`` CPU seconds), then
    score it on ``windows_scored`` windows of ``val_ids``: {"curve", "bpc", "params"}."""
    torch.manual_seed(seed)
    model = build(vocab_size)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        curve = train_entry(model, recipe, train_ids, budget, seed)
    finally:
        torch.set_num_threads(threads)
    params = sum(t.numel() for t in model.state_dict().values())
    return {"curve": curve, "bpc": score(model, val_ids, windows_scored), "params": params}


def course_entry_run(train_ids: np.ndarray, val_ids: np.ndarray, vocab_size: int, budget: float) -> dict:
    """``run_entry`` of the course's own entry (``BASELINE``), kept in the data cache per budget
    and vocabulary: trained once, then read back."""
    key = f"{runmode.mode()}-{budget:g}-{vocab_size}-{len(train_ids)}"
    path = cache_dir() / "race_course_entry.json"
    kept = json.loads(path.read_text()) if path.exists() else {}
    if key not in kept:
        namespace = {}
        exec(compile(BASELINE, "<course entry>", "exec"), namespace)
        run = run_entry(namespace["build"], namespace["RECIPE"], train_ids, val_ids, vocab_size, budget)
        kept[key] = {**run, "curve": [list(p) for p in run["curve"]]}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(kept))
    return kept[key]


def plot_race(mine: dict, course: dict, five_gram: float):
    """Training curves (bits per character against CPU seconds) of an entry and the course's,
    with each one's validation score and the 5-gram's as lines."""
    import matplotlib.pyplot as plt  # lazy: the sandbox's trainer never draws

    fig, ax = plt.subplots(figsize=(7, 4))
    for run, name, colour in ((course, "course entry", "#55a868"), (mine, "your entry", "#4c72b0")):
        xs, ys = zip(*run["curve"])
        ax.plot(xs, ys, color=colour, label=f"{name}: training")
        ax.axhline(run["bpc"], color=colour, linestyle=":", label=f"{name}: validation {run['bpc']:.3f}")
    ax.axhline(five_gram, color="#c44e52", linestyle="--", label=f"5-gram: validation {five_gram:.3f}")
    ax.set_xlabel("CPU seconds of training (one thread)")
    ax.set_ylabel("bits per character")
    ax.set_ylim(top=max(4.5, five_gram + 0.5))
    ax.legend(fontsize=8)
    return fig


# The course's own entry, which notebook 06's race cell starts from (a test keeps the two the
# same): ``autograder leaderboard`` ranks it with the class, as the line to beat.
BASELINE = '''
import torch
from course_lib.transformer import GPT, GPTConfig


def build(vocab_size):
    return GPT(GPTConfig(vocab_size=vocab_size, block_size=128, d_model=96, n_heads=4, n_layers=3))


RECIPE = {"lr": 3e-3, "batch_size": 16, "block_size": 128, "warmup": 0.05, "min_lr": 3e-4,
          "weight_decay": 0.1, "grad_clip": 1.0}
'''
