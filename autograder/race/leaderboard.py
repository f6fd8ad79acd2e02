"""``autograder leaderboard``: a class's race entries verified and ranked. [trusted]

Each learner's entry is the cell of their notebook whose nbgrader id is ``ENTRY_ID`` (read
with the careful reader, ``skim``: only cell sources, never outputs); the course's own entry
(``course_lib.race.BASELINE``) runs with them. Every entry's seeds are drawn from the race's
key (kept in the output folder, readable by its owner alone), so the same entry gets the same
seeds in every run, and no entry can choose them. What each entry gave is kept in
``runs/<id>.json`` with a digest of its source, the rules and the texts: a run stopped halfway
resumes where it was, and an entry changed since is run again, as is a seed whose sandbox did
not start (``Run.grader_fault``). Entries run ``jobs`` at a time (each is a chain of sandboxed
processes; a thread here only waits on them), or each seed on a worker of a Dask cluster
(``cluster``); where no sandbox starts at all, the race stops with ``SandboxUnavailable``
(``process.Starts``).
"""
from __future__ import annotations

import hashlib
import json
import os
import secrets
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, replace
from pathlib import Path

import torch
from tqdm import tqdm

from autograder.classroom.intake import find_submissions, unpacked
from autograder.pipeline.assignment import notebooks
from autograder.pipeline.skim import Cut, Limits, Unreadable, skim
from autograder.race import board
from autograder.race.heldout import Texts, texts
from autograder.race.process import Starts
from autograder.race.verify import Rules, Run, same_model, seeds_for, split_heldout, verify
from course_lib.ngram import NgramLM
from course_lib.race import BASELINE, bits_per_char

ENTRY_ID = "race_entry"
CELLS = 2000  # cells of a notebook read, at most (the course's longest has about 150)


class NoEntry(ValueError):
    """A notebook without a race entry that can be read; the message says why."""


def entry_source(notebook: Path) -> str:
    """The source of ``notebook``'s race entry cell (nbgrader id ``ENTRY_ID``)."""
    try:
        cells = skim(notebook, Limits(cells=CELLS)).cells
    except Unreadable as err:
        raise NoEntry(f"the notebook {err}") from None
    for cell in cells:
        meta = cell.get("metadata", {}).get("nbgrader", {}) if isinstance(cell, dict) else {}
        if isinstance(meta, dict) and meta.get("grade_id") == ENTRY_ID:
            source = cell.get("source", "")
            if isinstance(source, Cut):
                raise NoEntry(f"the race entry cell is {source.size} bytes, more than the grader reads")
            if isinstance(source, list) and all(isinstance(s, str) for s in source):
                source = "".join(source)
            if not isinstance(source, str):
                raise NoEntry("the race entry cell's source is not text")
            return source
    raise NoEntry(f"the notebook has no race entry cell (nbgrader id {ENTRY_ID!r})")


def read_entry(notebook: Path) -> str | NoEntry:
    """``entry_source``, or the ``NoEntry`` that says why there is none."""
    try:
        return entry_source(notebook)
    except NoEntry as err:
        return err


def five_gram(data: Texts, windows: int) -> float:
    """The 5-gram's bits per character on the scored windows (each from an empty context)."""
    scored, _ = split_heldout(data.heldout, windows)
    model = NgramLM(5, data.tokenizer.vocab_size).fit(data.train)
    with torch.no_grad():
        logits, _ = model(torch.from_numpy(scored[:, :-1]))
    return bits_per_char(logits.numpy(), scored[:, 1:])


def _key(out: Path) -> bytes:
    """The race's key (made once, mode 600): it draws every entry's seeds."""
    path = out / ".race_key"
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
    return bytes.fromhex(path.read_text().strip())


def _texts_digest(data: Texts) -> str:
    """A digest of the race's texts and vocabulary (once per race: the texts are megabytes)."""
    h = hashlib.sha256(data.tokenizer.chars.encode() + b"\0")
    h.update(data.train.tobytes())
    h.update(data.heldout.tobytes())
    return h.hexdigest()


KEPT = "runs with each window's bits"  # what runs/ holds; a change runs every kept entry again


def _digest(code: str, rules: Rules, texts_digest: str) -> str:
    h = hashlib.sha256()
    for part in (KEPT, code, json.dumps(asdict(rules), sort_keys=True), texts_digest):
        h.update(part.encode() + b"\0")
    return h.hexdigest()


def _kept(path: Path, digest: str) -> list[Run]:
    """The runs ``path`` keeps of the same entry under the same rules and texts (none: run them)."""
    try:
        saved = json.loads(path.read_text())
        return [Run(**r) for r in saved["runs"]] if saved.get("digest") == digest else []
    except (OSError, ValueError, KeyError, TypeError):  # none yet, or a file half written
        return []


