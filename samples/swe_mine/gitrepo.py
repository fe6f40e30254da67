"""Git repositories built at given dates, as GitHub would have made them: the sample clones and
the tests' scenario repositories use these, so commit ids are the same on every machine.

Author and committer dates come from the caller; the committer is GitHub (merges made on the
site), global and system git configuration are ignored.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def git(cwd: Path, *args: str, when: str | None = None, author: str = "dev") -> str:
    env = {
        **os.environ,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": author,
        "GIT_AUTHOR_EMAIL": f"{author}@users.noreply.github.com",
        "GIT_COMMITTER_NAME": "GitHub",
        "GIT_COMMITTER_EMAIL": "noreply@github.com",
    }
    if when:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = when
    cmd = ["git", "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", *args]
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {cwd}: {proc.stderr.strip()}")
    return proc.stdout


def commit_files(
    repo: Path, files: dict[str, str | None], message: str, when: str, author: str = "dev"
) -> str:
    """Write (or delete, for None) files and commit them; returns the new commit's sha."""
    for rel, text in files.items():
        p = repo / rel
        if text is None:
            git(repo, "rm", "-q", rel)
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
        git(repo, "add", rel)
    git(repo, "commit", "-q", "-m", message, when=when, author=author)
    return git(repo, "rev-parse", "HEAD").strip()


def init_repo(path: Path, origin: str | None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q")
    if origin:
        git(path, "remote", "add", "origin", f"https://github.com/{origin}.git")
    return path


def merge_pr(repo: Path, branch: str, number: int, user: str, title: str, when: str) -> str:
    """GitHub's "Create a merge commit": ``Merge pull request #N from user/branch``."""
    git(repo, "checkout", "-q", "main")
    msg = f"Merge pull request #{number} from {user}/{branch}\n\n{title}"
    git(repo, "merge", "-q", "--no-ff", "-m", msg, branch, when=when, author=user)
    return git(repo, "rev-parse", "HEAD").strip()
