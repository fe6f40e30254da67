"""Fuzzing the readers of git histories: the miner's scan (``git log``), PR diffs (``git diff``
parsed per file), relevant files (blobs at the base), task repositories (snapshots, archives,
diffs, patch checks) and repositories handed over as bundles.

Histories are written object by object (tests/reliability/gitobjects.py) so they hold what
porcelain refuses: messages with NUL / \\x1e / undecodable bytes and bogus ``encoding`` headers,
ident lines without a usable date, PR numbers past int64, file names with newlines, quotes,
tabs or latin-1 bytes, binary and latin-1 contents, huge commits (thousands of lines, huge
messages). Properties: nothing raises but a categorical ``GitError``/``PatchProblem``/``InputError``;
every commit is listed once; every PR commit gives exactly one pull record; every row the miner
writes is valid UTF-8 Arrow; a diff git made applies to its own base.
"""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.errors import InputError
from swe_envs.diff import parse_diff, patch_paths
from swe_envs.git import GitError, GitRepo, RepoCache
from swe_envs.mining.config import MiningConfig, PatchFilterConfig, RelevantFilesConfig
from swe_envs.mining.git_history import _log
from swe_envs.mining.patches import Patch, PatchProblem, obtain_patch, patch_problem
from swe_envs.mining.refs import pr_number_from_commit
from swe_envs.mining.relevant_files import select_relevant_files
from swe_envs.mining.stages import EXTRACT_SCHEMA, MineUnit, safe_extract_rows, to_batch
from swe_envs.repos import Snapshot, check_patches, diff, find_repo
from tests.reliability.gitobjects import Commit, write_history
from tests.reliability.ledger import LEDGER, fuzz_settings
from tests.reliability.strategies import RAW

AREA = "git histories"
CFG = MiningConfig()

# names a real tree can hold (no NUL, no "/", not "." / ".." / ".git")
ODD_NAMES = [b"with space.py", b"tab\there.py", b"new\nline.py", b'quo"te.py', b"caf\xe9.py", "日本.py".encode(),
             b"\xff\xfe.bin", b"-dash.py", b"back\\slash.py", b"\x1b[31mred.py", b"trailing ", b"x" * 200]
PLAIN_NAMES = [b"src", b"pkg", b"tests", b"util.py", b"test_util.py", b"README.md", b"main.go", b"lib.rs"]
NAME = (st.sampled_from(PLAIN_NAMES) | st.sampled_from(ODD_NAMES)
        | st.binary(min_size=1, max_size=8).filter(lambda b: b"\0" not in b and b"/" not in b
                                                   and b not in (b".", b"..", b".git")))
PATH = st.lists(NAME, min_size=1, max_size=3).map(b"/".join)
LINES = st.lists(st.text(max_size=40), max_size=20).map(lambda ls: "\n".join(ls).encode("utf-8", "surrogatepass"))
CONTENT = st.one_of(
    LINES,                                                     # text, lone surrogates as invalid UTF-8
    LINES.map(lambda b: b.replace(b"\n", b"\r\n")),            # CRLF
    st.binary(max_size=300).map(lambda b: b + b"\0"),          # binary (NUL: git says "Binary files")
    st.text(max_size=60).map(lambda t: t.encode("latin-1", "replace")),
    st.integers(min_value=3_100, max_value=12_000).map(lambda n: b"line\n" * n),  # a huge commit
)
# commit messages: PR subjects the miner recognises, around hostile bodies
PR_NUMBER = st.integers(min_value=1, max_value=999) | st.sampled_from([0, 2**63, 10**30])
BODY = st.one_of(
    st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")),
    RAW,                                                       # NUL, \x1e, undecodable bytes
    st.sampled_from([b"Fixes #3\n", b"closes acme/other#9", b"Fixes #99999999999999999999", b"\x1e\x00\x1e"]),
    st.integers(min_value=10_000, max_value=300_000).map(lambda n: b"m" * n),  # huge message
)
ENCODING = st.sampled_from([None, None, b"ISO-8859-1", b"UTF-16", b"SHIFT_JIS", b"UTF-7", b"bogus-enc", b""])
IDENT = st.sampled_from([
    b"A U Thor <a@example.org> 1600000000 +0000", b"A U Thor <a@example.org> 1600000000 +0000",
    b"No Date <n@example.org>", b"Huge <h@example.org> 99999999999999999999 +0000",
    b"Odd <o@example.org> -5 +9999", b"<> 0 +0000", b"\xff\xfe <\x1e@x> 1 +0000", b"A <a@b> 1600000000",
])


