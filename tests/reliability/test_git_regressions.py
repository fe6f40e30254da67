"""What fuzzing git histories found (tests/reliability/test_fuzz_git.py), each with the minimised
input hypothesis reported, and each fixed in the reader it names."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from core.errors import InputError
from swe_envs.diff import header_paths, parse_diff, patch_paths
from swe_envs.git import GitRepo
from swe_envs.mining.config import MiningConfig
from swe_envs.mining.refs import iso_utc, pr_number_from_commit
from swe_envs.mining.stages import EXTRACT_SCHEMA, MineUnit, safe_extract_rows, to_batch
from swe_envs.repos import diff, find_repo
from tests.reliability.gitobjects import Commit, write_history

BASE = {b"src/util.py": b"def f():\n    return 1\n", b"tests/test_util.py": b"def test_f():\n    pass\n"}


def _rows(path: Path, root: Path) -> list[dict]:
    unit = MineUnit(kind="git", path=str(path), root=str(root), prefix="git:acme/widgets")
    rows = list(safe_extract_rows(unit, MiningConfig()))
    to_batch(rows, EXTRACT_SCHEMA)  # the job's write: must not overflow or fail on UTF-8
    return rows


def test_a_message_holding_record_separators_loses_no_commit(tmp_path):
    """git_history split `git log` on \\x1e and NUL: a message holding either made the whole
    repository one `malformed_object` reject (ValueError: not enough values to unpack)."""
    path = tmp_path / "acme" / "widgets"
    write_history(path, [Commit(BASE, b"initial\n"),
                         Commit({**BASE, b"a.py": b"x\n"}, b"Fix it (#12)\n\nsep \x1e here \x00 after\nFixes #3\n",
                                [0], encoding=b"ISO-8859-1")])
    rows = _rows(path, tmp_path)
    assert not [r for r in rows if r.get("reason")]
    pulls = [json.loads(r["payload"]) for r in rows if r.get("kind") == "pull"]
    assert [p["number"] for p in pulls] == [12] and "sep \x1e here" in pulls[0]["body"]


def test_a_commit_dated_past_year_9999_is_mined_without_a_date(tmp_path):
    """refs.iso_utc raised OverflowError (timestamp out of range for platform time_t)."""
    path = tmp_path / "acme" / "widgets"
    write_history(path, [Commit(BASE, b"initial\n"),
                         Commit(BASE, b"Fix the thing (#1)\n\n", [0],
                                ident=b"Huge <h@example.org> 99999999999999999999 +0000")])
    pulls = [json.loads(r["payload"]) for r in _rows(path, tmp_path) if r.get("kind") == "pull"]
    assert len(pulls) == 1 and pulls[0]["merged_at"] == ""
    assert iso_utc(10**20) is None and iso_utc(float("nan")) is None


def test_a_pr_number_past_int64_is_not_a_pr():
    """`Fix the thing (#9223372036854775808)` became a pull row whose number overflowed Arrow's int64."""
    assert pr_number_from_commit("Fix the thing (#9223372036854775808)", 1) is None
    assert pr_number_from_commit("Merge pull request #1234567890 from a/b", 2) is None
    assert pr_number_from_commit("Fix the thing (#123456789)", 1) == (123456789, "squash")


def test_reading_a_blob_whose_path_holds_a_space(tmp_path):
    """GitRepo.blob took `<name> missing` with a space in the name for a found object and raised
    ValueError (int(b'missing')); relevant-file selection of such a repository crashed."""
    path = tmp_path / "r"
    sha = write_history(path, [Commit({**BASE, b"with space.py": b"here\n"}, b"initial\n")])[0]
    repo = GitRepo(path)
    try:
        assert repo.blob(sha, "with space.py/caf\ufffd.py") is None
        assert repo.blob(sha, "no such file.py") is None
        assert repo.blob(sha, "with space.py") == b"here\n"
    finally:
        repo.close()


@pytest.mark.parametrize("name", [b"with space.py", b'tab\tq"uote.py', b"new\nline.py", "café.py".encode()])
def test_patch_paths_of_odd_names(tmp_path, name):
    """repos.patch_paths matched `a/(\\S+) b/(\\S+)`: a file named with a space was missing from
    the paths a test patch writes; quoted names came back with their quotes and escapes."""
    path = tmp_path / "r"
    old, new = write_history(path, [Commit(BASE, b"initial\n"), Commit({**BASE, name: b"x\n"}, b"add\n", [0])])
    text = diff(path, old, new)
    assert patch_paths(text) == [name.decode()]
    assert [f.path for f in parse_diff(text)] == [name.decode()]
    assert header_paths('diff --git "a/caf\\303\\251" "b/caf\\303\\251"') == ("café", "café")


def test_a_bundle_cut_inside_its_ref_list_is_refused(tmp_path, monkeypatch):
    """A bundle cut to its first 12.5% cloned "successfully" into an empty repository."""
    monkeypatch.setenv("SWE_ENVS_CACHE", str(tmp_path / "cache"))
    write_history(tmp_path / "src", [Commit(BASE, b"initial\n"), Commit({**BASE, b"a": b"1\n"}, b"more\n", [0])])
    repos = tmp_path / "repos"
    repos.mkdir()
    bundle = repos / "acme__widgets.bundle"
    subprocess.run(["git", "-C", str(tmp_path / "src"), "bundle", "create", "-q", str(bundle), "--all"], check=True)
    bundle.write_bytes(bundle.read_bytes()[: len(bundle.read_bytes()) // 8])
    with pytest.raises(InputError, match="cannot clone bundle"):
        find_repo(repos, "acme/widgets")
