"""Web archives (WARC, WET, ARC; gzipped per record or as one stream) -> documents and rejects.

Each record becomes exactly one document or reject (``pipelines.warc_records`` decides which);
this module walks an archive with warcio and notices what warcio lets pass quietly:

- a record whose headers were cut off (no Content-Length, which WARC requires) or whose body
  ends early (warcio's length-limited stream still owes bytes after it is drained): the
  archive was truncated inside it — that record is ``corrupt_file``, the ones before it stand;
- bytes after the last record that are not a record (warcio stops there silently), an empty
  file, or an archive warcio cannot go on reading: one ``corrupt_file`` reject for the rest;
- a gzip that is one member over all records (``gzip file.warc``, not per record): warcio
  refuses it after the first record; it is read again as one decompressed stream.

Digests are checked, never enforced: a mismatch is recorded on the record (see warc_records).
Completeness is the WARC record's own length; an HTTP Content-Length that differs is not
damage (crawlers truncate long payloads and say so in WARC-Truncated, or store them decoded).
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator

from datatrove.data import Document

from pipelines.warc_records import WarcRecord, is_page_type, record_outcome

_DRAIN = 1 << 16


def _drain(stream) -> None:
    while stream.read(_DRAIN):
        pass


def _from_warcio(n: int, record, limits) -> WarcRecord:
    h = record.rec_headers
    rec = WarcRecord(n, record.rec_type or "unknown", h.get_header("WARC-Record-ID"),
                     h.get_header("WARC-Target-URI") or "", h.get_header("WARC-Date"),
                     truncated=h.get_header("WARC-Truncated"))
    length = h.get_header("Content-Length")
    if length is None:
        rec.cut = "record headers cut short (no Content-Length)"
        return rec
    if not length.strip().isdigit():
        rec.malformed = f"record length {length!r} is not a byte count"
        return rec
    if rec.rec_type == "response":
        rec.content_type = (record.http_headers.get_header("Content-Type") if record.http_headers else "") or ""
    else:
        rec.content_type = h.get_header("Content-Type") or ""
    raw = record.raw_stream
    if is_page_type(rec.rec_type, rec.content_type):
        try:
            payload = record.content_stream().read(limits.max_doc_bytes + 1)
        except Exception as err:  # noqa: BLE001 - a bad chunked/gzip body is this record's
            rec.malformed = f"payload not decodable as sent: {type(err).__name__}: {err}"
            payload = b""
        rec.too_large = len(payload) > limits.max_doc_bytes
        rec.payload = payload
    _drain(raw)
    missing = getattr(raw, "limit", 0)
    if missing > 0:
        rec.cut = f"record body cut short ({missing} of {length.strip()} bytes missing)"
    checker = getattr(record, "digest_checker", None)
    if checker is not None and checker.passed is not None and rec.payload is not None and not rec.too_large:
        rec.digest_ok = bool(checker.passed)
        rec.digest_detail = "; ".join(str(p) for p in checker.problems)
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

    records = ArchiveIterator(stream, check_digests=True, arc2warc=True)
    for n, record in enumerate(records, start=1):
        if n <= skip:
            _drain(record.raw_stream)
            continue
        yield _outcome(_from_warcio(n, record, limits), f, limits, reject)
    yield records.offset


def read_warc(f, limits, reject) -> Iterator[Document]:
    """``reject(id, text, file, reason, detail, limits, meta)`` is the readers module's, so
    archive records are rejected like every input."""
    from warcio.exceptions import ArchiveLoadFailed

    n = 0
    whole_gzip = False
    try:
        with open(f.path, "rb") as fh:
            size = fh.seek(0, 2)
            fh.seek(0)
            if size == 0:  # an archive holds at least one record: this is a write cut short
                yield reject(f"{f.source}/{f.relpath}", "", f, "corrupt_file", f"{f.path}: empty file", limits)
                return
            end = None
            try:
                for item in _walk(fh, f, limits, reject):
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
            with gzip.open(f.path, "rb") as gz:
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
