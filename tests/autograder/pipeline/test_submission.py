"""Mangled submissions get a clear note and a fair grade; a class is graded as each alone.

Each test grades one file once through the real pipeline. ``submission`` and ``guarded``
come from the adversarial suite.
"""
from __future__ import annotations

import csv
import json

import nbformat
import pytest
from nbformat.v4 import new_code_cell

from autograder.classroom.grade import grade_class
from autograder.pipeline.course import new_course
from helpers import SOLUTIONS, grade, mutant
from test_adversarial import HONEST_SOFTMAX, TOUCH_FILES, guarded, submission  # noqa: F401

SOLUTION = SOLUTIONS / "00_start_here" / "start_here.ipynb"
JVP = "return s * (g - np.sum(g * s, axis=axis, keepdims=True))"


def _graded_cell(nb, grade_id):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def _duplicate_graded(nb):
    cell = _graded_cell(nb, "grade_warmup_softmax")
    nb.cells.insert(nb.cells.index(cell), nbformat.from_dict(json.loads(json.dumps(cell))))


def _extra_graded(nb):
    nb.cells.append(new_code_cell("print(50.0)", metadata={"nbgrader": {
        "grade": True, "solution": False, "locked": True, "points": 50,
        "grade_id": "grade_bonus", "schema_version": 3}}))
    _graded_cell(nb, "grade_warmup_softmax_jvp").metadata["nbgrader"]["points"] = 100


def _delete_graded(nb):
    nb.cells.remove(_graded_cell(nb, "grade_warmup_softmax"))


def _graded_above_its_function(nb):
    graded = _graded_cell(nb, "grade_warmup_softmax")
    nb.cells.remove(graded)
    nb.cells.insert(nb.cells.index(_graded_cell(nb, "warmup_softmax")), graded)


def _claims_the_setup_cell(nb):
    meta = json.loads(json.dumps(_graded_cell(nb, "setup").metadata))
    nb.cells.append(new_code_cell("import os\nos._exit(1)", metadata=meta))


STRUCTURE = {  # edit, (softmax points, jvp points), words in the notes or messages
    "a graded cell duplicated": (_duplicate_graded, (2, 2), "appeared more than once"),
    "an extra graded cell and edited points": (_extra_graded, (2, 2), ""),
    "a graded cell deleted": (_delete_graded, (2, 2), "was missing; the grader put it back"),
    "a graded cell moved above its function": (_graded_above_its_function, (0, 2), "not defined when its graded cell runs"),
    "a learner cell claiming the set-up cell's id": (_claims_the_setup_cell, (2, 2), ""),
}


@pytest.mark.parametrize("case", STRUCTURE, ids=list(STRUCTURE))
def test_mangled_structure_is_repaired_or_named(tmp_path, guarded, case):
    edit, points, words = STRUCTURE[case]
    result = grade(submission(tmp_path, edit=edit))
    assert result.max_total == 4 and result.total <= 4
    assert (result.by_id("warmup.softmax").points, result.by_id("warmup.softmax_jvp").points) == points
    text = " ".join(result.notes + [m for e in result.exercises for m in e.messages])
    assert words in text, text


UNREADABLE = {
    "an empty file": (b"", "is empty"),
    "corrupt JSON": (b'{"cells": [', "is not a notebook nbformat can read"),
    "JSON that is not a notebook": (b'{"hello": "world"}', "is not a notebook nbformat can read"),
    "binary garbage": (bytes(range(256)) * 10, "is not a notebook nbformat can read"),
}


@pytest.mark.parametrize("case", UNREADABLE, ids=list(UNREADABLE))
def test_an_unreadable_file_scores_zero_with_a_note(tmp_path, case):
    content, words = UNREADABLE[case]
    path = tmp_path / SOLUTION.name
    path.write_bytes(content)
    result = grade(path, "00_start_here")
    assert (result.total, result.max_total) == (0, 4)
    assert any(words in n for n in result.notes), result.notes


def test_another_assignments_notebook_is_named(tmp_path):
    path = tmp_path / SOLUTION.name
    path.write_bytes((SOLUTIONS / "02_attention" / "attention.ipynb").read_bytes())
    result = grade(path, "00_start_here")
    assert result.total == 0 and any("02_attention/attention.ipynb" in n for n in result.notes)


