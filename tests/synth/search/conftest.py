"""The real sample corpus (the Python 3.11 docs' HTML and its links) and four plain tasks on it,
shared by the deep-search tests."""

from __future__ import annotations

import pytest

from synth.search.corpus import load_corpus
from synth.search.generate import Generator, SearchConfig


@pytest.fixture(scope="session")
def docs_corpus(sample_corpus):
    return load_corpus(sample_corpus.html_dir)


@pytest.fixture(scope="session")
def plain_tasks(docs_corpus):
    return Generator(docs_corpus, SearchConfig(seed=3)).generate(4)
