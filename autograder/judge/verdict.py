"""The verdict: recorded outputs against the reference, mistakes named. [trusted; also the check cell]

Runs in the trusted grading process (``pipeline.judge_outputs.JudgeOutputs``) on outputs decoded
from plain data, and in the learner's own kernel for the advisory check cell (never in the
grading sandbox). It never calls learner code: the reference and the mistakes' ``wrong``
functions come from the registry.
"""
from __future__ import annotations

import copy
import re
import time
from dataclasses import dataclass, field

import numpy as np

from autograder.judge.diagnose import close_per_output, diagnose, nonfinite_words, rounding, safe_outputs
from autograder.judge.exercise import Exercise, Family, Mistake, both
from autograder.judge.explain import explain, output_kind
from autograder.judge.features import in_words
from autograder.kernel.hints import returned_tuple_hint, shorten
from autograder.kernel.repair import Fix
from autograder.kernel import wire
from autograder.kernel.transport import REFUSED, STOPPED, Listed, OverMemory, Raised, as_outputs


LABEL_FEATURES = 4  # what a case exercises, in its label: at most this many, the rest counted
MIN_SEARCH = 0.3  # seconds the search among the mutants gets however late it starts
AGAIN = "run again alone in a fresh process, on a case of the same kind the grader drew for it"
UNREAD = Raised(wire.UNREAD)


@dataclass(frozen=True)
class Alone:
    """What a case's twin gave, run again alone (``pipeline.rerun``): ``twin``, a case of the
    same kind the kernel never saw; ``outcome``, its outcome there (None: the process stopped
    without one, a crash, or out of time)."""
    twin: dict
    outcome: object | None


@dataclass
class Verdict:
    exercise_id: str
    points: float
    max_points: float
    passed: int
    total: int
    messages: list[str] = field(default_factory=list)
    # what the messages say about a wrong answer: "listed" (a registered Mistake), "specific"
    # (what the mistake is), "pinpoint" (only where it is), None (nothing beyond the count)
    kind: str | None = None
    lines: tuple = ()  # the learner's lines that a confirmed fix names (``autograder.kernel.repair``)
    changed: str | None = None  # the message when the learner's code changed its inputs in place

    @property
    def full_marks(self) -> bool:
        return self.points >= self.max_points


# a decimal or an exponent (1.5, .5, 2e-3), or an integer of five digits or more: how a value
# of a case shows in text (shapes, indices and line numbers are shorter integers)
_VALUE = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+(?=[eE][-+]?\d))(?:[eE][-+]?\d+)?|\d{5,}")


def without_values(text: str) -> str:
    """``text`` from the learner's kernel, fit to quote beside a hidden case: its first line,
    every number that could be a case's value replaced by "…". The learner's own code writes
    the text (an exception's message, say) and may put the case's inputs in it.

    >>> without_values("shapes (2,3) and (3,4); got 0.25 and -1.5e-3\nmore")
    'shapes (2,3) and (3,4); got … and …'
    """
    return _VALUE.sub("…", text.strip().partition("\n")[0])


def close(ex: Exercise, got: tuple, want: tuple, equal_nan: bool = False) -> bool:
    """Whether outputs ``got`` pass as ``want``: equal within the exercise's tolerance, of the
    kind it promises."""
    return _same_values(ex, got, want, equal_nan) and \
        not any(_kind_promised(g, w, ex.int_scalars) for g, w in zip(got, want))


_PROMISED = {"bool": "a boolean array", "int": "an integer array"}  # kinds of output_kind
LISTED = ("a numpy array", "np.array")  # a list returned where the reference returns an array


def _kind_promised(g: np.ndarray, w: np.ndarray, int_scalars: bool = False) -> tuple[str, str] | None:
    """What the exercise promises that ``g`` is not, as (words, dtype to use): a boolean or an
    integer array (the reference's kind), an int where ``int_scalars`` (the exercise's text
    says so) and the reference's number is one, or None. Other scalars may be any number;
    float arrays any float."""
    if isinstance(g, Listed) and w.ndim and not isinstance(w, Listed):
        return LISTED
    promised = output_kind(w)
    if promised == "scalar" and int_scalars and w.dtype.kind in "iu":
        return ("an int", "int") if g.dtype.kind not in "iu" else None
    if promised in _PROMISED and output_kind(np.atleast_1d(g)) != promised:  # g's dtype, any shape
        return _PROMISED[promised], promised
    return None


