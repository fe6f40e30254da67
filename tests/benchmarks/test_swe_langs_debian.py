"""The Debian upstream-projects benchmark's own logic, without Docker or a mirror: the upstream
tree as a one-commit repository (Debian's packaging dropped) and the parse-vs-summary check."""

from __future__ import annotations

import subprocess

from benchmarks import swe_langs_debian as bench
from swe_envs.envs.parsers import parse_log

CARGO_OK = """running 2 tests
test a ... ok
test b ... ignored

test result: ok. 1 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out
"""


def test_upstream_tree_becomes_one_commit_without_debian(tmp_path):
    tree = tmp_path / "pkg-1.0"
    (tree / "debian").mkdir(parents=True)
    (tree / "debian" / "control").write_text("Source: pkg\n")
    (tree / ".pc").mkdir()
    (tree / "src").mkdir()
    (tree / "src" / "a.c").write_text("int a;\n")
    (tree / "configure").write_text("#!/bin/sh\n")
    (tree / ".gitignore").write_text("configure\n")  # released trees ship what upstream's git ignores
    (tree / "src" / "debian").mkdir()
    (tree / "src" / "debian" / "keep.txt").write_text("only the top-level packaging is Debian's\n")
    commit = bench.as_repo(tree, tmp_path / "repo")
    files = subprocess.run(["git", "ls-tree", "-r", "--name-only", commit], cwd=tmp_path / "repo",
                           capture_output=True, text=True, check=True).stdout.split()
    assert sorted(files) == [".gitignore", "configure", "src/a.c", "src/debian/keep.txt"]
    assert bench.as_repo(tree, tmp_path / "repo") == commit  # cached, same commit


def test_summary_check_compares_parse_with_the_runners_counts():
    match, tallies = bench.summary_check(parse_log("cargo", CARGO_OK))
    assert match is True and tallies["parsed"] == {"passed": 1, "failed": 0, "skipped": 1}
    # a test line the parser missed: the runner's own count disagrees
    match, tallies = bench.summary_check(parse_log("cargo", CARGO_OK.replace("test b ... ignored\n", "")))
    assert match is False and tallies["summary"] == {"passed": 1, "failed": 0, "skipped": 1}
    # a runner whose summary states no counts (go test): nothing to compare, said as such
    match, tallies = bench.summary_check(parse_log("go-test", "--- PASS: TestA (0.00s)\nok  \tm\t0.01s\n"))
    assert match is None and tallies["summary"] is None


def test_fetch_error_names_the_missing_files_not_the_mirror():
    out = ("E: Failed to fetch http://mirror.example/debian/pool/main/r/rust-itoa/rust-itoa_1.0.1.orig.tar.gz  "
           "404  Not Found [IP: 192.0.2.1 80]\nE: Failed to fetch some archives.\n")
    assert bench.fetch_error(out) == "the mirror does not serve rust-itoa_1.0.1.orig.tar.gz (404  Not Found)"
    assert bench.fetch_error("E: Unable to find a source package for nope\n") == (
        "apt-get source failed: Unable to find a source package for nope")
    assert "mirror.example" not in bench.fetch_error("E: Could not connect to http://mirror.example/debian\n")


def test_era_date_is_the_debian_upload(tmp_path):
    (tmp_path / "debian").mkdir()
    (tmp_path / "debian" / "changelog").write_text(
        "node-ansi-regex (5.0.1-1) unstable; urgency=medium\n\n  * New upstream version\n\n"
        " -- Yadd <yadd@debian.org>  Wed, 22 Sep 2021 08:56:34 +0200\n\n"
        "node-ansi-regex (5.0.0-1) unstable; urgency=medium\n\n  * Old\n\n"
        " -- Yadd <yadd@debian.org>  Mon, 01 Mar 2021 10:00:00 +0100\n")
    assert bench.upload_date(tmp_path) == "2021-09-22T08:56:34+02:00"
    assert bench.upload_date(tmp_path / "nowhere") is None
