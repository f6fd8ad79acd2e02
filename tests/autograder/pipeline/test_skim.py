"""skim reads a notebook's cells as json.loads would, a window at a time, and only up to its limits.

The windows are made tiny here (a few bytes) so that every value, quote and backslash run
falls across a window's edge somewhere; the files are random notebooks with strings full of
quotes, backslashes, brackets and non-ASCII characters.
"""
from __future__ import annotations

import json
import random

import pytest

from autograder.pipeline import skim as skim_module
from autograder.pipeline.skim import Cut, Limits, Unreadable, size_text, skim

ROOMY = Limits(cells=10_000, source=1 << 30, sources=1 << 30, nbgrader=1 << 30, entries=1 << 30)
PIECES = ["a", '"', "\\", "[", "]", "{", "}", ",", ":", " ", "\n", "é", "\u2028", "\\\\", '\\"', "x" * 50]


def _expected(text: str) -> list:
    """What prepare used to take from ``json.loads``: per cell its type, source, level, nbgrader."""
    nb = json.loads(text)
    cells = nb.get("cells")
    if cells is None and isinstance(nb.get("worksheets"), list):
        cells = [c for w in nb["worksheets"] if isinstance(w, dict) for c in w.get("cells", [])]
    kept = []
    for c in cells:
        if not isinstance(c, dict):
            kept.append(None)
            continue
        raw = {k: c[k] for k in ("cell_type", "level", "source", "input") if k in c}
        if isinstance(c.get("metadata"), dict):
            raw["metadata"] = {k: v for k, v in c["metadata"].items() if k == "nbgrader"}
        kept.append(raw)
    return kept


class _Random:
    """Random notebooks: cells with odd keys and values, outputs and metadata of any shape."""

    def __init__(self, seed: int):
        self.r = random.Random(seed)

    def text(self) -> str:
        return "".join(self.r.choice(PIECES) for _ in range(self.r.randint(0, 12)))

    def value(self, depth: int = 0):
        kind = self.r.randint(0, 6 if depth < 5 else 2)
        if kind == 0:
            return self.text()
        if kind == 1:
            return self.r.choice([0, -17, 10**12, 1.5e-7, True, False, None])
        if kind == 2:
            return self.text() * 3
        if kind in (3, 4):
            return [self.value(depth + 1) for _ in range(self.r.randint(0, 4))]
        return {self.text(): self.value(depth + 1) for _ in range(self.r.randint(0, 4))}

    def cell(self):
        choices = {
            "cell_type": lambda: self.r.choice(["code", "markdown", "raw", "heading", "bogus", 5]),
            "source": lambda: self.r.choice([self.text(), [self.text(), self.text()], 7, [self.text(), 3]]),
            "input": self.text,
            "level": lambda: self.r.choice([1, 3, "x", True]),
            "metadata": lambda: self.r.choice([{"nbgrader": {"grade_id": self.text(), "grade": True},
                                                "other": self.value()}, {"x": self.value()}, 5,
                                               {"nbgrader": self.value()}]),
            "outputs": self.value, "attachments": self.value, "execution_count": self.value}
        keys = self.r.sample(sorted(choices), self.r.randint(0, len(choices)))
        return {k: choices[k]() for k in keys} if self.r.random() < 0.9 else self.value()

    def notebook(self) -> str:
        cells = [self.cell() for _ in range(self.r.randint(0, 6))]
        nb = ({"metadata": self.value(), "cells": cells, "nbformat": 4} if self.r.random() < 0.8
              else {"worksheets": [{"cells": cells}, 5, {"cells": cells[:1]}], "metadata": {}})
        return json.dumps(nb, ensure_ascii=self.r.random() < 0.5, indent=self.r.choice([None, 1]))


@pytest.fixture
def windows(monkeypatch):
    """Set skim's windows (bytes read at once, short values first tried whole)."""
    def use(window: int, small: int):
        monkeypatch.setattr(skim_module, "WINDOW", window)
        monkeypatch.setattr(skim_module, "SMALL", small)
    return use


@pytest.mark.parametrize("window, small, files", [(1 << 20, 4096, 150), (64, 16, 150), (7, 3, 50)])
def test_cells_are_read_as_json_loads_reads_them(tmp_path, windows, window, small, files):
    windows(window, small)
    path = tmp_path / "nb.ipynb"
    for seed in range(files):
        text = _Random(seed).notebook()
        path.write_text(text, encoding="utf-8")
        assert skim(path, ROOMY).cells == _expected(text), (seed, text[:500])