def distinct(a, b, digits: int = 6) -> tuple[str, str]:
    """Two numbers that differ, printed with ``digits`` significant digits, or with as many
    more as it takes for the two to read differently (up to 17, a float64's every digit);
    ``g`` format, so a short number stays short.

    >>> distinct(0.5, 0.25)
    ('0.5', '0.25')
    >>> distinct(1.746e11, 1.746e11 + 4.7e3)
    ('1.746e+11', '1.74600005e+11')
    """
    for n in range(digits, 18):
        shown = f"{a:.{n}g}", f"{b:.{n}g}"
        if shown[0] != shown[1]:
            break
    return shown


def describe_difference(ex: Exercise, got: tuple, want: tuple, reveal: bool = True) -> str:
    """How ``got`` differs from ``want``: count, shape, NaN or largest error.

    ``reveal`` False (a hidden case): no index, no expected or returned number.
    """
    if len(got) != len(want):
        hint = returned_tuple_hint(len(got), len(want))
        return (f"returned {len(got)} value(s), expected {len(want)} "
                f"({', '.join(ex.output_names) or 'see the signature'})" + (f". {hint}" if hint else ""))
    for i, (g, w) in enumerate(zip(got, want)):
        name = ex.name_of(i)
        if g.shape != w.shape:
            return f"`{name}` has shape {g.shape}, expected {w.shape}"
        promised = _kind_promised(g, w, ex.int_scalars)
        if promised and promised[0] == "an int":
            return f"`{name}` is a {g.dtype} number; the exercise asks for an int"
        if promised == LISTED:
            return f"`{name}` is a Python list; the exercise asks for a numpy array ({w.dtype.name})"
        if promised:
            return (f"`{name}` has dtype {g.dtype}; the exercise asks for {promised[0]} "
                    f"({w.dtype.name}), e.g. `np.zeros(shape, dtype={promised[1]})`")
        if not np.all(np.isfinite(g)) and np.all(np.isfinite(w)):
            where = tuple(int(j) for j in np.argwhere(~np.isfinite(g))[0])
            found = nonfinite_words([g[~np.isfinite(g)]])[0]
            return f"`{name}` contains {found}" + (f" (first at index {where})" if reveal else "") \
                + " where the reference is finite"
        if not np.allclose(g, w, rtol=ex.rtol, atol=ex.atol):
            err = np.abs(g.astype(np.float64) - w.astype(np.float64))
            j = np.unravel_index(int(np.argmax(err)), err.shape) if err.ndim else ()
            j = tuple(int(k) for k in j)
            if not reveal:
                return f"`{name}` differs (largest error {err[j]:.2g})"
            expected, returned = distinct(w[j], g[j])
            return f"`{name}` differs: max abs error {err[j]:.3g} at index {j}, expected {expected}, got {returned}"
    return "matches"


def helper_note(ex: Exercise, failing: set[str]) -> str | None:
    """A note when ``ex`` runs other learner functions (``helpers``) that fail their own exercise."""
    names = [h for h in ex.helpers if h in failing]
    if not names:
        return None
    return (f"`{ex.function}` runs your {' and '.join(f'`{h}`' for h in names)}, which does not "
            "match the reference yet: fix that first, and this one may pass too.")


