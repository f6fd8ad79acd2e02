"""The class race: entries trained in the sandbox under a CPU budget, scored on text they never
saw, and ranked; every way to cheat or to break the grader that we could think of fails and is named.

One class is raced once (``raced``): the course's entry, an honest learner, one learner per
attack (``race_entries.ATTACKS``), and one whose sandbox fails to start (a fault of the
grader's, injected), on small generated texts with a budget of a few CPU seconds; the tests
read that run.
"""
from __future__ import annotations

import csv
import errno
import json
import math
import subprocess
import sys
import threading
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import nbformat
import numpy as np
import pytest

from autograder.kernel.transport import encode_array
from autograder.pipeline.sandbox import isolation
from autograder.race import board, leaderboard, process, verify
from autograder.race.heldout import Unseen, seen_by_sandbox, texts
from autograder.race.leaderboard import entry_source, race, summary
from autograder.race.verify import MAX_BITS, SAME_MODEL, Run, probes, same_model, split_heldout
from course_lib.data import generated_text
from course_lib.race import CONTEXT, RECIPE_KEYS, recipe_of
from race_entries import ATTACKS, RULES, SAME_EVERY_SEED, SMALL, UNLUCKY, notebook

REPO = Path(__file__).resolve().parents[3]
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
        notebook(folder / f"{name}.ipynb", source)
    (folder / "empty.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook()))
    out = top / "out"
    with unlucky_sandbox() as unlucky:
        ranked, line = race("06_gpt", folder, out, RULES, heldout, jobs=2, train_text=generated_text(40_000))
    assert unlucky == [UNLUCKY] * RULES.seeds  # the fault struck that entry alone, at its first start
    return {s.name: s for s in ranked}, ranked, line, out, entries


@contextmanager
def unlucky_sandbox(strikes=lambda code: code == UNLUCKY):
    """Within it, starting a race's sandbox raises ``OSError(EMFILE)``, as a file descriptor limit
    would, for each entry whose source ``strikes``; it gives the list of the sources struck."""
    thread, struck, real_verify = threading.local(), [], leaderboard.verify

    def verify(code, *args, **kwargs):  # which entry this thread's sandboxes are for
        thread.code = code
        return real_verify(code, *args, **kwargs)

    class Sandbox(process.Sandbox):
        def __init__(self, *args, **kwargs):
            if strikes(thread.code):
                struck.append(thread.code)
                raise OSError(errno.EMFILE, "Too many open files")
            super().__init__(*args, **kwargs)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(leaderboard, "verify", verify)
        patch.setattr(process, "Sandbox", Sandbox)
        yield struck


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


def test_a_sandbox_that_did_not_start_costs_that_entry_alone_and_says_whose_fault_it_was(raced):
    standings, ranked, line, out, _ = raced
    unlucky = standings["unlucky"]
    assert unlucky.rank is None and [r.grader_fault for r in unlucky.runs] == [True] * RULES.seeds
    assert "the grader could not run the train process (OSError: [Errno 24] Too many open files)" in unlucky.reason
    assert "not the entry's doing" in unlucky.reason
    assert not [s.name for s in ranked if s is not unlucky and any(r.grader_fault for r in s.runs)]
    assert all(r["grader_fault"] for r in json.loads((out / "runs" / "unlucky.json").read_text())["runs"])
    assert "the next race runs it again" in (out / "feedback" / "unlucky.html").read_text()
    assert summary(ranked, line).endswith("1 entry could not be run to the end through no doing of theirs "
                                          "(the sandbox did not start): run the same command again to run them")


def test_numbers_too_large_for_the_board_are_refused_and_left_off_its_plots(raced):
    standings, _, _, out, _ = raced
    assert standings["overflow"].runs[0].curve == []  # every point was at 1.7e308 bits
    assert all(0 <= bits <= MAX_BITS for s in standings.values() for r in s.runs for _, bits in r.curve)
    assert standings["ada"].runs[0].curve  # an honest curve is kept
    assert "data:image/png" in (out / "feedback" / "overflow.html").read_text()


def test_logits_finite_only_in_a_wider_float_are_refused():
    wide = np.full((CONTEXT, 5), np.longdouble("1e4000"))
    if not np.isfinite(wide).all():
        pytest.skip("this machine's long double is no wider than a double")
    assert "NaN or infinity" in verify._logits(encode_array(wide), 5)
    assert verify._logits(encode_array(np.ones((CONTEXT, 5), np.float16)), 5).dtype == np.float64


def test_a_second_run_resumes_from_the_kept_runs_and_runs_again_what_did_not_start(raced, tmp_path):
    _, ranked, _, out, entries = raced
    folder = tmp_path / "again"
    folder.mkdir()
    notebook(folder / "ada.ipynb", entries["ada"][0])
    notebook(folder / "unlucky.ipynb", UNLUCKY)
    before = (out / "runs" / "ada.json").read_text()
    with unlucky_sandbox(lambda code: True) as struck:  # any start fails now: only a seed run again starts one
        again, _ = race("06_gpt", folder, out, RULES, Path(out.parent / "unseen.txt"),
                        train_text=generated_text(40_000))
    assert (out / "runs" / "ada.json").read_text() == before  # not trained again
    assert struck == [UNLUCKY] * RULES.seeds  # the seed whose sandbox did not start is tried again
    assert {s.name for s in again} == {"ada", "unlucky", board.BASELINE}


def test_an_entry_whose_every_seed_is_the_same_run_is_told_so_after_its_sandboxes_end(tmp_path):
    """Two random seeds each (the class race's fixture has one): the course's entry, whose seeds
    give two models, is ranked; ``SAME_EVERY_SEED`` passes the scoring process's own check of
    seeds, and is refused on the logits it was scored by, read here."""
    if not isolation()[0]:
        pytest.skip("the race runs entries in the sandbox (bubblewrap)")
    heldout = tmp_path / "unseen.txt"
    heldout.write_text(generated_text(12_000, seed=99))
    folder = tmp_path / "submissions"
    folder.mkdir()
    notebook(folder / "same.ipynb", SAME_EVERY_SEED)
    two = replace(RULES, seeds=2)
    ranked, _ = race("06_gpt", folder, tmp_path / "out", two, heldout, jobs=2, train_text=generated_text(40_000))
    standings = {s.name: s for s in ranked}
    same, course = standings["same"], standings[board.BASELINE]
    assert course.reason is None and course.rank is not None and len(course.scores) == 2
    a, b = course.runs
    assert max(abs(x - y) for x, y in zip(a.windows, b.windows)) > 30 * SAME_MODEL  # honest seeds: far apart
    assert same.rank is None and "does not depend on the race's seed" in same.reason, same.reason
    assert all("sets its own seed" not in (r.reason or "") for r in same.runs)  # the scoring process was fooled
    kept = json.loads((tmp_path / "out" / "runs" / "same.json").read_text())["runs"]
    assert [r["reason"] for r in kept] == [None, None] and kept[0]["windows"] == kept[1]["windows"]  # as they ran
    page = (tmp_path / "out" / "feedback" / "same.html").read_text()
    assert "depend on the race" in page


# --- without the sandbox: the parts ----------------------------------------------------------

def test_seeds_that_scored_every_window_alike_are_one_model():
    w = [2.0, 2.5, 3.0]
    runs = [Run(1, bpc=2.5, windows=w), Run(2, bpc=2.5, windows=[v + SAME_MODEL / 2 for v in w]),
            Run(3, bpc=2.6, windows=[2.1, 2.6, 3.1])]
    assert "seeds 1 and 2" in same_model(runs)
    assert same_model([runs[0], runs[2]]) is None
    apart = [Run(1, bpc=2.5, windows=w), Run(2, bpc=2.5, windows=[2.0, 2.5, 3.0 + 2 * SAME_MODEL])]
    assert same_model(apart) is None  # one window apart is two models
    assert same_model([Run(1, bpc=2.5, windows=w), Run(2, reason="not causal", windows=w)]) is None
    assert same_model([Run(1, bpc=2.5, windows=w)]) is None



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
    nb = notebook(tmp_path / "x.ipynb", SMALL)
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
    mine = notebook(tmp_path / "gpt.ipynb", entries["ada"][0])
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
