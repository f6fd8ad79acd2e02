"""A race entry verified: trained in the sandbox, scored on text it never saw. [trusted]

For each seed of an entry (its source: ``build`` and ``RECIPE``, see ``course_lib.race``):

1. **Training**, in a sandbox of its own (``autograder/kernel/race.py train``): the training
   text, the random seed and the budget go in; the weights and the curve come out. The budget is CPU
   time, not wall time: the process trains until ``Rules.budget`` CPU seconds of its own have
   passed (every thread counted), ``prlimit`` kills it ``Rules.grace`` seconds later, and the
   CPU time the operating system counted for the whole sandbox, read here once it has ended,
   must be within the budget plus ``Rules.startup`` (torch's import and the harness). No
   child process can be made there (``kernel/confine``), so no work escapes the count.
2. **Scoring**, in a second sandbox: the entry's source and the weights go in, and the
   held-out windows one at a time, in the text's order, each sent only once the logits of the
   one before are here: nothing the process does later changes them, and it never holds the
   text ahead of what it scores. The loss is computed here from those logits.
3. **Causality**, in a third: for ``Rules.checks`` of the windows, a *probe* that keeps the
   window's first t + 1 characters and continues with text that is never scored. The logits at
   positions 0..t must be the scored ones: a model that looks at a later character changes
   them. The probes run in a fresh process, which cannot know the logits it must repeat; last
   comes one scored window again, whose logits must be the same as when it was scored (a model
   that carries something from window to window gives others there).

Last, once every seed has run (``same_model``, called by the leaderboard): two seeds whose
scores of every held-out window agree within ``SAME_MODEL`` are one model, and the entry counts for
nothing. That check reads only the logits the entry was scored by, so nothing in its sandboxes
can tell it apart from scoring, unlike the scoring process's own check of two seeds.

The weights are checked as they cross (names, shapes, finite numbers) and counted against the
parameter cap, the score must be a number the board can rank (``MAX_BITS``), and only points of
the curve that lie on its plot are kept; what the entry's code raises, a budget overrun, a crash
or a broken promise makes the run's ``reason``, and a run with a reason counts for nothing. A
process that did not start (``process.Fault``: the grader's doing, not the entry's) gives a
reason too, marked ``Run.grader_fault``: the next race runs that seed again.
"""
from __future__ import annotations

import hmac
import math
from dataclasses import dataclass, field

import numpy as np

from autograder.kernel import wire
from autograder.kernel.transport import decode_array, encode_array
from autograder.race import process
from autograder.race.process import Fault, Refused, Starts
from course_lib.race import BUDGET, CONTEXT, PARAMS, WINDOWS, window_bits, windows

MAX_WEIGHTS = 4096   # arrays in an entry's state
MAX_NAME = 200       # characters of an array's name
CAUSAL_TOLERANCE = 1e-4  # of a logit, relative to its size (the same inputs give the same bits)
# bits per character past which a score or a point of a curve is no number the board can compare or
# draw (a uniform guess over the course's characters gives about 6); beyond it Python's floats overflow
MAX_BITS = 1000.0
# bits per character within which two seeds' scores of every window agree when the entry's result
# does not depend on the race's random seed (two random seeds of the course's entry differ by
# 10-100 times more on most windows; the same model run twice, by nothing)
SAME_MODEL = 1e-3


@dataclass(frozen=True)
class Rules:
    """What an entry must keep to; the defaults are the class race's."""
    budget: float = BUDGET        # CPU seconds of training, one thread
    params: int = PARAMS          # numbers in the trained state, at most
    seeds: int = 3
    windows: int = WINDOWS        # held-out windows scored, of CONTEXT characters each
    checks: int = 8               # causality probes
    memory: int = 2 << 30         # bytes the process may hold beyond torch's own
    code_bytes: int = 20_000      # of the entry's source
    startup: float = 20.0         # CPU seconds allowed besides the budget (torch's import, the harness)
    grace: float = 10.0           # CPU seconds past the budget before prlimit kills the process
    score_seconds: float = 120.0  # CPU seconds for scoring all windows

    @property
    def train_limit(self) -> float:
        """CPU seconds past which ``prlimit`` kills a training process."""
        return self.budget + self.startup + self.grace

    def wall(self, cpu: float) -> float:
        """Wall seconds a process with ``cpu`` CPU seconds may run: a busy machine's share."""
        return 4 * cpu + 60