def judge(ex: Exercise, cases: list, results: list, public: bool = False, fixes=(),
          seconds: float | None = None, changed=None, alone: dict | None = None) -> Verdict:
    """Score the recorded ``results`` on ``cases`` (per case, its outcome: a tuple of arrays,
    a ``transport.Raised`` or a ``transport.OverMemory``).

    ``public``: the cases are the check cell's, which the learner may look at (``show_case``);
    otherwise feedback names what a failing case exercises, never its numbers.
    ``fixes``: single edits of the learner's code found where it runs (``autograder.kernel.repair``),
    as (line, words, per case: outputs or None), or a function returning them when asked;
    one is named only if its outputs equal the reference's on every case. They never change
    the score. ``seconds``: where the learner waits (the check cell), the searches for a name
    end after about this many seconds on the clock (the one among the mutants gets what the
    fixes left); None: each has its own budget. ``changed``: per case, the names of the inputs
    the learner's call changed in place (the kernel's ``changed_in_place``; data from the
    sandbox, so only names of the case's own inputs are told); a case whose call changed one
    does not pass, whatever its outputs (the caller's array is part of what the call does).
    ``alone``: case index -> ``Alone``, its twin run again alone; a case whose kernel outputs
    pass fails after all unless its twin's outputs pass too.
    """
    deadline = None if seconds is None else time.monotonic() + seconds
    alone_at = alone if isinstance(alone, dict) else {}
    verdict = Verdict(ex.id, 0.0, float(ex.points), 0, len(cases))
    changed_names = _changed_names(cases, changed)
    verdict.changed = _changed_message(ex, changed_names)
    changed_at = {i for i, names in enumerate(changed_names) if names}
    if len(results) != len(cases):
        verdict.messages.append(f"Recorded {len(results)} results for {len(cases)} cases; "
                                "run the graded cell unchanged.")
        return verdict

    failing, passing, first_problem, errors, raised, wants = [], [], None, [], [], []
    stubs = 0       # cases that raised the release's NotImplementedError
    too_large = []  # messages for the cases that held more memory than their limit
    told_alone = []  # and for those that failed run again alone (``autograder.pipeline.rerun``)
    in_place = 0     # cases with the right outputs whose call changed an input in place
    for i, (case, got) in enumerate(zip(cases, results)):
        want = as_outputs(ex.reference(**case))
        wants.append(want)
        label = f"{'case' if public else 'hidden case'} {i + 1} ({in_words(ex.describe(case), most=LABEL_FEATURES)})"
        if not isinstance(got, (tuple, Raised, OverMemory)):
            got = UNREAD  # not an outcome: a caller's bug costs this case, never the grading
        if isinstance(got, tuple) and i in alone_at and close(ex, got, want):
            got = _twin_failure(ex, alone_at[i]) or got  # right in the kernel: also alone?
            if isinstance(got, str):  # wrong alone: told apart
                told_alone.append(f"{label}: right in your notebook, but {got if public else without_values(got)}")
                continue
        if isinstance(got, OverMemory):
            too_large.append(f"{label}: {_memory_message(ex, case, got)}")
            continue
        if isinstance(got, Raised):
            errors.append(got.text if got.stub else f"{label}: {got.text if public else without_values(got.text)}")
            stubs += got.stub
            raised.append(case)
            continue
        if close(ex, got, want) and i in changed_at:
            in_place += 1  # the right outputs, but the caller's inputs changed: told in ``changed``
            continue
        if close(ex, got, want):
            verdict.passed += 1
            passing.append((case, got))
        else:
            failing.append((case, got, want))
            first_problem = first_problem or f"{label}: {describe_difference(ex, got, want, public)}"

    verdict.points = round(ex.points * verdict.passed / len(cases), 3)
    if verdict.passed == len(cases):
        verdict.messages.append(f"All {len(cases)} cases match the reference.")
        verdict.messages += [verdict.changed] if verdict.changed else []
        return verdict
    if errors and stubs == len(errors) and not failing:
        verdict.messages.append(f"`{ex.function}` is not implemented yet.")
        return verdict
    # the right numbers in the wrong kind of array, told first: they match a listed mistake's
    # too (1.0 == True)
    wrong_kind = _dtype_only(ex, failing)
    mistake = None if wrong_kind else identify_mistake(ex, failing, passing)
    if wrong_kind:
        verdict.messages, verdict.kind = [wrong_kind], "specific"
    elif mistake is not None:
        verdict.messages.append(mistake.message())
        verdict.kind = "listed"
    elif failing or raised:
        found = _once(fixes)

        def fix(edits: int = 1):
            lines, message = _confirmed_fix(ex, wants, found(), edits)
            verdict.lines = lines
            return message

        def partly():
            lines, message = _one_edit_then_listed(ex, cases, wants, found())
            verdict.lines = lines
            return message
        verdict.messages, verdict.kind = _unlisted(ex, failing, passing, raised, fix, deadline, partly)
    if verdict.changed:  # a fact, and often the cause (a residual that adds the changed x)
        verdict.messages.append(verdict.changed)
        verdict.kind = verdict.kind or "specific"
    if errors:
        verdict.messages.append(f"{len(errors)} case(s) raised an error, e.g. {errors[0]}")
    if too_large:
        verdict.messages += too_large
        verdict.kind = verdict.kind or "specific"
    if told_alone:  # what went wrong there is for the learner to find: the grader saw only the twin's outputs
        verdict.messages.append(told_alone[0] + (f" ({len(told_alone) - 1} more case(s) likewise)"
                                                 if len(told_alone) > 1 else ""))
    verdict.messages.append(f"{verdict.passed} of {len(cases)} cases match the reference" + (
        f"; {in_place} more give the right outputs but change an input in place." if in_place else "."))
    if first_problem:
        verdict.messages.append("First difference, " + first_problem.rstrip(".") + ".")
    return verdict


