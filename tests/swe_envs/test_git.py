"""The one git wrapper: one-shot commands, commit dates, bundles cloned once."""

import subprocess

import pytest

from swe_envs.git import GitError, GitFailure, GitRepo, commit_date, git
from swe_envs.repos import find_repo


@pytest.fixture
def repo(tmp_path):
    path = tmp_path / "o" / "r"
    path.mkdir(parents=True)
    (path / "a.txt").write_text("hello\n")
    env = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    subprocess.run(["git", *env, "init", "-q", str(path)], check=True)
    subprocess.run(["git", *env, "-C", str(path), "add", "-A"], check=True)
    subprocess.run(["git", *env, "-C", str(path), "commit", "-qm", "one", "--date", "2021-03-04T05:06:07+00:00"],
                   check=True, env={"GIT_COMMITTER_DATE": "2021-03-04T05:06:07+00:00", "PATH": "/usr/bin:/bin"})
    return path


def test_commands_dates_and_failures(repo):
    head = git(repo, "rev-parse", "HEAD").decode().strip()
    assert commit_date(repo, head) == "2021-03-04T05:06:07+00:00" and commit_date(repo, "0" * 40) is None
    with pytest.raises(GitFailure) as err:
        git(repo, "cat-file", "-p", "0" * 40)
    assert isinstance(err.value, GitError) and str(err.value) and "git_error" not in str(err.value)
    r = GitRepo(repo)
    assert r.blob(head, "a.txt") == b"hello\n" and r.blob(head, "missing") is None
    with pytest.raises(GitError) as missing:
        r.run("show", "0" * 40)
    assert missing.value.reason == "commit_missing"
    r.close()


def test_a_bundle_is_cloned_once(repo, tmp_path, monkeypatch):
    monkeypatch.setenv("SWE_ENVS_CACHE", str(tmp_path / "cache"))
    bundles = tmp_path / "bundles"
    bundles.mkdir()
    git(repo, "bundle", "create", str(bundles / "o__r.bundle"), "--all")
    first = find_repo(bundles, "o/r")
    assert (first / "HEAD").is_file() and find_repo(bundles, "o/r") == first
    assert git(first, "rev-parse", "HEAD") == git(repo, "rev-parse", "HEAD")
