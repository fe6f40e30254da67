"""The per-language sample repositories are read from files: every language has a bug that the
gold patch fixes, a test patch that adds the sub test, and a missing folder is an input error."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from core.errors import ConfigError, InputError
from samples.swe_envs.lang_repos import ALL, PY, SOURCES, load, make_repo


def test_nine_languages_each_with_a_fix_and_a_test_patch():
    assert list(ALL) == ["python", "javascript", "java", "go", "rust", "c", "cpp", "php", "ruby"]
    for r in ALL.values():
        assert r.f2p and r.p2p and set(r.f2p).isdisjoint(r.p2p)
        # the gold patch and the test patch change files of the base commit or add new ones
        for rel, text in {**r.fix, **r.tests}.items():
            assert r.base.get(rel) != text, (r.language, rel)
        assert set(r.fix).isdisjoint(r.tests)


def test_make_repo_gives_two_commits_and_the_two_patches(tmp_path):
    inst = make_repo(tmp_path, PY)
    repo = tmp_path / "tests" / "calc-python"
    log = subprocess.run(["git", "-C", str(repo), "log", "--format=%s"], capture_output=True, text=True).stdout
    assert log.splitlines() == ["Fix sub (closes #1)", "calc with add and sub"]
    assert "-    return a + b\n+    return a - b" in inst["patch"]
    assert "+def test_sub():" in inst["test_patch"] and "calc/__init__.py" not in inst["test_patch"]


def test_missing_part_or_bad_expectations_are_one_line_errors(tmp_path):
    shutil.copytree(SOURCES / "python", tmp_path / "python")
    shutil.rmtree(tmp_path / "python" / "gold_patch")
    with pytest.raises(InputError, match="sample repository folder not found: .*gold_patch"):
        load("python", tmp_path)
    (tmp_path / "python" / "repo.yaml").write_text("fail_to_pass: [a]\n")
    with pytest.raises(ConfigError, match="pass_to_pass"):
        load("python", tmp_path)
