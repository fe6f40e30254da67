"""The sample git clones, replayed from ``repos/<owner>/<name>/history.yaml``.

A history is a list of steps: ``commit`` (write the files of the named folder beside the
history — whole contents — and commit them), ``branch`` (create and check out a branch) and
``merge`` (GitHub's "Create a merge commit" of a branch into main). Each clone is built at
``root/owner/name`` with ``origin`` set to the GitHub repository, so the miner names it like
the API does. Dates, authors and messages are the recorded ones, so commit ids never change.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from core.config import StrictModel, load_config
from core.errors import InputError
from samples.swe_mine.gitrepo import commit_files, git, init_repo, merge_pr

SOURCES = Path(__file__).resolve().parent / "repos"
HISTORY = "history.yaml"


class Commit(StrictModel):
    commit: str  # folder beside the history holding the files this commit writes
    message: str
    when: str
    author: str = "dev"


class Branch(StrictModel):
    branch: str


class Merge(StrictModel):
    merge: str  # the branch merged into main
    number: int
    user: str
    title: str
    when: str


class History(StrictModel):
    steps: list[Commit | Branch | Merge]


def commit_folder_files(folder: Path) -> dict[str, str]:
    """Relative path -> text of every file under ``folder`` (bytecode caches are not sources)."""
    if not folder.is_dir():
        raise InputError(f"sample commit folder not found: {folder}")
    files = {
        p.relative_to(folder).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }
    if not files:
        raise InputError(f"sample commit folder is empty: {folder}")
    return files


def replay(history_path: Path, root: Path) -> Path:
    """Build the clone described by ``history_path`` under ``root``; returns its path."""
    owner_name = history_path.parent.relative_to(history_path.parents[2]).as_posix()
    hist = load_config(History, history_path)
    repo = init_repo(root / owner_name, owner_name)
    for step in hist.steps:
        if isinstance(step, Commit):
            files = commit_folder_files(history_path.parent / step.commit)
            commit_files(repo, files, step.message, step.when, step.author)
        elif isinstance(step, Branch):
            git(repo, "checkout", "-q", "-b", step.branch)
        else:
            merge_pr(repo, step.merge, step.number, step.user, step.title, step.when)
    return repo


def build_repos(root: Path, sources: Path = SOURCES) -> list[Path]:
    """Every sample clone under ``root`` (rebuilt from scratch), in owner/name order."""
    histories = sorted(sources.glob(f"*/*/{HISTORY}"))
    if not histories:
        raise InputError(f"no sample repository histories under {sources}")
    if root.exists():
        shutil.rmtree(root)
    return [replay(h, root) for h in histories]
