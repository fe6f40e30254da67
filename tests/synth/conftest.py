"""Real text for the synth tests: the sample corpus's novels (in the cache, ``core.cache``)."""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="session")
def books(sample_corpus) -> list[dict]:
    """The 10 public-domain novels: id, title, text."""
    return [json.loads(line) for line in sample_corpus.books_jsonl.read_text().splitlines()]