@st.composite
def changed(draw, files: dict[bytes, bytes]) -> dict[bytes, bytes]:
    out = dict(files)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        op = draw(st.sampled_from(["add", "modify", "delete", "rename"]))
        if op == "add" or not out:
            out[draw(PATH)] = draw(CONTENT)
            continue
        path = draw(st.sampled_from(sorted(out)))
        if op == "modify":
            out[path] = draw(CONTENT)
        elif op == "delete" and len(out) > 1:
            del out[path]
        elif op == "rename":
            out[draw(PATH)] = out.pop(path)
    return out


@st.composite
def history(draw) -> tuple[list[Commit], int]:
    """A mainline of 2..6 commits: plain ones, squash-merged PRs and merge commits of a branch."""
    base = {b"src/util.py": b"def f():\n    return 1\n", b"tests/test_util.py": b"def test_f():\n    pass\n"}
    commits = [Commit(draw(changed(base)), b"initial\n")]
    head, faults = 0, 0

    def odd(c: Commit) -> Commit:
        nonlocal faults
        c.encoding, c.ident = draw(ENCODING), draw(IDENT)
        faults += (c.encoding is not None) + (not c.ident.endswith(b"1600000000 +0000"))
        return c

    for _ in range(draw(st.integers(min_value=1, max_value=5))):
        kind = draw(st.sampled_from(["plain", "squash", "merge", "merge"]))
        body, n = draw(BODY), draw(PR_NUMBER)
        faults += 1
        files = draw(changed(commits[head].files))
        if kind == "plain":
            commits.append(odd(Commit(files, b"Change things\n\n" + body, [head])))
        elif kind == "squash":
            commits.append(odd(Commit(files, b"Fix the thing (#%d)\n\n" % n + body, [head])))
        else:  # a branch commit off the mainline, then the merge commit bringing it in
            commits.append(odd(Commit(files, b"work on branch\n\n" + draw(BODY), [head])))
            merge_files = draw(changed(files)) if draw(st.booleans()) else files
            subject = draw(st.sampled_from([b"Merge pull request #%d from someone/branch", b"Auto merge of #%d - x"]))
            commits.append(odd(Commit(merge_files, subject % n + b"\n\n" + body, [head, len(commits) - 1])))
        head = len(commits) - 1
    return commits, faults


def _git(path: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(path), *args], capture_output=True, check=True).stdout


def _check_patch(patch: Patch, repo: GitRepo) -> None:
    """A diff read from git: its files are git's files, it writes as UTF-8 JSON, its base is readable."""
    json.dumps(patch.to_json(), ensure_ascii=False).encode("utf-8")
    names = [n for n in _git(Path(repo.path), "diff", "--name-only", "-z", "-M", patch.base_commit,
                              patch.target_commit).split(b"\0") if n]
    assert len(patch.files) == len(names), (len(patch.files), names)
    patch_problem(patch, PatchFilterConfig(binary="drop"))
    try:
        select_relevant_files(repo, patch.base_commit, patch.files, "fix util tests", RelevantFilesConfig())
    except GitError as err:
        assert err.reason


@pytest.mark.area(AREA)
@pytest.mark.timeout(600)
@fuzz_settings(ci_examples=12, long_examples=250)
@given(hist=history(), origin=st.sampled_from([None, "https://github.com/acme/widgets.git"]))
def test_mining_a_hostile_history_accounts_for_every_commit(hist, origin):
    commits, faults = hist
    with tempfile.TemporaryDirectory(prefix="fuzz-git-") as tmp:
        root = Path(tmp)
        shas = write_history(root / "acme" / "widgets", commits, origin)
        path = root / "acme" / "widgets"
        listed = _log(GitRepo(path), "--all")
        assert sorted(c[0] for c in listed) == sorted(set(shas)), "a commit was lost or split"
        expected_pulls = sum(pr_number_from_commit(c[4].partition("\n")[0], len(c[1])) is not None for c in listed)
        unit = MineUnit(kind="git", path=str(path), root=str(root), prefix="git:acme/widgets")
        rows = list(safe_extract_rows(unit, CFG))
        to_batch(rows, EXTRACT_SCHEMA)  # what the job writes: valid UTF-8, numbers within int64
        bad = [r for r in rows if r.get("reason")]
        pulls = [r for r in rows if r.get("kind") == "pull"]
        assert not bad, [(r["reason"], r["metadata"][:300]) for r in bad]
        lost = expected_pulls - len(pulls)
        LEDGER.add(AREA, tried=len(set(shas)), faults=faults, lost=abs(lost))
        assert lost == 0, (expected_pulls, len(pulls))
        with RepoCache() as repos:
            for row in pulls:
                try:
                    patch = obtain_patch(json.loads(row["payload"]), None, CFG.patch_filter, repos)
                except PatchProblem as err:
                    assert err.reason in {"diff_too_large", "too_many_files", "commit_missing", "git_timeout"}
                    continue
                _check_patch(patch, repos.get(str(path)))


