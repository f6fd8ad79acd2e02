"""What learners might enter in the class race, and what the race must say of each.

The race's tests (``tests/autograder/race/``) race small classes of these on generated text
under ``RULES``, a budget of a few CPU seconds: ``SMALL``, an honest entry; ``ATTACKS``, one
entry per way to cheat or to break the grader that we could think of, each with the words its
reason must hold.
"""
from __future__ import annotations

from pathlib import Path

import nbformat

from autograder.race.leaderboard import ENTRY_ID
from autograder.race.verify import Rules

RULES = Rules(budget=2.0, seeds=1, windows=12, checks=4, startup=8.0, grace=4.0, params=400_000,
              score_seconds=60.0)
SMALL = '''
import torch
from course_lib.transformer import GPT, GPTConfig


def build(vocab_size):
    return GPT(GPTConfig(vocab_size=vocab_size, block_size=128, d_model=32, n_heads=2, n_layers=1))


RECIPE = {"lr": 1e-2, "batch_size": 8}  # windows of 128, as scored: every position trained
'''
PEEK = '''
import torch


class Peek(torch.nn.Module):
    """Predicts position t from the character at t + 1: perfect, and not causal."""
    def __init__(self, vocab_size):
        super().__init__()
        self.table = torch.nn.Embedding(vocab_size, vocab_size)

    def forward(self, idx):
        return self.table(torch.roll(idx, -1, dims=1))


def build(vocab_size):
    return Peek(vocab_size)


RECIPE = {"lr": 0.1, "batch_size": 8, "block_size": 32}
'''
# The harness's way out is the one pipe open for writing from fd 3 up: an entry can write there itself.
WAY_OUT = ("import os, stat, time\n"
           "def _out(fd):\n    try:\n        st = os.fstat(fd)\n    except OSError:\n        return False\n"
           "    return stat.S_ISFIFO(st.st_mode) and st.st_ino != os.fstat(0).st_ino\n"
           "out = next(fd for fd in range(3, 64) if _out(fd))\n")
UNLUCKY = "# its sandbox does not start (a fault the test injects)\n" + SMALL
# Its own seeds, set only in the training process, where the scoring process's check of seeds
# (two seeds must build two models) cannot see them; a learning rate by the step, not the clock,
# and ten steps of learning, then none: every run of it is the same run, whatever the race's seed.
SAME_EVERY_SEED = ("import sys\nimport numpy\nimport torch\nimport course_lib.race as race\n"
                   "if sys.argv[1] == 'train':\n    _rng = numpy.random.default_rng\n"
                   "    numpy.random.default_rng = lambda seed=None: _rng(7)\n"
                   "    race.lr_at = lambda progress, recipe: 1e-2\n"
                   + SMALL.replace("RECIPE =", "class Stops(torch.nn.Module):\n"
                                   "    def __init__(self, inner):\n        super().__init__()\n"
                                   "        self.inner, self.steps = inner, 0\n"
                                   "        self.still = torch.nn.Parameter(torch.zeros(()))\n\n"
                                   "    def forward(self, idx):\n        out = self.inner(idx)[0]\n"
                                   "        if not self.training:\n            return out\n"
                                   "        self.steps += 1\n"
                                   "        return out if self.steps <= 10 else out.detach() + 0 * self.still\n\n\n"
                                   "_plain = build\n\n\ndef build(vocab_size):\n"
                                   "    if sys.argv[1] == 'train':\n        torch.manual_seed(7)\n"
                                   "    return Stops(_plain(vocab_size))\n\n\nRECIPE ="))