@dataclass
class Run:
    """One seed of an entry: its score (bits per character on the held-out windows) or why none."""
    seed: int
    bpc: float | None = None
    cpu: float = 0.0              # CPU seconds of the training sandbox, as the system counted them
    params: int = 0
    curve: list = field(default_factory=list)  # (CPU seconds, training bits per character)
    windows: list = field(default_factory=list)  # bits per character of each scored window, in order
    reason: str | None = None
    grader_fault: bool = False    # the reason is the grader's (a ``Fault``): the next race runs it again


def seeds_for(key: bytes, name: str, n: int) -> list[int]:
    """``n`` random seeds for entry ``name``, drawn from the race's key: the same for the same entry,
    unknown to it in advance."""
    digest = hmac.new(key, b"race seeds: " + name.encode(), "sha256").digest()
    return [int.from_bytes(digest[4 * i:4 * i + 4], "little") % (2 ** 31) for i in range(n)]


def verify(code: str, train_ids: np.ndarray, heldout: np.ndarray, vocab_size: int, rules: Rules,
           seeds: list[int], isolate: bool = True, progress=None, starts: Starts | None = None) -> list[Run]:
    """Every seed's ``Run`` of the entry ``code``: trained on ``train_ids``, scored on the first
    ``rules.windows`` windows of ``heldout`` (ids, with a tail kept for the probes, ``split_heldout``).
    ``starts``: the race's (``process.Starts``), which stops it where no sandbox starts."""
    starts = Starts() if starts is None else starts
    if len(code.encode()) > rules.code_bytes:
        why = f"the entry's source is {len(code.encode())} bytes; the race takes at most {rules.code_bytes}"
        return [Run(seed, reason=why) for seed in seeds]
    scored, spare = split_heldout(heldout, rules.windows)
    runs = []
    for seed in seeds:
        run = Run(seed)
        try:
            weights = _train(run, code, train_ids, vocab_size, rules, isolate, starts)
            logits = _scores(code, weights, vocab_size, scored[:, :-1], rules, isolate, starts,
                             seeds=(seed, seed ^ 0x5EED))
            run.bpc, run.windows = _bits(logits, scored[:, 1:])
            _check_causal(code, weights, vocab_size, scored, spare, logits, seed, rules, isolate, starts)
        except Refused as why:
            run.bpc, run.reason, run.grader_fault = None, str(why), isinstance(why, Fault)
        runs.append(run)
        if progress is not None:
            progress(run)
    return runs