def _changed_names(cases: list, changed) -> list[list[str]]:
    """Per case, the names of its own inputs that the learner's call changed in place (the
    kernel's report, data from the sandbox: anything else in it is ignored)."""
    if not isinstance(changed, list) or len(changed) != len(cases):
        return [[] for _ in cases]
    return [[name for name in (these if isinstance(these, list) else ())
             if isinstance(name, str) and name in case] for case, these in zip(cases, changed)]


def _changed_message(ex: Exercise, changed_names: list[list[str]]) -> str | None:
    """What to tell when the learner's call changed its inputs in place on some case
    (``changed_names``: per case, the inputs changed, from ``_changed_names``)."""
    names = []
    for these in changed_names:
        names += [name for name in these if name not in names]
    if not names:
        return None
    shown = " and ".join(f"`{n}`" for n in names)
    where = f"`{ex.function}`" + (f" (or a function of yours it calls: {', '.join(f'`{h}`' for h in ex.helpers)})"
                                  if ex.helpers else "")
    return (f"Your {where} changes its input {shown} in place (`-=`, `*=`, `out=`, or a slice "
            f"assigned), so the caller's array is no longer what it passed: code that uses it "
            "afterwards (a residual `x + ...`, the next call) sees other values. Work on a new "
            "array (`x = x - mu` makes one; `x.copy()` first also does).")


def _twin_failure(ex: Exercise, alone: Alone):
    """Why a case right in the kernel fails after all, run alone on its twin: an
    ``OverMemory`` (told as the kernel's would be), a sentence (``AGAIN`` and why), or None."""
    outcome = alone.outcome
    if outcome is None:
        return f"{AGAIN}, it stopped without a result (a crash, or out of time)"
    if isinstance(outcome, OverMemory):
        return outcome
    if isinstance(outcome, Raised):
        return f"{AGAIN}: {shorten(outcome.text, 300)}"
    if not isinstance(outcome, tuple) or not close(ex, outcome, as_outputs(ex.reference(**alone.twin))):
        return f"{AGAIN}, its outputs differ from the reference's there"
    return None


def _memory_message(ex: Exercise, case, over: OverMemory) -> str:
    """Why a case that held more memory than ``ex.memory`` allows fails, whatever its values."""
    limit, why = ex.memory(case) if ex.memory else (0, "")
    peak = over.peak
    if over.by == REFUSED:
        return (f"`{ex.function}` asked for more memory at once than the {limit / 2**20:.0f} MiB this "
                f"case allows, run alone in a fresh process where the operating system holds it to "
                f"that limit: {why}.")
    if over.by == STOPPED:
        return (f"`{ex.function}` stopped Python's count of allocations (`tracemalloc`), by which "
                f"this case measures its memory ({why}).")
    return (f"`{ex.function}` held {peak / 2**20:.1f} MiB at once, more than the "
            f"{limit / 2**20:.0f} MiB this case allows: {why}.")


def _unlisted(ex: Exercise, failing: list, passing: list, raised: list, fix,
              deadline: float | None = None, partly=lambda: None) -> tuple[list[str], str | None]:
    """Messages for a wrong answer no registered mistake explains (nor the wrong dtype), and
    their kind, in this order (the fewer changes first): differences of rounding size; one
    edit of the learner's code that makes every case match (``fix()``); an output of zeros;
    one mutant of the reference that fits every case, raising where the learner's code raised
    (``explain``); two listed mistakes of one model made together (``identify_pair``); listed
    mistakes that each explain some of the outputs (``identify_per_output``); a generic
    diagnosis that says what the mistake is (``diagnose``); two edits of the learner's code
    (``fix(2)``); one edit after which a listed mistake explains the rest (``partly()``); the
    generic diagnosis of where it is. With no failing case (every wrong
    case raised an error), the fix alone: the error says the rest."""
    if not failing:
        fixed = fix()
        return ([fixed], "specific") if fixed else ([], None)
    small = rounding(ex, failing)
    if small:
        return [small], "pinpoint"
    fixed = fix()
    if fixed:
        return [fixed], "specific"
    zeros = _all_zeros(ex, failing)
    if zeros:  # nothing computed: a coincidence with a changed input would mislead
        return [zeros], "pinpoint"
    left = None if deadline is None else max(MIN_SEARCH, deadline - time.monotonic())
    named = explain(ex, failing, passing, raised, **({} if left is None else {"budget": left, "wall": left}))
    if named:
        return [named], "specific"
    pair = identify_pair(ex, failing, passing, deadline)  # after one edit: the fewer changes first
    if pair is not None:
        first, second = pair
        return [f"Looks like two mistakes at once: {first.name}, and {second.name}.",
                f"First, {first.name}: {first.hint}", f"Second, {second.name}: {second.hint}"], "listed"
    per_output = identify_per_output(ex, failing, passing)
    if per_output:
        return per_output
    generic = diagnose(ex, failing, [c for c, _ in passing], raised, deadline)
    if generic[1] == "specific":  # one thing that says what the mistake is: before two edits
        return generic
    fixed = fix(2)
    if fixed:
        return [fixed], "specific"
    fixed = partly()
    if fixed:
        return [fixed], "listed"
    near = near_miss(ex, failing, passing)
    if near is not None:  # said before the generic counts, which it keeps
        return [f"Looks like {near.name} (and something else differs too): {near.hint}",
                *generic[0]], "listed"
    return generic


