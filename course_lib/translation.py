"""The translation task of notebook 05: dates written many ways in, one canonical form out.

A stand-in for machine translation that the project generates itself (no download) and a
2-core CPU learns in minutes. The source is a date in one of ``len(FORMATS)`` surface forms,
the target is always ISO 8601::

    "the twenty-first of March, 1994"   ->  "1994-03-21"
    "Mon 21 Mar 94"                     ->  "1994-03-21"
    "03/21/1994"                        ->  "1994-03-21"

Like a real translation pair, source and target differ in length and in word order: the
target names the year first, most sources name it last, so cross-attention has to jump
backwards (a non-monotonic alignment, visible in its heatmaps). Some words in the source
(the weekday, "of", "the") have no counterpart in the target, and some need real
translation ("twenty-first" -> "21", "Mar" -> "03").

Conventions that make every source unambiguous: slashes mean month/day/year (US), dots
mean day.month.year (European); a two-digit year ``yy`` means 20yy when yy < 50, else 19yy,
and the dates span exactly that window, 1950-01-01 to 2049-12-31.

Splits are by *date*: a date of the test split never occurs in training, in any form.

``train_translation`` trains ``course_lib.transformer.Transformer`` on it with teacher
forcing and the paper's warm-up schedule; ``evaluate`` measures exact match and token
accuracy with greedy decoding or beam search.
"""
from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass

import numpy as np
import torch

from course_lib import runmode
from course_lib.generate import beam_search, greedy_decode
from course_lib.tokenize import BOS, EOS, PAD, BPETokenizer
from course_lib.train import default_device
from course_lib.transformer import Transformer, TransformerConfig, noam_lr

FIRST_DAY, LAST_DAY = dt.date(1950, 1, 1), dt.date(2049, 12, 31)
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_UNITS = ("", "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth",
          "ninth")
_TEENS = ("tenth", "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth",
          "sixteenth", "seventeenth", "eighteenth", "nineteenth")


