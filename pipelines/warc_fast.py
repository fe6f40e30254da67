"""FastWARC (Rust) as the WARC framing layer: records and their stored payloads, several times
faster than warcio (``benchmarks/warc_read.py`` measures it on the real archives).

FastWARC reads WARC only (not ARC) and stops with an ``OSError`` at bytes it cannot parse;
``pipelines.warc_reader`` then lets warcio, which is more lenient (it reads records whose
Content-Length is off by a few bytes, or whose lines end in CR CR LF), go on from the first
record not yet emitted. A record FastWARC yields without its Content-Length (a gzip member cut
short) or with fewer payload bytes than announced is handed over the same way, so warcio's
checks decide what is cut: FastWARC is the fast path for clean records, never the judge of
damaged ones. HTTP bodies are not decoded here (``auto_decode='none'``): digests and decoding
are ``warc_records``'s, shared by both backends.
"""

from __future__ import annotations

from collections.abc import Iterator

from core.storage import open_input
from pipelines.warc_records import WarcRecord, is_page_type


class HandOver(OSError):
    """FastWARC cannot frame this record as announced: warcio, the arbiter, reads it (and the
    rest of the file) and decides whether it is cut, malformed or fine."""


def fastwarc_available() -> bool:
    try:
        import fastwarc.warc  # noqa: F401
    except ImportError:
        return False
    return True


def fastwarc_records(path: str, limits) -> Iterator[WarcRecord]:
    """Each record of the WARC file at ``path``; raises OSError where FastWARC cannot go on."""
    from fastwarc.warc import ArchiveIterator

    with open_input(path) as fh:
        for n, record in enumerate(ArchiveIterator(fh, parse_http=True, auto_decode="none"), start=1):
            # one dict per record: HeaderMap.get costs more than the framing of a small record
            h: dict[str, str] = {}
            for key, value in record.headers.items():
                h.setdefault(key.lower(), value)
            rec_type = (h.get("warc-type") or str(record.record_type)).strip()
            rec = WarcRecord(n, rec_type, h.get("warc-record-id"), h.get("warc-target-uri") or "",
                             h.get("warc-date"), payload_digest=h.get("warc-payload-digest"),
                             truncated=h.get("warc-truncated"), offset=record.stream_pos)
            length = h.get("content-length")
            if length is None:
                raise HandOver(f"record {n}: no Content-Length")
            http = record.http_headers if record.is_http_parsed else None
            if rec_type == "response":
                rec.content_type = (http.get("Content-Type") if http is not None else "") or ""
            else:
                rec.content_type = h.get("content-type") or ""
            got = 0
            if is_page_type(rec_type, rec.content_type):
                rec.payload = record.reader.read(limits.max_doc_bytes + 1)
                got = len(rec.payload)
                if http is not None:
                    rec.transfer_encoding = http.get("Transfer-Encoding")
                    rec.content_encoding = http.get("Content-Encoding")
            got += record.reader.consume()
            if got < record.content_length:  # the payload FastWARC announced, less what it had
                raise HandOver(f"record {n}: {record.content_length - got} of {record.content_length} payload bytes missing")
            yield rec
