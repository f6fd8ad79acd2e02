"""config.py: every course directory's nbgrader_config.py is ``config_file``'s text, the repository's too."""
from pathlib import Path

from traitlets.config.loader import PyFileConfigLoader

from autograder.paths import REPO
from autograder.pipeline.config import config_file


def _load(folder: Path):
    return PyFileConfigLoader("nbgrader_config.py", path=str(folder)).load_config()


def test_the_repository_s_nbgrader_config_opens_with_config_file():
    assert (REPO / "nbgrader_config.py").read_text().startswith(config_file())
    assert _load(REPO).CourseDirectory.release_directory == "notebooks"


def test_a_course_directory_is_the_folder_its_config_file_is_in(tmp_path):
    (tmp_path / "nbgrader_config.py").write_text(config_file("c.Exchange.root = '/srv/exchange'"))
    config = _load(tmp_path)
    assert config.CourseDirectory.root == str(tmp_path.resolve())
    assert config.Exchange.root == "/srv/exchange" and config.CourseDirectory.course_id == "transformers"


def test_a_config_file_written_before_the_move_still_loads(tmp_path):
    """Course directories made before ``config.py`` moved into ``pipeline/`` import it from
    ``autograder.config``."""
    (tmp_path / "nbgrader_config.py").write_text(
        "from pathlib import Path\nfrom autograder.config import configure\n"
        "configure(get_config(), Path(__file__).resolve().parent)\n")
    assert _load(tmp_path).CourseDirectory.root == str(tmp_path.resolve())
