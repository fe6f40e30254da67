"""Debian source packages as upstream trees (benchmarks/_debian_sources.py), without a mirror: the
tree as a one-commit repository (Debian's packaging dropped), apt's errors, the era of an upload,
orig tarballs, and which trees get Debian's patches."""

from __future__ import annotations

import subprocess
from pathlib import Path

from benchmarks import _debian_sources as bench


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


def _tarball(path, top, files, mtime=1_600_000_000):
    import io
    import tarfile

    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}" if top else name)
            info.size, info.mtime = len(data), mtime
            tar.addfile(info, io.BytesIO(data))


def test_orig_tarballs_are_the_upstream_tree_when_the_packaging_is_not_served(tmp_path):
    # the mirror served node-throttleit's orig tarballs but not its debian.tar.xz: apt-get source
    # left them (each checked against the signed index) and unpacked nothing
    where = tmp_path / "pkg"
    where.mkdir()
    (where / "node-throttleit_1.0.0+~1.0.0-2.dsc").write_text("Format: 3.0 (quilt)\n")
    _tarball(where / "node-throttleit_1.0.0+~1.0.0.orig.tar.gz", "package",
             {"package.json": "{}", "test/index.js": ""}, mtime=1_500_000_000)
    _tarball(where / "node-throttleit_1.0.0+~1.0.0.orig-types-throttleit.tar.gz", "types",
             {"index.d.ts": ""}, mtime=1_600_000_000)
    tree = bench.unpack_orig(where)
    assert tree == where / "node-throttleit-1.0.0+~1.0.0"
    assert sorted(str(p.relative_to(tree)) for p in tree.rglob("*") if p.is_file()) == [
        "package.json", "test/index.js", "types-throttleit/index.d.ts"]  # a component: its own directory
    assert bench.release_date(tree) == "2020-09-13T12:26:40+00:00"  # the newest file: the release
    # no main orig tarball (only the packaging, or nothing): no tree
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "rust-itoa_1.0.1-2.dsc").write_text("")
    assert bench.unpack_orig(empty) is None
    # a crate archive's normalised times say nothing of its release
    _tarball(tmp_path / "c.tar.gz", "fnv-1.0.7", {"lib.rs": ""}, mtime=0)
    subprocess.run(["tar", "-xf", str(tmp_path / "c.tar.gz"), "-C", str(tmp_path)], check=True)
    assert bench.release_date(tmp_path / "fnv-1.0.7") is None


def test_fetch_falls_back_to_the_orig_tarball(tmp_path, monkeypatch):
    # apt-get itself stands in only for the mirror: its partial result (a 404 on the packaging) is
    # what the real mirror gave for rust-fnv
    apt = bench.AptSource(tmp_path)
    real_run = subprocess.run

    def fake_run(cmd, cwd=None, **kw):
        if cmd[0] != "apt-get":
            return real_run(cmd, cwd=cwd, **kw)
        _tarball(Path(cwd) / "rust-fnv_1.0.7.orig.tar.gz", "fnv-1.0.7", {"Cargo.toml": "", "lib.rs": ""})
        (Path(cwd) / "rust-fnv_1.0.7-1.dsc").write_text("")
        return subprocess.CompletedProcess(cmd, 100, "", "E: Failed to fetch http://m/pool/main/r/rust-fnv/"
                                           "rust-fnv_1.0.7-1.debian.tar.xz  404  Not Found [IP: 192.0.2.1 80]\n")

    monkeypatch.setattr(bench.subprocess, "run", fake_run)
    tree, version, err = apt.fetch("rust-fnv")
    assert err == "" and version == "1.0.7-1" and (tree / "Cargo.toml").is_file()