ATTACKS = {  # learner id -> (entry source, words its reason must hold; None: ranked, not refused)
    "ada": (SMALL, None),
    "peek": (PEEK, "not causal"),
    "slowclock": ("import time\nimport course_lib.race as race\n"  # the budget's clock made to run slow
                  "race.train_entry.__defaults__ = (0, lambda: time.process_time() / 10)\n" + SMALL, "CPU seconds"),
    "atimport": ("import time\nend = time.process_time() + 15\nwhile time.process_time() < end:\n    pass\n"  # precomputed
                 + SMALL, "CPU seconds"),
    "child": ("import subprocess\nsubprocess.run(['true'])\n" + SMALL, "raised while training"),
    "giant": (SMALL.replace("d_model=32, n_heads=2, n_layers=1", "d_model=200, n_heads=2, n_layers=1"),
              "the race allows 400,000"),
    "forged": (SMALL.replace("def build(vocab_size):\n", "def build(vocab_size):\n    torch.manual_seed(7)\n"),
               "sets its own seed"),
    "nan": (SMALL.replace("RECIPE =", "class Odd(torch.nn.Module):\n    def __init__(self, inner):\n"
                          "        super().__init__()\n        self.inner = inner\n\n    def forward(self, idx):\n"
                          "        out = self.inner(idx)[0]\n        return out if self.training else out * float('nan')\n\n\n"
                          "_plain = build\nbuild = lambda v: Odd(_plain(v))\n\n\nRECIPE ="), "NaN"),
    "junk": ("def build(vocab_size):\n    return 42\n", "not a torch.nn.Module"),
    # logits kept from the first window scored and returned for every later one: what the probes'
    # fresh process returns differs
    "cached": (SMALL.replace("RECIPE =", "class Kept(torch.nn.Module):\n    def __init__(self, inner):\n"
                             "        super().__init__()\n        self.inner, self.kept = inner, None\n\n"
                             "    def forward(self, idx):\n        out = self.inner(idx)[0]\n"
                             "        if self.training:\n            return out\n"
                             "        self.kept = out if self.kept is None else self.kept\n        return self.kept\n\n\n"
                             "_plain = build\nbuild = lambda v: Kept(_plain(v))\n\n\nRECIPE ="), ("not causal", "same window")),
    # torch.compile's workers are processes, which the sandbox refuses: it raises, or its work
    # (done in this process instead) counts against the budget
    "compiled": (SMALL.replace("def build(vocab_size):\n    return GPT(", "def build(vocab_size):\n    return torch.compile(GPT(")
                 .replace("n_layers=1))", "n_layers=1)))"), ("raised while training", "CPU")),
    # half a line of results, then the pipe closed
    "halfline": (WAY_OUT + "os.write(out, b'{\"results\": {\"weights\": {\"w\": {\"dtype')\nos._exit(0)\n",
                 "stopped without a result"),
    # whole results whose weights do not decode (then alive, as the harness waits)
    "badweights": (WAY_OUT + "os.write(out, b'{\"results\": {\"weights\": {\"w\": {\"dtype\": \"float32\", "
                   "\"shape\": [4], \"data\": \"not base64!\"}}, \"curve\": []}}\\n')\ntime.sleep(600)\n",
                   "state could not be read"),
    # a training curve at 1.7e308 bits (which matplotlib cannot draw) and logits 1e200 times
    # too large (whose spread over seeds overflows Python's floats)
    "overflow": ("import sys\nimport numpy\nimport __main__\nnumpy.mean = lambda a, *args, **kwargs: 1.7e308\n"
                 "if sys.argv[1] == 'score':\n    _encode = __main__.encode_array\n"
                 "    __main__.encode_array = lambda a: _encode(a.astype('float64') * 1e200)\n" + SMALL,
                 "the race can rank"),
    "unlucky": (UNLUCKY, "Too many open files"),
}


def notebook(path: Path, source: str) -> Path:
    cell = nbformat.v4.new_code_cell(source, metadata={"nbgrader": {"grade_id": ENTRY_ID, "solution": True,
                                                                     "grade": False, "locked": False}})
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# GPT"), cell]), path)
    return path


def class_of(folder: Path, n: int, source: str = SMALL) -> Path:
    """A folder of ``n`` learners' notebooks, each entering ``source``."""
    folder.mkdir()
    for i in range(n):
        notebook(folder / f"learner{i}.ipynb", source)
    return folder
