"""A real 2013 release (requests 2.0.1's sdist from the package index) builds with the shipped defaults.

Its setup.py pins pytest 2.3.4 and pytest-cov 1.6 and its requirements pull pexpect-u, whose
setup.py uses use_2to3: the template fails, then the Python-2-era rules get it to a verified
environment on Python 3.9 (the era's interpreter), each round recorded.
"""

from __future__ import annotations

import subprocess

import pytest

from samples.swe_envs.pypi_sdists import fetch_sdist, unpack
from swe_envs.config import SweEnvsConfig
from swe_envs.envs.environment.group import make_builder
from tests.samples.swe_envs.test_pypi_sdists import CACHE

pytestmark = pytest.mark.docker


def _repo(name: str, version: str, tmp_path):
    sdist = fetch_sdist(name, version, CACHE)
    tree = unpack(sdist, tmp_path)
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", f"{name} {version}"]):
        subprocess.run(["git", "-C", str(tree), *args], check=True, capture_output=True, env=env)
    commit = subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], check=True, capture_output=True,
                            text=True).stdout.strip()
    return sdist, tree, commit


def test_requests_2013_builds_through_the_python2_era_rules(docker_ready, tmp_path):
    sdist, tree, commit = _repo("requests", "2.0.1", tmp_path)
    builder = make_builder(docker_ready, SweEnvsConfig(), tmp_path / "out", log=lambda m: None)
    try:
        built = builder.build("pypi/requests", tree, commit, language="python", created_at=[sdist.uploaded])
    finally:
        builder.sandbox.close()
    assert built.ok, built.reason
    assert built.toolchain["version"] == "3.9"  # the 2013 era's interpreter among 3.9/3.11/3.13
    if not built.cached:  # a fresh build went through the rules; a cached one was verified by them before
        rules = [a.rule for a in built.attempts if a.source == "rule"]
        assert rules == ["setuptools of the Python 2 era", "test runner of the interpreter's era"], built.attempts
    assert any(r.lower().startswith("pytest==6.2") for r in built.resolved)  # the runner of Python 3.9's era


def test_a_python2_test_module_is_left_out_and_the_cached_environment_remembers_it(docker_ready, tmp_path):
    """simplejson 3.8.0 (2015): one test module imports ``StringIO``, which stops pytest's collection
    on Python 3; the suite runs without it, and a second build (the verified image, found by its
    labels) has the same command."""
    sdist, tree, commit = _repo("simplejson", "3.8.0", tmp_path)
    builder = make_builder(docker_ready, SweEnvsConfig(), tmp_path / "out", log=lambda m: None)
    try:
        first = builder.build("pypi/simplejson", tree, commit, language="python", created_at=[sdist.uploaded],
                              version="3.8.0")
        again = builder.build("pypi/simplejson", tree, commit, language="python", created_at=[sdist.uploaded],
                              version="3.8.0")
    finally:
        builder.sandbox.close()
    assert first.ok, first.reason
    left = "simplejson/tests/test_iterable.py"
    for env in (first, again):
        assert env.left_out == [left] and env.test_command.endswith(f"--ignore={left}"), env.test_command
    assert again.cached
    if not first.cached:
        assert [a.rule for a in first.attempts][-1] == "Python 2 test modules left out"
