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

import math
import time

import numpy as np
import torch
import torch.nn.functional as F

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


def bits_per_char(logits: np.ndarray, targets: np.ndarray) -> float:
    """Mean cross-entropy in bits of ``logits`` (N, T, vocab_size) against ``targets`` (N, T)."""
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    picked = np.take_along_axis(logp, np.asarray(targets)[..., None], axis=-1)[..., 0]
    return float(-picked.mean() / math.log(2))


@torch.no_grad()
def score(model: torch.nn.Module, ids: np.ndarray, n: int | None = None) -> float:
    """``model``'s bits per character on ``windows(ids, n)``, one window at a time."""
    model.eval()
    w = windows(ids, n)
    logits = np.stack([logits_of(model(torch.from_numpy(row[None, :-1])))[0].float().numpy() for row in w])
    model.train()
    return bits_per_char(logits, w[:, 1:])


# The course's own entry: the GPT of this notebook, sized for a CPU budget. ``autograder
# leaderboard`` ranks it with the class, as the line to beat beside the 5-gram's.
BASELINE = '''
import torch
from course_lib.transformer import GPT, GPTConfig


def build(vocab_size):
    return GPT(GPTConfig(vocab_size=vocab_size, block_size=128, d_model=96, n_heads=4, n_layers=3))


RECIPE = {"lr": 3e-3, "batch_size": 16, "block_size": 64, "warmup": 0.05, "min_lr": 3e-4,
          "weight_decay": 0.1, "grad_clip": 1.0}
'''
