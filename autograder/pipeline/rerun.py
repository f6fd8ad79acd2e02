"""Cases run again alone, where the learner's code cannot forge what grades them [trusted]

Two promises of the exercises' texts are kept in the learner's own process, which can forge
anything there: the kernel counts a call's allocations with ``tracemalloc`` (flash attention's
long cases: tiles, never the whole matrix), and ``calls.once_per_step`` refuses a decoder's
second call of its model on prefixes of one length (all live sequences in one call per step).
So after the notebook has run, each case of those exercises that the kernel got right runs
again, in a fresh process of the sandbox (``autograder.kernel.fresh``) on the learner's
function pickled by value in the graded cell, on the case's twin: a case of the same kind
and shapes, drawn from the submission's key for this purpose and never given to the kernel,
so no answer prepared there fits it.

* A case held to a memory limit runs alone in a process confined before the learner's bytes
  are loaded (``kernel/confine.py``: its address space, no file written, no shared memory,
  pipe or child): the operating system, not a count, refuses the whole matrix wherever it
  would be held.
* A decoder's twins run in one process whose model is served from here, a line at a time:
  the table of log-probabilities never enters the sandbox, and the calls are counted here.

What each twin gave, read back as plain data, goes to the judge, which keeps a case's kernel
result only if the twin's outputs equal the reference's too; the pickled bytes are passed on
and never loaded here.
"""
from __future__ import annotations

import hmac
import os
import select
import sys
import time
from contextlib import AbstractContextManager
from pathlib import Path
from subprocess import Popen
from typing import Callable

import numpy as np

from autograder.judge.exercise import Exercise
from autograder.judge.verdict import Alone
from autograder.kernel.calls import once_per_step, table_model
from autograder.kernel.cases import CASE_SECONDS, CODE, WALL_FACTOR
from autograder.kernel.hints import shorten
from autograder.kernel import wire
from autograder.kernel.transport import Raised, decode_ask, decode_results, encode_array, encode_cases, unread

SECONDS = 10  # of the notebook's time budget, kept for its reruns: an honest one takes under one
SERVED = "markov_decoder"  # the call of the exercises whose model the grader serves
LINE = 16 << 20  # bytes of one line read from a process run alone
MOST_PREFIXES = 4096  # rows of one request of the served model
# start(argv) -> a context holding (the process, with stdin and stdout pipes; a function that
# kills it and all it started): ``Sandbox.alone``
Start = Callable[[list], AbstractContextManager[tuple[Popen, Callable[[], None]]]]


def twins(ex: Exercise, key: bytes) -> list:
    """Cases of the kinds of ``ex.graded_cases(key)``, in its order, with other values."""
    return ex.graded_cases(hmac.new(key, b"held alone: " + ex.id.encode(), "sha256").digest())


def again(ex: Exercise, cases: list) -> list[int]:
    """The indices of the cases that run again alone when the kernel gets them right."""
    if ex.memory is not None:
        return [i for i, c in enumerate(cases) if ex.memory(c) is not None]
    return list(range(len(cases))) if ex.call == SERVED else []


def run_again(ex: Exercise, cases: list, key: bytes, payload, site: Path, start: Start,
              deadline: float | None = None) -> dict[int, Alone]:
    """Case index -> what its twin gave, run alone (``site``: where the sandbox stages
    ``autograder``), for the cases ``again`` names whose kernel outcome is outputs: facts
    only; the judge compares them with the reference (``verdict.judge``), and only where the
    kernel's own outputs pass. A twin's outcome is None when its process stopped without one
    (a crash) or did not finish by ``deadline`` (on the monotonic clock, for all of a
    grading's reruns together)."""
    at = again(ex, cases)
    if not at or not isinstance(payload, dict):
        return {}
    try:
        results = decode_results(payload)
    except ValueError:
        return {}  # the judge says why the recorded outputs are unreadable
    if len(results) != len(cases):
        return {}
    at = [i for i in at if isinstance(results[i], tuple)]
    if not at:
        return {}  # no outputs to hold to the twins: the kernel's own outcomes say more
    code, drawn = payload.get(CODE), twins(ex, key)
    if not isinstance(code, str):
        cannot = Raised(f"the graded cell could not pickle `{ex.function}` to run it there")
        return {i: Alone(drawn[i], cannot) for i in at}
    script = [sys.executable, str(site / "autograder" / "kernel" / "fresh.py")]
    if ex.memory is not None:  # one process per case: each its own limit
        got = {}
        for i in at:
            limit = (ex.memory(drawn[i]) or ex.memory(cases[i]))[0]  # one kind, one limit
            got.update(_run(ex, {i: drawn[i]}, code, script + [str(limit)], start, deadline, memory=[limit]))
    else:  # one process for all: the model served from here
        got = _run(ex, {i: drawn[i] for i in at}, code, script + ["-1"], start, deadline, served=True)
    return {i: Alone(drawn[i], got.get(i)) for i in at}


