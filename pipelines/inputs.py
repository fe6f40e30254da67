"""Inputs: the files a job reads, named by the user as ``InputSpec``s and expanded to
``InputFile``s (sorted, de-duplicated, format detected from the suffix), and the read limits.

A missing input path is a one-line ``InputError`` naming it, raised before any work starts.
A path may be a URL (``s3://bucket/prefix/``, a glob ``s3://bucket/crawl/*.warc.gz``, one object):
its objects are listed through fsspec (``core.storage``), and the readers stream them.
The readers that turn these files into documents are in ``pipelines.readers``.
"""

from __future__ import annotations

import fnmatch
import glob
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import Field

from core.config import StrictModel
from core.errors import InputError
from core.storage import full_url, is_url, storage_errors, url_fs

# "documents": a dataset written by our own jobs (id, text, metadata JSON), read verbatim
Format = Literal["jsonl", "parquet", "html", "text", "documents", "warc"]

_SUFFIXES: dict[str, Format] = {
    ".jsonl": "jsonl",
    ".jsonl.gz": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
    ".html": "html",
    ".htm": "html",
    ".html.gz": "html",
    ".txt": "text",
    ".txt.gz": "text",
    ".warc": "warc",
    ".warc.gz": "warc",
    # WET (extracted text, conversion records) and ARC (the format before WARC): the same reader
    ".wet": "warc",
    ".wet.gz": "warc",
    ".arc": "warc",
    ".arc.gz": "warc",
}


class InputSpec(StrictModel):
    """One input: a file or a directory (searched recursively for known document files)."""

    path: str
    # mixture name recorded in every document's metadata; default: the file/directory name
    source: str | None = None
    format: Literal["auto", "jsonl", "parquet", "html", "text", "documents", "warc"] = "auto"
    text_key: str = "text"
    id_key: str = "id"
    # only files of a directory whose relative path matches this fnmatch pattern ("*.html")
    glob: str | None = None
    # read only the first N files of a directory (path order): a bounded, deterministic sample
    max_files: int | None = Field(default=None, gt=0)


def sample_inputs(corpus) -> list[InputSpec]:
    """The sample corpus (``core.cached_samples.SampleCorpus``) as job inputs: its HTML pages, then
    its novels (samples/ builds data and knows nothing of jobs, so the specs are made here)."""
    specs = [InputSpec(path=str(corpus.html_dir), source="python-docs", glob="*.html",
                       max_files=corpus.max_html_pages)]
    if corpus.books_jsonl is not None:
        specs.append(InputSpec(path=str(corpus.books_jsonl), source="books"))
    return specs


class ReadLimits(StrictModel):
    # A document above this many bytes is rejected as `too_large` before it is parsed.
    max_doc_bytes: int = Field(default=20 * 2**20, gt=0)
    # Rejected documents keep at most this many characters of their text.
    reject_text_chars: int = Field(default=20_000, ge=0)
    # A web-archive record whose payload digest does not match: "keep" it (flagged
    # digest_mismatch, counted in the read stage) or "reject" it with that reason. Some crawls
    # (ClueWeb) carry digests that never match, so rejecting is opt-in.
    on_digest_mismatch: Literal["keep", "reject"] = "keep"
    # WARC framing: "fastwarc" (several times faster; warcio still reads ARC files and takes
    # over where FastWARC stops) or "warcio" alone. Both give the same documents.
    warc_reader: Literal["fastwarc", "warcio"] = "fastwarc"


class InputFile(StrictModel):
    """One concrete file to read, with the spec fields it needs (picklable, JSON-able)."""

    path: str
    relpath: str
    source: str
    format: Format
    text_key: str = "text"
    id_key: str = "id"


def _detect_format(name: str) -> Format | None:
    lower = name.lower()
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if lower.endswith(suffix):
            return _SUFFIXES[suffix]
    return None


def _file_candidate(path: Path, rel: str, spec: InputSpec) -> tuple[Path, str, Format]:
    fmt = spec.format if spec.format != "auto" else _detect_format(path.name)
    if fmt is None:
        raise InputError(f"{path}: unknown document format; use one of {sorted(_SUFFIXES)} or set format")
    return path, rel, fmt


def _dir_member(fn: str, rel: str, spec: InputSpec) -> Format | None:
    """The format of the file ``fn`` (``rel`` under the directory searched), or None to skip it."""
    # auto: only known document suffixes (images, css, js… beside them are not
    # documents); a forced format takes every non-hidden file
    fmt = _detect_format(fn) if spec.format == "auto" else spec.format
    if spec.format == "documents" and not fn.endswith(".parquet"):
        return None  # Spark's _SUCCESS and .crc files beside the parts
    if fmt is None or fn.startswith((".", "_")):
        return None
    if spec.glob and not fnmatch.fnmatch(rel, spec.glob):
        return None
    return fmt


