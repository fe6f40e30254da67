"""Instance layers get the environment's rule-based refine (Docker, real uv installs from the index).

A 2013 SWE-bench instance died in its instance layer: the base commit's setup.py imported what
setuptools removed (``Feature``), the environment's own commit did not, and the layer ran the
environment's recipe once, with no rules. Here the same shape on a two-commit repository: the
environment's commit installs as is; the instance's base commit imports ``Feature``.
"""

from __future__ import annotations

import subprocess

import pytest

from swe_envs.config import SweEnvsConfig
from swe_envs.envs.environment.builder import EnvBuilder
from swe_envs.images import Images
from swe_envs.sandbox import Sandbox
from tests.swe_envs.envs.regen_fixtures import make_git

SETUP = "from setuptools import setup\n\nsetup(name='p', version='1.0', py_modules=['p'])\n"
# what setup.py scripts of the Python 2 era did; setuptools 46 (2020-03) removed Feature
SETUP_FEATURE = "from setuptools import setup, Feature  # noqa\n\nsetup(name='p', version='1.0', py_modules=['p'])\n"
TEST = "import p\n\n\ndef test_value():\n    assert p.VALUE == 1\n"


def _commit(repo, files: dict[str, str]) -> str:
    for path, text in files.items():
        (repo / path).write_text(text)
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x", "PATH": "/usr/bin:/bin"}
    for args in (["add", "-A"], ["commit", "-q", "-m", "base"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.mark.slow  # minutes on 2 cores: `make test-slow` runs it
def test_instance_layer_at_an_older_setup_py_gets_the_setuptools_rule(docker_ready, tmp_path):
    client = docker_ready
    repo, env_commit = make_git(tmp_path / "feat", {"setup.py": SETUP, "p.py": "VALUE = 1\n",
                                                    "tests/test_p.py": TEST})
    base = _commit(repo, {"setup.py": SETUP_FEATURE})
    cfg = SweEnvsConfig()
    builder = EnvBuilder(cfg, Images(client, cfg.build), Sandbox(client, cfg.sandbox), None, tmp_path / "logs")
    # a 2020 repo-version: Python 3.9, the era's pins; its own commit builds with no rule
    env = builder.build("tests/instance-refine", repo, env_commit, language="python", created_at=["2020-01-15"])
    assert env.ok, env.reason
    assert not any(a.rule for a in env.attempts)
    image, error, refine = builder.instance_image(env, repo, base, "tests__instance-refine-1")
    assert error == "" and image, error
    assert refine["rules"] == ["setuptools of the Python 2 era"] and refine["rounds"] == 2
    assert any("--exclude-newer-package setuptools=2019-12-31" in line for line in refine["recipe"])
    # the layer is the base commit's tree, installed: its test runs there
    run = builder.sandbox.run(image, "python -m pytest -q tests/test_p.py", [], runs=1)
    assert run.runs and run.runs[0].rc == 0, run.runs[0].log[-2000:] if run.runs else run.error
    # the environment's recipe is not changed by what one instance needed
    assert not any("setuptools=2019-12-31" in line for line in env.recipe)