def _run(ex: Exercise, twins_at: dict, code: str, argv: list, start: Start, deadline: float | None,
         memory: list | None = None, served: bool = False) -> dict:
    """Case index -> the result of its twin in one process run alone (missing: none came;
    ``transport.unread``: what came could not be read)."""
    order = list(twins_at)
    tables = {n: twins_at[i].get("logp") for n, i in enumerate(order)} if served else {}
    cases = [{k: v for k, v in twins_at[i].items() if not (served and k == "logp")} for i in order]
    spec = {**encode_cases(ex.id, ex.function, ex.call, cases, ex.signature, memory=memory),
            CODE: code, "seconds": CASE_SECONDS, "served": served}
    seconds = WALL_FACTOR * CASE_SECONDS * len(cases) + 10
    if deadline is not None:
        seconds = min(seconds, deadline - time.monotonic())
    if seconds <= 1:
        return {}
    with start(argv) as (process, stop):
        reply = converse(process, stop, wire.dumps(spec), _server(tables) if served else None, seconds)
    if reply is None:
        return {}  # it stopped without results: a crash, or out of time
    try:
        if isinstance(reply, wire.Unreadable):
            raise reply
        results = decode_results(reply)
    except ValueError as err:  # ``wire.Unreadable``
        return {i: unread(err) for i in order}
    if len(results) != len(order):
        return {i: unread(f"{len(results)} results for {len(order)} cases") for i in order}
    return dict(zip(order, results))


def _server(tables: dict) -> Callable[[dict], dict]:
    """Answers to the requests of the served model: what the kernel's model would give or
    raise (``calls.once_per_step`` of ``calls.table_model`` of case n's table), its error's
    type and text in place of a raise."""
    models = {n: once_per_step(table_model(table)) for n, table in tables.items()}
    refused = {"error": f"next_log_probs takes prefixes (n, t) of ints, n at most {MOST_PREFIXES}",
               "type": "ValueError"}

    def answer(request) -> dict:
        """Never raises: whatever the request holds, the learner's code gets an error to catch."""
        try:
            case, prefixes = decode_ask(request)
        except ValueError:  # ``wire.Unreadable``
            return refused
        model = models.get(case)
        if model is None or (prefixes.ndim and len(prefixes) > MOST_PREFIXES):
            return refused
        try:
            return {"logp": encode_array(np.asarray(model(prefixes), dtype=np.float64))}
        except (ValueError, IndexError) as err:  # what the kernel's model raises (``calls.table_model``)
            return {"error": shorten(str(err), 300), "type": type(err).__name__}
        except Exception:  # noqa: BLE001  (numbers no model takes: an error of the learner's call)
            return refused
    return answer


def converse(process: Popen, stop: Callable[[], None], first: str | None, answer: Callable[[dict], dict] | None,
             seconds: float, line: int = LINE, on_results: Callable[[], None] | None = None):
    """Send ``first`` (a line; None: nothing before its first request) to a process run alone,
    answer its requests (``{"ask": ...}``) with ``answer`` (a ``wire.Unreadable`` it raises is
    returned), and return the ``results`` of its last line, parsed (``wire.loads``); None
    when it ends without one, sends more than ``line`` bytes in a line, or runs past ``seconds``
    (``stop`` kills it and all it started, then or on return); a ``wire.Unreadable``, returned,
    when it sends a line ``wire.loads`` refuses, or one that is neither a request nor results.
    Nothing here waits on the process past ``seconds``: its output is read as it comes.
    ``on_results`` is called as the results come, before the process is killed."""
    deadline = time.monotonic() + seconds
    lines = _lines(process.stdout.fileno(), deadline, line)
    try:
        if first is not None:
            process.stdin.write(first.encode() + b"\n")
            process.stdin.flush()
        for text in lines:
            message = wire.loads(text, max_bytes=line)
            if isinstance(message, dict) and "results" in message:
                if on_results is not None:
                    on_results()
                return message["results"]
            if answer is None or not isinstance(message, dict) or "ask" not in message:
                return wire.Unreadable("a line that is neither a request nor results")
            process.stdin.write(wire.dumps(answer(message)).encode() + b"\n")
            process.stdin.flush()
        return None  # the end, a line too long, or out of time
    except wire.Unreadable as err:
        return err
    except OSError:  # the pipe closed
        return None
    finally:
        stop()
        process.wait()


def _lines(fd: int, deadline: float, line: int = LINE):
    """The lines (without their newline) that come on ``fd`` until it closes, a line grows past
    ``line`` bytes, or the monotonic clock passes ``deadline``."""
    held, size = [], 0  # the pieces of the line not yet ended, and their length
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return
        first, *rest = chunk.split(b"\n")
        held.append(first)
        size += len(first)
        if rest:
            yield b"".join(held)
            yield from rest[:-1]
            held, size = [rest[-1]], len(rest[-1])
        if size > line:
            return
