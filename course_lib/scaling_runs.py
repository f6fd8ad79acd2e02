"""A mini scaling-law experiment on this CPU (notebook 06): validation loss against model size.

Kaplan et al. (2020, "Scaling Laws for Neural Language Models") found that a language model's
loss falls as a power of its non-embedding parameter count N, L(N) = (N_c / N)^alpha_N with
alpha_N ~ 0.076, when data and compute do not limit it. Here several GPTs of growing size
each train on the same number of tokens with the same recipe, and ``course_lib.scaling.
fit_power_law`` fits the straight line through (log N, log L). A fixed token budget means the
larger models are further from convergence, so expect a smaller exponent than Kaplan's.

Each run is a dict {"n_layers", "d_model", "n_heads", "non_embedding_params", "tokens",
"steps", "val_loss" (nats per token on the whole validation split), "seconds" (training
time)}. Results are saved as JSON in the data cache, one file per run mode, so a notebook can
show the full-mode numbers without training again.
"""
from __future__ import annotations

import json
import os

import numpy as np
import torch

from course_lib import runmode
from course_lib.data import cache_dir
from course_lib.train import default_device, evaluate, train
from course_lib.transformer import GPT, GPTConfig

# The training setup that reaches nanoGPT's CPU validation loss in under half its wall time
# (benchmarks/gpt_shakespeare.py): a larger batch and a 4x larger peak learning rate with a
# short warm-up, AdamW as nanoGPT sets it up, and the fused optimiser step.
FAST_RECIPE = dict(batch_size=24, lr=4e-3, warmup=30, min_lr=4e-4, weight_decay=0.1,
                   betas=(0.9, 0.99), fused=True)

# (n_layers, d_model): non-embedding parameters from about 28 thousand to 0.79 million,
# each about twice the one before (1.5 orders of magnitude).
FULL_SIZES = [(1, 48), (2, 48), (2, 64), (3, 80), (2, 128), (4, 128)]
TINY_SIZES = [(1, 8), (1, 16), (2, 16), (2, 24), (2, 32)]
FULL_TOKENS = 1_500_000  # per model; about 1.5 passes over the course's training split
TINY_TOKENS = 60_000


def default_sizes() -> list[tuple[int, int]]:
    return runmode.pick(full=FULL_SIZES, ci=TINY_SIZES)


def default_tokens() -> int:
    return runmode.pick(full=FULL_TOKENS, ci=TINY_TOKENS)


def train_one(train_ids, val_ids, n_layers: int, d_model: int, tokens: int, *,
              vocab_size: int, n_heads: int = 4, block_size: int = 64,
              recipe: dict | None = None, device=None, seed: int = 0) -> dict:
    """Train one GPT for ``tokens`` training tokens (whole batches) and score it on all of
    ``val_ids`` in consecutive windows of ``block_size``; one result dict (see the module)."""
    recipe = dict(FAST_RECIPE if recipe is None else recipe)
    device = device or default_device()
    steps = max(1, tokens // (recipe["batch_size"] * block_size))
    torch.manual_seed(seed)
    model = GPT(GPTConfig(vocab_size, block_size=block_size, d_model=d_model,
                          n_heads=n_heads, n_layers=n_layers))
    history = train(model, train_ids, steps=steps, eval_every=steps, device=device, seed=seed,
                    **recipe)
    return {"n_layers": n_layers, "d_model": d_model, "n_heads": n_heads,
            "non_embedding_params": model.n_params(non_embedding=True),
            "tokens": steps * recipe["batch_size"] * block_size, "steps": steps,
            "val_loss": evaluate(model, val_ids, device=device, block_size=block_size),
            "seconds": history["seconds"][-1]}


def scaling_experiment(train_ids: np.ndarray, val_ids: np.ndarray, sizes=None, tokens=None, *,
                       vocab_size: int | None = None, cached: bool = False, **kwargs) -> list[dict]:
    """Train one GPT per (n_layers, d_model) in ``sizes`` on ``tokens`` tokens each; the
    list of result dicts, smallest model first.

    ``sizes`` and ``tokens`` default to the run mode's (``FULL_SIZES`` and ``FULL_TOKENS``:
    about 7 minutes on a quiet 2-core laptop, as notebook 06's Time line says, and several
    times as long beside other work: 1,665 s of training at load average 3 to 8; the tiny ones
    in CI and grade modes: seconds).
    ``vocab_size`` defaults to the largest id + 1. With ``cached``, results saved earlier in
    this run mode for the same sizes and tokens are returned without training, and new
    results are saved. Other keyword arguments go to ``train_one`` (n_heads, block_size,
    recipe, device, seed).
    """
    sizes = [tuple(s) for s in (default_sizes() if sizes is None else sizes)]
    tokens = default_tokens() if tokens is None else tokens
    if cached:
        saved = load_results()
        if saved and saved["sizes"] == [list(s) for s in sizes] and saved["tokens"] == tokens:
            return saved["runs"]
    vocab_size = vocab_size or int(max(np.max(train_ids), np.max(val_ids))) + 1
    runs = [train_one(train_ids, val_ids, n_layers, d_model, tokens, vocab_size=vocab_size,
                      **kwargs)
            for n_layers, d_model in runmode.progress(sizes, desc="model sizes")]
    runs.sort(key=lambda r: r["non_embedding_params"])
    if cached:
        save_results(runs, sizes, tokens)
    return runs


# --- the cache: one JSON file per run mode ----------------------------------------------------

def results_path():
    return cache_dir() / f"scaling_runs_{runmode.mode()}.json"


def save_results(runs: list[dict], sizes, tokens: int) -> None:
    path = results_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"sizes": [list(s) for s in sizes], "tokens": tokens, "runs": runs}
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # a reader never sees half a file
    tmp.write_text(json.dumps(payload, indent=1))
    os.replace(tmp, path)


def load_results() -> dict | None:
    """{"sizes", "tokens", "runs"} saved in this run mode, or None when there are none."""
    path = results_path()
    return json.loads(path.read_text()) if path.exists() else None


def scaling_table(runs: list[dict]) -> str:
    """A plain-text table, one row per model."""
    lines = [f"{'layers':>6}{'d_model':>8}{'N (non-emb.)':>14}{'tokens':>11}{'val loss':>10}"
             f"{'seconds':>9}"]
    lines += [f"{r['n_layers']:>6}{r['d_model']:>8}{r['non_embedding_params']:>14,}"
              f"{r['tokens']:>11,}{r['val_loss']:>10.3f}{r['seconds']:>9.1f}" for r in runs]
    return "\n".join(lines)
