"""Fixtures for the mining rules: the real github3.py recordings (downloaded once into the cache)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.cache import cache_dir

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def cassettes() -> Path:
    from samples.swe_mine.recordings import obtain_cassettes

    return obtain_cassettes(cache_dir())


@pytest.fixture(scope="session")
def events(cassettes):
    from samples.swe_mine.recordings import recorded_events

    return recorded_events(cassettes)


@pytest.fixture(scope="session")
def unit_json(cassettes) -> Path:
    return cassettes.parent / "unit_json"
