"""The class race: entries trained in the sandbox under a CPU budget, scored on text they never
saw, and ranked; every way to cheat that we could think of fails and is named.

One class is raced once (``raced``): the course's entry, an honest learner, and one learner per
attack, on small generated texts with a budget of a few CPU seconds; the tests read that run.
"""
from __future__ import annotations

import csv
import math
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest

from autograder.pipeline.sandbox import isolation
from autograder.race import board
from autograder.race.heldout import Unseen, seen_by_sandbox, texts
from autograder.race.leaderboard import ENTRY_ID, entry_source, race
from autograder.race.verify import Rules, Run, probes, split_heldout
from course_lib.data import generated_text
from course_lib.race import CONTEXT, RECIPE_KEYS, recipe_of

REPO = Path(__file__).resolve().parents[3]
RULES = Rules(budget=2.0, seeds=1, windows=12, checks=4, startup=8.0, grace=4.0, params=400_000,
              score_seconds=60.0)
SMALL = '''
import torch
from course_lib.transformer import GPT, GPTConfig


def build(vocab_size):
    return GPT(GPTConfig(vocab_size=vocab_size, block_size=128, d_model=32, n_heads=2, n_layers=1))


RECIPE = {"lr": 1e-2, "batch_size": 8, "block_size": 32}
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
}


def _notebook(path: Path, source: str) -> Path:
    cell = nbformat.v4.new_code_cell(source, metadata={"nbgrader": {"grade_id": ENTRY_ID, "solution": True,
                                                                     "grade": False, "locked": False}})
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# GPT"), cell]), path)
    return path


@pytest.fixture(scope="module")
def raced(tmp_path_factory):
    """The class of ``ATTACKS`` raced once, with the course's entry; (board, 5-gram line, out, held-out)."""
    if not isolation()[0]:
        pytest.skip("the race runs entries in the sandbox (bubblewrap)")
    top = tmp_path_factory.mktemp("race")
    heldout = top / "unseen.txt"
    heldout.write_text(generated_text(12_000, seed=99))
    host = [str(top), str(REPO / "solutions"), str(REPO / "autograder" / "race")]
    snoop = (f"import os\nif os.path.exists({str(heldout)!r}):\n    raise RuntimeError('SAW THE HELD-OUT TEXT')\n"
             f"seen = [p for p in {host!r} if os.path.exists(p) and os.access(p, os.R_OK)]\n"
             "if seen:\n    raise RuntimeError(f'SAW THE HOST: {seen}')\n")
    entries = {**ATTACKS, "snoop": (snoop + SMALL, None)}
    folder = top / "submissions"
    folder.mkdir()
    for name, (source, _) in entries.items():
        _notebook(folder / f"{name}.ipynb", source)
    (folder / "empty.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook()))
    out = top / "out"
    ranked, line = race("06_gpt", folder, out, RULES, heldout, jobs=2, train_text=generated_text(40_000))
    return {s.name: s for s in ranked}, ranked, line, out, entries


def test_every_attack_is_ranked_nowhere_with_its_reason_and_honest_entries_are_ranked(raced):
    standings, ranked, line, _, entries = raced
    for name, (_, why) in entries.items():
        s = standings[name]
        if why is None:
            assert s.reason is None and s.rank is not None, (name, s.reason)
            assert all(r.cpu <= RULES.budget + RULES.startup for r in s.runs), s.runs
        else:
            assert s.rank is None and s.reason and any(w in s.reason for w in (why if isinstance(why, tuple) else (why,))), \
                (name, s.reason)
    assert standings[board.BASELINE].rank is not None, standings[board.BASELINE].reason
    assert "no race entry cell" in standings["empty"].reason
    assert [s.rank is not None for s in ranked] == sorted((s.rank is not None for s in ranked), reverse=True)


def test_a_trained_entry_learns_and_the_five_gram_line_is_computed_on_the_same_windows(raced):
    standings, _, line, _, _ = raced
    ada = standings["ada"]
    assert math.log2(30) > line > 0.1  # a 5-gram on the generated play: far below a uniform guess
    assert ada.runs[0].curve and ada.runs[0].curve[-1][1] < ada.runs[0].curve[0][1]  # it learned
    assert 0.1 < ada.mean < math.log2(30) and 0 < ada.runs[0].params <= RULES.params


def test_the_board_is_written_offline_and_escaped(raced):
    standings, ranked, line, out, _ = raced
    page = (out / "leaderboard.html").read_text()
    assert "<script" not in page and "http" not in page.replace("http-equiv", "")
    assert "ada" in page and "not causal" in page and "data:image/png;base64," in page
    rows = list(csv.DictReader(open(out / "leaderboard.csv")))
    assert {r["id"] for r in rows} == set(standings)
    assert all(r["rank"] == "" for r in rows if r["id"] == "peek")
    feedback = (out / "feedback" / "ada.html").read_text()
    assert "Your entry:" in feedback and "data:image/png" in feedback
    assert (out / "runs" / "ada.json").exists() and (out / ".race_key").stat().st_mode & 0o077 == 0


def test_a_second_run_resumes_from_the_kept_runs(raced, tmp_path):
    _, ranked, _, out, entries = raced
    folder = tmp_path / "again"
    folder.mkdir()
    _notebook(folder / "ada.ipynb", entries["ada"][0])
    before = (out / "runs" / "ada.json").read_text()
    again, _ = race("06_gpt", folder, out, RULES, Path(out.parent / "unseen.txt"), train_text=generated_text(40_000))
    assert (out / "runs" / "ada.json").read_text() == before  # not trained again
    assert {s.name for s in again} == {"ada", board.BASELINE}


# --- without the sandbox: the parts ----------------------------------------------------------

def test_welch_and_the_t_distribution():
    assert board.t_sf(0.0, 5) == pytest.approx(0.5)
    assert board.t_sf(2.776445, 4) == pytest.approx(0.025, abs=1e-5)  # the table's 97.5% point
    assert board.t_sf(-2.776445, 4) == pytest.approx(0.975, abs=1e-5)
    assert board.welch_p([1.0, 1.01, 0.99], [2.0, 2.01, 1.99]) < 1e-4
    assert board.welch_p([1.0, 1.5, 0.5], [1.1, 1.6, 0.6]) > 0.3
    assert board.welch_p([1.0], [2.0, 2.1]) == 1.0  # one seed says nothing


def test_a_place_needs_significance():
    runs = lambda *xs: [Run(i, bpc=x) for i, x in enumerate(xs)]  # noqa: E731
    ranked = board.rank([board.Standing("a", runs(1.50, 1.52, 1.51)), board.Standing("b", runs(1.505, 1.53, 1.49)),
                         board.Standing("c", runs(2.0, 2.01, 2.02)), board.Standing("d", [Run(0, reason="not causal")])])
    assert [(s.name, s.rank) for s in ranked] == [("b", 1), ("a", 1), ("c", 3), ("d", None)]


def test_a_csv_cell_is_never_a_formula():
    assert board._cell("=HYPERLINK(1)") == "'=HYPERLINK(1)" and board._cell("ada") == "ada"


def test_recipes_are_checked():
    assert recipe_of({})["block_size"] == CONTEXT
    for bad, said in (({"lr": "fast"}, "lr"), ({"batch_size": 2.5}, "integer"), ({"lrate": 1}, "unknown"),
                      ({"lr": float("nan")}, "lr"), ([], "dict")):
        with pytest.raises(ValueError, match=said):
            recipe_of(bad)
    assert set(RECIPE_KEYS) >= {"lr", "batch_size", "block_size"}


def test_probes_keep_a_prefix_and_continue_with_text_never_scored():
    ids = np.arange(40 * CONTEXT) % 50
    scored, spare = split_heldout(ids, 10)
    assert scored.shape == (10, CONTEXT + 1) and len(spare) == len(ids) - 10 * CONTEXT - 1
    for i, t, inputs in probes(scored, spare, seed=3, n=5):
        assert np.array_equal(inputs[:t + 1], scored[i, :t + 1]) and len(inputs) == CONTEXT


def test_held_out_text_where_the_sandbox_can_read_it_is_refused(tmp_path):
    from course_lib.data import cache_dir

    assert seen_by_sandbox(Path(sys.prefix) / "held.txt") is not None
    if cache_dir().is_dir():
        with pytest.raises(Unseen, match="grading sandbox can read"):
            texts(cache_dir() / "shakespeare.txt", train_text="abc")
    with pytest.raises(Unseen, match="no held-out text"):
        texts(tmp_path / "missing.txt", train_text="abc")


def test_the_entry_cell_is_found_by_its_id(tmp_path):
    nb = _notebook(tmp_path / "x.ipynb", SMALL)
    assert entry_source(nb) == SMALL


def test_the_command_says_what_is_missing(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", "leaderboard", "06_gpt", str(tmp_path),
                           "--heldout", str(tmp_path / "none.txt"), "--allow-unisolated"],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 2 and "no held-out text" in proc.stderr and "Traceback" not in proc.stderr


def test_the_notebooks_race_cell_starts_as_the_course_entry():
    from course_lib.race import BASELINE

    assert entry_source(REPO / "solutions" / "06_gpt" / "gpt.ipynb").strip() == BASELINE.strip()
    assert entry_source(REPO / "notebooks" / "06_gpt" / "gpt.ipynb").strip() == BASELINE.strip()


def test_a_learner_races_their_own_notebook(raced, tmp_path):
    """``autograder leaderboard 06_gpt gpt.ipynb``: one notebook, raced as "you" beside the course's entry
    (kept from the class run: the same entry, rules and texts)."""
    _, _, _, out, entries = raced
    mine = _notebook(tmp_path / "gpt.ipynb", entries["ada"][0])
    ranked, _ = race("06_gpt", mine, out, RULES, Path(out.parent / "unseen.txt"), train_text=generated_text(40_000))
    assert [s.name for s in ranked if s.rank] and {s.name for s in ranked} == {"you", board.BASELINE}
    assert (out / "feedback" / "you.html").exists()


def test_points_for_the_gradebook_by_the_line_or_by_rank(raced, tmp_path):
    standings, ranked, line, _, _ = raced
    board.write_csv(tmp_path / "line.csv", ranked, line, None, most=2, award="line")
    board.write_csv(tmp_path / "rank.csv", ranked, line, None, most=10, award="rank")
    by_line = {r["id"]: float(r["points"]) for r in csv.DictReader(open(tmp_path / "line.csv"))}
    by_rank = {r["id"]: float(r["points"]) for r in csv.DictReader(open(tmp_path / "rank.csv"))}
    for name, s in standings.items():
        if s.rank is None:
            assert by_line[name] == by_rank[name] == 0, name
        else:
            assert by_line[name] == (2 if s.mean < line else 0)
    learners = [s for s in ranked if s.rank is not None and s.name != board.BASELINE]
    assert by_rank[learners[0].name] == 10 and by_rank[board.BASELINE] == 0
    assert all(0 < by_rank[s.name] <= 10 for s in learners)
    assert by_rank[learners[-1].name] == min(by_rank[s.name] for s in learners)
