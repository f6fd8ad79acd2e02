"""nanoGPT's own model (github.com/karpathy/nanoGPT, ``model.py``) for the benchmarks that
compare the course's GPT with it. Never committed here: give the folder of a clone with
``--nanogpt PATH`` or in the ``NANOGPT`` environment variable. ``first_at`` reads the curve of
a race against it."""
from __future__ import annotations

import contextlib
import importlib.util
import os
from pathlib import Path

import torch


def find(folder: str | Path | None = None):
    """nanoGPT's ``model`` module from ``folder`` (else $NANOGPT), or None if neither is given.

    A folder without ``model.py`` is an error, not a silent fall-back."""
    folder = folder or os.environ.get("NANOGPT")
    if not folder:
        return None
    path = Path(folder) / "model.py"
    if not path.is_file():
        raise SystemExit(f"no nanoGPT here: {path} does not exist (a clone of "
                         "github.com/karpathy/nanoGPT holds it)")
    spec = importlib.util.spec_from_file_location("nanogpt_model", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(module, vocab_size: int, block_size: int, n_layers: int, n_heads: int, d_model: int,
          dropout: float = 0.0, seed: int = 0, relu: bool = False) -> torch.nn.Module:
    """nanoGPT's ``GPT`` with these sizes, as its ``train.py`` makes it (no biases); with
    ``relu``, its MLPs use ReLU where nanoGPT has GELU (the course's GPT uses ReLU)."""
    torch.manual_seed(seed)
    cfg = module.GPTConfig(block_size=block_size, vocab_size=vocab_size, n_layer=n_layers,
                           n_head=n_heads, n_embd=d_model, dropout=dropout, bias=False)
    with contextlib.redirect_stdout(None):  # it prints its parameter count
        model = module.GPT(cfg)
    if relu:
        for block in model.transformer.h:
            block.mlp.gelu = torch.nn.ReLU()  # the attribute keeps nanoGPT's name
    return model


def optimizer(model, weight_decay: float, lr: float, betas, device_type: str):
    """nanoGPT's own ``configure_optimizers`` (AdamW, decay on 2-D weights, fused on CUDA)."""
    with contextlib.redirect_stdout(None):  # it prints its parameter groups
        return model.configure_optimizers(weight_decay, lr, betas, device_type)


def first_at(curve, loss):
    """(step, training seconds) of the first evaluation in ``curve`` (rows of step, training
    seconds, validation loss) at or below ``loss``; None if the run never got there."""
    return next(((step, seconds) for step, seconds, value in curve if value <= loss), None)
