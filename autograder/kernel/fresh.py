"""A memory limit the learner's code cannot lift: one case in a fresh process. [sandbox]

Where an exercise's text promises tiles, never the whole matrix, the kernel counts what the
learner's call allocates (``cases._allocations``, Python's ``tracemalloc``). That count runs in
the learner's process, and code in that process can stop it, restart it or replace it: it is
advice for the learner, not a limit. The limit that grades is the operating system's: after the
notebook has run, the grader starts this module in the sandbox once per such case, on a case of
the same kind that the kernel never saw (so no answer prepared in the kernel fits it), with

1. numpy imported and its first matrix product made (OpenBLAS maps its buffers then), nothing
   of the learner's loaded yet, the process's data size measured;
2. ``RLIMIT_DATA`` set, soft and hard, to that size plus the case's limit plus ``SLACK``: an
   unprivileged process can lower its hard limit, never raise it, and the children and threads
   it starts share or inherit it;
3. only then the case and the learner's function (pickled by value in the kernel,
   ``cases.pickled``) read from standard input and unpickled, so whatever runs while
   unpickling runs under the limit too;
4. the case run as the graded cell runs it (``run_cases``, with the count as well), and its
   outputs written to standard output as ``transport`` encodes results: plain data (what the
   learner's code prints goes to /dev/null).

An allocation the limit refuses raises ``MemoryError`` in the learner's code; the case's result
is then ``OVER_MEMORY`` with the peak ``REFUSED``. The trusted side (``autograder.pipeline.rerun``)
starts this process, reads its output as data and compares it with the reference.
"""
from __future__ import annotations

import base64
import functools
import json
import os
import resource
import sys

if __name__ == "__main__":  # run by its path (never -m): its own folder, first on sys.path, is no
    del sys.path[0]         # package root, and the cwd (the learner's /tmp) is not on it at all

import cloudpickle  # noqa: E402  (numpy and cloudpickle load before the limit: not the learner's bytes)
import numpy as np  # noqa: E402

from autograder.kernel.cases import CODE, run_cases  # noqa: E402
from autograder.kernel.transport import OVER_MEMORY, REFUSED, decode_cases, encode_results  # noqa: E402

SLACK = 4 << 20  # bytes beyond the case's limit: the interpreter's own churn while it runs


def data_size() -> int:
    """This process's data size as the limit counts it (``VmData``), in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmData in /proc/self/status")


def main() -> None:
    """``python fresh.py LIMIT``: the case and the function on standard input, as the grader
    encodes them (``transport.encode_cases``, with ``CODE``, and ``seconds`` of CPU time)."""
    limit = int(sys.argv[1])
    channel = os.dup(1)  # the results' way out; what the learner's code prints goes nowhere
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    warm = np.ones((512, 512))
    warm @ warm  # OpenBLAS maps its buffers (tens of MiB) on its first product: before the limit
    del warm
    cap = data_size() + limit + SLACK
    resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))
    spec = json.load(sys.stdin)
    refused = []  # not empty once the limit refused an allocation
    results = _results(spec, refused)
    if refused:
        results = [f"{OVER_MEMORY}{REFUSED}"]
    with os.fdopen(channel, "w") as out:
        json.dump(encode_results(spec["exercise"], results), out)


def _results(spec: dict, refused: list) -> list:
    """The learner's results on the case of ``spec``; a ``MemoryError`` noted in ``refused``."""
    try:
        learner = cloudpickle.loads(base64.b64decode(spec[CODE]))
    except MemoryError:
        refused.append(True)
        return []
    except Exception as err:
        return [f"could not be loaded in a fresh process: {err!r}"[:300]]
    if not callable(learner):
        return [f"could not be loaded in a fresh process: {type(learner).__name__} is not a function"]

    @functools.wraps(learner)
    def watched(*args, **kwargs):
        try:
            return learner(*args, **kwargs)
        except MemoryError:
            refused.append(True)
            raise
    return run_cases({spec["function"]: watched}, spec["function"], spec["call"], decode_cases(spec),
                     budget=float(spec["seconds"]), signature=spec.get("signature"), memory=spec.get("memory"))


if __name__ == "__main__":
    main()
