"""The exact diff of a merged PR, from git history or (without a clone) from API responses.

Sources, best first: the PR's merge / squash commit found in git history (base = first
parent); the ``merge_commit_sha`` an API object names, if the clone has it; ``merge-base``
of the API's base and head commits; a recorded ``/pulls/N`` diff; the ``/pulls/N/files``
patches. A clone that lacks the commits (force-pushed branch, shallow or stale clone) is
``commit_missing``; no clone and no recorded diff is ``no_diff``. ``git diff --numstat`` runs
first, so a huge diff is refused before it is read. The diff text is read by ``swe_envs.diff``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from swe_envs.diff import FileDiff, parse_diff
from swe_envs.git import GitError, GitRepo, RepoCache
from swe_envs.mining.config import PatchFilterConfig
from swe_envs.paths import is_source_path, is_test_path


class PatchProblem(Exception):
    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


@dataclass
class Patch:
    files: list[FileDiff]
    base_commit: str | None
    target_commit: str | None
    source: str
    repo_path: str | None

    def summary(self, extra_test_patterns: tuple[str, ...] = ()) -> dict[str, Any]:
        tests = [f.path for f in self.files if is_test_path(f.path, extra_test_patterns)]
        return {
            "source": self.source,
            "base_commit": self.base_commit,
            "target_commit": self.target_commit,
            "files": [f.path for f in self.files],
            "test_files": tests,
            "additions": sum(f.additions for f in self.files),
            "deletions": sum(f.deletions for f in self.files),
        }

    def split(self, extra_test_patterns: tuple[str, ...] = ()) -> tuple[str, str]:
        """(code patch, test patch), the SWE-bench ``patch`` / ``test_patch`` split."""
        code = [f.text for f in self.files if not is_test_path(f.path, extra_test_patterns)]
        tests = [f.text for f in self.files if is_test_path(f.path, extra_test_patterns)]
        return "".join(code), "".join(tests)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "files": [asdict(f) for f in self.files]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Patch:
        return cls(**{**data, "files": [FileDiff(**f) for f in data["files"]]})


def files_from_api(api_files: list[dict[str, Any]]) -> list[FileDiff]:
    out = []
    for f in api_files:
        path, old = f["filename"], f.get("previous_filename") or f["filename"]
        status = {"removed": "deleted"}.get(f.get("status") or "", f.get("status") or "modified")
        old_path = None if status == "added" else old
        patch = f.get("patch")
        a = "/dev/null" if status == "added" else f"a/{old}"
        b = "/dev/null" if status == "deleted" else f"b/{path}"
        header = f"diff --git a/{old} b/{path}\n"
        if patch is None:  # GitHub omits patches of binary (and enormous) files
            text = header + f"Binary files {a} and {b} differ\n"
        else:
            text = header + f"--- {a}\n+++ {b}\n" + patch.rstrip("\n") + "\n"
        out.append(
            FileDiff(
                path,
                old_path,
                status,
                int(f.get("additions") or 0),
                int(f.get("deletions") or 0),
                patch is None,
                text,
            )
        )
    return out


def _numstat(repo: GitRepo, base: str, target: str) -> list[tuple[int | None, int | None]]:
    out = repo.run("diff", "--numstat", "-z", "-M", base, target)
    stats = []
    for entry in out.split(b"\0"):
        parts = entry.split(b"\t")
        if len(parts) >= 3:
            a, d = parts[0], parts[1]
            stats.append((int(a) if a.isdigit() else None, int(d) if d.isdigit() else None))
    return stats


def _git_patch(repo: GitRepo, base: str, target: str, source: str, cfg: PatchFilterConfig) -> Patch:
    for rev in (base, target):
        if not repo.has_commit(rev):
            raise PatchProblem("commit_missing", f"{rev[:12]} is not in {repo.path}")
    stats = _numstat(repo, base, target)
    changed = sum((a or 0) + (d or 0) for a, d in stats)
    if changed > cfg.max_changed_lines:
        raise PatchProblem("diff_too_large", f"{changed} changed lines > {cfg.max_changed_lines}")
    if len(stats) > cfg.max_files:
        raise PatchProblem("too_many_files", f"{len(stats)} files > {cfg.max_files}")
    try:
        raw = repo.run(
            "diff",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "-M",
            base,
            target,
            max_bytes=cfg.max_patch_bytes,
        )
    except GitError as err:
        raise PatchProblem(err.reason, err.detail) from None
    text = raw.decode("utf-8", errors="replace")
    return Patch(parse_diff(text), base, target, source, repo.path)


def obtain_patch(
    pull: dict[str, Any], repo_path: str | None, cfg: PatchFilterConfig, repos: RepoCache
) -> Patch:
    git = pull.get("git") or {}
    path = git.get("path") or repo_path
    try:
        if path:
            repo = repos.get(path)
            if git.get("merge_commit"):
                return _git_patch(repo, git["base_commit"], git["merge_commit"], f"git_{git.get('how')}", cfg)
            sha = pull.get("merge_commit_sha")
            if pull.get("merged") and repo.has_commit(sha):
                parents = repo.parents(sha)
                if parents:
                    return _git_patch(repo, parents[0], sha, "git_merge_commit_sha", cfg)
            base, head = pull.get("base_sha"), pull.get("head_sha")
            if repo.has_commit(base) and repo.has_commit(head):
                mb = repo.text("merge-base", base, head).strip()
                return _git_patch(repo, mb, head, "git_merge_base", cfg)
    except GitError as err:
        raise PatchProblem(err.reason, err.detail) from None
    if pull.get("api_diff"):
        return Patch(
            parse_diff(pull["api_diff"]), pull.get("base_sha"), pull.get("head_sha"), "api_diff", path
        )
    if pull.get("api_files"):
        return Patch(
            files_from_api(pull["api_files"]), pull.get("base_sha"), pull.get("head_sha"), "api_files", path
        )
    if path:
        raise PatchProblem(
            "commit_missing", f"the PR's commits are not in {path} (force-pushed or not fetched)"
        )
    raise PatchProblem("no_diff", "no git clone of the repository and no recorded diff")


def patch_problem(patch: Patch, cfg: PatchFilterConfig) -> str | None:
    """Strict patch rules: 1–15 files, tests and code both changed, bounded size, no binaries."""
    extra = tuple(cfg.extra_test_patterns)
    if any(f.binary for f in patch.files):
        if cfg.binary == "reject":
            return "binary_diff"
        patch.files = [f for f in patch.files if not f.binary]
    n = len(patch.files)
    if n < max(cfg.min_files, 1):
        return "no_files_changed"
    if n > cfg.max_files:
        return "too_many_files"
    changed = sum(f.additions + f.deletions for f in patch.files)
    if changed < cfg.min_changed_lines:
        return "diff_too_small"
    if changed > cfg.max_changed_lines:
        return "diff_too_large"
    tests = [f for f in patch.files if is_test_path(f.path, extra)]
    code = [f for f in patch.files if not is_test_path(f.path, extra) and is_source_path(f.path)]
    if cfg.require_test_change and not tests:
        return "no_test_change"
    if cfg.require_source_change and not code:
        return "no_source_change"
    return None
