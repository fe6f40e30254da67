"""Local git repositories -> pull-request observations, closing links and PR commits.

A repository's history says which PR each mainline commit merged (``refs``) and gives the
exact diff later (``patches``). Records here are the commits that matter: PR merge / squash
commits (one pull observation each, plus links from closing keywords in the merge message and
in every commit of the merged branch) and other commits whose message closes an issue
(``commit_ref:git`` facts, resolved to a PR when an API object names that commit). Other
commits are scanned but are not records.

The repository's GitHub name comes from its ``origin`` remote, else from its path under the
``--repos`` root (``owner/name``), else ``local/<dirname>``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from swe_envs.git import GitError, GitRepo, is_git_repo
from swe_envs.mining.config import GitScanConfig
from swe_envs.mining.observations import COMMIT_REF_PREFIX, LINK_PREFIX, PR_COMMIT, Bad, Obs
from swe_envs.mining.refs import closing_refs, iso_utc, pr_number_from_commit, repo_from_remote, repo_key

SOURCE = "git"
# -z ends each commit with a NUL, which is the one byte %B never prints (git stops a message at
# an embedded NUL), so any message, \x1e or newlines included, stays one record; the fields
# before it are hex and digits, one per line
_FMT = "--format=%H%n%P%n%at%n%ct%n%B"


def discover_repos(root: Path, max_depth: int = 3) -> list[Path]:
    """``root`` itself if it is a repository, else the repositories below it (not nested)."""
    if is_git_repo(root):
        return [root]
    found: list[Path] = []

    def walk(d: Path, depth: int) -> None:
        if depth > max_depth:
            return
        try:
            children = sorted(p for p in d.iterdir() if p.is_dir() and not p.name.startswith("."))
        except OSError:
            return
        for child in children:
            if is_git_repo(child):
                found.append(child)
            else:
                walk(child, depth + 1)

    walk(root, 1)
    return found


def repo_name(repo: GitRepo, path: Path, root: Path) -> str:
    remote = repo.run("config", "--get", "remote.origin.url", check=False).decode().strip()
    name = repo_from_remote(remote) if remote else None
    if name:
        return name
    try:
        parts = path.resolve().relative_to(root.resolve()).parts
    except ValueError:
        parts = ()
    parts = tuple(p.removesuffix(".git") for p in parts if p)
    if len(parts) >= 2:
        return f"{parts[-2]}/{parts[-1]}"
    return f"local/{path.resolve().name.removesuffix('.git')}"


def _log(repo: GitRepo, *args: str) -> list[tuple[str, list[str], int, int, str]]:
    out = repo.text("log", "-z", _FMT, *args)
    commits = []
    for rec in out.split("\x00"):
        fields = rec.lstrip("\n").split("\n", 4)
        if len(fields) < 4:
            continue
        sha, parents, at, ct, message = (*fields, "")[:5]
        commits.append((sha, parents.split(), _int(at), _int(ct), message.rstrip("\n")))
    return commits


def _int(stamp: str) -> int:
    return int(stamp) if stamp.isdigit() else 0  # a malformed ident line has no usable date


def _links(kind: str, message: str, repo: str, number: int, when: str) -> list[Obs]:
    return [
        Obs(LINK_PREFIX + kind, repo, number, ref_repo=r, ref_number=n, observed_at=when, source=SOURCE)
        for r, n in closing_refs(message, repo)
    ]


def _pull_commit(
    repo: GitRepo, name: str, path: str, commit: tuple, number: int, how: str, cfg: GitScanConfig
) -> list[Obs]:
    sha, parents, at, ct, message = commit
    key = repo_key(name)
    merged_at = iso_utc(ct) or ""
    subject, _, rest = message.partition("\n")
    if how == "merge":
        branch: list[tuple] = []
        try:
            branch = _log(repo, f"--max-count={cfg.max_pr_commits}", f"{parents[0]}..{parents[1]}")
        except GitError:
            pass  # history cut (shallow clone, force push): the diff stage reports it
        title, _, body = rest.strip().partition("\n")
        first_at = min([c[2] for c in branch] or [at])
    else:
        branch = [commit]
        title, body = subject.rsplit("(#", 1)[0].strip(), rest.strip()
        first_at = at
    payload = {
        "repo_name": name,
        "number": number,
        "title": title.strip(),
        "body": body.strip(),
        "merged": True,
        "merged_at": merged_at,
        "git": {
            "path": path,
            "how": how,
            "merge_commit": sha,
            "base_commit": parents[0],
            "head_commit": parents[1] if how == "merge" else sha,
            "first_commit_at": iso_utc(first_at),
            "merged_at": merged_at,
        },
    }
    out = [Obs("pull", key, number, payload=payload, observed_at=merged_at, source=SOURCE)]
    out += _links(
        "git_merge_message" if how == "merge" else "git_commit_message", message, key, number, merged_at
    )
    for c in branch:
        if c[0] != sha:
            out += _links("git_commit_message", c[4], key, number, merged_at)
    for s in sorted({sha, *(c[0] for c in branch)}):
        out.append(Obs(PR_COMMIT, key, number, sha=s, observed_at=merged_at, source=SOURCE))
    return out


def scan_repo(path: Path, root: Path, cfg: GitScanConfig) -> Iterator[tuple[str, list[Obs] | Bad]]:
    """(record id, observations or Bad) for the PR-relevant commits of one repository."""
    repo = GitRepo(path, cfg.timeout_s)
    rel = str(path.relative_to(root)) if path != root and path.is_relative_to(root) else path.name
    try:
        name = repo_name(repo, path, root)
        limit = [f"--max-count={cfg.max_commits}"] if cfg.max_commits else []
        commits = _log(repo, "--all", *limit)
    except GitError as err:
        yield f"git:{rel}", Bad(err.reason, err.detail)
        return
    if not commits:
        yield f"git:{rel}", Bad("empty_repository", str(path))
        return
    key = repo_key(name)
    head = repo.run("rev-parse", "--verify", "-q", "HEAD", check=False).decode().strip()
    bare = not (path / ".git").exists()
    meta = {"repo_name": name, "path": str(path.resolve()), "bare": bare, "head": head or None}
    yield f"git:{name}", [Obs("gitrepo", key, payload=meta, observed_at="", source=SOURCE)]
    in_prs: set[str] = set()
    pulls = []
    for commit in commits:
        pr = pr_number_from_commit(commit[4].partition("\n")[0], len(commit[1]))
        if pr is not None:
            obs = _pull_commit(repo, name, meta["path"], commit, pr[0], pr[1], cfg)
            in_prs.update(o.sha for o in obs if o.kind == PR_COMMIT)
            pulls.append((f"git:{name}@{commit[0][:12]}", obs))
    yield from pulls
    for sha, _parents, _at, ct, message in commits:
        refs = closing_refs(message, key) if sha not in in_prs else []
        if refs:  # a commit outside every known PR (a direct push, or a rebase-merged PR)
            when = iso_utc(ct) or ""
            yield (
                f"git:{name}@{sha[:12]}",
                [
                    Obs(
                        COMMIT_REF_PREFIX + "git",
                        key,
                        sha=sha,
                        ref_repo=r,
                        ref_number=n,
                        observed_at=when,
                        source=SOURCE,
                    )
                    for r, n in refs
                ],
            )
