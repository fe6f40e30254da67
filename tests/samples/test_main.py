"""``python -m samples``: every subcommand has --help, prints where it put each part (the cache by
default), and a cache it cannot write is one line, exit 2."""

import subprocess
import sys
from pathlib import Path

import pytest

from core.cache import cache_dir

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = ("corpus", "models", "swe-mine", "web-archives", "web-volume", "release-pairs", "agentic", "demo")


def samples(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "samples", *args], cwd=cwd, capture_output=True, text=True)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_subcommand_has_help(command):
    res = samples(command, "--help")
    assert res.returncode == 0 and "--cache" in res.stdout


def test_the_corpus_is_printed_from_the_cache(sample_corpus):
    res = samples("corpus")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [f"html: {sample_corpus.html_dir}", f"books: {sample_corpus.books_jsonl}"]
    res = samples("corpus", "--print", "html")
    assert res.returncode == 0 and res.stdout.strip() == str(sample_corpus.html_dir)
    assert str(sample_corpus.html_dir).startswith(str(cache_dir()))
    res = samples("corpus", "--print", "nope")
    assert res.returncode == 2 and "one of html, books" in res.stderr


def test_the_swe_mine_sample_is_built_in_the_cache():
    res = samples("swe-mine", "--print", "events")
    assert res.returncode == 0, res.stderr
    events = Path(res.stdout.strip())
    assert events.parent.parent == cache_dir() and any(events.glob("*.json.gz"))


def test_an_unwritable_cache_is_one_line(tmp_path):
    # a cache whose github3/ part is a file: no download is attempted
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "github3").write_text("x")
    res = samples("swe-mine", "--cache", str(tmp_path / "d"))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.startswith("error: ") and len(res.stderr.strip().splitlines()) == 1