def _dir_candidates(root: Path, spec: InputSpec, base: Path) -> list[tuple[Path, str, Format]]:
    """The document files under ``root``, their relative paths taken from ``base``."""
    candidates = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for fn in sorted(filenames):
            p = Path(dirpath) / fn
            fmt = _dir_member(fn, str(p.relative_to(root)), spec)
            if fmt is not None:
                candidates.append((p, str(p.relative_to(base)), fmt))
    return candidates


def _url_candidates(spec: InputSpec) -> tuple[str, list[tuple[str, str, Format]]]:
    """``_spec_candidates`` for a URL: an object, a prefix (a "directory") or a glob, listed once."""
    fs, root = url_fs(spec.path)
    fs.invalidate_cache()  # a listing cached by an earlier job of this process may be stale
    root = root.rstrip("/")
    if _is_magic(root):
        parts = root.split("/")
        base = "/".join(parts[: next(i for i, p in enumerate(parts) if _is_magic(p))])
        tops = [(m, fs.info(m)) for m in sorted(fs.glob(root))]
    else:
        base = root.rsplit("/", 1)[0] if fs.isfile(root) else root
        tops = [(root, fs.info(root))]  # FileNotFoundError: no bucket, no such object or prefix
    candidates: list[tuple[str, str, Format]] = []
    for top, info in tops:
        if info["type"] == "directory":
            for key in fs.find(top, withdirs=False):
                fmt = _dir_member(key.rsplit("/", 1)[-1], key[len(top) + 1:], spec)
                if fmt is not None:
                    candidates.append((full_url(fs, key), key[len(base) + 1:], fmt))
        elif spec.format != "auto" or _detect_format(top) is not None or not _is_magic(root):
            name = top.rsplit("/", 1)[-1]
            _, _, fmt = _file_candidate(Path(name), name, spec)
            candidates.append((full_url(fs, top), top[len(base) + 1:], fmt))
    if not candidates:
        raise InputError(f"{spec.path}: no document files found (looked for {sorted(_SUFFIXES)})")
    # as for paths: a file's or directory's own name, a glob's fixed directory
    named = base if _is_magic(root) else root
    return _default_source(Path(named.rsplit("/", 1)[-1] or "default")), candidates


def _glob_base(pattern: str) -> Path:
    """The directory part of a glob before its first wildcard (``crawl/*/x.warc.gz`` -> crawl)."""
    fixed: list[str] = []
    for part in Path(pattern).parts:
        if _is_magic(part):
            break
        fixed.append(part)
    return Path(*fixed) if fixed else Path(".")


def _is_magic(text: str) -> bool:
    return any(c in text for c in "*?[")


def _spec_candidates(spec: InputSpec) -> tuple[str, list[tuple[Path, str, Format]]]:
    """(default source, candidate files) of one spec: a file, a directory, or a glob pattern."""
    if is_url(spec.path):
        with storage_errors(spec.path):
            return _url_candidates(spec)
    root = Path(spec.path).expanduser()
    if not root.exists() and _is_magic(spec.path):
        base = _glob_base(str(root))
        matches = sorted(Path(m) for m in glob.glob(str(root), recursive=True))
        candidates = []
        for m in matches:
            if m.is_dir():
                candidates += _dir_candidates(m, spec, base)
            elif spec.format != "auto" or _detect_format(m.name) is not None:
                candidates.append(_file_candidate(m, str(m.relative_to(base)), spec))
        if not candidates:
            raise InputError(f"{spec.path}: the pattern matches no document files (looked for {sorted(_SUFFIXES)})")
        return _default_source(base.absolute()), candidates
    if not root.exists():
        raise InputError(f"input path does not exist: {root}")
    if root.is_file():
        return _default_source(root), [_file_candidate(root, root.name, spec)]
    candidates = _dir_candidates(root, spec, root)
    if not candidates:
        raise InputError(f"{root}: no document files found (looked for {sorted(_SUFFIXES)})")
    return _default_source(root), candidates


def list_input_files(specs: Iterable[InputSpec]) -> list[InputFile]:
    """Expand input specs (files, directories, glob patterns such as ``crawl/*.warc.gz``) into a
    sorted, de-duplicated list of files; error on missing paths and patterns matching nothing."""
    files: list[InputFile] = []
    for spec in specs:
        default_source, candidates = _spec_candidates(spec)
        if spec.max_files is not None:
            candidates = candidates[: spec.max_files]
        for p, rel, fmt in candidates:
            files.append(InputFile(path=str(p), relpath=rel, source=spec.source or default_source, format=fmt,
                                   text_key=spec.text_key, id_key=spec.id_key))
    seen: set[str] = set()
    unique = []
    for f in files:
        if f.path not in seen:
            seen.add(f.path)
            unique.append(f)
    return unique


def _default_source(root: Path) -> str:
    name = root.name
    fmt = _detect_format(name)
    if fmt is not None:
        for suffix in sorted(_SUFFIXES, key=len, reverse=True):
            if name.lower().endswith(suffix):
                return name[: -len(suffix)] or "default"
    return name or "default"
