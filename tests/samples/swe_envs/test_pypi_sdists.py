"""Real sdists from the host's package index: fetched with its pip configuration, hash-checked, unpacked safely."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.cache import cache_dir
from core.errors import UserError
from samples.swe_envs.pypi_sdists import fetch_sdist, unpack

CACHE = cache_dir() / "pypi-sdists" / "sdists"


def test_a_2013_release_with_its_tests_and_upload_date(tmp_path):
    sdist = fetch_sdist("requests", "1.1.0", CACHE)  # pip download cannot: its setup.py fails on 3.11
    assert sdist.uploaded.startswith("2013-01-10")
    tree = unpack(sdist, tmp_path)
    assert (tree / "test_requests.py").is_file() and (tree / "setup.py").is_file()
    assert tree.stat().st_uid == Path(tmp_path).stat().st_uid  # the tarball's owners are not kept


def test_an_unknown_release_is_a_clear_error_and_a_found_one_is_cached(tmp_path):
    with pytest.raises(UserError, match="not found"):
        fetch_sdist("requests", "0.0.0-not-a-release", tmp_path)
    sdist = fetch_sdist("six", "1.10.0", tmp_path)
    meta = json.loads((tmp_path / "six-1.10.0.json").read_text())
    assert meta["filename"] == sdist.path.name and sdist.path.stat().st_size > 10_000
