"""Two real releases as a SWE instance: the split into gold and test patches reproduces the later release."""

from __future__ import annotations

import json
import subprocess

from core.cache import cache_dir
from samples.swe_envs.release_pairs import PAIRS, build_release_pairs, make_instance
from swe_envs.paths import is_test_path

CACHE = cache_dir() / "release-pairs"


def test_test_paths_are_those_of_the_projects_own_layouts():
    for path in ("tests/test_a.py", "src/pkg/tests/data.json", "testing/x.py", "test_requests.py", "tests.py",
                 "markupsafe/tests.py", "conftest.py", "pkg/util_test.py", "pyflakes/test/test_api.py"):
        assert is_test_path(path), path
    for path in ("setup.py", "pkg/testutils.py", "docs/testing.rst", "CHANGES", "contest.py", "attestation/a.py"):
        assert not is_test_path(path), path


def test_a_real_pair_splits_into_patches_that_rebuild_the_later_release(tmp_path):
    inst = make_instance("wcwidth", "0.1.6", "0.1.7", CACHE / "sdists", tmp_path / "trees", tmp_path / "repos")
    repo = tmp_path / "repos" / "pypi" / "wcwidth"
    assert inst["repo"] == "pypi/wcwidth" and inst["created_at"].startswith("2016-07-02")
    assert inst["patch"] and inst["test_patch"]
    touched = [ln.split(" b/")[-1] for ln in (inst["patch"] + inst["test_patch"]).splitlines()
               if ln.startswith("diff --git")]
    assert all(is_test_path(p) for p in touched[inst["patch"].count("diff --git"):])
    assert not any(is_test_path(p) for p in touched[:inst["patch"].count("diff --git")])
    # the base commit with both patches applied is the later release, less the sdist tool's metadata
    work = tmp_path / "work"
    subprocess.run(["git", "clone", "-q", str(repo), str(work)], check=True)
    subprocess.run(["git", "checkout", "-q", inst["base_commit"]], cwd=work, check=True)
    for patch in (inst["patch"], inst["test_patch"]):
        subprocess.run(["git", "apply", "-"], cwd=work, input=patch, text=True, check=True)
    diff = subprocess.run(["git", "diff", "--stat", "main"], cwd=work, capture_output=True, text=True,
                          check=True).stdout
    assert all("PKG-INFO" in ln or "egg-info" in ln for ln in diff.splitlines()[:-1]), diff


def test_the_shipped_pairs_are_distinct_projects_and_reproducible(tmp_path):
    assert len({name.lower() for name, _, _ in PAIRS}) == len(PAIRS) >= 10
    assert not {name.lower() for name, _, _ in PAIRS} & {"flask", "pytest"}  # ../shared/swe-real's projects
    pairs = PAIRS[:2]
    first = build_release_pairs(tmp_path / "a", pairs, log=lambda m: None, sdists=CACHE / "sdists")
    second = build_release_pairs(tmp_path / "b", pairs, log=lambda m: None, sdists=CACHE / "sdists")
    rows = [json.loads(x) for x in first["instances"].read_text().splitlines()]
    assert [r["base_commit"] for r in rows] == [json.loads(x)["base_commit"] for x in
                                                second["instances"].read_text().splitlines()]
    assert len({r["instance_id"] for r in rows}) == 2
