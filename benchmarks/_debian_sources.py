"""Debian source packages as upstream trees: ``apt-get source`` through a private apt root, unpacked
without Debian's patches, each tree a one-commit git repository with the era of its upload.

Shared by ``swe_langs_debian.py`` (8 languages) and ``swe_py_eras.py``; see the former for why the
trees are upstream's and when Debian's patches are applied after all (repacked orig tarballs).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

# the packaging (and quilt's state, in trees unpacked with patches) are Debian's, not upstream's
NOT_UPSTREAM = ("debian", ".pc")


# -- fetching ----------------------------------------------------------------------------------
KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
SUITE = "bookworm"  # the toolchain images' suite; the mirror is the one the host's apt uses


class AptSource:
    """``apt-get source`` through a private apt root made of the host's own Debian mirror."""

    def __init__(self, root: Path):
        self.root = root

    def _opts(self) -> list[str]:
        r = self.root / "apt"
        return ["-o", f"Dir::Etc::sourcelist={r / 'sources.list'}", "-o", f"Dir::Etc::sourceparts={r / 'sources.list.d'}",
                "-o", f"Dir::State::Lists={r / 'lists'}", "-o", f"Dir::Cache={r / 'cache'}"]

    def ready(self) -> str | None:
        """Why deb-src is unavailable, or None (``apt-get update`` once per day of cache)."""
        r = self.root / "apt"
        stamp = r / "updated"
        if stamp.is_file() and time.time() - stamp.stat().st_mtime < 86400:
            return None
        from swe_envs.docker_setup import apt_mirror

        try:
            uri = apt_mirror(SUITE)
        except Exception as err:
            return f"no Debian mirror for deb-src: {err}"
        for d in ("lists/partial", "cache/archives/partial", "sources.list.d"):
            (r / d).mkdir(parents=True, exist_ok=True)
        (r / "sources.list").write_text(f"deb-src [signed-by={KEYRING}] {uri} {SUITE} main\n")
        proc = subprocess.run(["apt-get", *self._opts(), "update"], capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            return f"apt-get update (deb-src) failed: {proc.stderr.strip()[-300:]}"
        stamp.write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        return None

    def fetch(self, package: str) -> tuple[Path | None, str, str]:
        """(unpacked upstream tree, version, error): cached under ``root/pkg/<package>``. Debian's
        patches are not applied (``dpkg-source -x --skip-patches``): the tree is upstream's."""
        where = self.root / "pkg" / package
        trees = [p for p in where.glob("*") if p.is_dir() and not p.name.startswith(".")] if where.is_dir() else []
        marker = where / UNPATCHED
        if trees and not (marker.is_file() and marker.read_text() == UNPACK_POLICY):
            # unpacked by an earlier version of this benchmark, under another patch policy
            for tree in trees:
                shutil.rmtree(tree)
            trees = []
        if not trees:
            if not any(where.glob("*.dsc")) and not any(_ORIG.match(p.name) for p in where.glob("*.tar.*")):
                shutil.rmtree(where, ignore_errors=True)
                where.mkdir(parents=True)
                proc = subprocess.run(["apt-get", *self._opts(), "source", "--download-only", package], cwd=where,
                                      capture_output=True, text=True, timeout=900)
                apt_said = proc.stderr or proc.stdout
            else:
                apt_said = "apt-get source: nothing usable in the cache"
            tree = unpack_upstream(where)
            if tree is None:
                shutil.rmtree(where, ignore_errors=True)
                return None, "", fetch_error(apt_said)
            marker.write_text(UNPACK_POLICY)
            trees = [tree]
        dsc = next(iter(sorted(where.glob("*.dsc"))), None)
        version = dsc.stem.split("_", 1)[1] if dsc else ""
        return trees[0], version, ""


# marks a package directory whose tree was unpacked under UNPACK_POLICY
UNPATCHED = ".unpacked-without-debian-patches"
UNPACK_POLICY = ("dpkg-source -x --skip-patches, patches applied only to repacked (+dfsg/+ds) orig tarballs; "
                 "or the orig tarballs alone\n")
# a repacked orig tarball: Debian removed files from upstream's (vendored copies, non-free parts)
_REPACKED = re.compile(r"^Version:\s*(?:\d+:)?[^-\s]*[+~](?:dfsg|ds)", re.M)


def unpack_upstream(where: Path) -> Path | None:
    """The upstream tree of the downloaded source package, Debian's quilt patches not applied
    (``debian/`` itself is unpacked, for its changelog, and left out of the repository later); the
    orig tarballs alone when the mirror did not serve Debian's packaging; None without either."""
    dsc = next(iter(sorted(where.glob("*.dsc"))), None)
    if dsc is not None:
        fmt = re.search(r"^Format:\s*(\S+)", dsc.read_text(errors="replace"), re.M)
        # format 1.0's diff patches upstream files in place: only the orig tarball is upstream's
        if fmt and fmt.group(1) != "1.0":
            before = {p for p in where.iterdir() if p.is_dir()}
            # a repacked tree is not upstream's either, and Debian's patches are what make it build
            # without what was removed (yaml-cpp 0.7.0+dfsg, fmtlib 9.1.0+ds1: the vendored googletest
            # gone, the patches point CMake at the system's); any other tree: upstream's, unpatched
            repacked = bool(_REPACKED.search(dsc.read_text(errors="replace")))
            proc = subprocess.run(["dpkg-source", "-x", *([] if repacked else ["--skip-patches"]), dsc.name], cwd=where,
                                  capture_output=True, text=True, timeout=600)
            made = [p for p in where.iterdir() if p.is_dir() and p not in before and not p.name.startswith(".")]
            if proc.returncode == 0 and made:
                return made[0]
            for p in made:
                shutil.rmtree(p, ignore_errors=True)
    return unpack_orig(where)


_ORIG = re.compile(r"^(?P<src>[^_]+)_(?P<ver>[^_]+)\.orig(?:-(?P<component>[A-Za-z0-9-]+))?\.tar\.(?:gz|xz|bz2)$")


def unpack_orig(where: Path) -> Path | None:
    """The upstream tree from the orig tarball and its components (``dpkg-source``'s layout:
    a component's tarball unpacks into a directory named after it), without Debian's packaging;
    None when the main orig tarball is not there."""
    origs = {m["component"]: (p, m) for p in sorted(where.iterdir()) if (m := _ORIG.match(p.name))}
    if None not in origs:
        return None
    main, m = origs.pop(None)
    tree = where / f"{m['src']}-{m['ver'].split(':')[-1]}"
    for part, (tarball, _) in [(None, (main, m)), *sorted(origs.items())]:
        dest = tree if part is None else tree / part
        tmp = where / f".unpack-{part or 'main'}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        subprocess.run(["tar", "-xf", str(tarball), "-C", str(tmp), "--no-same-owner"], check=True,
                       capture_output=True)
        entries = list(tmp.iterdir())
        # a tarball holds one top directory (usually) or the files themselves
        top = entries[0] if len(entries) == 1 and entries[0].is_dir() else tmp
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(dest, ignore_errors=True)
        top.rename(dest)
        shutil.rmtree(tmp, ignore_errors=True)
    return tree


