"""Jobs read the samples where `python -m samples` put them, and say which command to run when
they are missing (one line)."""

import pytest

from core import cached_samples
from core.cache import ENV
from core.cached_samples import CORPUS_BOOKS, CORPUS_HTML, SampleConfig, sample_corpus, swe_mine_sample
from core.errors import InputError


def test_a_missing_corpus_names_the_command_that_builds_it(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, str(tmp_path))
    with pytest.raises(InputError) as err:
        sample_corpus(SampleConfig())
    msg = str(err.value)
    assert "`python -m samples corpus`" in msg and str(tmp_path / CORPUS_HTML) in msg and "\n" not in msg
    (tmp_path / CORPUS_HTML).mkdir(parents=True)
    with pytest.raises(InputError, match="novels not found .*`python -m samples corpus`"):
        sample_corpus(SampleConfig())
    corpus = sample_corpus(SampleConfig(include_books=False, max_html_pages=3))
    assert corpus.html_dir == tmp_path / CORPUS_HTML and corpus.books_jsonl is None and corpus.max_html_pages == 3


def test_the_corpus_is_found_in_the_default_cache_or_a_given_one(tmp_path, monkeypatch):
    given = tmp_path / "given"
    (given / CORPUS_HTML).mkdir(parents=True)
    (given / CORPUS_BOOKS).parent.mkdir()
    (given / CORPUS_BOOKS).write_text("{}\n")
    monkeypatch.setenv(ENV, str(given))
    assert sample_corpus(SampleConfig()).books_jsonl == given / CORPUS_BOOKS
    monkeypatch.setenv(ENV, str(tmp_path / "empty"))
    assert sample_corpus(SampleConfig(data_dir=str(given))).html_dir == given / CORPUS_HTML


def test_a_missing_swe_mine_sample_names_its_command(tmp_path):
    with pytest.raises(InputError, match=r"swe-mine sample's api not found .*`python -m samples swe-mine`"):
        swe_mine_sample(tmp_path)


def test_the_cached_samples_are_where_the_builders_put_them(sample_corpus):
    """The session's corpus (built by samples.corpus into the cache) reads back through core."""
    again = cached_samples.sample_corpus(SampleConfig())
    assert again.html_dir == sample_corpus.html_dir and again.books_jsonl == sample_corpus.books_jsonl
