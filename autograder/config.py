"""The old place of ``pipeline/config.py``, which course directories' nbgrader_config.py import. [trusted]"""
from autograder.pipeline.config import configure  # noqa: F401 (re-exported for those files)