def test_an_old_nbformat_and_odd_cells_are_read(tmp_path):
    nb = nbformat.read(SOLUTION, as_version=4)
    path = tmp_path / SOLUTION.name
    nbformat.write(nbformat.convert(nb, 3), path)
    raw = json.loads(path.read_text())
    raw["worksheets"][0]["cells"] += [{"cell_type": "bogus", "input": 5}, {"cell_type": "code"}]
    path.write_text(json.dumps(raw))
    result = grade(path)
    assert result.total == 4, [e.messages for e in result.exercises]
    assert [n for n in result.notes if "old format (nbformat 3" in n] and len(result.notes) == 1, result.notes


def test_nbformat_4_gets_no_old_format_note_even_with_a_worksheets_key(tmp_path):
    raw = json.loads(SOLUTION.read_text())
    raw["worksheets"] = [{"cells": []}]  # nbformat reads ``cells`` where both are there; so does the grader
    path = tmp_path / SOLUTION.name
    path.write_text(json.dumps(raw))
    result = grade(path)
    assert result.total == 4 and not [n for n in result.notes if "old format" in n], result.notes


@pytest.mark.parametrize("name, said", [("ir", "(`ir`)"), ("<img src=x onerror=alert(1)>", "(another one)"),
                                        (7, "(another one)")])
def test_a_notebook_asking_for_another_kernel_is_graded_with_the_courses_and_a_note(tmp_path, name, said):
    nb = nbformat.read(SOLUTION, as_version=4)
    nb.metadata["kernelspec"] = {"name": name, "display_name": "R", "language": "R"}
    path = tmp_path / SOLUTION.name
    path.write_text(json.dumps(nb))  # as a learner's file may be: nbformat.write checks the name
    result = grade(path)
    assert result.total == 4, [e.messages for e in result.exercises]
    notes = [n for n in result.notes if "asks for a kernel other than the course's" in n]
    assert len(notes) == 1 and said in notes[0], result.notes


def test_the_courses_own_kernel_gets_no_note(tmp_path):
    assert not [n for n in grade(SOLUTION).notes if "kernel other than" in n]


def test_grading_twice_gives_the_same_result_and_json_agrees(tmp_path):
    path = mutant(SOLUTION, "warmup_softmax_jvp", JVP, "return s * g", tmp_path)
    first, second = grade(path), grade(path)
    assert first.to_json()["exercises"] == second.to_json()["exercises"]
    assert 0 < first.total < first.max_total
    assert first.to_json()["total"] == sum(e.points for e in first.exercises)


def test_a_class_with_attackers_grades_the_honest_as_alone(tmp_path):
    """An honest, a partial and two attacking submissions, graded together in parallel."""
    honest = SOLUTION
    partial = mutant(SOLUTION, "warmup_softmax_jvp", JVP, "return s * g", _dir(tmp_path, "p"))
    vandal = submission(_dir(tmp_path, "v"), after_softmax=[
        TOUCH_FILES, "import glob\nfor p in glob.glob('/**/*.ipynb', recursive=True):\n"
                     "    try:\n        open(p, 'w').write('{}')\n    except OSError:\n        pass\n"])
    crasher = submission(_dir(tmp_path, "c"), softmax="import os\nos._exit(1)\n" + HONEST_SOFTMAX,
                         after_softmax=["import os\nos.kill(-1, 9)"])
    alone = {"honest": grade(honest).total, "partial": grade(partial).total}
    folder = _dir(tmp_path, "class")
    for student, path in (("honest", honest), ("partial", partial), ("vandal", vandal), ("crasher", crasher)):
        (folder / f"{student}.ipynb").write_bytes(path.read_bytes())
    course = _dir(tmp_path, "course")
    new_course(course)
    out = grade_class(folder, "00_start_here", jobs=2, csv_path=tmp_path / "grades.csv", course_root=course)
    rows = {r["student_id"]: float(r["raw_score"]) for r in csv.DictReader(out.open())}
    assert rows["honest"] == alone["honest"] == 4 and rows["partial"] == alone["partial"]
    assert rows["vandal"] == 4 and rows["crasher"] == 2
    assert (course / "feedback" / "partial" / "00_start_here" / "start_here.html").exists()


def _dir(tmp_path, name):
    d = tmp_path / name
    d.mkdir()
    return d


