"""The learner's function run again alone, where its code cannot forge what grades it. [sandbox]

Two promises of the exercises' texts are counted in the kernel, in the learner's own process,
where code can forge them: the memory a call holds at once (``cases._allocations``, Python's
``tracemalloc``: flash attention's tiles, never the whole matrix), and one call of a decoder's
model per step (``calls.once_per_step``, which the learner's code can reach behind). Both are
advice there. After the notebook has run, the grader (``autograder.pipeline.rerun``) starts
this module in the sandbox on cases of the same kinds that the kernel never saw (so no answer
prepared in the kernel fits them), with

1. numpy imported and its first matrix product made (OpenBLAS maps its buffers then), nothing
   of the learner's loaded yet;
2. for a memory limit, the process confined (``confine``): its address space held, soft and
   hard, to its present size plus the case's limit plus ``SLACK`` (every mapping counts,
   shared or not), no file written, and no shared memory, pipe, socket or child process made
   (a seccomp filter): an unprivileged process can lower a hard limit, never raise it, and
   the threads it starts share the limit;
3. only then the cases and the learner's function (pickled by value in the kernel,
   ``cases.pickled``) read from standard input and unpickled, so whatever runs while
   unpickling runs under the limit too;
4. the cases run as the graded cell runs them (``run_cases``, with the count as well); a
   decoder's model is not in this process: each call asks the grader, which holds the table
   and refuses a second call for one length (``served``);
5. the outputs written to standard output as ``transport`` encodes results: plain data (what
   the learner's code prints goes to /dev/null).

An allocation the limit refuses raises ``MemoryError`` in the learner's code, or ``OSError``
(``ENOMEM``: a mapping or a call the filter refuses; ``EFBIG``: a write to a file): every
case's outcome is then ``OverMemory(REFUSED)``.
"""
from __future__ import annotations

import base64
import errno
import functools
import os
import sys
from typing import Callable

if __name__ == "__main__":  # run by its path (never -m): its own folder, first on sys.path, is no
    del sys.path[0]         # package root, and the cwd (the learner's /tmp) is not on it at all

import cloudpickle  # noqa: E402  (numpy and cloudpickle load before the limit: not the learner's bytes)
import numpy as np  # noqa: E402

from autograder.kernel import wire  # noqa: E402
from autograder.kernel.cases import CODE, run_cases  # noqa: E402
from autograder.kernel.confine import confine  # noqa: E402
from autograder.kernel.hints import shorten  # noqa: E402
from autograder.kernel.transport import (REFUSED, OverMemory, Raised, decode_array,  # noqa: E402
                                         decode_cases, encode_ask, encode_results)

SLACK = 4 << 20  # bytes beyond the case's limit: the interpreter's own churn while it runs
SPEC_BYTES = 1 << 30  # of the grader's first line, the cases: its own data, held to no tighter limit
REFUSALS = (errno.ENOMEM, errno.EFBIG)  # the errors of what the confinement refuses


def refused_by_limit(err: BaseException) -> bool:
    """Whether ``err`` is the confinement's refusal (``confine``): an allocation or a mapping
    past the limit, a call of the filter's, a write to a file."""
    return isinstance(err, MemoryError) or isinstance(err, OSError) and err.errno in REFUSALS


def main() -> None:
    """``python fresh.py LIMIT``: LIMIT the bytes each case may hold at once, or -1 (none).

    Standard input: one line, the cases and the function as the grader encodes them
    (``transport.encode_cases`` with ``CODE``, ``seconds`` of CPU time, and ``served``: a
    decoder's model served by the grader), then the grader's answers to the model's requests,
    one line each. Standard output: the requests (``{"ask": case index, "prefixes": array}``),
    one line each, then ``{"results": ...}`` (``transport.encode_results``)."""
    limit = int(sys.argv[1])
    sys.dont_write_bytecode = True  # an import's cache is a file written: the limit refuses it
    channel = os.fdopen(os.dup(1), "w")  # the way out; what the learner's code prints goes nowhere
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    warm = np.ones((512, 512))
    warm @ warm  # OpenBLAS maps its buffers (tens of MiB) on its first product: before the limit
    del warm
    refused = []  # not empty once the limit refused an allocation
    if limit >= 0:
        confine(limit, SLACK, lambda: refused.append(True))
    spec = wire.loads(sys.stdin.readline(), max_bytes=SPEC_BYTES)
    results = _results(spec, refused if limit >= 0 else None, channel)
    if refused:
        results = [OverMemory(REFUSED)] * len(spec["cases"])
    channel.write(wire.dumps({"results": encode_results(spec["exercise"], results)}) + "\n")
    channel.flush()


def _results(spec: dict, refused: list | None, channel) -> list:
    """The learner's results on the cases of ``spec``; a ``MemoryError`` noted in ``refused``
    (None: no limit, so a ``MemoryError`` is the learner's own error, as any other)."""
    cases = decode_cases(spec)
    try:
        learner = cloudpickle.loads(base64.b64decode(spec[CODE]))
    except Exception as err:
        if refused is not None and refused_by_limit(err):
            refused.append(True)
            return []
        return [Raised(shorten(f"could not be loaded in a fresh process: {err!r}", 300))] * len(cases)
    if not callable(learner):
        return [Raised(f"could not be loaded in a fresh process: {type(learner).__name__} is not a function")] * len(cases)

    @functools.wraps(learner)
    def watched(*args, **kwargs):
        try:
            return learner(*args, **kwargs)
        except Exception as err:  # MemoryError, OSError
            if refused is not None and refused_by_limit(err):
                refused.append(True)
            raise
    call = spec["call"]
    if spec.get("served"):
        call = "served_decoder"
        for i, case in enumerate(cases):
            case["next_log_probs"] = _served(i, channel)
    return run_cases({spec["function"]: watched}, spec["function"], call, cases,
                     budget=float(spec["seconds"]), signature=spec.get("signature"), memory=spec.get("memory"))


def _served(i: int, channel) -> Callable:
    """``next_log_probs`` of case ``i`` asked of the grader, which holds the model and counts
    the calls: prefixes (n, t) of ints -> (n, vocab_size) log-probabilities."""
    def next_log_probs(prefixes):
        try:
            asked = encode_ask(i, prefixes)
        except (TypeError, ValueError):
            raise ValueError("next_log_probs takes prefixes (n, t) of ints") from None
        channel.write(wire.dumps(asked) + "\n")
        channel.flush()
        reply = wire.loads(sys.stdin.readline() or "{}")
        if "logp" not in reply:  # the error the kernel's model would raise (``calls.table_model``)
            raise (IndexError if reply.get("type") == "IndexError" else ValueError)(
                str(reply.get("error", "the grader did not answer")))
        return decode_array(reply["logp"])
    return next_log_probs


if __name__ == "__main__":
    main()
