"""GPT on tiny Shakespeare on a GPU: time to a validation loss, the course's GPT against real
nanoGPT, nanoGPT's ``config/train_shakespeare_char.py`` for both, side by side in one process.

The recipe (nanoGPT's config): 6 layers, 6 heads, width 384, context 256, batch 64, dropout
0.2, lr 1e-3 with 100 warm-up steps and a cosine decay to 1e-4 at step 5000, AdamW (betas
0.9, 0.99; weight decay 0.1 on 2-D weights; fused on CUDA), gradients clipped at 1; bfloat16
autocast where the GPU has it, as nanoGPT's ``train.py`` does. nanoGPT's README reports a best
validation loss of 1.4697, hence the default target 1.47: the best, not the last, since this
recipe overfits (its config keeps a checkpoint only when the validation loss improves). On an
H200 nanoGPT's model was at its best, 1.4731, after 1,750 of the 5,000 steps, and at 1.72 by
the end.

- ``nanogpt``: nanoGPT's own ``model.py`` (its ``GPT``, with PyTorch's fused attention, GELU,
  no biases) and its own ``configure_optimizers``. Give the folder holding ``model.py`` with
  --nanogpt (a clone of github.com/karpathy/nanoGPT; never committed here); without it only
  the course's model runs, and the output says so.
- ``course``: ``course_lib.transformer.GPT`` (hand-derived attention and layer-norm backward
  passes; ReLU), with the recipe's dropout on the attention weights too, as nanoGPT has it;
  with --flash its attention is ``course_lib.flash`` (notebook 07's Triton kernels on a CUDA
  GPU), which has no dropout on the weights, so that run has none there (the output says so).

On a GPU both models are compiled with ``torch.compile``, as nanoGPT's ``train.py`` compiles its
own by default (its README turns that off on a CPU, and so does this script); the course's GPT
compiles whole, its hand-derived backward passes traced into the graph
(``tests/course_lib/test_gpt.py``). ``--no-compile`` runs both eagerly, ``--compile`` compiles
on a CPU too. Compiling (the first
forward and backward, made on a batch of their own before the clock starts, the weights left as
they were) is timed apart. Both draw the same training batches, follow the same learning-rate schedule
(``course_lib.train.lr_at``) and are evaluated on the same ``--eval-iters`` validation
batches every ``--eval-interval`` steps, nanoGPT's way; they take turns of that many steps,
so a slow spell of the machine hits both. Evaluation is left out of the training clock.
Printed: each evaluation, the training time at which each run first reaches the target,
their ratio, and the median time per step. Where a run misses the target, each run's best and
when it came, and the times to the loss both reached (the higher of the two bests).

``--max-steps`` stops both runs early (the schedule stays the recipe's 5,000 steps: on an H200
both runs were at their best after 1,500-1,750); ``--profile N`` ends with N more steps of each
under ``torch.profiler``, and the table of the operators that took the most GPU time.

    python benchmarks/gpt_shakespeare_gpu.py --nanogpt PATH [--flash] [--no-compile]
                                             [--time-limit 600] [--max-steps 2500] [--profile 10]
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from pathlib import Path

import numpy as np
import torch

import nanogpt  # benchmarks/nanogpt.py
from course_lib.tokenize import CharTokenizer
from course_lib.train import get_batch, lr_at, make_optimizer, val_batches
from course_lib.transformer import GPT, GPTConfig

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "tinyshakespeare.txt"
RECIPE = dict(n_layers=6, n_heads=6, d_model=384, block=256, batch=64, dropout=0.2, lr=1e-3,
              warmup=100, min_lr=1e-4, steps=5000, weight_decay=0.1, betas=(0.9, 0.99), clip=1.0)


def load_data(path):
    text = Path(path).read_text(encoding="utf-8")
    tok = CharTokenizer.from_text(text)  # the sorted set of characters, as nanoGPT's prepare.py
    ids = tok.encode(text)
    n_train = int(0.9 * len(ids))
    return tok.vocab_size, ids[:n_train], ids[n_train:]


def course_model(vocab_size, r, flash):
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size, block_size=r["block"], d_model=r["d_model"],
                          n_heads=r["n_heads"], n_layers=r["n_layers"], dropout=r["dropout"],
                          attn_dropout=0.0 if flash else r["dropout"], flash=flash))
    return model, lambda m, fused: make_optimizer(m, r["lr"], r["weight_decay"], r["betas"], fused)


def nanogpt_model(vocab_size, r, module):
    model = nanogpt.build(module, vocab_size, r["block"], r["n_layers"], r["n_heads"],
                          r["d_model"], r["dropout"])
    return model, lambda m, fused: nanogpt.optimizer(m, r["weight_decay"], r["lr"], r["betas"],
                                                     "cuda" if fused else "cpu")


class Run:
    """One model's training, a turn of steps at a time, on batches drawn from its own random
    generator, started alike for both runs (so both see the same batches)."""

    def __init__(self, name, model, optimizer, r, device, autocast, compile=False):
        self.name, self.r, self.device, self.autocast = name, r, device, autocast
        model = model.to(device).train()
        self.opt = optimizer(model, device.type == "cuda")
        self.model = torch.compile(model) if compile else model
        self.rng = np.random.default_rng(0)
        self.step, self.train_s, self.eval_s, self.compile_s = 0, 0.0, 0.0, 0.0
        self.curve, self.hit, self.step_ms = [], None, []
        self.uncompiled = compile

    def _compile(self, train_ids):
        """The first forward and backward, where torch.compile makes the graphs, on a batch of
        its own (the training batches' generator is not touched); the gradients are dropped."""
        self.uncompiled = False
        self._sync()
        start = time.perf_counter()
        x, y = get_batch(train_ids, self.r["batch"], self.r["block"], np.random.default_rng(1),
                         self.device)
        with self.autocast():
            _, loss = self.model(x, y)
        loss.backward()
        self.opt.zero_grad(set_to_none=True)
        self._sync()
        self.compile_s = time.perf_counter() - start

    def _sync(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    def turn(self, train_ids, steps, past_end=False):
        """``steps`` training steps, fewer where the recipe's last step comes first (unless
        ``past_end``, for the profile: the schedule's rate then stays at its minimum)."""
        if self.uncompiled:
            self._compile(train_ids)
        self._sync()
        start = time.perf_counter()
        n = steps if past_end else min(steps, self.r["max_steps"] - self.step)
        for _ in range(n):
            self.step += 1
            for group in self.opt.param_groups:
                group["lr"] = lr_at(self.step, self.r["lr"], self.r["steps"], self.r["warmup"],
                                    self.r["min_lr"])
            x, y = get_batch(train_ids, self.r["batch"], self.r["block"], self.rng, self.device)
            with self.autocast():
                _, loss = self.model(x, y)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.r["clip"])
            self.opt.step()
        self._sync()
        elapsed = time.perf_counter() - start
        self.train_s += elapsed
        self.step_ms.append(1e3 * elapsed / max(1, n))

    @torch.no_grad()
    def evaluate(self, batches, target):
        start = time.perf_counter()
        self.model.eval()
        with self.autocast():
            loss = sum(self.model(x, y)[1].item() for x, y in batches) / len(batches)
        self.model.train()
        self.eval_s += time.perf_counter() - start
        self.curve.append((self.step, self.train_s, loss))
        if self.hit is None and loss <= target:
            self.hit = (self.step, self.train_s)
        return loss

    @property
    def best(self):
        """(step, training seconds, validation loss) of the evaluation with the lowest loss."""
        return min(self.curve, key=lambda c: c[2])

    def done(self, time_limit):
        return (self.hit is not None or self.step >= self.r["max_steps"]
                or self.train_s >= time_limit)

    def profile(self, train_ids, steps):
        """``steps`` more training steps under torch.profiler: its table of the operators that
        took the most time on the GPU (on the CPU, of the CPU)."""
        from torch.profiler import ProfilerActivity, profile

        cuda = self.device.type == "cuda"
        activities = [ProfilerActivity.CPU] + [ProfilerActivity.CUDA] * cuda
        with profile(activities=activities) as prof:
            self.turn(train_ids, steps, past_end=True)
        key = "self_cuda_time_total" if cuda else "self_cpu_time_total"
        return prof.key_averages().table(sort_by=key, row_limit=15)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nanogpt", type=Path, help="folder holding nanoGPT's model.py "
                        "(default: $NANOGPT)")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--flash", action="store_true", help="the course's GPT with flash=True")
    parser.add_argument("--target", type=float, default=1.47)
    parser.add_argument("--eval-interval", type=int, default=250)
    parser.add_argument("--eval-iters", type=int, default=200)
    parser.add_argument("--time-limit", type=float, default=1800,
                        help="training seconds per run after which it stops")
    parser.add_argument("--dtype", choices=["bfloat16", "float32"], default=None,
                        help="autocast dtype (default bfloat16 where the GPU has it)")
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                        help="torch.compile both models (default: on a GPU, as nanoGPT's "
                             "train.py does; --no-compile: both eager)")
    parser.add_argument("--max-steps", type=int, default=None,
                        help="stop each run after this many steps (the schedule stays 5,000's)")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="after training, profile N more steps of each run")
    parser.add_argument("--quick", action="store_true", help="a tiny model, a few steps: a smoke test")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    r = dict(RECIPE)
    if args.quick:
        r.update(n_layers=2, n_heads=2, d_model=32, block=32, batch=8, steps=6, warmup=2)
        args.eval_interval, args.eval_iters = 3, 2
    r["max_steps"] = min(r["steps"], args.max_steps or r["steps"])
    compile = device.type == "cuda" if args.compile is None else args.compile
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True  # as nanoGPT's train.py
        torch.backends.cudnn.allow_tf32 = True
    dtype = args.dtype or ("bfloat16" if device.type == "cuda" and torch.cuda.is_bf16_supported()
                           else "float32")
    autocast = (contextlib.nullcontext if dtype == "float32" else
                lambda: torch.autocast(device.type, dtype=getattr(torch, dtype)))
    vocab_size, train_ids, val_ids = load_data(args.data)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"device: {name} | torch {torch.__version__} | {dtype} autocast"
          f"{', TF32 matmuls' if device.type == 'cuda' else ''} | "
          f"{'torch.compile' if compile else 'eager (not compiled)'} | recipe: {r}")
    runs = [Run("course" + (" (flash)" if args.flash else ""), *course_model(vocab_size, r, args.flash),
                r, device, autocast, compile)]
    if args.flash:
        print("course (flash): no dropout on the attention weights (the flash kernels have none); "
              f"dropout {r['dropout']} on the embeddings and sublayer outputs only")
    module = nanogpt.find(args.nanogpt)
    if module:
        runs.insert(0, Run("nanogpt", *nanogpt_model(vocab_size, r, module), r, device, autocast,
                           compile))
    else:
        print("no nanoGPT given (--nanogpt PATH or $NANOGPT): only the course's model runs")
    batches = val_batches(val_ids, args.eval_iters, r["batch"], r["block"], device, seed=1337)
    print(f"{'run':<16}{'step':>6}{'train s':>9}{'val loss':>10}{'ms/step':>9}", flush=True)
    while not all(run.done(args.time_limit) for run in runs):
        for run in runs:
            if not run.done(args.time_limit):
                run.turn(train_ids, args.eval_interval)
                loss = run.evaluate(batches, args.target)
                print(f"{run.name:<16}{run.step:>6}{run.train_s:>9.1f}{loss:>10.4f}"
                      f"{run.step_ms[-1]:>9.1f}", flush=True)
    print()
    for run in runs:
        step, seconds, best = run.best
        hit = f"val loss {args.target} at step {run.hit[0]}, {run.hit[1]:.1f} s" if run.hit else \
            f"did not reach {args.target} (best {best:.4f}, at step {step}, {seconds:.1f} s)"
        print(f"{run.name}: {hit}; median {statistics.median(run.step_ms):.1f} ms per step "
              f"(turns of {args.eval_interval}); eval {run.eval_s:.1f} s"
              + (f"; compiling {run.compile_s:.1f} s" if compile else ""))
    if len(runs) == 2:
        base, course = runs
        per_step = statistics.median(course.step_ms) / statistics.median(base.step_ms)
        print(f"time per step: course / nanoGPT = {per_step:.2f}")
        if all(run.hit for run in runs):
            print(f"time to val loss {args.target}: course / nanoGPT = {course.hit[1]:.1f} s / "
                  f"{base.hit[1]:.1f} s = {course.hit[1] / base.hit[1]:.2f}")
        else:
            both = max(run.best[2] for run in runs)  # the higher best
            (_, t_base), (_, t_course) = (nanogpt.first_at(run.curve, both) for run in (base, course))
            print(f"no time ratio at {args.target}: a run did not reach it. To {both:.4f}, "
                  f"the loss both reached: course / nanoGPT = {t_course:.1f} s / {t_base:.1f} s = "
                  f"{t_course / t_base:.2f}")
    for run in runs if args.profile else ():
        print(f"\n-- {run.name}: {args.profile} more steps under torch.profiler --\n"
              f"{run.profile(train_ids, args.profile)}")


if __name__ == "__main__":
    main()