NEAR = 0.8         # of the numbers that differ, the share a near miss's model must explain
SHOWN = 0.5        # of the numbers its model changes, the share the learner's must show
NEAR_BACKING = 12  # numbers at least, explained by it


def near_miss(ex: Exercise, failing: list, passing: list):
    """The one listed mistake that explains most of what differs but not all (a mistake with
    a small variation: made on some cases and not others, or beside a second slip), or None.

    Counted number by number over every case's float outputs: of the numbers where the
    learner's differ from the reference, at least ``NEAR`` equal the mistake's model, and of
    those the model changes (passing cases included), at least ``SHOWN`` show it, with at
    least ``NEAR_BACKING`` behind it. Floats only: a wrong boolean or integer agrees with
    another wrong one by chance. Where two mistakes qualify, neither is said."""
    found = []
    for mistake in ex.mistakes:
        if mistake.wrong is None:
            continue
        counts = _near_counts(ex, mistake, [*failing, *((c, g, g) for c, g in passing)])
        if counts is None:
            continue
        differ, moved, shown = counts
        if shown >= NEAR_BACKING and shown >= NEAR * differ and shown >= SHOWN * moved:
            found.append(mistake)
    return found[0] if len(found) == 1 else None


def _near_counts(ex: Exercise, mistake, cases: list) -> tuple[int, int, int] | None:
    """(numbers the learner's differ at, numbers the model changes, numbers where the learner's
    equal the model's and differ) over ``cases`` ((case, got, want)); None: no model there."""
    differ = moved = shown = 0
    for case, got, want in cases:
        model = safe_outputs(mistake.wrong, case)
        if model is None or len(model) != len(want) or len(got) != len(want):
            return None
        for g, m, w in zip(got, model, want):
            if w.dtype.kind != "f" or g.shape != w.shape or m.shape != w.shape:
                continue
            with np.errstate(all="ignore"):
                off = ~np.isclose(g, w, rtol=ex.rtol, atol=ex.atol, equal_nan=True)
                changed = ~np.isclose(m, w, rtol=ex.rtol, atol=ex.atol, equal_nan=True)
                same = np.isclose(g, m, rtol=ex.rtol, atol=ex.atol, equal_nan=True)
            differ, moved, shown = differ + int(off.sum()), moved + int(changed.sum()), \
                shown + int((off & changed & same).sum())
    return differ, moved, shown


def _once(fixes):
    """``fixes`` as a function that computes them (the search of the check cell) at most once."""
    kept = []

    def found():
        if not kept:
            kept.append(list(fixes() if callable(fixes) else fixes or ()))
        return kept[0]
    return found


def _as_fix(fix) -> Fix:
    return fix if isinstance(fix, Fix) else Fix(*fix)


_EDIT = re.compile(r"with `(.*)` in place of `(.*)`")


def _simplest(words: str) -> tuple:
    """Which of several edits of one line to show: one that only deletes (`x + f(x)` -> `f(x)`,
    `T - 1` -> `T`) before one that replaces, then the shortest."""
    m = _EDIT.search(words)
    if m is None:
        return (True, len(words))
    after, before = m.groups()
    p = next((i for i, (a, b) in enumerate(zip(after, before)) if a != b), min(len(after), len(before)))
    return (not (len(after) < len(before) and before.endswith(after[p:])), len(words))


