"""Python's test plan: which files the suite's pytest command names."""

from __future__ import annotations

from swe_envs.envs.languages.python import plan
from swe_envs.repos import Snapshot
from tests.swe_envs.envs.regen_fixtures import make_git


def _plan(tmp_path, files: dict[str, str]) -> str:
    repo, head = make_git(tmp_path, files)
    return plan(Snapshot(repo, head), []).command


def test_a_suite_pytest_collects_by_default_is_not_named(tmp_path):
    cmd = _plan(tmp_path, {"setup.py": "", "pkg/__init__.py": "", "tests/test_a.py": "def test_a(): pass\n"})
    assert cmd.endswith("--color=no")


def test_nose_era_test_files_are_named(tmp_path):
    """itsdangerous 0.24's tests.py and tqdm 4.45's tqdm/tests/tests_*.py: nose found them, pytest does not."""
    cmd = _plan(tmp_path, {"setup.py": "", "tqdm/__init__.py": "", "tqdm/tests/tests_main.py": "def test_x(): pass\n",
                           "tqdm/tests/tests_perf.py": "def test_y(): pass\n", "tests.py": "def test_z(): pass\n",
                           "tqdm/tests/helpers.py": ""})
    assert cmd.split("--color=no")[1].split() == ["tests.py", "tqdm/tests/tests_main.py", "tqdm/tests/tests_perf.py"]