@pytest.mark.area(AREA)
@pytest.mark.timeout(600)
@fuzz_settings(ci_examples=10, long_examples=200)
@given(hist=history())
def test_task_repository_reads_of_a_hostile_history(hist):
    """What environments read (swe_envs/repos.py): every file listed and readable, the archive
    holds every file, the diff names every changed path and applies to its base."""
    commits, faults = hist
    with tempfile.TemporaryDirectory(prefix="fuzz-git-") as tmp:
        path = Path(tmp) / "r"
        shas = write_history(path, commits)
        new, old = shas[-1], shas[commits[-1].parents[0]]
        snap = Snapshot(path, new)
        blobs = [e for e in _git(path, "ls-tree", "-r", "-z", new).split(b"\0") if e]
        assert len(snap.files) == len(blobs)
        for f in snap.files:
            snap.read(f)
        with tarfile.open(fileobj=io.BytesIO(snap.archive()), mode="r:") as tar:
            assert sum(m.isfile() for m in tar.getmembers()) == len(blobs)
        text = diff(path, old, new)
        json.dumps(text, ensure_ascii=False).encode("utf-8")  # what an instance stores
        changed_paths = [n for n in _git(path, "diff", "--name-only", "-z", old, new).split(b"\0") if n]
        got = patch_paths(text)
        assert len(got) == len(changed_paths), (got, changed_paths)
        why = check_patches(path, old, [("patch", text)])
        raw = _git(path, "diff", "--binary", "--full-index", old, new)
        # all UTF-8: it must apply, except where git cannot read its own header back (a new empty
        # file whose name holds a space: no ---/+++ lines to disambiguate "a/x b/x"); otherwise a
        # reason, never a crash
        ambiguous = any(" " in f.path and "\n--- " not in f.text and "GIT binary patch" not in f.text
                        for f in parse_diff(text))
        if raw == text.encode("utf-8") and not ambiguous:
            assert why is None, why
        else:
            assert why is None or "does not apply" in why
        LEDGER.add(AREA, tried=1, faults=faults)


@pytest.mark.area(AREA)
@pytest.mark.timeout(600)
@fuzz_settings(ci_examples=8, long_examples=120)
@given(hist=history(), damage=st.sampled_from(["none", "none", "cut", "flip", "garbage"]),
       where=st.floats(min_value=0.0, max_value=0.999))
def test_bundles_clone_whole_or_are_refused(hist, damage, where, monkeypatch):
    commits, _ = hist
    with tempfile.TemporaryDirectory(prefix="fuzz-git-") as tmp:
        tmp = Path(tmp)
        monkeypatch.setenv("SWE_ENVS_CACHE", str(tmp / "cache"))
        shas = write_history(tmp / "src", commits)
        repos = tmp / "repos"
        repos.mkdir()
        bundle = repos / "acme__widgets.bundle"
        _git(tmp / "src", "bundle", "create", "-q", str(bundle), "--all")
        blob = bytearray(bundle.read_bytes())
        at = int(where * len(blob))
        if damage == "cut":
            blob = blob[:at]
        elif damage == "flip":
            blob[at] ^= 0xFF
        elif damage == "garbage":
            blob = bytearray(b"# v2 git bundle\n" + bytes(blob[at:at + 64]))
        bundle.write_bytes(bytes(blob))
        try:
            clone = find_repo(repos, "acme/widgets")
        except InputError as err:
            assert damage != "none", err
            LEDGER.add(AREA, tried=1, faults=1)
            return
        got = set(_git(clone, "rev-list", "--all").split())
        # a damaged bundle that still clones must hold the whole history, never part of it
        assert got == set(s.encode() for s in shas), (damage, len(got), len(set(shas)))
        LEDGER.add(AREA, tried=1, faults=int(damage != "none"))
