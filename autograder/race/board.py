"""The class race's ranking: means over random seeds, spreads, significance, what is written. [trusted]

Each entry's score is its mean bits per character over its seeds (lower is better), with the
spread (the sample standard deviation over its random seeds). A place is taken only at a stated significance:
an entry shares the rank of the one above it unless Welch's t-test says it is worse at
``ALPHA`` (one-sided), the bar modded-nanogpt and Parameter Golf set for a new record. An entry
with a run that has a reason (over its budget, not causal, a crash) is listed with that reason
and ranked nowhere. Two lines are drawn: the 5-gram's and the course's own entry's.

Written: ``leaderboard.csv`` (what a spreadsheet or gradebook imports), ``leaderboard.html``
(offline, one page, every learner-made string escaped), and per learner ``<id>.html``: their
curve against the course's entry and the 5-gram line.
"""
from __future__ import annotations

import base64
import csv
import html
import io
import math
from dataclasses import dataclass, field
from pathlib import Path

from autograder.race.verify import Run

ALPHA = 0.01
BASELINE = "course entry"


@dataclass
class Standing:
    """One entry of the race: who, its runs, and (once ranked) its place."""
    name: str
    runs: list[Run]
    rank: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def reason(self) -> str | None:
        return next((r.reason for r in self.runs if r.reason), None if self.runs else "no run")

    @property
    def scores(self) -> list[float]:
        return [r.bpc for r in self.runs if r.bpc is not None]

    @property
    def mean(self) -> float:
        return sum(self.scores) / len(self.scores)

    @property
    def spread(self) -> float:
        s = self.scores
        return math.sqrt(sum((x - self.mean) ** 2 for x in s) / (len(s) - 1)) if len(s) > 1 else 0.0


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-12:
            break
    return h


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b), 0 <= x <= 1."""
    if x <= 0.0 or x >= 1.0:
        return 0.0 if x <= 0.0 else 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom."""
    tail = 0.5 * incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def welch_p(better: list[float], worse: list[float]) -> float:
    """One-sided p-value of Welch's t-test that ``better``'s mean is lower than ``worse``'s
    (1.0 where there are too few seeds to say)."""
    n, m = len(better), len(worse)
    if n < 2 or m < 2:
        return 1.0
    mean = lambda s: sum(s) / len(s)  # noqa: E731
    var = lambda s: sum((x - mean(s)) ** 2 for x in s) / (len(s) - 1)  # noqa: E731
    va, vb = var(better) / n, var(worse) / m
    diff = mean(worse) - mean(better)
    if va + vb == 0.0:
        return 0.0 if diff > 0 else 1.0
    df = (va + vb) ** 2 / (va ** 2 / (n - 1) + vb ** 2 / (m - 1))
    return t_sf(diff / math.sqrt(va + vb), df)


def rank(standings: list[Standing]) -> list[Standing]:
    """The standings in order, ``rank`` set for those without a reason: the best first; one
    shares the rank above unless worse at ``ALPHA`` than the first of that rank."""
    valid = sorted((s for s in standings if s.reason is None), key=lambda s: (s.mean, s.name))
    head = None
    for place, s in enumerate(valid, start=1):
        if head is None or welch_p(head.scores, s.scores) < ALPHA:
            head, s.rank = s, place
        else:
            s.rank = head.rank
    return valid + sorted((s for s in standings if s.reason is not None), key=lambda s: s.name)


AWARDS = ("line", "rank")  # points for crossing the 5-gram's line, or by place


def points(s: Standing, board: list[Standing], five_gram: float, most: float, award: str) -> float:
    """``s``'s points out of ``most``: ``line``, all of them for beating the 5-gram; ``rank``,
    all for first place down to ``most / n`` for the last of ``n`` ranked (ties alike); none
    for an entry ranked nowhere. The course's entry takes no place from a learner."""
    if s.rank is None or most <= 0:
        return 0.0
    if award == "line":
        return most if s.mean < five_gram else 0.0
    ranked = [t for t in board if t.rank is not None and t.name != BASELINE]
    above = sum(1 for t in ranked if t.rank < s.rank)
    return round(most * (len(ranked) - above) / len(ranked), 2) if s in ranked else 0.0


def write_csv(path: Path, board: list[Standing], five_gram: float, baseline: float | None,
              most: float = 0.0, award: str = "line") -> None:
    """One row per entry: rank (empty: ranked nowhere), id, mean, spread, how many random seeds, the lines it
    crosses, parameters, CPU seconds of its slowest training, its reason, and its ``points``
    out of ``most`` by ``award`` (a column a gradebook can import)."""
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["rank", "id", "bits_per_char", "spread", "seeds", "beats_5gram", "beats_course_entry",
                      "parameters", "train_cpu_s", "reason", "points"])
        for s in board:
            ok = s.reason is None
            out.writerow([s.rank or "", _cell(s.name), f"{s.mean:.4f}" if ok else "", f"{s.spread:.4f}" if ok else "",
                          len(s.runs), ok and s.mean < five_gram, ok and baseline is not None and s.mean < baseline,
                          max((r.params for r in s.runs), default=0), f"{max((r.cpu for r in s.runs), default=0):.1f}",
                          _cell(s.reason or ""), f"{points(s, board, five_gram, most, award):g}"])


