import json

import pytest

from samples.swe_mine.gitrepo import commit_files, git, merge_pr
from swe_envs.diff import parse_diff
from swe_envs.git import RepoCache
from swe_envs.mining.config import GitScanConfig, PatchFilterConfig
from swe_envs.mining.git_history import scan_repo
from swe_envs.mining.observations import Bad
from swe_envs.mining.patches import (
    Patch,
    PatchProblem,
    files_from_api,
    obtain_patch,
    patch_problem,
)
from tests.swe_envs.gitrepos import project


@pytest.fixture()
def repo(tmp_path):
    return project(tmp_path / "w")


def _pulls(repo, root):
    obs = [o for _, r in scan_repo(repo, root, GitScanConfig()) if not isinstance(r, Bad) for o in r]
    return {o.number: o.payload for o in obs if o.kind == "pull"}


def test_git_patches_of_merge_and_squash_prs(repo, tmp_path):
    pulls = _pulls(repo, tmp_path)
    cfg = PatchFilterConfig()
    with RepoCache() as repos:
        merged = obtain_patch(pulls[5], None, cfg, repos)
        squash = obtain_patch(pulls[7], None, cfg, repos)
    assert merged.source == "git_merge" and squash.source == "git_squash"
    assert [f.path for f in merged.files] == ["pkg/parser.py", "tests/test_parser.py"]
    assert (merged.files[0].additions, merged.files[0].deletions) == (1, 1)
    assert patch_problem(merged, cfg) is None
    code, tests = merged.split()
    assert (
        code.startswith("diff --git a/pkg/parser.py")
        and "tests/test_parser.py" in tests
        and "pkg/" not in tests
    )
    added = next(f for f in squash.files if f.path == "tests/test_util.py")
    assert added.status == "added" and added.old_path is None
    # the patch applies to its base commit, as SWE-bench will apply it
    wt = tmp_path / "apply"
    git(tmp_path, "clone", "-q", str(repo), str(wt))
    git(wt, "checkout", "-q", merged.base_commit)
    (tmp_path / "p.diff").write_text(code + tests)
    git(wt, "apply", "--check", str(tmp_path / "p.diff"))
    assert Patch.from_json(json.loads(json.dumps(merged.to_json()))) == merged


def test_api_merge_commit_and_force_pushed_history(repo, tmp_path):
    pulls = _pulls(repo, tmp_path)
    cfg = PatchFilterConfig()
    sha = pulls[7]["git"]["merge_commit"]
    api_only = {"number": 7, "merged": True, "merge_commit_sha": sha}
    with RepoCache() as repos:
        p = obtain_patch(api_only, str(repo), cfg, repos)
        assert (
            p.source == "git_merge_commit_sha" and p.base_commit == git(repo, "rev-parse", f"{sha}^").strip()
        )
        gone = {
            "number": 9,
            "merged": True,
            "merge_commit_sha": "f" * 40,
            "base_sha": "e" * 40,
            "head_sha": "d" * 40,
        }
        with pytest.raises(PatchProblem) as err:
            obtain_patch(gone, str(repo), cfg, repos)
        assert err.value.reason == "commit_missing"
        with pytest.raises(PatchProblem) as err:
            obtain_patch(gone, None, cfg, repos)
        assert err.value.reason == "no_diff"
        # a history rewritten after the scan: the merge commit recorded in git facts is gone
        vanished = dict(pulls[5], git=dict(pulls[5]["git"], merge_commit="c" * 40))
        with pytest.raises(PatchProblem) as err:
            obtain_patch(vanished, None, cfg, repos)
        assert err.value.reason == "commit_missing"


def test_binary_and_huge_diffs(repo, tmp_path):
    git(repo, "checkout", "-q", "-b", "logo")
    (repo / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8)
    git(repo, "add", "logo.png")
    commit_files(
        repo,
        {"pkg/util.py": "def clean(t):\n    return t\n", "tests/test_util.py": "def test():\n    pass\n"},
        "Logo",
        "2020-02-01T00:00:00Z",
    )
    merge_pr(repo, "logo", 11, "eve", "Add a logo", "2020-02-02T00:00:00Z")
    commit_files(
        repo,
        {"pkg/big.py": "x = 1\n" * 5000, "tests/test_big.py": "def test():\n    pass\n"},
        "Generated tables (#12)",
        "2020-02-03T00:00:00Z",
    )
    pulls = _pulls(repo, tmp_path)
    with RepoCache() as repos:
        logo = obtain_patch(pulls[11], None, PatchFilterConfig(), repos)
        assert [f.binary for f in logo.files] == [True, False, False] and logo.files[0].path == "logo.png"
        assert patch_problem(logo, PatchFilterConfig()) == "binary_diff"
        assert patch_problem(logo, PatchFilterConfig(binary="drop")) is None and len(logo.files) == 2
        with pytest.raises(PatchProblem) as err:
            obtain_patch(pulls[12], None, PatchFilterConfig(max_changed_lines=1000), repos)
        assert err.value.reason == "diff_too_large"
        with pytest.raises(PatchProblem) as err:  # numstat passes, the bytes cap stops the read
            obtain_patch(
                pulls[12], None, PatchFilterConfig(max_changed_lines=10_000, max_patch_bytes=4096), repos
            )
        assert err.value.reason == "diff_too_large"


def test_patch_rules_each_reason(repo, tmp_path):
    pulls = _pulls(repo, tmp_path)
    with RepoCache() as repos:
        p5 = obtain_patch(pulls[5], None, PatchFilterConfig(), repos)
    assert patch_problem(p5, PatchFilterConfig(max_files=1)) == "too_many_files"
    assert patch_problem(p5, PatchFilterConfig(min_changed_lines=50)) == "diff_too_small"
    assert patch_problem(p5, PatchFilterConfig(max_changed_lines=2)) == "diff_too_large"
    only_code = Patch([p5.files[0]], "a", "b", "git", None)
    only_tests = Patch([p5.files[1]], "a", "b", "git", None)
    assert patch_problem(only_code, PatchFilterConfig()) == "no_test_change"
    assert patch_problem(only_tests, PatchFilterConfig()) == "no_source_change"
    assert patch_problem(Patch([], "a", "b", "git", None), PatchFilterConfig()) == "no_files_changed"


def test_api_file_patches_from_a_real_recording(cassettes):
    from swe_envs.mining.api_dumps import read_api_dump
    from swe_envs.mining.config import ReadConfig

    obs = [
        o
        for _, r in read_api_dump(str(cassettes / "PullRequest_files.json"), "f", ReadConfig())
        if not isinstance(r, Bad)
        for o in r
        if o.payload and "api_files" in o.payload
    ]
    files = files_from_api(obs[0].payload["api_files"])
    reparsed = parse_diff("".join(f.text for f in files))
    assert [(f.path, f.additions, f.deletions) for f in reparsed] == [
        (f.path, f.additions, f.deletions) for f in files
    ]
    missing = files_from_api([{"filename": "img.png", "status": "added", "additions": 0, "deletions": 0}])
    assert missing[0].binary
