"""Real upstream changes as SWE instances: two consecutive releases of a Python project.

A project's sdist at release A is the base commit; its sdist at the next release B is the fix. The
difference is split as SWE-bench splits a pull request: the files under the project's tests
(``swe_envs.paths.is_test_path``, the rule mining and validation use) are the test patch, every
other text file is the gold patch; packaging metadata that only the sdist tool
writes (PKG-INFO, ``*.egg-info``) is left out of both, and so are binary files (a diff cannot
carry them). The instance's date is B's upload time (its era), its problem statement names the
release. Nothing here was written for these tests: code, tests and dates are upstream's.

Used where the validation pipeline needs many *distinct* real repositories (the load run: the 20
SWE-bench instances of ../shared/swe-real plus these); a pair whose tests did not change in a way
that fails on A and passes on B is a counted validation failure with its reason, as it would be for
any mined instance.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from samples.swe_envs.pypi_sdists import fetch_sdist, unpack
from samples.swe_mine.gitrepo import git
from swe_envs.paths import is_test_path

# (project, release A, release B): bug-fix or minor releases, none of them a project of
# ../shared/swe-real (pytest, flask), chosen before the first run (2026-12-03)
# (the first choice's cachetools 2.0.1, Werkzeug 0.14.1, itsdangerous 0.24 and pyasn1 0.4.2 changed
# no test file in their sdists: replaced by more-itertools, packaging, mccabe and pyflakes, plus toolz)
PAIRS = [
    ("six", "1.10.0", "1.11.0"), ("idna", "2.7", "2.8"), ("click", "6.6", "6.7"),
    ("simplejson", "3.7.3", "3.8.0"), ("wcwidth", "0.1.6", "0.1.7"), ("jsonschema", "2.5.1", "2.6.0"),
    ("tqdm", "4.44.1", "4.45.0"), ("python-dateutil", "2.6.0", "2.6.1"), ("attrs", "17.3.0", "17.4.0"),
    ("MarkupSafe", "0.23", "1.0"), ("requests", "2.23.0", "2.24.0"), ("more-itertools", "4.2.0", "4.3.0"),
    ("packaging", "19.0", "19.1"), ("mccabe", "0.6.0", "0.6.1"), ("pyflakes", "2.1.0", "2.1.1"),
    ("toolz", "0.9.0", "0.10.0"),
]

_METADATA = re.compile(r"(^|/)PKG-INFO$|\.egg-info(/|$)")


def _git(repo: Path, *args: str, date: str = "2000-01-01T00:00:00Z") -> str:
    return git(repo, *args, when=date, author="upstream")


def _replace_tree(repo: Path, tree: Path) -> None:
    for child in repo.iterdir():
        if child.name != ".git":
            shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
    for child in tree.iterdir():
        dest = repo / child.name
        shutil.copytree(child, dest, symlinks=True) if child.is_dir() and not child.is_symlink() \
            else shutil.copy2(child, dest, follow_symlinks=False)


def changed_text_files(repo: Path, a: str, b: str) -> list[str]:
    """Paths that differ between commits A and B as text (``--numstat`` prints ``-`` for binary)."""
    out = []
    for line in _git(repo, "diff", "--no-renames", "--numstat", a, b).splitlines():
        added, removed, path = line.split("\t", 2)
        if added != "-" and removed != "-" and not _METADATA.search(path):
            out.append(path)
    return out


def make_instance(name: str, old: str, new: str, sdists: Path, trees: Path, repos: Path) -> dict:
    """``repos/pypi/<name>`` as a git repository of two commits (release OLD, then NEW); the instance."""
    a_sdist, b_sdist = fetch_sdist(name, old, sdists), fetch_sdist(name, new, sdists)
    a_tree, b_tree = unpack(a_sdist, trees), unpack(b_sdist, trees)
    repo = repos / "pypi" / name.lower()
    shutil.rmtree(repo, ignore_errors=True)
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    _replace_tree(repo, a_tree)
    _git(repo, "add", "-f", "-A")
    _git(repo, "commit", "-q", "--no-gpg-sign", "-m", f"{name} {old}", date=a_sdist.uploaded or "2000-01-01T00:00:00Z")
    base = _git(repo, "rev-parse", "HEAD").strip()
    _replace_tree(repo, b_tree)
    _git(repo, "add", "-f", "-A")
    _git(repo, "commit", "-q", "--no-gpg-sign", "--allow-empty", "-m", f"{name} {new}",
         date=b_sdist.uploaded or "2000-01-01T00:00:00Z")
    head = _git(repo, "rev-parse", "HEAD").strip()
    files = changed_text_files(repo, base, head)
    tests = [f for f in files if is_test_path(f)]
    code = [f for f in files if not is_test_path(f)]

    def diff(paths: list[str]) -> str:
        return _git(repo, "diff", "--no-renames", base, head, "--", *paths) if paths else ""

    return {
        "instance_id": f"pypi__{name.lower()}-{new}", "repo": f"pypi/{name.lower()}", "base_commit": base,
        "problem_statement": f"The changes of {name} {new} over {old} (upstream release of {b_sdist.uploaded[:10]}).",
        "hints_text": "", "patch": diff(code), "test_patch": diff(tests), "created_at": b_sdist.uploaded,
        "version": old, "environment_setup_commit": base, "FAIL_TO_PASS": "[]", "PASS_TO_PASS": "[]",
    }


def build_release_pairs(root: Path, pairs: list[tuple[str, str, str]] = PAIRS, log: Callable[[str], None] = print,
                        sdists: Path | None = None) -> dict[str, Path]:
    """``root/instances.jsonl`` (one instance per pair) and ``root/repos``; sdists cached in ``sdists``
    (default ``root/sdists``). A release that cannot be fetched is an error naming it (the list is
    fixed, not sampled)."""
    rows = []
    for i, (name, old, new) in enumerate(pairs, 1):
        log(f"release pair {i}/{len(pairs)}: {name} {old} -> {new}")
        rows.append(make_instance(name, old, new, sdists or root / "sdists", root / "trees", root / "repos"))
    out = root / "instances.jsonl"
    tmp = out.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tmp.replace(out)
    return {"instances": out, "repos": root / "repos"}