def _confirmed_fix(ex: Exercise, wants: list, fixes, edits: int = 1) -> tuple[tuple, str | None]:
    """(lines, message): the learner's line that one edit fixes, when that edit's outputs
    equal the reference's on every case, or the two lines where either of two edits does;
    no message when no edit does, or edits of more lines do. ``edits`` 2: the two edits,
    made together, that do (two mistakes), where exactly one pair of lines is found. An edit
    that matches by coincidence (``loose``) names its line only, and only where no other does."""
    fixes = [_as_fix(f) for f in fixes or ()]
    if edits == 2:
        return _confirmed_pair(ex, wants, fixes)
    good, loose = {}, set()  # line -> the words of each edit of it that makes every case match
    for fix in fixes:
        if fix.then is not None or fix.partial or not _matches_all(ex, fix.results, wants):
            continue
        if fix.loose:
            loose.add(fix.line)
            continue
        edits = good.setdefault(fix.line, [])
        if fix.words not in edits:
            edits.append(fix.words)
    if not good and len(loose) == 1:
        line, = loose
        return (line,), f"This line of yours looks like the mistake: `{line}`."
    if len(good) == 1:
        (line, [words, *others]), = good.items()
        if others:  # `new == word` made never true by any of three names: the line, not the edit;
            words = min([words, *others], key=_simplest)
            return (line,), (f"This line of yours looks like the mistake: `{line}`. More than one change "
                             f"of it makes every case match, one is this: {words}.")
        return (line,), (f"This line of yours looks like the mistake: `{line}`. {words[0].upper()}{words[1:]}, "
                         "every case matches.")
    if len(good) == 2:
        (a, [wa, *_]), (b, [wb, *_]) = good.items()
        return (a, b), (f"One of these lines of yours looks like the mistake: `{a}` ({wa}) or `{b}` ({wb}); "
                        "either change makes every case match.")
    return (), None


def _matches_all(ex: Exercise, results: list, wants: list) -> bool:
    return len(results) == len(wants) and all(r is not None and close(ex, r, w) for r, w in zip(results, wants))


def _confirmed_pair(ex: Exercise, wants: list, fixes: list) -> tuple[tuple, str | None]:
    """(lines, message) for two edits that, made together, make every case match; only where
    all such pairs name the same two lines (with the same words)."""
    pairs = {}  # (line, other line) -> the words of each pair of edits of them that fixes every case
    for f in fixes:
        if f.then is not None and _matches_all(ex, f.results, wants):
            pairs.setdefault((f.line, f.then[0]), []).append((f.words, f.then[1]))
    if len(pairs) != 1:
        return (), None
    ((line, other), said), = pairs.items()
    words, other_words = min(said, key=lambda pair: (_simplest(pair[0]), _simplest(pair[1])))
    if line == other:
        return (line,), (f"This line of yours looks wrong in two places: `{line}`. With both changes, "
                         f"every case matches: {words}, and {other_words}.")
    return (line, other), (f"Two lines of yours look like two mistakes: `{line}` ({words}) and `{other}` "
                           f"({other_words}); with both changes, every case matches.")


def _one_edit_then_listed(ex: Exercise, cases: list, wants: list, fixes) -> tuple[tuple, str | None]:
    """(lines, message) where one edit of the learner's line (a partial fix from the search)
    leaves outputs that one listed mistake explains on every case it leaves failing, with no
    case against it: the two mistakes, one named by its line, the other by the list."""
    told = {}
    for fix in (_as_fix(f) for f in fixes or ()):
        if not fix.partial or len(fix.results) != len(cases) or any(r is None for r in fix.results):
            continue
        failing = [(c, r, w) for c, r, w in zip(cases, fix.results, wants) if not close(ex, r, w)]
        passing = [(c, r) for c, r, w in zip(cases, fix.results, wants) if close(ex, r, w)]
        if not failing or sum(int(np.size(w)) for _, _, want in failing for w in want) < 3:
            continue
        mistake = identify_mistake(ex, failing, passing)
        if mistake is not None:
            told.setdefault(mistake.name, (fix, mistake))
    if len(told) != 1:  # none, or edits that leave different mistakes: no claim
        return (), None
    (fix, mistake), = told.values()
    return (fix.line,), (f"Looks like two mistakes at once. One is this line of yours: `{fix.line}` "
                         f"({fix.words}). With that changed, your code behaves like {mistake.name}: {mistake.hint}")


