"""WARC input (Common Crawl style): each HTTP response record with an HTML payload becomes a
document (``url``, ``warc_date``, ``warc_record_id`` in metadata, ``content_type`` text/html
so the extraction step picks it up).

Request/metadata records are not documents and are skipped. A response that is not HTML is
a counted reject (``not_html``); an undecodable payload, an oversized one or a corrupt or
truncated archive becomes a reject with its reason — the archive is read up to the damage.
warcio itself is lenient: it yields records whose headers were cut off and stops silently at
bytes it cannot parse, so both are checked here (``_cut_short``, the final offset).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from datatrove.data import Document

from core.records import find_lone_surrogate

_CHARSET = re.compile(r"charset=([\w.:-]+)", re.IGNORECASE)


def _truncated(record, payload: bytes) -> bool:
    """warcio stops quietly at the end of a truncated archive; a record whose payload digest
    was announced but could not be verified, or that is shorter than its declared length,
    was cut short."""
    if record.rec_headers.get_header("WARC-Payload-Digest"):
        checker = getattr(record, "digest_checker", None)
        if checker is not None and checker.passed is not True:
            return True
    http = record.http_headers
    if http is not None and not http.get_header("Content-Encoding"):
        declared = http.get_header("Content-Length")
        if declared and declared.isdigit() and int(declared) != len(payload):
            return True
    return False


def _cut_short(record) -> str | None:
    """Why a record is incomplete, or None. warcio yields a record whose headers were cut off
    (no Content-Length, which WARC requires) and quietly stops inside a cut payload."""
    if not record.rec_headers.get_header("Content-Length"):
        return "record headers cut short (no Content-Length)"
    raw = getattr(record, "raw_stream", None)
    if getattr(raw, "limit", 0) > 0:
        record.content_stream().read()  # the parser may still be holding the rest
        if getattr(raw, "limit", 0) > 0:
            return f"record body cut short ({raw.limit} of {record.length} bytes missing)"
    return None


def read_warc(f, limits, decode, reject) -> Iterator[Document]:
    """``decode(bytes) -> (text, encoding)`` and ``reject(id, text, file, reason, detail, limits, meta)``
    come from the readers module, so WARC pages are decoded and rejected like every input."""
    from warcio.archiveiterator import ArchiveIterator

    n = 0
    try:
        with open(f.path, "rb") as fh:
            records = ArchiveIterator(fh, check_digests="raise")
            for n, record in enumerate(records, start=1):  # noqa: B007
                url = record.rec_headers.get_header("WARC-Target-URI") or ""
                rid = record.rec_headers.get_header("WARC-Record-ID") or f"{f.relpath}#{n}"
                doc_id = f"{f.source}/{rid.strip('<>')}"
                meta = {"source": f.source, "file": f.relpath, "url": url,
                        "warc_date": record.rec_headers.get_header("WARC-Date"), "warc_record_id": rid}
                if record.rec_type != "response":
                    cut = _cut_short(record)
                    if cut:  # the archive ends inside a record we cannot even classify
                        yield reject(doc_id, "", f, "corrupt_file", f"{f.path}: record {n}: {cut}", limits, meta)
                    continue
                ctype = (record.http_headers.get_header("Content-Type") if record.http_headers else "") or ""
                cut = _cut_short(record) if "html" not in ctype.lower() else None
                if cut:
                    yield reject(doc_id, "", f, "corrupt_file", f"{f.path}: record {n}: {cut}", limits, meta)
                    continue
                if "html" not in ctype.lower():
                    yield reject(doc_id, "", f, "not_html", f"content type {ctype or 'missing'!r}", limits, meta)
                    continue
                payload = record.content_stream().read(limits.max_doc_bytes + 1)
                if len(payload) > limits.max_doc_bytes:
                    yield reject(doc_id, payload[: limits.reject_text_chars].decode("utf-8", "replace"), f,
                                 "too_large", f"{url}: payload over max_doc_bytes={limits.max_doc_bytes}", limits, meta)
                    continue
                if _truncated(record, payload) or (len(payload) <= limits.max_doc_bytes and _cut_short(record)):
                    yield reject(doc_id, payload[: limits.reject_text_chars].decode("utf-8", "replace"), f,
                                 "corrupt_file", f"{url}: record cut short ({len(payload)} bytes read)", limits, meta)
                    continue
                m = _CHARSET.search(ctype)
                text, encoding = None, None
                if m:
                    try:
                        text, encoding = payload.decode(m.group(1)), m.group(1).lower()
                    except (LookupError, UnicodeDecodeError):
                        pass
                    if text is not None and find_lone_surrogate(text):  # utf-7, unicode_escape, …
                        text, encoding = None, None
                if text is None:
                    text, encoding = decode(payload)
                if text is None:
                    yield reject(doc_id, payload.decode("utf-8", "replace"), f, "undecodable",
                                 f"{url}: no usable charset", limits, meta)
                    continue
                if not text.strip():
                    yield reject(doc_id, text, f, "empty_text", f"{url}: empty payload", limits, meta)
                    continue
                meta.update(content_type="text/html", encoding=encoding)
                yield Document(text=text, id=doc_id, metadata=meta)
            size = fh.seek(0, 2)
            if size == 0:  # an archive holds at least one record: this is a write cut short
                yield reject(f"{f.source}/{f.relpath}", "", f, "corrupt_file", f"{f.path}: empty file", limits)
            elif records.offset != size:  # warcio stops quietly at bytes it cannot parse as a record
                yield reject(f"{f.source}/{f.relpath}#after-{n}", "", f, "corrupt_file",
                             f"{f.path}: {size - records.offset} bytes after record {n} are not a WARC record",
                             limits)
    except Exception as err:  # warcio raises assorted errors on truncated/corrupt archives
        yield reject(f"{f.source}/{f.relpath}#after-{n}", "", f, "corrupt_file",
                     f"{f.path}: after record {n}: {type(err).__name__}: {err}", limits)
