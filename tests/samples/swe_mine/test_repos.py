"""The sample clones replayed from their history files: commit ids pinned (the mining tests and
``make data-swe`` outputs depend on them), bad histories are one-line errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from core.errors import ConfigError, InputError
from samples.swe_mine.gitrepo import git
from samples.swe_mine.repos import SOURCES, build_repos

# HEAD of main and every ref, as the code that kept the sources as Python strings built them
PINNED = {
    "PyCQA/pyflakes": "1f9ccfc4ac032075c79a94655bf0a5067e9aedeb",
    "requests/toolbelt": "e943780aebbc617eeb77d4226de71d138a2af8ae",
    "sigmavirus24/github3.py": "6baca03f5e8f08b8d2dd2e34defe51ee91fa602f",
}
REFS = {
    "PyCQA/pyflakes": {"refs/heads/main", "refs/heads/string-annotations"},
    "requests/toolbelt": {"refs/heads/main", "refs/heads/bug/199", "refs/heads/docs-typo"},
    "sigmavirus24/github3.py": {"refs/heads/main"},
}


def test_clones_have_the_pinned_commits_and_origins(tmp_path):
    repos = build_repos(tmp_path / "repos")
    assert [p.relative_to(tmp_path / "repos").as_posix() for p in repos] == sorted(PINNED)
    for repo in repos:
        name = repo.relative_to(tmp_path / "repos").as_posix()
        assert git(repo, "rev-parse", "HEAD").strip() == PINNED[name]
        assert git(repo, "symbolic-ref", "HEAD").strip() == "refs/heads/main"
        assert {line.split()[1] for line in git(repo, "show-ref").splitlines()} == REFS[name]
        assert git(repo, "config", "--get", "remote.origin.url").strip() == f"https://github.com/{name}.git"
        assert git(repo, "status", "--porcelain") == ""
    toolbelt = tmp_path / "repos" / "requests" / "toolbelt"
    merge = git(toolbelt, "log", "-1", "--format=%s%n%an%n%cn%n%cI", "HEAD^").splitlines()
    assert merge == ["Merge pull request #200 from Kefevs/bug/199", "Kefevs", "GitHub", "2017-11-21T00:39:08+00:00"]


def test_rebuild_replaces_an_existing_tree(tmp_path):
    (tmp_path / "repos" / "stale").mkdir(parents=True)
    build_repos(tmp_path / "repos")
    assert not (tmp_path / "repos" / "stale").exists()


def _copy_sources(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    shutil.copytree(SOURCES / "PyCQA", src / "PyCQA")
    return src


def test_unknown_step_key_is_a_config_error_naming_the_file(tmp_path):
    src = _copy_sources(tmp_path)
    history = src / "PyCQA" / "pyflakes" / "history.yaml"
    history.write_text("steps:\n  - rebase: main\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="history.yaml"):
        build_repos(tmp_path / "out", src)


def test_missing_commit_folder_is_an_input_error(tmp_path):
    src = _copy_sources(tmp_path)
    shutil.rmtree(src / "PyCQA" / "pyflakes" / "2-string-annotations")
    with pytest.raises(InputError, match="sample commit folder not found: .*2-string-annotations"):
        build_repos(tmp_path / "out", src)


def test_no_histories_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="no sample repository histories"):
        build_repos(tmp_path / "out", tmp_path)