def _standing(name: str, code: str | None, why: str | None, texts_digest: str, rules: Rules, out: Path,
              key: bytes, runs_of) -> board.Standing:
    """``name``'s standing: from ``runs/`` where the same entry ran under the same rules, else
    ``runs_of(code, seeds)`` (``verify`` here or on the cluster); a seed whose sandbox did not start
    runs again."""
    if code is None:
        return board.Standing(name, [Run(0, reason=why)])
    kept = out / "runs" / f"{name}.json"
    digest = _digest(code, rules, texts_digest)
    earlier = {r.seed: r for r in _kept(kept, digest) if not r.grader_fault}
    seeds = seeds_for(key, name, rules.seeds)
    if all(seed in earlier for seed in seeds):
        runs = [earlier[seed] for seed in seeds]
    else:
        now = runs_of(code, [seed for seed in seeds if seed not in earlier])
        runs = [earlier[seed] if seed in earlier else now.pop(0) for seed in seeds]
        tmp = kept.with_suffix(".tmp")
        tmp.write_text(json.dumps({"digest": digest, "runs": [asdict(r) for r in runs]}))
        tmp.replace(kept)
    alike = same_model(runs)  # kept as they ran; judged on every reading
    if alike:
        runs = [replace(r, bpc=None, reason=alike) if r.reason is None else r for r in runs]
    return board.Standing(name, runs)


def race(assignment: str, submissions: Path, out: Path, rules: Rules = Rules(), heldout: Path | None = None,
         jobs: int = 1, isolate: bool = True, train_text: str | None = None, most: float = 0.0,
         award: str = "line", scheduler: str | None = None) -> tuple[list[board.Standing], float]:
    """Verify and rank every entry of ``submissions`` (a folder or zip, as ``grade`` reads it, or
    one notebook) and the course's own, ``jobs`` entries at a time here, or on the Dask cluster
    behind ``scheduler`` (``cluster``); write the leaderboard into ``out``, with ``most`` points
    by ``award`` in its CSV (``board.points``). (the board, the 5-gram's line)."""
    data = texts(heldout, train_text)
    out.mkdir(parents=True, exist_ok=True)
    (out / "runs").mkdir(exist_ok=True)
    (out / "feedback").mkdir(exist_ok=True)
    key = _key(out)
    names = notebooks(assignment)
    if not names:
        raise NoEntry(f"no assignment {assignment!r} in solutions/")
    entries: dict[str, tuple[str | None, str | None]] = {board.BASELINE: (BASELINE, None)}
    submissions = Path(submissions)
    if submissions.suffix == ".ipynb":  # one learner's own notebook: raced as "you"
        read, refused = {"you": read_entry(submissions)}, []
    else:
        with unpacked(submissions) as (folder, skipped):
            found, refused = find_submissions(folder, assignment, names[0], skipped=skipped)
            read = {student: read_entry(paths[0]) for student, paths in found.items()}
    for outcome in refused:
        entries[outcome.student] = (None, outcome.reason)
    for student, got in read.items():
        entries[student] = (None, str(got)) if isinstance(got, NoEntry) else (got, None)
    line, texts_digest, starts = five_gram(data, rules.windows), _texts_digest(data), Starts()
    if scheduler:
        from autograder.race.cluster import DaskRaces  # lazy: Dask, only for a cluster

        cluster = DaskRaces(scheduler, data.train, data.heldout, data.tokenizer.vocab_size, rules, isolate, starts)
        jobs, runs_of = cluster.threads, cluster.verify
    else:
        def runs_of(code: str, seeds: list[int]) -> list[Run]:
            return verify(code, data.train, data.heldout, data.tokenizer.vocab_size, rules, seeds,
                          isolate=isolate, starts=starts)
    try:
        with ThreadPoolExecutor(max(1, jobs)) as pool, \
                tqdm(total=len(entries), desc="race entries", unit="entry") as bar:
            def one(item):
                name, (code, why) = item
                try:
                    return _standing(name, code, why, texts_digest, rules, out, key, runs_of)
                finally:
                    bar.update()
            standings = list(pool.map(one, entries.items()))
    finally:
        if scheduler:
            cluster.close()
    ranked = board.rank(standings)
    base = next(s for s in standings if s.name == board.BASELINE)
    base_mean = base.mean if base.reason is None else None
    runs = rules.seeds
    about = (f"Trained for {rules.budget:g} CPU seconds on one thread, at most {rules.params:,} numbers, "
             f"{runs} random seeds each; scored on {data.heldout_name} ({rules.windows} windows of "
             f"held-out text no entry saw). A place needs p < {board.ALPHA} (Welch's t-test).")
    board.write_csv(out / "leaderboard.csv", ranked, line, base_mean, most, award)
    board.write_html(out / "leaderboard.html", ranked, line, base_mean, about)
    for s in ranked:
        if s.name != board.BASELINE:
            board.write_feedback(out / "feedback" / f"{s.name}.html", s, base, line, about)
    return ranked, line


def summary(ranked: list[board.Standing], line: float) -> str:
    """The board as lines for a terminal (learner ids escaped by the caller)."""
    rows = [f"5-gram line: {line:.3f} bits per character"]
    for s in ranked:
        if s.reason is None:
            rows.append(f"{s.rank:>3}  {s.name}: {s.mean:.3f} ± {s.spread:.3f}")
        else:
            rows.append(f"  -  {s.name}: ranked nowhere: {s.reason}")
    unrun = sum(any(r.grader_fault for r in s.runs) for s in ranked)
    if unrun:
        rows.append(f"{unrun} entr{'y' if unrun == 1 else 'ies'} could not be run to the end through no doing "
                    "of theirs (the sandbox did not start): run the same command again to run them")
    return "\n".join(rows)