def fetch_error(apt_output: str) -> str:
    """apt's reason, without the mirror's address: the files it could not get, or its last error."""
    missing = re.findall(r"Failed to fetch \S+/([^/\s]+)\s+(\d{3}[^[\n]*)", apt_output)
    if missing:
        return "the mirror does not serve " + ", ".join(f"{name} ({why.strip()})" for name, why in missing)
    errors = [ln[3:] for ln in apt_output.splitlines() if ln.startswith("E: ")]
    return "apt-get source failed: " + re.sub(r"\w+://\S+", "<mirror>", (errors or [apt_output.strip()])[-1])[:300]


def upload_date(tree: Path) -> str | None:
    """The date of the Debian upload of this version (its changelog's first entry), ISO 8601."""
    from email.utils import parsedate_to_datetime

    changelog = tree / "debian" / "changelog"
    text = changelog.read_text(errors="replace") if changelog.is_file() else ""
    m = re.search(r"^ -- .+?>  (.+)$", text, re.M)
    try:
        return parsedate_to_datetime(m.group(1).strip()).isoformat() if m else None
    except (TypeError, ValueError):
        return None


def release_date(tree: Path) -> str | None:
    """Without Debian's changelog (only the orig tarball served): the upstream release's date,
    the newest file time in its tree (tar keeps them), ISO 8601 UTC."""
    from datetime import UTC, datetime

    times = [p.lstat().st_mtime for p in tree.rglob("*") if p.is_file() and not p.is_symlink()]
    # 1980-01-02 and earlier: a zeroed or normalised time (crate archives, reproducible builds)
    times = [t for t in times if t > 315_619_200]
    return datetime.fromtimestamp(max(times), UTC).isoformat() if times else None


def as_repo(tree: Path, dest: Path) -> str:
    """The upstream tree as a git repository of one commit (fixed identity and date); its commit.
    Made again when the tree changed since (a re-unpacked tree: the digest of its files' names,
    sizes and times is kept in the repository's ``.git``)."""
    digest = tree_digest(tree)
    stamp = dest / ".git" / "swe-upstream-tree"
    if not (stamp.is_file() and stamp.read_text() == digest):
        tmp = dest.with_name(dest.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(tree, tmp, symlinks=True, ignore=lambda d, names: [n for n in names if Path(d) == tree
                                                                           and n in NOT_UPSTREAM])
        env = {**os.environ, "GIT_AUTHOR_NAME": "upstream", "GIT_AUTHOR_EMAIL": "upstream@localhost",
               "GIT_COMMITTER_NAME": "upstream", "GIT_COMMITTER_EMAIL": "upstream@localhost",
               "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z"}
        for cmd in (["git", "init", "-q", "-b", "main"], ["git", "add", "-f", "-A"],
                    ["git", "commit", "-q", "--no-gpg-sign", "-m", f"upstream tree of {tree.name}"]):
            subprocess.run(cmd, cwd=tmp, check=True, capture_output=True, env=env)
        (tmp / ".git" / "swe-upstream-tree").write_text(digest)
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=dest, check=True, capture_output=True,
                          text=True).stdout.strip()


def tree_digest(tree: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    for p in sorted(tree.rglob("*")):
        rel = p.relative_to(tree)
        if rel.parts[0] in NOT_UPSTREAM or not (p.is_file() or p.is_symlink()):
            continue
        st = p.lstat()
        h.update(f"{rel}\0{st.st_size}\0{int(st.st_mtime)}\n".encode())
    return h.hexdigest()
