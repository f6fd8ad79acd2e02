"""Where the course lives: the repository root, the instructor source and the release. [trusted]"""
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOLUTIONS = REPO / "solutions"
RELEASE = REPO / "notebooks"
HEADER = Path(__file__).resolve().parent / "release_header.ipynb"
