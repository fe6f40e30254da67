"""Object storage (``s3://``, or any fsspec URL) for job inputs and outputs: the one place a
path is told from a URL, and URLs are opened, listed and written.

Local paths stay on the standard library; a URL goes through fsspec (s3fs for ``s3://``, which
reads the usual ``AWS_ENDPOINT_URL`` / ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``
environment). Inputs are read as streams (ranged reads: a WARC is never fetched whole to disk).

Inputs that a reader needs as real files (git reads a repository by path) are fetched into a
local directory first (``fetched_tree``); every other input is streamed, DuckDB's reads too
(``duckdb_reads``: through fsspec, not its httpfs extension).

Outputs given as a URL are staged (``staged_output``): the job runs into a local directory and
the finished tree is uploaded, ``job.json`` (a shard directory's ``manifest.json``) last. Why
not write in place: datatrove's writers could, but Spark's DataFrame writer needs Hadoop's s3a
jars (not installable here, and a second credential path), our completion markers, counts and
fingerprint are local files, and resume needs a directory it can list and rename in; one upload
at the end serves both engines alike.
A storage failure (no bucket, no credentials, an empty prefix) is one ``UserError`` line.
"""

from __future__ import annotations

import fnmatch
import gzip
import hashlib
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from core.errors import InputError, UserError

# what s3fs/botocore read from the environment; Spark executors get these from the driver
STORAGE_ENV = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
               "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE")
JOB_JSON, FINGERPRINT = "job.json", "fingerprint.json"