@pytest.mark.parametrize("window, small, files", [(1 << 20, 4096, 150), (7, 3, 50)])
def test_a_broken_file_is_unreadable_or_read_never_a_crash(tmp_path, windows, window, small, files):
    windows(window, small)
    path = tmp_path / "nb.ipynb"
    refused = 0
    for seed in range(files):
        r = random.Random(seed)
        text = bytearray(_Random(seed).notebook().encode())
        if seed % 2:
            del text[r.randrange(len(text)):]
        else:
            for _ in range(3):
                text[r.randrange(len(text))] = r.choice(b'"[]{}\\,:x0 \x00\xff')
        path.write_bytes(bytes(text))
        try:
            skim(path, ROOMY)
        except Unreadable:
            refused += 1
    assert refused > files // 3  # a file cut short always is


def _cells_file(tmp_path, cells):
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}}))
    return path


def test_a_source_past_its_limit_or_past_what_the_cells_hold_is_cut(tmp_path):
    exact = "a" * 98  # 100 bytes in the file, with its quotes
    cells = [{"cell_type": "code", "source": s} for s in (exact, exact + "a", exact, exact, "b")]
    got = skim(_cells_file(tmp_path, cells), Limits(cells=10, source=100, sources=250)).cells
    assert [c["source"] for c in got] == [exact, Cut(101, 100), exact, Cut(100, 250, True), "b"]


def test_nbgrader_metadata_past_its_limit_is_cut(tmp_path):
    big = {"grade_id": "x" * 5000}
    cells = [{"cell_type": "code", "source": "", "metadata": {"nbgrader": big, "tags": []}}]
    got = skim(_cells_file(tmp_path, cells), Limits(cells=10)).cells
    assert got == [{"cell_type": "code", "source": "", "metadata": {"nbgrader": Cut(len(json.dumps(big)), 4096)}}]


def test_reading_stops_at_the_cell_limit_and_at_the_entries_limit(tmp_path):
    cells = [{"cell_type": "code", "source": str(i), "outputs": []} for i in range(10)]
    path = _cells_file(tmp_path, cells)
    first = skim(path, Limits(cells=4))
    assert [c["source"] for c in first.cells] == ["0", "1", "2", "3"] and first.more_cells
    # "cells", then per cell the item and its 3 keys: the fifth cell is cut short after 2 entries
    crowded = skim(path, Limits(cells=100, entries=1 + 4 * 4 + 2))
    assert [c["source"] for c in crowded.cells] == ["0", "1", "2", "3"] and crowded.crowded
    late = tmp_path / "late.ipynb"
    late.write_text('{"a": 1, "b": 2, "c": 3, "cells": []}')
    with pytest.raises(Unreadable, match="no list of cells in its first 3 entries"):
        skim(late, Limits(cells=9, entries=3))


def test_a_file_past_the_size_limit_is_not_read(tmp_path):
    path = tmp_path / "nb.ipynb"
    with path.open("wb") as f:
        f.truncate(12 << 27)  # 1.5 GB, sparse: nothing is written
    with pytest.raises(Unreadable, match="is 1.5 GB, more than the 1 GB the grader reads"):
        skim(path, Limits(cells=9))


def test_sizes_read_well():
    assert [size_text(n) for n in (812, 100 << 10, 52_428_900, 1 << 30, 3 << 29)] == [
        "812 bytes", "100 KB", "50 MB", "1 GB", "1.5 GB"]


def test_the_kernel_the_notebook_asks_for_is_read_and_nothing_else_of_its_metadata(tmp_path):
    path = tmp_path / "nb.ipynb"
    for metadata, kernel in [({"kernelspec": {"name": "ir", "display_name": "R"}, "x": [[1]]}, "ir"),
                             ({"kernelspec": {"name": 5}}, 5), ({"kernelspec": "ir"}, None), ({}, None),
                             ({"kernelspec": {"name": "k" * 300}}, Cut(302, 256))]:
        path.write_text(json.dumps({"metadata": metadata, "cells": []}))
        assert skim(path, ROOMY).kernel == kernel, metadata


def test_cells_read_from_worksheets_are_said_to_be(tmp_path):
    path = tmp_path / "nb.ipynb"
    cell = {"cell_type": "code", "input": "x = 1"}
    for nb, worksheets in [({"worksheets": [{"cells": [cell]}], "nbformat": 3}, True),
                           ({"worksheets": [], "cells": [cell]}, False), ({"cells": [], "nbformat": 4}, False)]:
        path.write_text(json.dumps(nb))
        assert skim(path, ROOMY).worksheets == worksheets, nb
