"""Two learners are never one: ids that fold alike are refused, never merged (issue: trust, item 3).

The export matched roster rows to the gradebook's learners through ``{id.lower(): id}``, built
from a set: ``Kim``, ``kim`` and ``\\u212aim`` (the Kelvin sign, whose ``lower()`` is ``k``)
overwrote one another in the set's hash order, so the same export gave one learner's grade to
another, and a different one under another ``PYTHONHASHSEED``. Intake took ``Kim.ipynb`` and
``kim.ipynb`` as two learners, whose folders are one on a case-insensitive file system.
"""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

from autograder.classroom.export import match
from autograder.classroom.identity import collisions, id_key
from autograder.classroom.intake import find_submissions, unpacked

ASSIGNMENT, NAME = "00_start_here", "start_here.ipynb"
KELVIN, CYRILLIC_A = "\u212a", "\u0430"
GRADED = {  # the gradebook's learners and their scores
    "Kim": 1, "kim": 2, f"{KELVIN}im": 3,         # case, and the Kelvin sign (NFKC: K)
    f"{KELVIN}el": 4, "kel": 5,                    # NFKC only
    "ｚｏｅ": 6, "zoe": 7,                          # full width letters (NFKC)
    "ada": 8, f"{CYRILLIC_A}da": 9,                # look-alikes: other letters, other learners
    "bo": 10, "cy": 11, "dee": 12, "eve": 13,
}
EMAILS = {"eve": "eve@uni.example"}
ROSTER = [  # (login, email): the school's spelling
    ("kim", ""), (f"{KELVIN}el", ""), ("zoe", ""), ("ada", ""), (f"{CYRILLIC_A}da", ""),
    ("BO", ""),                                    # case alone: one learner, bo
    ("cy", ""), ("CY", ""),                        # one learner, two rows
    ("dee", "eve@uni.example"),                    # one row, two learners
    ("fay", ""),                                   # no submission
]
EXPORT = """
import json, sys
from pathlib import Path
from autograder.classroom import export as ex
data = json.loads(sys.argv[1])
ex.final_scores = lambda course, assignments=None: {{(s, "00_start_here"): v for s, v in data["graded"].items()}}
ex.student_emails = lambda course: data["emails"]
done = ex.export(sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]), Path("."), moodle_id="username")
print(json.dumps([Path(sys.argv[4]).read_text(encoding="utf-8"), done.report(), done.unknown]))
""".replace("{{", "{").replace("}}", "}")


def _roster(path: Path) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["Student", "SIS Login ID", "Email"])
        writer.writerows([(login, login, email) for login, email in ROSTER])
    return path


def _export(tmp_path: Path, layout: str, seed: int) -> tuple[str, str, list[str]]:
    """The ``layout`` export of GRADED against ROSTER, in a process with ``PYTHONHASHSEED=seed``."""
    out = tmp_path / f"{layout}{seed}.csv"
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    data = json.dumps({"graded": GRADED, "emails": EMAILS})
    proc = subprocess.run([sys.executable, "-c", EXPORT, data, layout, str(_roster(tmp_path / "roster.csv")),
                           str(out)], capture_output=True, text=True, env=env, check=True)
    text, report, unknown = json.loads(proc.stdout)
    return text, report.replace(str(out), "OUT"), unknown


def test_the_key_folds_case_and_compatibility_forms_but_not_other_letters():
    assert id_key("Kim") == id_key("KIM") == id_key(f"{KELVIN}im") == id_key("ＫＩＭ") == "kim"
    assert id_key("Straße") == id_key("STRASSE")
    assert id_key(f"{CYRILLIC_A}da") != id_key("ada")
    assert collisions(["b", "a", "A", "ａ", "c"]) == {"a": ["A", "a", "ａ"]}


def test_the_export_never_merges_two_learners_whatever_the_hash_seed(tmp_path):
    for layout, login in (("canvas", "SIS Login ID"), ("moodle", "Username")):
        runs = [_export(tmp_path, layout, seed) for seed in range(4)]
        assert all(run == runs[0] for run in runs), f"{layout}: another PYTHONHASHSEED, another file"
        text, report, unknown = runs[0]
        rows = {r[login]: r["00_start_here"] for r in csv.DictReader(text.splitlines())}
        assert rows == {"ada": "8", f"{CYRILLIC_A}da": "9", "BO": "10",
                        **({"fay": ""} if layout == "canvas" else {})}
        for refused in ("'Kim' and 'kim' and '\\u212aim' are one id", "'kel' and '\\u212ael'",
                        "'zoe' and '\\uff5a\\uff4f\\uff45'", "'cy' has more than one row",
                        "'dee' and 'eve' are both"):
            assert refused in report, (refused, report)
        assert unknown == []


def test_match_leaves_out_every_row_of_a_collision():
    header = ["login", "email"]
    rows = [{"login": login, "email": email} for login, email in ROSTER]
    done = match(header, rows, set(GRADED), EMAILS)
    assert {rows[i]["login"]: s for i, s in done.found.items()} == {
        "ada": "ada", f"{CYRILLIC_A}da": f"{CYRILLIC_A}da", "BO": "bo"}
    assert done.refused == set(GRADED) - {"ada", f"{CYRILLIC_A}da", "bo"}
    assert not done.skipped & set(done.found)


def test_intake_refuses_ids_that_fold_alike_and_names_both(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    for student in ("Kim", f"{KELVIN}im", "ｚｏｅ", "zoe", "ada", f"{CYRILLIC_A}da", "bo"):
        (folder / f"{student}.ipynb").write_bytes(b"{}")
    with unpacked(folder) as (inside, _):
        found, refused = find_submissions(inside, ASSIGNMENT, NAME, known=["BO"])
    assert sorted(found) == ["ada", f"{CYRILLIC_A}da"]
    reasons = {o.student: o.reason for o in refused}
    assert set(reasons) == {"Kim", f"{KELVIN}im", "ｚｏｅ", "zoe", "bo"}
    assert "'Kim' and '\\u212aim'" in reasons["Kim"] and reasons["Kim"] == reasons[f"{KELVIN}im"]
    assert "'BO' and 'bo'" in reasons["bo"] and "already in the course" in reasons["bo"]
