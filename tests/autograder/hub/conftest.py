"""The hub the tests of this folder share: one per test session (per xdist worker)."""
import os
from pathlib import Path

import pytest

from hub_site import running_hub


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory):
    """Where the screenshots go: $AUTOGRADER_ARTIFACTS, else ``hub-artifacts*`` in pytest's tmp folder."""
    folder = Path(os.environ.get("AUTOGRADER_ARTIFACTS") or tmp_path_factory.mktemp("hub-artifacts"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def site():
    """The hub of ``hub_site.running_hub``: two courses, up, and removed after the session."""
    pytest.importorskip("playwright")
    with running_hub() as site:
        yield site
