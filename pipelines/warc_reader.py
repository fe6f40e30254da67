"""Web archives (WARC, WET, ARC; gzipped per record or as one stream) -> documents and rejects.

Each record becomes exactly one document or reject (``pipelines.warc_records`` decides which).
WARC files are framed by FastWARC (``pipelines.warc_fast``) by default; warcio reads ARC files,
files FastWARC cannot read, and the rest of a file from wherever FastWARC stopped. With warcio,
this module notices what warcio lets pass quietly:

- a record whose headers were cut off (no Content-Length, which WARC requires) or whose body
  ends early (warcio's length-limited stream still owes bytes after it is drained): the
  archive was truncated inside it — that record is ``corrupt_file``, the ones before it stand;
- bytes after the last record that are not a record (warcio stops there silently), an empty
  file, or an archive warcio cannot go on reading: one ``corrupt_file`` reject for the rest;
- a gzip that is one member over all records (``gzip file.warc``, not per record): warcio
  refuses it after the first record; it is read again as one decompressed stream.

Digests are checked, never enforced, by ``warc_records`` on the payload as stored (the same
code for both backends): a mismatch is recorded on the record.
Completeness is the WARC record's own length; an HTTP Content-Length that differs is not
damage (crawlers truncate long payloads and say so in WARC-Truncated, or store them decoded).
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator

from datatrove.data import Document

from core.storage import input_size, open_input
from pipelines.warc_fast import fastwarc_available, fastwarc_records
from pipelines.warc_records import WarcRecord, is_page_type, record_outcome

_DRAIN = 1 << 16
ARC_SUFFIXES = (".arc", ".arc.gz")  # FastWARC does not read ARC


def _drain(stream) -> None:
    while stream.read(_DRAIN):
        pass


def _from_warcio(n: int, record, limits) -> WarcRecord:
    h = record.rec_headers
    if record.format == "arc":  # ARC names its few headers differently and has no record ids
        rec = WarcRecord(n, record.rec_type or "unknown", None, h.get_header("uri") or "",
                         h.get_header("archive-date"))
        length = h.get_header("length")
    else:
        rec = WarcRecord(n, record.rec_type or "unknown", h.get_header("WARC-Record-ID"),
                         h.get_header("WARC-Target-URI") or "", h.get_header("WARC-Date"),
                         payload_digest=h.get_header("WARC-Payload-Digest"), truncated=h.get_header("WARC-Truncated"))
        length = h.get_header("Content-Length")
    if length is None:
        rec.cut = "record headers cut short (no Content-Length)"
        return rec
    if not length.strip().isdigit():
        rec.malformed = f"record length {length!r} is not a byte count"
        return rec
    http = record.http_headers
    if rec.rec_type == "response":
        rec.content_type = (http.get_header("Content-Type") if http else "") or ""
    else:
        rec.content_type = h.get_header("Content-Type") or ""
    raw = record.raw_stream  # the payload as stored: after the HTTP headers, still encoded
    if is_page_type(rec.rec_type, rec.content_type):
        rec.payload = raw.read(limits.max_doc_bytes + 1)
        if http is not None:
            rec.transfer_encoding = http.get_header("Transfer-Encoding")
            rec.content_encoding = http.get_header("Content-Encoding")
    _drain(raw)
    missing = getattr(raw, "limit", 0)
    if missing > 0:
        rec.cut = f"record body cut short ({missing} of {length.strip()} bytes missing)"
    return rec


def _outcome(rec: WarcRecord, f, limits, reject) -> Document:
    try:
        return record_outcome(rec, f, limits, reject)
    except Exception as err:  # noqa: BLE001 - a record our rules did not foresee is still one reject
        return reject(f"{f.source}/{f.relpath}#{rec.n}", "", f, "unreadable_record",
                      f"{f.path}: record {rec.n}: {type(err).__name__}: {err}", limits)


def _walk(stream, f, limits, reject, skip: int = 0) -> Iterator[Document | int]:
    """Documents of the records after the first ``skip``; finally warcio's end offset (an int)."""
    from warcio.archiveiterator import ArchiveIterator

    records = ArchiveIterator(stream)  # digests: checked on the payload by warc_records
    for n, record in enumerate(records, start=1):
        if n <= skip:
            _drain(record.raw_stream)
            continue
        yield _outcome(_from_warcio(n, record, limits), f, limits, reject)
    yield records.offset


