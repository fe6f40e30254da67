"""Reading task repositories (local git clones, bare or not) at a commit, without checkouts.

Everything is read from git objects: the file list and contents at a commit (for language
detection and recipes), ``git archive`` for an image's build context, the diff between the
environment commit and a task's base commit, and patch checks against a temporary index
(``git apply --cached``), so a patch that does not apply is caught before any container runs.
"""

from __future__ import annotations

import io
import os
import tempfile
from functools import cached_property
from pathlib import Path

from core.errors import InputError
from swe_envs.git import GitFailure, git


def find_repo(repos_dir: Path, repo: str) -> Path:
    """``owner/name`` under DIR as a clone ``owner/name``, ``owner__name`` or ``name`` (first that exists),
    else a git bundle ``owner__name.bundle`` / ``owner/name.bundle``, cloned once into a cache."""
    owner, _, name = repo.partition("/")
    for cand in (repos_dir / owner / name, repos_dir / f"{owner}__{name}", repos_dir / (name or owner)):
        if (cand / ".git").exists() or (cand / "HEAD").is_file():
            return cand
    for bundle in (repos_dir / f"{owner}__{name}.bundle", repos_dir / owner / f"{name}.bundle"):
        if bundle.is_file():
            return clone_bundle(bundle, repo)
    raise InputError(f"repository {repo} not found under {repos_dir} (as {owner}/{name}, {owner}__{name} "
                     f"or {owner}__{name}.bundle)")


def bundle_cache() -> Path:
    return Path(os.environ.get("SWE_ENVS_CACHE") or Path.home() / ".cache" / "swe_envs") / "bundles"


def clone_bundle(bundle: Path, repo: str) -> Path:
    """A bare clone of ``bundle`` (read-only inputs stay untouched), keyed by its path, size and mtime."""
    import fcntl
    import hashlib
    import shutil

    st = bundle.stat()
    key = hashlib.sha256(f"{bundle.resolve()}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:16]
    dest = bundle_cache() / key / repo.replace("/", "__")
    if (dest / "HEAD").is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two workers asking for one bundle clone it once
        if not (dest / "HEAD").is_file():
            tmp = dest.with_name(dest.name + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            try:
                # a bundle cut inside its ref list clones "successfully" into an empty or partial
                # repository: every ref it lists must come out, and it must list one
                heads = [ln.split()[0] for ln in git(dest.parent, "bundle", "list-heads", str(bundle))
                         .decode("utf-8", "replace").splitlines() if ln.strip()]
                if not heads:
                    raise GitFailure("it lists no refs (truncated or not a bundle)")
                git(dest.parent, "clone", "--bare", "--quiet", str(bundle), str(tmp))
                for head in dict.fromkeys(heads):
                    try:
                        git(tmp, "cat-file", "-e", head)
                    except GitFailure:
                        raise GitFailure(f"listed commit {head[:12]} is missing from the clone") from None
            except GitFailure as err:
                shutil.rmtree(tmp, ignore_errors=True)
                raise InputError(f"cannot clone bundle {bundle}: {str(err)[-300:]}") from None
            tmp.rename(dest)
    return dest


class Snapshot:
    """A repository's tree at one commit: file list, contents, tree hash, tar export."""

    def __init__(self, path: Path, commit: str):
        self.path, self.commit = path, commit
        try:
            self.tree = git(path, "rev-parse", f"{commit}^{{tree}}").decode().strip()
        except GitFailure as err:
            raise InputError(f"commit {commit} not found in {path}: {err}") from None

    @cached_property
    def files(self) -> list[str]:
        out = git(self.path, "ls-tree", "-r", "--name-only", "-z", self.commit)
        return [f for f in out.decode("utf-8", "replace").split("\0") if f]

    def has(self, path: str) -> bool:
        return path in self._file_set

    @cached_property
    def _file_set(self) -> frozenset[str]:
        return frozenset(self.files)

    def read(self, path: str, limit: int = 200_000) -> str | None:
        if path not in self._file_set:
            return None
        try:
            return git(self.path, "show", f"{self.commit}:{path}")[:limit].decode("utf-8", "replace")
        except GitFailure:
            return None

    def archive(self, prefix: str = "repo/") -> bytes:
        """Every file of the commit, as a clone has them: ``git archive`` alone drops what the tree's
        .gitattributes marks export-ignore (PHP/JS libraries mark /tests and phpunit.xml.dist so).
        A throwaway git dir borrows the objects and unsets export-ignore/export-subst in its
        info/attributes (highest precedence); the repository is not touched."""
        common = git(self.path, "rev-parse", "--path-format=absolute", "--git-common-dir").decode().strip()
        with tempfile.TemporaryDirectory(prefix="swe-archive-") as tmp:
            git(Path(tmp), "init", "-q", "--bare", ".")
            (Path(tmp) / "objects" / "info" / "alternates").write_text(str(Path(common) / "objects") + "\n")
            (Path(tmp) / "info").mkdir(exist_ok=True)
            (Path(tmp) / "info" / "attributes").write_text("* -export-ignore -export-subst\n")
            return git(Path(tmp), "archive", "--format=tar", f"--prefix={prefix}", self.commit)


def diff(path: Path, old: str, new: str) -> str:
    if old == new:
        return ""
    return git(path, "diff", "--binary", "--full-index", old, new).decode("utf-8", "replace")


def check_patches(path: Path, commit: str, patches: list[tuple[str, str]]) -> str | None:
    """Apply ``(name, diff)`` in order to COMMIT's tree in a throwaway index; None or why not."""
    with tempfile.TemporaryDirectory(prefix="swe-index-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        try:
            git(path, "read-tree", commit, env=env)
        except GitFailure as err:
            return f"cannot read commit {commit}: {err}"
        for name, text in patches:
            if not text.strip():
                continue
            try:
                git(path, "apply", "--cached", "--whitespace=nowarn", "-", input_bytes=_ensure_nl(text), env=env)
            except GitFailure as err:
                first = str(err).splitlines()[0] if str(err) else "git apply failed"
                return f"{name} does not apply at {commit[:12]}: {first}"
    return None


def _ensure_nl(text: str) -> bytes:
    return (text if text.endswith("\n") else text + "\n").encode("utf-8")


def tar_with(base_tar: bytes, extra: dict[str, bytes]) -> bytes:
    """``base_tar`` (from ``git archive``) with ``extra`` files appended (Dockerfile, scripts)."""
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as out:
        if base_tar:
            with tarfile.open(fileobj=io.BytesIO(base_tar), mode="r:") as src:
                for member in src.getmembers():
                    out.addfile(member, src.extractfile(member) if member.isfile() else None)
        for name, data in extra.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            out.addfile(info, io.BytesIO(data))
    return buf.getvalue()
