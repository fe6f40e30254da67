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


def test_requests_2013_builds_through_the_python2_era_rules(docker_ready, tmp_path):
    sdist = fetch_sdist("requests", "2.0.1", CACHE)
    tree = unpack(sdist, tmp_path)
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "requests 2.0.1"]):
        subprocess.run(["git", "-C", str(tree), *args], check=True, capture_output=True, env=env)
    commit = subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], check=True, capture_output=True,
                            text=True).stdout.strip()
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
