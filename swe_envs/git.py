"""The one wrapper over the ``git`` CLI (mining, environments): local repositories, bare or not.

``git()`` runs one command (environments: trees, archives, diffs, patch checks);
``GitRepo`` reads a repository for mining: every call has a timeout, output can be capped (a
huge diff is refused, not loaded), and failures are ``GitError`` with a categorical reason
(``commit_missing``, ``git_error``, ``diff_too_large``, ``git_timeout``) so callers can count
them; blobs are read through one long-lived ``git cat-file --batch`` process per repository.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

_ENV = {"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "GIT_PAGER": "cat", "GIT_OPTIONAL_LOCKS": "0"}
# repositories may belong to another user (mounted datasets); we only read them
_BASE = ["git", "-c", "safe.directory=*", "-c", "core.quotepath=off", "--no-pager"]


class GitError(Exception):
    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


class GitFailure(GitError):
    """A failed ``git()`` command; its message is git's own error output."""

    def __init__(self, detail: str):
        super().__init__("git_error", detail)
        self.args = (detail,)

    def __str__(self) -> str:
        return self.detail


def git(repo: Path, *args: str, input_bytes: bytes | None = None, env: dict | None = None,
        timeout: float = 300) -> bytes:
    """stdout of ``git -C repo ARGS``; ``GitFailure`` with git's error output when it fails."""
    proc = subprocess.run([*_BASE, "-C", str(repo), *args], input=input_bytes, capture_output=True,
                          timeout=timeout, env={**os.environ, **_ENV, **(env or {})})
    if proc.returncode != 0:
        raise GitFailure(proc.stderr.decode("utf-8", "replace").strip()[-500:] or f"git {args[0]} failed")
    return proc.stdout


def commit_date(repo: Path, commit: str) -> str | None:
    """The committer date of ``commit`` (ISO 8601), None when git cannot tell."""
    try:
        return git(repo, "show", "-s", "--format=%cI", commit, timeout=60).decode().strip() or None
    except (OSError, subprocess.TimeoutExpired, GitFailure):
        return None


def is_git_repo(path: Path) -> bool:
    """A working tree (``.git`` inside) or a bare repository (HEAD, objects/, refs/)."""
    if (path / ".git").exists():
        return True
    return (path / "HEAD").is_file() and (path / "objects").is_dir() and (path / "refs").is_dir()


def restore_git_dirs(root: Path) -> None:
    """Recreate under ``root`` what a repository copied through object storage loses: S3 keeps
    no empty directories, and git refuses a git directory (``HEAD`` beside ``config``) without
    ``objects/`` and ``refs/`` (a new repository's are empty, a packed one's ``refs/`` may be)."""
    for head in root.rglob("HEAD"):
        gitdir = head.parent
        if head.is_file() and (gitdir / "config").is_file():
            for sub in ("objects", "refs"):
                (gitdir / sub).mkdir(exist_ok=True)


class GitRepo:
    def __init__(self, path: str | Path, timeout: float = 60.0):
        self.path = str(path)
        self.timeout = timeout
        self._batch: subprocess.Popen | None = None
        self._env = {**os.environ, **_ENV}

    def run(self, *args: str, max_bytes: int | None = None, check: bool = True) -> bytes:
        cmd = [*_BASE, "-C", self.path, *args]
        if max_bytes is None:
            try:
                proc = subprocess.run(cmd, capture_output=True, timeout=self.timeout, env=self._env)
            except subprocess.TimeoutExpired:
                raise GitError("git_timeout", " ".join(args[:3])) from None
            if check and proc.returncode != 0:
                raise GitError(_classify(proc.stderr), proc.stderr.decode("utf-8", "replace").strip()[:300])
            return proc.stdout
        return self._run_capped(cmd, args, max_bytes, check)

    def _run_capped(self, cmd: list[str], args: tuple[str, ...], max_bytes: int, check: bool) -> bytes:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self._env)
        chunks, size = [], 0
        try:
            while block := proc.stdout.read(1 << 16):
                chunks.append(block)
                size += len(block)
                if size > max_bytes:
                    proc.kill()
                    raise GitError("diff_too_large", f"{' '.join(args[:2])} output over {max_bytes} bytes")
            err = proc.stderr.read()
            code = proc.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise GitError("git_timeout", " ".join(args[:3])) from None
        finally:
            proc.stdout.close()
            proc.stderr.close()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if check and code != 0:
            raise GitError(_classify(err), err.decode("utf-8", "replace").strip()[:300])
        return b"".join(chunks)

    def text(self, *args: str) -> str:
        return self.run(*args).decode("utf-8", errors="replace")

    def has_commit(self, rev: str | None) -> bool:
        if not rev:
            return False
        out = self.run("cat-file", "-t", rev, check=False)
        return out.strip() == b"commit"

    def parents(self, rev: str) -> list[str]:
        return self.text("rev-list", "--parents", "-n", "1", rev).split()[1:]

    def ls_tree(self, rev: str) -> list[tuple[str, int]]:
        """(path, size) of every blob at ``rev``."""
        out = self.run("ls-tree", "-r", "-l", "-z", rev)
        files = []
        for entry in out.split(b"\0"):
            if not entry:
                continue
            meta, _, path = entry.partition(b"\t")
            parts = meta.split()
            if len(parts) == 4 and parts[1] == b"blob":
                size = int(parts[3]) if parts[3].isdigit() else 0
                files.append((path.decode("utf-8", "replace"), size))
        return files

    def blob(self, rev: str, path: str) -> bytes | None:
        """Contents of ``path`` at ``rev`` (None when it does not exist there)."""
        if "\n" in path:
            return None
        if self._batch is None or self._batch.poll() is not None:
            self._batch = subprocess.Popen(
                [*_BASE, "-C", self.path, "cat-file", "--batch"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=self._env,
            )
        self._batch.stdin.write(f"{rev}:{path}\n".encode())
        self._batch.stdin.flush()
        line = self._batch.stdout.readline().rstrip(b"\n")
        # "<name> missing" / "<name> ambiguous", where the name may hold spaces; else "<sha> <type> <size>"
        if line.endswith((b" missing", b" ambiguous")) or not line:
            return None
        header = line.split()
        size = int(header[2])
        data = self._batch.stdout.read(size)
        self._batch.stdout.read(1)  # the newline after the contents
        return data if header[1] == b"blob" else None

    def close(self) -> None:
        if self._batch is not None:
            try:
                self._batch.stdin.close()
                self._batch.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self._batch.kill()
            self._batch = None


def _classify(stderr: bytes) -> str:
    msg = stderr.decode("utf-8", "replace").lower()
    if any(
        s in msg for s in ("bad object", "unknown revision", "bad revision", "invalid object", "not a tree")
    ):
        return "commit_missing"
    if "not a git repository" in msg:
        return "not_a_repository"
    return "git_error"


class RepoCache:
    """Open repositories of one worker, closed together (passed in, never global)."""

    def __init__(self, timeout: float = 60.0):
        self.timeout = timeout
        self._repos: dict[str, GitRepo] = {}

    def get(self, path: str) -> GitRepo:
        repo = self._repos.get(path)
        if repo is None:
            repo = self._repos[path] = GitRepo(path, self.timeout)
        return repo

    def close(self) -> None:
        for repo in self._repos.values():
            repo.close()
        self._repos.clear()

    def __enter__(self) -> RepoCache:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