def split_heldout(ids: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(the scored windows (n, CONTEXT + 1), the text after them, for the probes' continuations)."""
    ids = np.asarray(ids, dtype=np.int64)
    n = min(n, (len(ids) - 1) // CONTEXT - 1)
    if n < 1:
        raise ValueError(f"{len(ids)} held-out characters cannot hold two windows of {CONTEXT}")
    return windows(ids, n), ids[n * CONTEXT + 1:]


def _encode_ids(ids: np.ndarray, vocab_size: int) -> dict:
    """Character ids as they cross to a race process: 2 bytes each where the vocabulary allows."""
    return encode_array(np.asarray(ids, dtype=np.int16 if vocab_size < 2 ** 15 else np.int64))


def _results(reply, what: str) -> dict:
    """The results of a race process, or ``Refused`` saying why there are none."""
    if reply is None:
        raise Refused(f"the {what} process stopped without a result (a crash, or out of its time)")
    if isinstance(reply, wire.Unreadable):
        raise Refused(f"the {what} process sent what could not be read: {reply}"[:300])
    if not isinstance(reply, dict):
        raise Refused(f"the {what} process sent no results")
    if "error" in reply:
        raise Refused(f"the entry raised while {what}: {str(reply['error'])[:300]}")
    return reply


def _train(run: Run, code: str, train_ids, vocab_size: int, rules: Rules, isolate: bool, starts: Starts) -> dict:
    """Train in the sandbox (filling ``run``'s cpu, curve and params); the weights, decoded."""
    spec = {"code": code, "seed": run.seed, "budget": rules.budget, "vocab_size": vocab_size,
            "train": _encode_ids(train_ids, vocab_size)}
    limit = rules.train_limit
    reply, run.cpu = process.run("train", spec, None, limit, rules.wall(limit), rules.memory, starts, isolate)
    if reply is None and run.cpu >= limit - 1.0:
        raise Refused(f"training ran past its CPU limit ({limit:.0f} s) and was stopped: the budget is "
                      f"{rules.budget:.0f} CPU seconds (and {rules.startup:.0f} to start), counted in every "
                      "thread, from the entry's first line")
    if run.cpu > rules.budget + rules.startup:
        raise Refused(f"training used {run.cpu:.0f} CPU seconds; the budget is {rules.budget:.0f} "
                      f"(and {rules.startup:.0f} to start): work done in another thread or before "
                      "the budget's clock started counts too")
    results = _results(reply, "training")
    weights = results.get("weights")
    if not isinstance(weights, dict) or not weights or len(weights) > MAX_WEIGHTS:
        raise Refused("the trained model's state is not a mapping of at most "
                      f"{MAX_WEIGHTS} named arrays")
    sizes = {}
    for name, a in weights.items():
        shape = a.get("shape") if isinstance(a, dict) else None
        if not isinstance(name, str) or len(name) > MAX_NAME or not isinstance(shape, list) or \
                any(type(n) is not int or n < 0 for n in shape):
            raise Refused("the trained model's state holds something that is not a named array")
        sizes[name] = math.prod(shape)
    run.params = sum(sizes.values())
    if run.params > rules.params:
        raise Refused(f"the model holds {run.params:,} numbers; the race allows {rules.params:,}")
    try:
        decoded = {name: decode_array(a) for name, a in weights.items()}
    except (ValueError, KeyError, TypeError) as err:
        raise Refused(f"the trained model's state could not be read: {err}"[:300]) from None
    if not all(np.isfinite(a).all() for a in decoded.values()):
        raise Refused("the trained model's weights hold NaN or infinity")
    run.curve = curve_points(results.get("curve"), limit)
    return decoded


def curve_points(curve, limit: float) -> list[tuple[float, float]]:
    """The points (CPU seconds, bits per character) of a training curve as it came: the entry's
    word, only drawn, so what is not a pair of numbers on the plot (0 to ``limit`` seconds, 0 to
    ``MAX_BITS`` bits) is left out (matplotlib cannot draw 1.7e308)."""
    if not isinstance(curve, list) or len(curve) > 10_000:
        return []
    return [(float(p[0]), float(p[1])) for p in curve
            if isinstance(p, (list, tuple)) and len(p) == 2 and all(type(v) in (int, float) for v in p)
            and 0 <= p[0] <= limit and 0 <= p[1] <= MAX_BITS]


def _scores(code: str, weights: dict, vocab_size: int, inputs: np.ndarray, rules: Rules,
            isolate: bool, starts: Starts, seeds: tuple = ()) -> np.ndarray:
    """The entry's logits (n, CONTEXT, vocab_size) on ``inputs`` (n, CONTEXT), each window sent
    once the one before has its logits here; ``seeds``: two seeds the model is first built
    under, which must give two models (an entry that fixes its own seed is refused)."""
    got, sent = [], []
    problems = []

    def answer(message: dict) -> dict:
        if sent:
            logits = _logits(message.get("logits"), vocab_size)
            if isinstance(logits, str):
                problems.append(logits)
                return {"stop": True}
            got.append(logits)
        if len(sent) == len(inputs):
            return {"stop": True}
        sent.append(len(sent))
        return {"window": _encode_ids(inputs[len(sent) - 1], vocab_size)}
    spec = {"code": code, "vocab_size": vocab_size, "weights": {k: encode_array(v) for k, v in weights.items()},
            "seeds": list(seeds)}
    cpu = rules.score_seconds + rules.startup
    reply, _ = process.run("score", spec, answer, cpu, rules.wall(cpu), rules.memory, starts, isolate)
    if problems:
        raise Refused(problems[0])
    _results(reply, "scoring")
    if len(got) != len(inputs):
        raise Refused(f"the model scored {len(got)} of {len(inputs)} windows")
    return np.stack(got)


def _logits(data, vocab_size: int) -> np.ndarray | str:
    """One window's logits (CONTEXT, vocab_size) as they came, or why they cannot be scored."""
    try:
        a = decode_array(data) if isinstance(data, dict) else None
    except (ValueError, KeyError, TypeError) as err:
        return f"the model's logits could not be read: {err}"[:300]
    if a is None or a.shape != (CONTEXT, vocab_size) or a.dtype.kind != "f":
        shape = None if a is None else a.shape
        return f"the model returned logits of shape {shape} for a window; the race needs ({CONTEXT}, {vocab_size}) floats"
    with np.errstate(over="ignore"):  # first: a float128 finite in its own type may not be in this one
        a = a.astype(np.float64)
    if not np.isfinite(a).all():
        return "the model's logits hold NaN or infinity"
    return a


def _bits(logits: np.ndarray, targets: np.ndarray) -> tuple[float, list[float]]:
    """(bits per character of the entry's logits, each window's), or ``Refused`` where they are
    no numbers to rank."""
    with np.errstate(over="ignore", invalid="ignore"):  # told below, in words
        each = window_bits(logits, targets)
        bits = float(each.mean())
    if not bits <= MAX_BITS or not np.all(each <= MAX_BITS):  # NaN too
        raise Refused(f"the model's logits give {bits:.3g} bits per character, more than the {MAX_BITS:g} "
                      "the race can rank (a uniform guess gives about 6): logits that large are broken")
    return bits, [round(float(b), 7) for b in each]


def same_model(runs: list[Run]) -> str | None:
    """Why ``runs`` (one entry's, a seed each) count for nothing where two seeds scored every
    window alike (within ``SAME_MODEL``): the entry's result does not depend on the race's random
    seed, so the spread over its random seeds says nothing and the entry may have picked its luck. Read from the
    logits each run was scored by, here, after every sandbox has ended: the entry cannot tell
    this check from its scoring. None where no two seeds agree so."""
    scored = [r for r in runs if r.reason is None and r.windows]
    for i, a in enumerate(scored):
        for b in scored[i + 1:]:
            if len(a.windows) == len(b.windows) and \
                    max(abs(x - y) for x, y in zip(a.windows, b.windows)) <= SAME_MODEL:
                return (f"random seeds {a.seed} and {b.seed} scored every held-out window alike (within "
                        f"{SAME_MODEL:g} bits): the entry's result does not depend on the race's seed "
                        "(its own torch.manual_seed, or its own batch order); the race draws the random seeds")
    return None


def probes(scored: np.ndarray, spare: np.ndarray, seed: int, n: int) -> list[tuple[int, int, np.ndarray]]:
    """``n`` probes (window index, cut t, inputs (CONTEXT,)): the window's first t + 1 inputs,
    then ``spare`` text that is never scored."""
    rng = np.random.default_rng(seed)
    out = []
    for i in rng.choice(len(scored), size=min(n, len(scored)), replace=False):
        t = int(rng.integers(0, CONTEXT - 1))
        start = int(rng.integers(0, max(1, len(spare) - CONTEXT)))
        rest = spare[start:start + CONTEXT - t - 1]
        if len(rest) < CONTEXT - t - 1:
            continue
        inputs = np.concatenate([scored[i, :t + 1], rest])
        if np.array_equal(inputs, scored[i, :CONTEXT]):
            continue  # the same text: it tells nothing
        out.append((int(i), t, inputs))
    return out


def _check_causal(code, weights, vocab_size, scored, spare, logits, seed, rules, isolate, starts) -> None:
    """``Refused`` when a probe's logits at positions 0..t differ from the scored window's, or
    when a scored window sent again last (``echo``) gets other logits there than when it was scored."""
    made = probes(scored, spare, seed, rules.checks)
    if not made:
        return
    echo = 1 + int(np.random.default_rng(seed + 1).integers(0, len(scored) - 1)) if len(scored) > 1 else 0
    inputs = np.stack([p[2] for p in made] + [scored[echo, :CONTEXT]])
    again = _scores(code, weights, vocab_size, inputs, rules, isolate, starts)
    for (i, t, _), probe in zip(made, again):
        kept, seen = logits[i, :t + 1], probe[:t + 1]
        if not np.allclose(kept, seen, rtol=CAUSAL_TOLERANCE, atol=CAUSAL_TOLERANCE):
            where = int(np.argmax(np.abs(kept - seen).max(axis=-1) > CAUSAL_TOLERANCE))
            raise Refused(f"the model is not causal: its logits at position {where} changed when only "
                          f"characters after position {t} did (a model must not see the characters it predicts, "
                          "nor keep anything from one window to the next: each is scored on its own)")
    if not np.allclose(logits[echo], again[-1], rtol=CAUSAL_TOLERANCE, atol=CAUSAL_TOLERANCE):
        raise Refused("the model gave other logits for the same window in a fresh process: each window is "
                      "scored on its own, so a model must keep nothing from one to the next (and give the same "
                      "logits for the same characters)")