def identify_per_output(ex: Exercise, failing: list, passing: list = ()) -> tuple[list[str], str] | None:
    """(messages, kind) where listed mistakes, each matching the learner's numbers on every
    output it changes (``_touched``), together explain every wrong output: two mistakes in
    different outputs (`dQ` from one, `dV` from another). Where one mistake explains some
    wrong outputs and none explains the rest: that one, and which outputs still differ. No
    claim where two covers differ, or where fewer than three numbers back a mistake."""
    if len(ex.output_names) < 2 or not failing:
        return None
    wrong = {k for _, got, want in failing if len(got) == len(want)
             for k, ok in enumerate(close_per_output(ex, got, want)) if not ok}
    if len(wrong) < 2:
        return None
    wrong_at = [{k for k, ok in enumerate(close_per_output(ex, got, want)) if not ok} for _, got, want in failing]
    explaining = []  # (mistake, the outputs it changes and explains, per failing case those it changes)
    for mistake in ex.mistakes:
        if mistake.wrong is None:
            continue
        touched, moved = _touched(ex, mistake, failing, passing)
        if touched and touched <= wrong:
            explaining.append((mistake, touched, moved))
    covers = [(a[:2], b[:2]) for i, a in enumerate(explaining) for b in explaining[i + 1:]
              if not a[1] & b[1] and all(w <= m | n for w, m, n in zip(wrong_at, a[2], b[2]))]
    names = lambda ks: " and ".join(f"`{ex.name_of(k)}`" for k in sorted(ks))  # noqa: E731
    if len(covers) == 1:
        (first, ks), (second, ls) = covers[0]
        return [f"Looks like two mistakes at once, in different outputs: {first.name} in {names(ks)}, "
                f"and {second.name} in {names(ls)}.",
                f"In {names(ks)}: {first.name}: {first.hint}", f"In {names(ls)}: {second.name}: {second.hint}"], "listed"
    if covers or len({m.name for m, _, _ in explaining}) != 1:
        return None  # several covers, or parts that say different things: no claim
    mistake, ks, moved = explaining[0]
    left = [w - m for w, m in zip(wrong_at, moved) if w - m]  # per case, what it does not explain
    rest = set().union(*left) if left else set()
    if not rest:
        return None
    where = "" if rest.isdisjoint(ks) else f" on {len(left)} of the {len(failing)} failing cases"
    return [f"One of the mistakes, in {names(ks)}: {mistake.name}: {mistake.hint} "
            f"With that fixed, {names(rest)} still differ{'s' if len(rest) == 1 else ''}{where}."], "listed"


def _touched(ex: Exercise, mistake, failing: list, passing: list) -> tuple[set[int], list[set[int]]]:
    """(the outputs ``mistake`` changes on the failing cases, per failing case those it
    changes there), if on every case (failing and passing alike) its numbers equal the
    learner's on each output it changes and at least three numbers back it; else nothing."""
    touched, backing, per_case = set(), 0, []
    for case, got, want in failing:
        model = safe_outputs(mistake.wrong, case)
        if model is None or len(model) != len(want) or len(got) != len(want):
            return set(), []
        moved = {k for k, ok in enumerate(close_per_output(ex, model, want)) if not ok}
        same = close_per_output(ex, got, model, equal_nan=True)
        if not all(same[k] for k in moved):
            return set(), []
        touched |= moved
        per_case.append(moved)
        backing += sum(int(np.size(want[k])) for k in moved)
    for case, got in passing:  # there the learner's is the reference: a mistake that moves it is not theirs
        model = safe_outputs(mistake.wrong, case)
        if model is not None and len(model) == len(got) and not all(close_per_output(ex, got, model, equal_nan=True)) \
                and all(np.isfinite(m).all() for m in model if m.dtype.kind in "fc"):
            return set(), []
    return (touched, per_case) if backing >= 3 else (set(), [])


def _all_zeros(ex: Exercise, failing: list) -> str | None:
    """A message when an output is all zeros on every failing case (the reference's is not).
    Zero is a token id or a count like any other: for an integer output one failing case is
    not enough (an argmax that finds nothing gives 0 too)."""
    n = min(len(got) for _, got, _ in failing)
    for k in range(n):
        if len(failing) < 2 and output_kind(failing[0][2][k]) in ("int", "bool"):
            continue
        if all(got[k].size and not np.any(got[k]) and np.any(want[k]) for _, got, want in failing):
            return (f"`{ex.name_of(k)}` is all zeros on every failing case: is a result computed but "
                    "never written into the array you return, or a loop never run?")
    return None


