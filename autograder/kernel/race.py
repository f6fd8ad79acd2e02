"""A race entry trained, or scored, alone in the sandbox. [sandbox]

``autograder.race.verify`` starts this file by its path in the grading sandbox, three times per seed
of an entry (notebook 06's race: ``build`` and ``RECIPE``, see ``course_lib.race``):

Once up (torch imported, the process confined), it asks for its spec: ``{"ask": "spec"}`` on
standard output, the grader's answer one line on standard input. Nothing of the entry's has
run before, so a process that never asks failed through no doing of the entry's
(``autograder/race/process.py``).

``python race.py train MEMORY``
    The spec: ``{"code", "seed", "budget", "vocab_size", "train"}`` (the entry's source, the
    random seed, the CPU seconds, the training text as an array of ids).
    Standard output: then one line, ``{"results": {"weights": {name: array}, "curve": [[s, bits]]}}``.
``python race.py score MEMORY``
    The spec: ``{"code", "vocab_size", "weights", "seeds"}``; then, for each request this
    process makes (``{"ask": "window", "logits": the last window's (CONTEXT, vocab_size)
    array or None}``), the grader's answer: ``{"window": ids (CONTEXT,)}`` or ``{"stop": true}``.
    Standard output: the requests, then ``{"results": {}}``.

After its results it waits, alive, until the grader has read the CPU time the system counted
for it (``sandbox.tree_cpu``) and ends it.

The grader sends the next window only once it holds the logits of the one before, so nothing
this process does later changes what it returned; the held-out text is never here whole.
Before it scores, it builds the model under each of ``seeds`` (two): an entry that sets its
own seed builds the same model twice, and is told so.

Before the entry's source runs, torch is imported with one thread, and the process is confined
(``confine``: its address space held to its present size plus MEMORY bytes, no file written,
no child process, shared memory, pipe or socket). Its threads share the process's CPU time,
which the grader's ``prlimit`` caps and the grader reads back when it ends. Everything the
entry's code prints goes to /dev/null; an error is one line, ``{"results": {"error": text}}``.
"""
from __future__ import annotations

import hashlib
import os
import sys

if __name__ == "__main__":  # run by its path: its own folder is no package root
    del sys.path[0]

import numpy as np  # noqa: E402
import torch  # noqa: E402

from autograder.kernel import wire  # noqa: E402
from autograder.kernel.confine import confine  # noqa: E402
from autograder.kernel.transport import decode_array, encode_array  # noqa: E402

SPEC_BYTES = 256 << 20  # of the grader's first line: its own data (the training text, the weights)
MAX_ERROR = 300  # characters of an error's text sent back


def _entry(code: str) -> tuple:
    """(build, RECIPE) of the entry's source, run in a namespace of its own."""
    namespace = {"__name__": "__race_entry__"}
    exec(compile(code, "<race entry>", "exec"), namespace)
    build, recipe = namespace.get("build"), namespace.get("RECIPE", {})
    if not callable(build):
        raise ValueError("the entry defines no function build(vocab_size)")
    return build, recipe


def train(spec: dict) -> dict:
    """Train the entry of ``spec`` for its budget: its weights and curve."""
    from course_lib.race import train_entry  # loads before the entry: not the learner's bytes

    torch.manual_seed(int(spec["seed"]))
    build, recipe = _entry(spec["code"])
    model = build(int(spec["vocab_size"]))
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"build returned {type(model).__name__}, not a torch.nn.Module")
    curve = train_entry(model, recipe, decode_array(spec["train"]).astype(np.int64), float(spec["budget"]), int(spec["seed"]))
    weights = {name: encode_array(t.detach().cpu().float().numpy()) for name, t in model.state_dict().items()}
    return {"weights": weights, "curve": [[float(s), float(b)] for s, b in curve]}


def score(spec: dict, ask) -> dict:
    """The entry of ``spec`` with its trained weights, fed the grader's windows one by one."""
    from course_lib.race import logits_of  # loads before the entry: not the learner's bytes

    build, _ = _entry(spec["code"])
    inits, drawn = [], False
    for seed in spec.get("seeds", []):  # a model built under two seeds starts from two places
        torch.manual_seed(int(seed))
        state = build(int(spec["vocab_size"])).state_dict()
        inits.append(hashlib.sha256(b"".join(t.detach().cpu().numpy().tobytes() for t in state.values())).hexdigest())
        drawn = drawn or any(t.numel() > 1 and bool((t != t.flatten()[0]).any()) for t in state.values())
    if drawn and len(set(inits)) < len(inits):  # not all constant (zeros, ones): drawn, from its own seed
        return {"error": "two seeds built the same model: the entry sets its own seed, "
                         "and the race draws them (leave torch.manual_seed out of the entry)"}
    model = build(int(spec["vocab_size"]))
    state = {name: torch.from_numpy(decode_array(a)) for name, a in spec["weights"].items()}
    model.load_state_dict(state, strict=True)
    model.eval()
    logits = None
    with torch.no_grad():
        while True:
            reply = ask({"ask": "window", "logits": logits})
            if reply.get("stop") is True:
                return {}
            window = torch.from_numpy(decode_array(reply["window"]).astype(np.int64))[None, :]
            out = logits_of(model(window))
            logits = encode_array(out[0].detach().cpu().float().numpy())


def main() -> None:
    mode, memory = sys.argv[1], int(sys.argv[2])
    sys.dont_write_bytecode = True  # an import's cache is a file written: the limit refuses it
    channel = os.fdopen(os.dup(1), "w")  # the way out; what the entry prints goes nowhere
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    warm = torch.nn.Linear(8, 8)  # torch's first layer and step map their buffers before the limit
    torch.optim.AdamW(warm.parameters()).step()
    if memory >= 0:
        confine(memory, 0, lambda: None)

    def ask(message: dict) -> dict:
        channel.write(wire.dumps(message) + "\n")
        channel.flush()
        return wire.loads(sys.stdin.readline() or "{}", max_bytes=SPEC_BYTES)
    spec = ask({"ask": "spec"})  # up: from here on, what goes wrong is the entry's
    try:
        results = train(spec) if mode == "train" else score(spec, ask)
    except BaseException as err:  # the entry's own error (or the limit's): told, not a crash
        results = {"error": f"{type(err).__name__}: {err}"[:MAX_ERROR]}
    channel.write(wire.dumps({"results": results}) + "\n")
    channel.flush()
    sys.stdin.readline()  # alive until the grader has read its CPU time, and ends it


if __name__ == "__main__":
    main()
