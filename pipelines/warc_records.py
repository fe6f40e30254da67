"""One web-archive record -> one document or one reject, whichever library parsed it.

The WARC backends (``pipelines.warc_reader``: FastWARC, warcio for ARC and what FastWARC cannot
read) turn each record into a ``WarcRecord`` and this module decides its outcome, so both give
the same documents, rejects and reasons. Every record of an archive comes out exactly once:

- ``response`` (HTTP, also ARC records), ``resource`` and ``conversion`` (WET: extracted text)
  records are pages: HTML becomes a document with ``content_type`` text/html (the extractor
  takes it from there), WET text one with text/plain; other payloads are ``not_html``;
- every other record (``request``, ``warcinfo``, ``metadata``, ``revisit``, …) is a reject
  named for its type (``request_record``): not a page, but counted, so in = kept + rejected
  holds per archive and a lost record would show;
- a record cut short (a truncated archive) is ``corrupt_file`` — only that record;
- a payload digest that does not match is the record's own outcome, never the end of the
  file: kept with ``digest_mismatch`` in ``metadata["read_flags"]`` (counted in job.json's
  ``read`` stage as ``flags``), or rejected with that reason (``ReadLimits.on_digest_mismatch``).
  Some crawls (ClueWeb) carry digests that never match their payloads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from datatrove.data import Document

from core.records import READ_FLAGS, find_lone_surrogate
from pipelines.charset import decode_page
from pipelines.http_payload import decode_body, payload_digest_ok

DIGEST_MISMATCH = "digest_mismatch"
PAGE_TYPES = frozenset({"response", "resource", "conversion"})


@dataclass
class WarcRecord:
    """What a backend parsed of one record: framing and headers, and the payload as stored."""

    n: int  # position in the archive, from 1
    rec_type: str
    record_id: str | None
    url: str
    date: str | None
    content_type: str = ""  # the page's, charset included: HTTP header for responses, the record's otherwise
    payload: bytes | None = None  # as stored, read only for pages of a type we take (at most max_doc_bytes + 1)
    transfer_encoding: str | None = None
    content_encoding: str | None = None
    payload_digest: str | None = None  # WARC-Payload-Digest as declared
    cut: str | None = None  # why the record is incomplete (the archive ends inside it)
    malformed: str | None = None  # a header we cannot use (ARC length "abc")
    truncated: str | None = None  # the crawler's WARC-Truncated reason: a partial payload it kept
    offset: int | None = None  # where the record starts in the file (its gzip member's start)


def is_page_type(rec_type: str, content_type: str) -> bool:
    """Whether a record's payload is worth reading: HTML, or WET text."""
    if rec_type == "conversion":
        return True
    return rec_type in PAGE_TYPES and "html" in content_type.lower()


def record_outcome(rec: WarcRecord, f, limits, reject: Callable[..., Document]) -> Document:
    """The record's document or reject (``reject`` is ``pipelines.readers._reject``)."""
    rid = rec.record_id or f"{f.relpath}#{rec.n}"
    doc_id = f"{f.source}/{rid.strip('<>')}"
    meta = {"source": f.source, "file": f.relpath, "url": rec.url, "warc_date": rec.date,
            "warc_record_id": rid, "warc_type": rec.rec_type}
    where = f"{f.path}: record {rec.n}"

    def rej(reason: str, detail: str, text: bytes | str = "") -> Document:
        if isinstance(text, bytes):
            text = text[: limits.reject_text_chars].decode("utf-8", "replace")
        return reject(doc_id, text, f, reason, detail, limits, meta)

    if rec.cut:
        return rej("corrupt_file", f"{where}: {rec.cut}")
    if rec.malformed:
        return rej("malformed_record", f"{where}: {rec.malformed}")
    if rec.rec_type not in PAGE_TYPES:
        return rej(f"{rec.rec_type}_record", f"{where}: a {rec.rec_type} record is not a page")
    if not is_page_type(rec.rec_type, rec.content_type):
        return rej("not_html", f"{rec.url}: content type {rec.content_type or 'missing'!r}")
    stored = rec.payload or b""
    if len(stored) > limits.max_doc_bytes:
        return rej("too_large", f"{rec.url}: payload over max_doc_bytes={limits.max_doc_bytes}", stored)
    digest_ok, digest_detail = payload_digest_ok(rec.payload_digest, stored)
    if digest_ok is False:
        if limits.on_digest_mismatch == "reject":
            return rej(DIGEST_MISMATCH, f"{rec.url}: {digest_detail}", stored)
        meta[READ_FLAGS] = [DIGEST_MISMATCH]
        meta["digest_detail"] = digest_detail
    payload = decode_body(stored, rec.transfer_encoding, rec.content_encoding, limits.max_doc_bytes + 1)
    if len(payload) > limits.max_doc_bytes:  # a compressed body can expand past the limit
        return rej("too_large", f"{rec.url}: decoded payload over max_doc_bytes={limits.max_doc_bytes}",
                   payload[: limits.reject_text_chars])
    if rec.truncated:
        meta["warc_truncated"] = rec.truncated
    html = rec.rec_type != "conversion"
    decoded = decode_page(payload, rec.content_type, html=html)
    text = decoded.text
    # strict WHATWG codecs cannot yield a lone surrogate; a detector's exotic codec might
    if text is not None and decoded.source == "detected" and find_lone_surrogate(text):
        text = None
    if text is None:
        return rej("undecodable", f"{rec.url}: no charset decodes it (declared {decoded.declared!r})", payload)
    if not text.strip():
        return rej("empty_text", f"{rec.url}: empty payload", text)
    meta.update(content_type="text/html" if html else "text/plain", **decoded.metadata())
    return Document(text=text, id=doc_id, metadata=meta)
