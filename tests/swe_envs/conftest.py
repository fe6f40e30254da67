"""Fixtures for the mining rules: the real github3.py recordings (downloaded once into data/)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def cassettes() -> Path:
    from samples.swe_mine.recordings import obtain_cassettes

    return obtain_cassettes(ROOT / "data")


@pytest.fixture(scope="session")
def events(cassettes):
    from samples.swe_mine.recordings import recorded_events

    return recorded_events(cassettes)


@pytest.fixture(scope="session")
def unit_json(cassettes) -> Path:
    return cassettes.parent / "unit_json"