def _cell(text: str) -> str:
    """A CSV cell a spreadsheet shows as text, never runs as a formula."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:sans-serif;max-width:60rem;margin:2rem auto;line-height:1.4}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:.2rem .5rem;text-align:left}}
td{{overflow-wrap:anywhere}}img{{max-width:100%}}</style></head>
<body>{body}</body></html>
"""


def write_html(path: Path, board: list[Standing], five_gram: float, baseline: float | None, about: str) -> None:
    """The leaderboard as one offline page (no script, no link out; learner text escaped)."""
    rows = []
    for s in board:
        ok = s.reason is None
        score = f"{s.mean:.3f} ± {s.spread:.3f}" if ok else "—"
        lines = ", ".join(w for w, crossed in (("the 5-gram", ok and s.mean < five_gram),
                                                ("the course entry", ok and baseline is not None and s.mean < baseline))
                          if crossed) or "—"
        rows.append(f"<tr><td>{s.rank or ''}</td><td>{html.escape(s.name)}</td><td>{score}</td>"
                    f"<td>{html.escape(lines)}</td><td>{html.escape(s.reason or '')}</td></tr>")
    body = (f"<h1>Class race: lowest bits per character</h1><p>{html.escape(about)}</p>"
            f"<p>The 5-gram's line: {five_gram:.3f} bits per character"
            + (f"; the course entry's: {baseline:.3f}." if baseline is not None else ".") + "</p>"
            + _figure(board, five_gram, baseline)
            + "<table><tr><th>rank</th><th>id</th><th>bits per character (mean ± spread)</th>"
              "<th>beats</th><th>ranked nowhere because</th></tr>" + "".join(rows) + "</table>")
    path.write_text(PAGE.format(title="Class race", body=body), encoding="utf-8")


def write_feedback(path: Path, standing: Standing, baseline: Standing | None, five_gram: float, about: str) -> None:
    """One learner's page: their score or reason, and their training curves against the course
    entry's, with the 5-gram's line."""
    s = standing
    said = (f"Your entry: {s.mean:.3f} ± {s.spread:.3f} bits per character over {len(s.scores)} random seeds"
            + (f", rank {s.rank}." if s.rank else ".") if s.reason is None
            else f"Your entry is ranked nowhere: {s.reason}")
    body = (f"<h1>Class race: {html.escape(s.name)}</h1><p>{html.escape(said)}</p><p>{html.escape(about)}</p>"
            + _curves(s, baseline, five_gram))
    path.write_text(PAGE.format(title="Class race feedback", body=body), encoding="utf-8")


def _png(fig) -> str:
    """A matplotlib figure as an embedded image (no file, no network)."""
    import matplotlib.pyplot as plt  # lazy: matplotlib, only when a page is drawn

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return f'<img alt="figure" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def _figure(board: list[Standing], five_gram: float, baseline: float | None) -> str:
    import matplotlib  # lazy: matplotlib, only when a page is drawn
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: (as above)

    ranked = [s for s in board if s.reason is None]
    if not ranked:
        return ""
    fig, ax = plt.subplots(figsize=(8, 0.4 * len(ranked) + 1.5))
    names = [s.name[:24] for s in ranked][::-1]
    ax.barh(names, [s.mean for s in ranked][::-1], xerr=[s.spread for s in ranked][::-1], color="#4c72b0")
    ax.axvline(five_gram, color="#c44e52", linestyle="--", label=f"5-gram ({five_gram:.3f})")
    if baseline is not None:
        ax.axvline(baseline, color="#55a868", linestyle=":", label=f"course entry ({baseline:.3f})")
    low = min([s.mean - s.spread for s in ranked] + [five_gram]) - 0.1
    ax.set_xlim(left=max(0.0, low))
    ax.set_xlabel("bits per character on the held-out text (lower is better)")
    ax.legend(loc="lower right")
    return _png(fig)


def _curves(s: Standing, baseline: Standing | None, five_gram: float) -> str:
    import matplotlib  # lazy: matplotlib, only when a page is drawn
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: (as above)

    fig, ax = plt.subplots(figsize=(7, 3.5))
    for who, colour in ((s, "#4c72b0"), (baseline, "#55a868")):
        if who is None:
            continue
        for i, run in enumerate(who.runs):
            if run.curve:
                xs, ys = zip(*run.curve)
                ax.plot(xs, ys, color=colour, alpha=0.8, label=("you" if who is s else BASELINE) if i == 0 else None)
    ax.axhline(five_gram, color="#c44e52", linestyle="--", label="5-gram, held-out")
    ax.set_xlabel("CPU seconds of training")
    ax.set_ylabel("training bits per character")
    ax.legend()
    return _png(fig)