def ordinal(n: int) -> str:
    """1 -> "1st", 2 -> "2nd", 11 -> "11th", 23 -> "23rd"."""
    suffix = "th" if 11 <= n % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def ordinal_word(n: int) -> str:
    """A day of the month in words: 1 -> "first", 21 -> "twenty-first", 30 -> "thirtieth"."""
    if n < 10:
        return _UNITS[n]
    if n < 20:
        return _TEENS[n - 10]
    tens = {2: "twenty", 3: "thirty"}[n // 10]
    return tens[:-1] + "ieth" if n % 10 == 0 else f"{tens}-{_UNITS[n % 10]}"


def _fields(d: dt.date) -> dict:
    month, weekday = MONTHS[d.month - 1], WEEKDAYS[d.weekday()]
    return dict(d=d.day, dd=f"{d.day:02d}", mm=f"{d.month:02d}", yyyy=d.year,
                yy=f"{d.year % 100:02d}", Month=month, Mon=month[:3], Weekday=weekday,
                Wkd=weekday[:3], th=ordinal(d.day), word=ordinal_word(d.day),
                MONTH=month.upper())


# Each format is a str.format template over the fields above.
FORMATS = (
    "{d} {Month} {yyyy}",                       # 21 March 1994
    "{Month} {d}, {yyyy}",                      # March 21, 1994
    "{th} of {Month} {yyyy}",                   # 21st of March 1994
    "{Month} {th}, {yyyy}",                     # March 21st, 1994
    "the {word} of {Month}, {yyyy}",            # the twenty-first of March, 1994
    "{Month} the {word}, {yyyy}",               # March the twenty-first, 1994
    "{Weekday}, {d} {Month} {yyyy}",            # Monday, 21 March 1994
    "{Wkd} {d} {Mon} {yy}",                     # Mon 21 Mar 94
    "{d} {Mon} '{yy}",                          # 21 Mar '94
    "{dd}-{Mon}-{yyyy}",                        # 21-Mar-1994
    "{mm}/{dd}/{yyyy}",                         # 03/21/1994
    "{dd}.{mm}.{yy}",                           # 21.03.94
    "{d} {MONTH} {yyyy}",                       # 21 MARCH 1994
    "{yyyy}, {Month} {d}",                      # 1994, March 21
)


def source_text(d: dt.date, fmt: int) -> str:
    """The date ``d`` written in surface form ``FORMATS[fmt]``."""
    return FORMATS[fmt].format(**_fields(d))


def target_text(d: dt.date) -> str:
    """The canonical form: ``YYYY-MM-DD``."""
    return d.isoformat()


def all_dates() -> list[dt.date]:
    """Every day from ``FIRST_DAY`` to ``LAST_DAY`` (36,525 dates)."""
    return [FIRST_DAY + dt.timedelta(days=i) for i in range((LAST_DAY - FIRST_DAY).days + 1)]


@dataclass(frozen=True)
class Splits:
    """Lists of (source, target) string pairs; no date is shared between two splits."""
    train: list[tuple[str, str]]
    val: list[tuple[str, str]]
    test: list[tuple[str, str]]


def make_splits(n_train: int = 50_000, n_val: int = 1_000, n_test: int = 1_000,
                seed: int = 0) -> Splits:
    """The course's fixed split of the date task (the same for the same arguments).

    The dates are shuffled once with ``seed``; the first ``n_test`` are the test dates, the
    next ``n_val`` the validation dates, and each of those appears once, in a random form.
    Training draws ``n_train`` distinct (date, form) pairs from the remaining dates.
    """
    rng = np.random.default_rng(seed)
    dates = all_dates()
    order = rng.permutation(len(dates))
    test_days, val_days = order[:n_test], order[n_test:n_test + n_val]
    train_days = order[n_test + n_val:]
    n_forms = len(FORMATS)
    if n_train > len(train_days) * n_forms:
        raise ValueError(f"n_train={n_train} is more than the {len(train_days) * n_forms} "
                         "(date, form) pairs left for training")

    def pairs(days, forms):
        return [(source_text(dates[i], f), target_text(dates[i])) for i, f in zip(days, forms)]

    picks = rng.choice(len(train_days) * n_forms, size=n_train, replace=False)
    return Splits(train=pairs(train_days[picks // n_forms], picks % n_forms),
                  val=pairs(val_days, rng.integers(n_forms, size=n_val)),
                  test=pairs(test_days, rng.integers(n_forms, size=n_test)))


def train_tokenizer(pairs, vocab_size: int = 400) -> BPETokenizer:
    """One BPE vocabulary learned on sources and targets together (Week 7, §3)."""
    return BPETokenizer.train([text for pair in pairs for text in pair], vocab_size)


# ---------------------------------------------------------------- ids for the model
def decoder_input_and_target(target_ids: list[int]) -> tuple[list[int], list[int]]:
    """Teacher forcing: the decoder reads the target shifted right and predicts it.

    target_ids [y1 .. yn] -> decoder input [<s> y1 .. yn] and target [y1 .. yn </s>]:
    at position t the decoder has seen <s> and y1 .. y(t-1) and must predict y_t; the last
    position predicts the end token. Both have length n + 1.
    """
    return [BOS] + list(target_ids), list(target_ids) + [EOS]


def pad(seqs: list[list[int]], length: int | None = None) -> np.ndarray:
    """Lists of ids -> (N, length) int64, filled up with <pad> on the right."""
    length = length or max(len(s) for s in seqs)
    out = np.full((len(seqs), length), PAD, dtype=np.int64)
    for i, s in enumerate(seqs):
        out[i, :len(s)] = s
    return out


def encode_pairs(tokenizer: BPETokenizer, pairs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(source, target) strings -> src (N, T_src), tgt_in (N, T), tgt_out (N, T), <pad>-filled.

    S is the longest source in tokens; T is one more than the longest target.
    """
    src = [tokenizer.encode(s) for s, _ in pairs]
    dec = [decoder_input_and_target(tokenizer.encode(t)) for _, t in pairs]
    return pad(src), pad([d[0] for d in dec]), pad([d[1] for d in dec])


# ------------------------------------------------------------------ training and scores
def train_translation(splits: Splits | None = None, tokenizer: BPETokenizer | None = None,
                      config: TransformerConfig | None = None, *, steps: int = 4000,
                      minutes: float | None = None, batch_size: int = 64, warmup: int = 400,
                      lr_factor: float = 1.0, eval_every: int = 250, device=None,
                      seed: int = 0, plot: bool = False) -> tuple[Transformer, BPETokenizer, dict]:
    """Train a Transformer on the date task with teacher forcing; (model, tokenizer, history).

    Adam with the paper's betas (0.9, 0.98), eps 1e-9 and its warm-up schedule
    (``noam_lr``) for ``steps`` steps of ``batch_size`` random training pairs, or until
    ``minutes`` of wall-clock time have passed. Every ``eval_every`` steps the history
    records the mean training loss since the last record and the teacher-forced token
    accuracy on the validation split. A tqdm bar shows progress in full mode; with ``plot``
    both curves redraw live in the notebook.
    history: {"step", "seconds", "lr", "train_loss", "val_token_acc"}, lists.
    """
    device = device or default_device()
    splits = splits or make_splits()
    tokenizer = tokenizer or train_tokenizer(splits.train)
    config = config or TransformerConfig(tokenizer.vocab_size)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = Transformer(config).to(device)
    train = [torch.from_numpy(a).to(device) for a in encode_pairs(tokenizer, splits.train)]
    val = [torch.from_numpy(a).to(device) for a in encode_pairs(tokenizer, splits.val)]
    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    history = {key: [] for key in ("step", "seconds", "lr", "train_loss", "val_token_acc")}
    live = None
    if plot:
        from course_lib.viz import LivePlot  # matplotlib only where a plot is asked for
        live = LivePlot({"training loss (nats per token)": ["train_loss"],
                         "validation token accuracy (teacher forced)": ["val_token_acc"]},
                        logy=True)
    start, running = time.perf_counter(), []
    for step in (bar := runmode.progress(range(1, steps + 1), desc="Transformer")):
        lr = noam_lr(step, config.d_model, warmup, lr_factor)
        for group in opt.param_groups:
            group["lr"] = lr
        rows = torch.from_numpy(rng.integers(len(train[0]), size=batch_size)).to(device)
        src, tgt_in, tgt_out = (a[rows] for a in train)
        _, loss = model(src, tgt_in, tgt_out)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        running.append(loss.item())
        out_of_time = minutes is not None and time.perf_counter() - start > 60 * minutes
        if step % eval_every == 0 or step == steps or out_of_time:
            history["step"].append(step)
            history["seconds"].append(time.perf_counter() - start)
            history["lr"].append(lr)
            history["train_loss"].append(float(np.mean(running)))
            history["val_token_acc"].append(teacher_forced_accuracy(model, *val))
            running = []
            bar.set_postfix(loss=f"{history['train_loss'][-1]:.3f}",
                            val_acc=f"{history['val_token_acc'][-1]:.3f}")
            if live:
                live.update(history)
        if out_of_time:
            break
    model.eval()
    return model, tokenizer, history


@torch.no_grad()
def teacher_forced_accuracy(model, src, tgt_in, tgt_out, batch_size: int = 500) -> float:
    """Fraction of non-<pad> target tokens predicted right when the decoder reads the true
    previous tokens (the training condition; decoding at test time is harder)."""
    was_training = model.training
    model.eval()
    right = total = 0
    for i in range(0, len(src), batch_size):
        logits, _ = model(src[i:i + batch_size], tgt_in[i:i + batch_size])
        y = tgt_out[i:i + batch_size]
        keep = y != PAD
        right += ((logits.argmax(-1) == y) & keep).sum().item()
        total += keep.sum().item()
    model.train(was_training)
    return right / total


@torch.no_grad()
def evaluate(model, tokenizer: BPETokenizer, pairs, method: str = "greedy",
             beam_size: int = 4, batch_size: int = 500, device=None) -> dict:
    """Decode every source of ``pairs`` and compare with its target.

    method: "greedy" or "beam". Returns {"exact": fraction of outputs equal to the target
    string, "token_acc": fraction of target tokens (and </s>) right at their position,
    "predictions": the decoded strings}.
    """
    device = device or next(model.parameters()).device
    src, _, tgt_out = encode_pairs(tokenizer, pairs)
    preds, right, total = [], 0, 0
    for i in range(0, len(src), batch_size):
        s = torch.from_numpy(src[i:i + batch_size]).to(device)
        if method == "greedy":
            out = greedy_decode(model, s, max_len=tgt_out.shape[1] + 4)
        elif method == "beam":
            out, _ = beam_search(model, s, beam_size, max_len=tgt_out.shape[1] + 4)
        else:
            raise ValueError(f"method must be 'greedy' or 'beam', got {method!r}")
        out = out.cpu().numpy()
        y = tgt_out[i:i + batch_size]
        L = min(out.shape[1], y.shape[1])
        right += ((out[:, :L] == y[:, :L]) & (y[:, :L] != PAD)).sum()
        total += (y != PAD).sum()
        preds += [tokenizer.decode(row[: _length(row)]) for row in out]
    exact = np.mean([p == t for p, (_, t) in zip(preds, pairs)])
    return {"exact": float(exact), "token_acc": float(right / total), "predictions": preds}


def _length(row) -> int:
    """Tokens up to (not including) the first </s>."""
    ends = np.flatnonzero(row == EOS)
    return int(ends[0]) if len(ends) else len(row)
