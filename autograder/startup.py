"""How every grading process starts: quiet logs, no slow imports, no ``alembic`` process. [trusted]

Trusted side: the ``autograder`` command, one-notebook grading and every class worker call
these first.
"""
from __future__ import annotations

import logging
import re
import sys
import warnings
from pathlib import Path


def quiet() -> None:
    """nbgrader's gradebook and the kernel manager warn about internals no user can act on."""
    warnings.filterwarnings("ignore")
    logging.getLogger("traitlets").setLevel(logging.ERROR)


def skip_slow_imports() -> None:
    """Keep ``rfc3987_syntax`` out of this process.

    nbformat imports jsonschema, which imports ``rfc3987_syntax`` when it is installed
    (Jupyter's own dependencies install it) and builds an IRI grammar on import: 1.6 of the
    1.9 s that ``import nbformat`` takes here, in every process that grades or exports.
    jsonschema goes without its "iri" format check, which no notebook schema uses.
    """
    sys.modules.setdefault("rfc3987_syntax", None)


def quick_alembic_head() -> None:
    """Stamp new gradebooks without running the ``alembic`` command.

    nbgrader starts ``alembic heads`` (a Python process: 3 s here) each time it creates a
    gradebook, only to learn the newest revision of its own migration scripts; every
    worker's scratch course and every new course would pay it. The scripts name it plainly.
    """
    # lazy: nbgrader takes seconds, and ``skip_slow_imports`` must run before it is imported
    import nbgrader.api
    from nbgrader.dbutil import ALEMBIC_DIR

    if getattr(nbgrader.api.get_alembic_version, "quick", False):
        return
    revisions, parents = set(), set()
    for script in (Path(ALEMBIC_DIR) / "versions").glob("*.py"):
        text = script.read_text()
        revisions.update(re.findall(r"^revision = '(\w+)'", text, re.M))
        parents.update(re.findall(r"^down_revision = '(\w+)'", text, re.M))
    heads = revisions - parents
    if len(heads) != 1:  # not the layout we know: let nbgrader ask alembic
        return
    head = heads.pop()

    def get_alembic_version() -> str:
        return head

    get_alembic_version.quick = True
    nbgrader.api.get_alembic_version = get_alembic_version