def _dtype_only(ex: Exercise, failing: list) -> str | None:
    """A message when every failing output holds the right numbers in the wrong kind of array."""
    promised = set()
    for _, got, want in failing:
        if len(got) != len(want) or not all(close_per_output(ex, got, want)):
            return None
        promised |= {(i, p) for i, (g, w) in enumerate(zip(got, want))
                     for p in [_kind_promised(g, w, ex.int_scalars)] if p}
    if not promised:
        return None
    i, (words, dtype) = sorted(promised)[0]
    if (words, dtype) == LISTED:
        return (f"`{ex.name_of(i)}` holds the right numbers, but as a Python list: the exercise asks for "
                "a numpy array, so return `np.array(...)` of it (with the dtype the exercise names).")
    if words == "an int":
        return (f"`{ex.name_of(i)}` holds the right number, but the exercise asks for an int: "
                "compute it in integers (`//` divides them) or return `int(...)` of it.")
    return (f"`{ex.name_of(i)}` holds the right numbers, but the exercise asks for {words}: create it "
            f"with `dtype={dtype}` or convert it with `.astype({dtype})`.")


def _detects(mistake, case, got, want) -> bool:
    """A detector's answer; False when it does not apply (it may assume the right shapes)."""
    try:
        with np.errstate(all="ignore"):
            return bool(mistake.detect(case, got, want))
    except Exception:
        return False


def identify_mistake(ex: Exercise, failing: list, passing: list = ()):
    """The first registered mistake that explains every failing case and that no passing case
    (case, got) contradicts, or None. A mistake's ``wrong`` whose outputs differ from the
    learner's right ones on a passing case is not the learner's: with one or two failing cases
    another bug can coincide with it there (an argmax that ignores u, on the one case where the
    learner's sampling slips)."""
    if not failing:
        return None
    for mistake in ex.mistakes:
        explained = 0
        for case, got, want in failing:
            if mistake.detect is not None:
                ok = _detects(mistake, case, got, want)
            else:
                ok = _same_values(ex, got, safe_outputs(mistake.wrong, case))
            if not ok:
                break
            explained += 1
        if explained == len(failing) and not _contradicted(ex, mistake, passing):
            return mistake
    return None


def identify_pair(ex: Exercise, failing: list, passing: list = (), deadline: float | None = None):
    """Two listed mistakes of one model (each an ``exercise.Switched``) that, made together,
    explain every failing case, with no passing case against them, or None. Only when exactly one
    pair fits (two pairs that say different things: no claim), on at least three numbers, and
    while ``deadline`` (the clock) allows."""
    if not failing or sum(int(np.size(w)) for _, _, want in failing for w in want) < 3:
        return None
    pairs = []
    listed = [m for m in ex.mistakes if m.wrong is not None]
    for i, first in enumerate(listed):
        for second in listed[i + 1:]:
            wrong = both(first.wrong, second.wrong)
            if wrong is not None:
                joint = Mistake(name=f"{first.name}; {second.name}", hint="", wrong=wrong)
                pairs.append((first, second, joint))
    fits = []
    for first, second, joint in pairs:
        if deadline is not None and time.monotonic() > deadline:
            return None
        if all(_same_values(ex, got, safe_outputs(joint.wrong, case)) for case, got, _ in failing) \
                and not _contradicted(ex, joint, passing):
            fits.append((first, second))
    return fits[0] if len(fits) == 1 else None


def _contradicted(ex: Exercise, mistake, passing: list) -> bool:
    """Whether a passing case shows that the learner does not make ``mistake``: its ``wrong``
    (or, for a ``detect`` that is an ``exercise.Family``, each of its models) gives other finite
    outputs there (another ``detect`` cannot say, nor a model that raises or gives NaN: a mistake's
    model may leave out a guard the learner kept, as a softmax without its maximum that
    divides 0 by 0 where the learner's gives a fully masked query 0)."""
    if mistake.detect is None:
        return any(_differs_finitely(ex, got, safe_outputs(mistake.wrong, case)) for case, got in passing)
    models = mistake.detect.models if isinstance(mistake.detect, Family) else ()  # each on a copy, as Family
    return bool(models) and any(all(_differs_finitely(ex, got, safe_outputs(model, copy.deepcopy(case)))
                                    for model in models) for case, got in passing)


def _differs_finitely(ex: Exercise, got: tuple, wrong: tuple | None) -> bool:
    return wrong is not None and all(np.isfinite(w).all() for w in wrong if w.dtype.kind in "fc") \
        and not _same_values(ex, got, wrong)


def _same_values(ex: Exercise, got: tuple, other: tuple | None, equal_nan: bool = True) -> bool:
    """Whether ``other`` holds the learner's numbers, output for output, whatever the kind of
    array (a mistake is about values; the promised kind is told apart, ``close``)."""
    return other is not None and len(got) == len(other) and all(close_per_output(ex, got, other, equal_nan))