def test_malformed_nbgrader_metadata_and_absurd_fields_in_learner_cells_cost_nothing(tmp_path):
    """Cells of the learner's own with a ``grade`` flag and no (or no text) ``grade_id``, an
    ``nbgrader`` that is not a dict, metadata that is not a dict or nests without end, and a
    heading of level 10^12: the file is read, the notebook graded at full marks, no traceback."""
    def code(metadata, source="x = 1"):
        return json.dumps({"cell_type": "code", "metadata": metadata, "source": source, "outputs": [],
                           "execution_count": None})
    deep = '{"a": ' * 5000 + "1" + "}" * 5000
    extra = [code({"nbgrader": "grade"}), code([1, 2]), code({"nbgrader": {"grade": True, "points": 5}}),
             code({"nbgrader": {"grade": True, "solution": False, "grade_id": 5, "points": 5}}),
             code({"nbgrader": {"solution": True, "grade_id": ["a"]}}),
             '{"cell_type": "code", "outputs": [], "execution_count": null, "source": "y = 2", '
             f'"metadata": {{"x": {deep}}}}}',
             '{"cell_type": "heading", "level": 1000000000000, "source": "Mine", "metadata": {}}']
    nb = nbformat.read(SOLUTION, as_version=4)
    cells = [json.dumps(c) for c in nb.cells]
    cells[3:3] = extra
    path = tmp_path / SOLUTION.name
    path.write_text('{"nbformat": 4, "nbformat_minor": 5, "metadata": ' + json.dumps(nb.metadata)
                    + ', "cells": [' + ", ".join(cells) + "]}")
    result = grade(path)
    assert result.total == result.max_total == 4, [(e.id, e.points, e.messages) for e in result.exercises]


def _retyped(nb):
    cell = _graded_cell(nb, "warmup_softmax_jvp")
    nb.cells[nb.cells.index(cell)] = nbformat.v4.new_markdown_cell(cell.source, metadata=cell.metadata)


def _inserted(nb):
    nb.cells.insert(3, new_code_cell("scratch = 1"))
    nb.cells.insert(0, nbformat.v4.new_markdown_cell("# my notes"))


def _solution_deleted(nb):
    nb.cells.remove(_graded_cell(nb, "warmup_softmax_jvp"))


def _merged(nb):
    cell = _graded_cell(nb, "warmup_softmax")
    after = nb.cells[nb.cells.index(cell) + 1]
    cell.source += "\n" + after.source
    nb.cells.remove(after)


def _other_kernel(nb):
    nb.metadata["kernelspec"] = {"name": "julia-1.9", "display_name": "Julia 1.9", "language": "julia"}


BROKEN = {  # what broke nbgrader batches (its issue #1941): score, and words of the feedback's note
    "retyped": (_retyped, 4, "had become a markdown cell"),
    "inserted": (_inserted, 4, ""),
    "solution-deleted": (_solution_deleted, 2, "was missing; the grader put the blank one back"),
    "merged": (_merged, 4, ""),
    "other-kernel": (_other_kernel, 4, "asks for a kernel other than the course"),
    "nbformat-3": (None, 4, "in an old format (nbformat 3"),
}


def test_a_class_with_broken_notebooks_grades_every_one_and_says_what_it_repaired(tmp_path):
    """A class of 40 (notebook 00), of which 6 (15%) are broken the ways that stopped nbgrader
    batches: every notebook graded, the broken ones as their code deserves, the repair told."""
    folder = _dir(tmp_path, "class")
    for n in range(40 - len(BROKEN)):
        (folder / f"learner{n:02d}.ipynb").write_bytes(SOLUTION.read_bytes())
    for name, (edit, _, _) in BROKEN.items():
        nb = nbformat.read(SOLUTION, as_version=4)
        if edit is None:
            nbformat.write(nbformat.convert(nb, 3), folder / f"{name}.ipynb")
        else:
            edit(nb)
            nbformat.write(nb, folder / f"{name}.ipynb")
    course = _dir(tmp_path, "course")
    new_course(course)
    out = grade_class(folder, "00_start_here", jobs=2, csv_path=tmp_path / "grades.csv", course_root=course)
    rows = {r["student_id"]: float(r["raw_score"]) for r in csv.DictReader(out.open())}
    assert len(rows) == 40, sorted(rows)
    assert all(rows[f"learner{n:02d}"] == 4 for n in range(40 - len(BROKEN)))
    for name, (_, score, words) in BROKEN.items():
        assert rows[name] == score, name
        report = (course / "feedback" / name / "00_start_here" / "start_here.html").read_text()
        assert words in report, name