def read_warc(f, limits, reject) -> Iterator[Document]:
    """``reject(id, text, file, reason, detail, limits, meta)`` is the readers module's, so
    archive records are rejected like every input. FastWARC reads WARC files
    (``ReadLimits.warc_reader``); warcio reads ARC files and takes over wherever FastWARC stops."""
    try:
        size = input_size(f.path)
    except OSError as err:
        yield reject(f"{f.source}/{f.relpath}", "", f, "corrupt_file", f"{f.path}: {err}", limits)
        return
    if size == 0:  # an archive holds at least one record: this is a write cut short
        yield reject(f"{f.source}/{f.relpath}", "", f, "corrupt_file", f"{f.path}: empty file", limits)
        return
    emitted = 0
    if limits.warc_reader == "fastwarc" and not f.path.lower().endswith(ARC_SUFFIXES) and fastwarc_available():
        # FastWARC ends quietly at a gzip member cut short early: the last record is held back
        # until warcio has checked that it, alone and whole, is the rest of the file
        held = None
        try:
            for rec in fastwarc_records(f.path, limits):
                if held is not None:
                    emitted += 1
                    yield _outcome(held, f, limits, reject)
                held = rec
            if held is not None and _tail_is_one_record(f.path, held.offset, size, limits):
                yield _outcome(held, f, limits, reject)
                return
        except Exception:  # noqa: BLE001 - FastWARC cannot go on here; warcio, more lenient, takes over
            pass
    yield from _read_with_warcio(f, limits, reject, size, skip=emitted)


def _tail_is_one_record(path: str, offset: int | None, size: int, limits) -> bool:
    """Whether the file from ``offset`` (a record's start: its byte, or its gzip member's) to
    its end is exactly one complete record, by warcio's checks."""
    from warcio.archiveiterator import ArchiveIterator

    if offset is None:
        return False
    with open_input(path) as fh:
        fh.seek(offset)
        records = ArchiveIterator(fh)
        n = 0
        for n, record in enumerate(records, start=1):  # noqa: B007 - n is the count
            rec = _from_warcio(n, record, limits)
            if n > 1 or rec.cut or rec.malformed:
                return False
        return n == 1 and records.offset == size  # warcio's offsets count from the file's start


def _read_with_warcio(f, limits, reject, size: int, skip: int) -> Iterator[Document]:
    """The records after the first ``skip`` (already read by FastWARC), with warcio."""
    from warcio.exceptions import ArchiveLoadFailed

    n = skip
    whole_gzip = False
    end = None
    try:
        with open_input(f.path) as fh:
            try:
                for item in _walk(fh, f, limits, reject, skip=n):
                    if isinstance(item, int):
                        end = item
                    else:
                        n += 1
                        yield item
            except ArchiveLoadFailed as err:
                if "non-chunked gzip" not in str(err):
                    raise
                whole_gzip = True
        if whole_gzip:
            with open_input(f.path) as raw, gzip.open(raw, "rb") as gz:
                for item in _walk(gz, f, limits, reject, skip=n):
                    if isinstance(item, int):
                        end = item
                    else:
                        n += 1
                        yield item
                size = gz.seek(0, 2)  # the decompressed size (raises on a truncated stream)
        if end != size:  # warcio stops quietly at bytes it cannot parse as a record
            yield reject(f"{f.source}/{f.relpath}#after-{n}", "", f, "corrupt_file",
                         f"{f.path}: {size - (end or 0)} bytes after record {n} are not a WARC record", limits)
    except Exception as err:  # warcio raises assorted errors on truncated/corrupt archives
        yield reject(f"{f.source}/{f.relpath}#after-{n}", "", f, "corrupt_file",
                     f"{f.path}: after record {n}: {type(err).__name__}: {err}", limits)