def _output_names() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(names that mark a tree as ours, uploaded first; names that mark it complete, uploaded
    last): a fingerprint, or a shard (pack's outputs have no fingerprint); a ``job.json``, or a
    shard directory's manifest. Imported here, not at the top: only URL outputs need them, and
    ``core.shards`` brings in pyarrow."""
    from core.shards import MANIFEST, SHARD_GLOB

    return (FINGERPRINT, SHARD_GLOB), (JOB_JSON, MANIFEST)


def _named(path: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(path.rsplit("/", 1)[-1], p) for p in patterns)


def is_url(path: str | Path) -> bool:
    """``s3://bucket/key`` and other ``scheme://`` paths (a ``Path`` is never one: it folds ``//``)."""
    return isinstance(path, str) and "://" in path


def storage_error(url: str, err: BaseException) -> UserError:
    """One line for a storage failure, naming the URL and what the storage said."""
    if isinstance(err, UserError):
        return err
    if isinstance(err, FileNotFoundError):
        what = "does not exist (no such bucket, or no object under this prefix)"
    elif isinstance(err, PermissionError):
        what = "access denied (check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)"
    elif type(err).__name__ == "NoCredentialsError":
        what = "no credentials (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
    else:
        what = f"{type(err).__name__}"
    detail = " ".join(str(err).split())[:300]
    return InputError(f"{url}: {what}: {detail}" if detail else f"{url}: {what}")


@contextmanager
def storage_errors(url: str) -> Iterator[None]:
    """Any storage failure inside the block as one ``UserError`` line naming ``url``."""
    try:
        yield
    except UserError:
        raise
    except Exception as err:  # noqa: BLE001 - botocore/aiohttp raise many kinds; each is one line
        raise storage_error(url, err) from err


def url_fs(url: str) -> tuple[Any, str]:
    """(fsspec filesystem, path without scheme) of ``url``."""
    import fsspec

    try:
        return fsspec.core.url_to_fs(url)
    except ImportError as err:  # s3fs, gcsfs, … are separate packages
        raise InputError(f"{url}: no filesystem for this scheme is installed ({err})") from err
    except ValueError as err:
        raise InputError(f"{url}: {err}") from err


def full_url(fs: Any, path: str) -> str:
    """``bucket/key`` back to ``s3://bucket/key``."""
    return fs.unstrip_protocol(path)


class _Gunzip(gzip.GzipFile):
    """A gzip stream that closes the stream it reads when closed (``gzip.open`` of a file object
    leaves that open)."""

    def close(self) -> None:
        raw = self.fileobj
        try:
            super().close()
        finally:
            if raw is not None:
                raw.close()


def open_input(path: str, gunzip: bool = False) -> IO[bytes]:
    """A binary stream of a local file or an object (read in ranges as it is consumed): seekable,
    or with ``gunzip`` decompressed when the name ends in ``.gz``."""
    if not is_url(path):
        raw = open(path, "rb")
    else:
        fs, p = url_fs(path)
        raw = fs.open(p, "rb")
    return _Gunzip(fileobj=raw, mode="rb") if gunzip and path.lower().endswith(".gz") else raw


def input_size(path: str) -> int:
    if not is_url(path):
        return os.path.getsize(path)
    fs, p = url_fs(path)
    return int(fs.size(p))


def url_files(url: str) -> list[tuple[str, str]]:
    """(URL, path relative to ``url``) of every object under the prefix ``url``, sorted; ``[(url,
    "")]`` when ``url`` is an object. Nothing there (no bucket, no such prefix) and any other
    storage failure is one ``UserError`` line."""
    with storage_errors(url):
        fs, root = url_fs(url)
        fs.invalidate_cache()  # a listing cached by an earlier job of this process may be stale
        root = root.rstrip("/")
        if fs.isfile(root):
            return [(full_url(fs, root), "")]
        keys = fs.find(root, withdirs=False)
        if not keys:
            raise FileNotFoundError(root)
        return [(full_url(fs, k), k[len(root) + 1 :]) for k in sorted(keys)]


def _staging_dir(staging_root: Path, url: str) -> Path:
    """The same local directory for the same URL (an interrupted run finds its files again)."""
    return staging_root / hashlib.sha256(url.encode()).hexdigest()[:16]


@contextmanager
def fetched_tree(url: str, staging_root: Path) -> Iterator[Path]:
    """A local copy of the object or prefix ``url``, at ``staging_root/<digest>/<its last name>``
    (names taken from the path stay those of the URL), removed afterwards. Only for readers that
    cannot stream: git opens a repository's files by path; everything else reads ranges."""
    files = url_files(url)
    fs, root = url_fs(url)
    top = _staging_dir(staging_root, url)
    shutil.rmtree(top, ignore_errors=True)  # a copy left by a run that was killed may be stale
    local = top / (root.rstrip("/").rsplit("/", 1)[-1] or "root")
    try:
        with storage_errors(url):
            for src, rel in files:
                (local / rel).parent.mkdir(parents=True, exist_ok=True)
                fs.get_file(url_fs(src)[1], str(local / rel))
        yield local
    finally:
        shutil.rmtree(top, ignore_errors=True)


def duckdb_reads(con: Any, paths: list[str]) -> None:
    """Let the DuckDB connection ``con`` read the URLs among ``paths`` through fsspec: ranged
    reads with the credentials every other read here uses, where DuckDB's own httpfs extension
    would be a download at first use and a second set of credential settings."""
    seen = set()
    for path in paths:
        if is_url(path):
            fs, _ = url_fs(path)
            if type(fs) not in seen:
                seen.add(type(fs))
                con.register_filesystem(fs)


def forward_storage_env(sc: Any) -> None:
    """Hand the driver's storage settings to Spark's Python workers (``SparkContext.environment``
    travels with every Python task): on ``local[N]`` the workers may have started before they
    were set; on a cluster, executors that have their own (an instance role) can do without."""
    for key in STORAGE_ENV:
        if key in os.environ:
            sc.environment[key] = os.environ[key]


def _remote_entries(fs: Any, root: str) -> list[str]:
    try:
        return fs.find(root, withdirs=False)
    except FileNotFoundError:
        return []


def _check_target(url: str, fs: Any, root: str, replace: bool) -> None:
    fs.invalidate_cache()
    entries = _remote_entries(fs, root)
    if not entries:
        if not fs.exists(root.split("/", 1)[0]):
            raise FileNotFoundError(f"bucket {root.split('/', 1)[0]!r} does not exist")
        return
    # the marks of ours go up first (``upload_tree``): an upload cut short is still known as a job output
    ours, complete = _output_names()
    if not any(_named(e, ours + complete) for e in entries):
        raise UserError(f"{url} holds {len(entries)} objects and is not a job output; choose another output")
    if not replace:
        raise UserError(f"{url} holds a job output; pass --overwrite to replace it or choose another output")


def upload_tree(local: Path, url: str) -> list[str]:
    """Put every file under ``local`` at ``url`` (the old objects there removed first): what marks
    the tree as ours (fingerprints, shards) first, what marks it complete (``job.json``, a shard
    directory's manifest) after everything else, the deepest first and the top one last (a reader
    that finds a marker finds everything it covers). Returns the keys written, in order."""
    fs, root = url_fs(url)
    root = root.rstrip("/")
    old = _remote_entries(fs, root)
    if old:
        fs.rm(old)
    ours, complete = _output_names()
    files = sorted(p for p in local.rglob("*") if p.is_file())
    first = [p for p in files if _named(p.name, ours)]
    # deepest first: shards/manifest.json before the job.json that covers it
    last = sorted((p for p in files if _named(p.name, complete)), key=lambda p: -len(p.parts))
    keys = []
    for p in first + [p for p in files if p not in first and p not in last] + last:
        keys.append(f"{root}/{p.relative_to(local).as_posix()}")
        fs.put_file(str(p), keys[-1])
    fs.invalidate_cache()
    return keys


@contextmanager
def staged_output(out: str, staging_root: Path, replace: bool) -> Iterator[str]:
    """Yield where the job writes: ``out`` itself when it is a path; for a URL, a local directory
    under ``staging_root`` (the same one for the same URL, so an interrupted run resumes there),
    uploaded to ``out`` when the job returns and then removed. The URL is checked first (bucket,
    credentials; an output of another kind there is refused, a job output needs ``replace``);
    if the job fails nothing is uploaded and the old objects stay."""
    if not is_url(out):
        yield out
        return
    fs, root = url_fs(out)
    with storage_errors(out):
        _check_target(out, fs, root, replace)
    staging = _staging_dir(staging_root, out)
    staging.mkdir(parents=True, exist_ok=True)
    try:
        yield str(staging)
    except BaseException:
        if not any(staging.iterdir()):  # the job failed before writing (a bad input): leave nothing
            staging.rmdir()
        raise
    try:
        upload_tree(staging, out)
    except Exception as err:  # noqa: BLE001
        raise UserError(f"{out}: the upload failed ({storage_error(out, err)}); the finished output is "
                        f"in {staging}; re-run to upload it again") from err
    shutil.rmtree(staging, ignore_errors=True)
