"""Object storage (``s3://``, or any fsspec URL) for job inputs and outputs: the one place a
path is told from a URL, and URLs are opened, listed and written.

Local paths stay on the standard library; a URL goes through fsspec (s3fs for ``s3://``, which
reads the usual ``AWS_ENDPOINT_URL`` / ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``
environment). Inputs are read as streams (ranged reads: a WARC is never fetched whole to disk).

Outputs given as a URL are staged (``staged_output``): the job runs into a local directory and
the finished tree is uploaded, ``job.json`` last. Why not write in place: datatrove's writers
could, but Spark's DataFrame writer needs Hadoop's s3a jars (not installable here, and a second
credential path), our completion markers, counts and fingerprint are local files, and resume
needs a directory it can list and rename in; one upload at the end serves both engines alike.
A storage failure (no bucket, no credentials, an empty prefix) is one ``UserError`` line.
"""

from __future__ import annotations

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


def open_input(path: str) -> IO[bytes]:
    """A binary, seekable stream of a local file or an object (read in ranges as it is consumed)."""
    if not is_url(path):
        return open(path, "rb")
    fs, p = url_fs(path)
    return fs.open(p, "rb")


def input_size(path: str) -> int:
    if not is_url(path):
        return os.path.getsize(path)
    fs, p = url_fs(path)
    return int(fs.size(p))


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
    # fingerprints go up first (``upload_tree``): an upload cut short is still known as a job output
    if not any(e.rsplit("/", 1)[-1] in (JOB_JSON, FINGERPRINT) for e in entries):
        raise UserError(f"{url} holds {len(entries)} objects and is not a job output; choose another output")
    if not replace:
        raise UserError(f"{url} holds a job output; pass --overwrite to replace it or choose another output")


def upload_tree(local: Path, url: str) -> list[str]:
    """Put every file under ``local`` at ``url`` (the old objects there removed first): fingerprints
    first, the top ``job.json`` last (a reader that finds it finds the whole output). Returns the
    keys written, in order."""
    fs, root = url_fs(url)
    root = root.rstrip("/")
    old = _remote_entries(fs, root)
    if old:
        fs.rm(old)
    files = sorted(p for p in local.rglob("*") if p.is_file())
    last = local / JOB_JSON
    first = [p for p in files if p.name == FINGERPRINT]
    keys = []
    for p in first + [p for p in files if p != last and p not in first] + [p for p in files if p == last]:
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
    try:
        _check_target(out, fs, root, replace)
    except UserError:
        raise
    except Exception as err:  # noqa: BLE001 - botocore/aiohttp raise many kinds; each is one line
        raise storage_error(out, err) from err
    staging = staging_root / hashlib.sha256(out.encode()).hexdigest()[:16]
    staging.mkdir(parents=True, exist_ok=True)
    yield str(staging)
    try:
        upload_tree(staging, out)
    except Exception as err:  # noqa: BLE001
        raise UserError(f"{out}: the upload failed ({storage_error(out, err)}); the finished output is "
                        f"in {staging}; re-run to upload it again") from err
    shutil.rmtree(staging, ignore_errors=True)
