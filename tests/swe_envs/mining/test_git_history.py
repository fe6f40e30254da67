from collections import Counter
from pathlib import Path

from samples.swe_mine.gitrepo import git
from swe_envs.mining.config import GitScanConfig
from swe_envs.mining.git_history import discover_repos, scan_repo
from swe_envs.mining.observations import Bad
from tests.swe_envs.gitrepos import project


def _scan(path: Path, root: Path):
    out = list(scan_repo(path, root, GitScanConfig()))
    obs = [o for _, r in out if not isinstance(r, Bad) for o in r]
    return out, obs


def test_prs_links_and_commits_from_history(tmp_path):
    repo = project(tmp_path / "w")
    out, obs = _scan(repo, tmp_path)
    pulls = {o.number: o.payload for o in obs if o.kind == "pull"}
    assert set(pulls) == {5, 7, 8}
    assert (
        pulls[5]["git"]["how"] == "merge"
        and pulls[7]["git"]["how"] == "squash"
        and pulls[8]["git"]["how"] == "merge"
    )
    assert pulls[5]["title"] == "Skip empty tokens" and pulls[7]["title"] == "Lower-case tokens"
    assert (
        pulls[5]["git"]["first_commit_at"] == "2020-01-03T00:00:00Z"
        and pulls[5]["merged_at"] == "2020-01-04T00:00:00Z"
    )
    merge5 = pulls[5]["git"]["merge_commit"]
    assert pulls[5]["git"]["base_commit"] == git(repo, "rev-parse", f"{merge5}^1").strip()
    assert pulls[5]["git"]["head_commit"] == git(repo, "rev-parse", f"{merge5}^2").strip()
    links = {(o.number, o.ref_repo, o.ref_number, o.kind) for o in obs if o.kind.startswith("link:")}
    assert links == {
        (5, "acme/widgets", 4, "link:git_commit_message"),
        (5, "acme/other", 9, "link:git_commit_message"),
        (7, "acme/widgets", 6, "link:git_commit_message"),
    }
    refs = [(o.sha, o.ref_number) for o in obs if o.kind == "commit_ref:git"]
    assert len(refs) == 1 and refs[0][1] == 3
    pr_commits = Counter(o.number for o in obs if o.kind == "pr_commit")
    assert pr_commits == {5: 3, 7: 1, 8: 2}  # merge + 2 branch commits; the squash; merge + 1
    gitrepo = next(o for o in obs if o.kind == "gitrepo")
    assert gitrepo.repo == "acme/widgets" and gitrepo.payload["bare"] is False
    assert all(rid.startswith("git:acme/widgets") for rid, _ in out)


def test_bare_clone_gives_the_same_observations_and_names(tmp_path):
    repo = project(tmp_path / "w")
    bare = tmp_path / "mirror" / "acme" / "widgets.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    git(bare, "remote", "remove", "origin")  # no GitHub remote: the name comes from the path
    _, a = _scan(repo, tmp_path)
    _, b = _scan(bare, tmp_path / "mirror")
    strip = lambda obs: sorted((o.kind, o.key) for o in obs if o.kind != "gitrepo")  # noqa: E731
    assert strip(a) == strip(b)
    assert next(o for o in b if o.kind == "gitrepo").payload["bare"] is True
    assert discover_repos(tmp_path) == [tmp_path / "mirror" / "acme" / "widgets.git", tmp_path / "w"]
    local = project(tmp_path / "solo", origin=None)
    _, c = _scan(local, tmp_path / "solo")
    assert {o.repo for o in c} == {"local/solo"}


def test_empty_and_broken_repositories_are_rejects(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    out, _ = _scan(empty, tmp_path)
    assert [(r.reason) for _, r in out] == ["empty_repository"]
    fake = tmp_path / "fake"
    (fake / "objects").mkdir(parents=True)
    (fake / "refs").mkdir()
    (fake / "HEAD").write_text("garbage\n")
    out, _ = _scan(fake, tmp_path)
    assert (
        len(out) == 1 and isinstance(out[0][1], Bad) and out[0][1].reason in {"git_error", "not_a_repository"}
    )