def _source_package(where: Path, patched_test: str, upstream: str = "1.0.0") -> None:
    """A real 3.0 (quilt) source package made by dpkg-source: upstream's test.js, and a Debian
    patch that rewrites it (as node-ansi-regex's moves its tests from ava to tape)."""
    src = where / "build" / f"node-demo-{upstream}"
    (src / "debian" / "source").mkdir(parents=True)
    (src / "debian" / "patches").mkdir()
    (src / "test.js").write_text("import test from 'ava';\n")
    subprocess.run(["tar", "-czf", str(where / "build" / f"node-demo_{upstream}.orig.tar.gz"), "-C", str(where / "build"),
                    "--exclude=debian", f"node-demo-{upstream}"], check=True)
    (src / "debian" / "source" / "format").write_text("3.0 (quilt)\n")
    (src / "debian" / "control").write_text("Source: node-demo\nMaintainer: A <a@localhost>\n\n"
                                             "Package: node-demo\nArchitecture: all\nDescription: d\n d\n")
    (src / "debian" / "changelog").write_text(f"node-demo ({upstream}-1) unstable; urgency=medium\n\n  * New\n\n"
                                              " -- A <a@localhost>  Wed, 22 Sep 2021 08:56:34 +0200\n")
    (src / "debian" / "patches" / "tape.diff").write_text(
        "--- a/test.js\n+++ b/test.js\n@@ -1 +1 @@\n-import test from 'ava';\n+" + patched_test + "\n")
    (src / "debian" / "patches" / "series").write_text("tape.diff\n")
    subprocess.run(["dpkg-source", "-b", f"node-demo-{upstream}"], cwd=where / "build", check=True, capture_output=True)
    for p in (where / "build").iterdir():
        if p.is_file():
            p.rename(where / p.name)


def test_fetch_unpacks_without_debians_patches(tmp_path, monkeypatch):
    # only the download stands in for the mirror; dpkg-source is the real one
    import shutil

    if shutil.which("dpkg-source") is None:
        import pytest

        pytest.skip("dpkg-source (dpkg-dev) is not installed")
    made = tmp_path / "made"
    made.mkdir()
    _source_package(made, "const test = require('tape');")
    apt = bench.AptSource(tmp_path / "data")
    real_run = subprocess.run
    calls = []

    def fake_run(cmd, cwd=None, **kw):
        if cmd[0] != "apt-get":
            return real_run(cmd, cwd=cwd, **kw)
        calls.append(cmd)
        for p in made.iterdir():
            if p.is_file():
                shutil.copy(p, Path(cwd) / p.name)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(bench.subprocess, "run", fake_run)
    tree, version, err = apt.fetch("node-demo")
    assert err == "" and version == "1.0.0-1" and "--download-only" in calls[0]
    assert (tree / "test.js").read_text() == "import test from 'ava';\n"  # upstream's, not Debian's patch
    assert (tree / "debian" / "changelog").is_file() and not (tree / ".pc").exists()
    assert bench.upload_date(tree) == "2021-09-22T08:56:34+02:00"
    repo = tmp_path / "repo"
    commit = bench.as_repo(tree, repo)
    # a tree unpacked by an older run with the patches applied is unpacked again, and its
    # repository made again
    (tree / "test.js").write_text("const test = require('tape');\n")
    (tree.parent / bench.UNPATCHED).unlink()
    tree, _, _ = apt.fetch("node-demo")
    assert (tree / "test.js").read_text() == "import test from 'ava';\n" and len(calls) == 1  # no new download
    assert bench.as_repo(tree, repo) == commit
    (tree / "test.js").write_text("changed\n")
    assert bench.as_repo(tree, repo) != commit


def test_a_repacked_orig_is_unpacked_with_debians_patches(tmp_path, monkeypatch):
    """+dfsg/+ds: Debian removed files from upstream's tarball (yaml-cpp's vendored googletest),
    and its patches are what make the rest build; such a tree is unpacked with them."""
    import shutil

    if shutil.which("dpkg-source") is None:
        import pytest

        pytest.skip("dpkg-source (dpkg-dev) is not installed")
    made = tmp_path / "made"
    made.mkdir()
    _source_package(made, "const test = require('tape');", upstream="1.0.0+dfsg")
    real_run = subprocess.run

    def fake_run(cmd, cwd=None, **kw):  # only the download stands in for the mirror
        if cmd[0] != "apt-get":
            return real_run(cmd, cwd=cwd, **kw)
        for p in made.iterdir():
            if p.is_file():
                shutil.copy(p, Path(cwd) / p.name)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(bench.subprocess, "run", fake_run)
    tree, version, err = bench.AptSource(tmp_path / "data").fetch("node-demo")
    assert err == "" and version == "1.0.0+dfsg-1"
    assert (tree / "test.js").read_text() == "const test = require('tape');\n"  # Debian's patch applied
