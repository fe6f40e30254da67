"""An archived HTTP payload as stored -> its digest verdict and the bytes a browser would render.

Both WARC backends (FastWARC and warcio) hand over the raw payload (after the HTTP headers,
still chunked or compressed as the server sent it), so digests are checked and bodies decoded
by one implementation: the two backends then give the same documents.

- ``WARC-Payload-Digest`` is over the payload as stored ("sha1:" + base32 in practice; base16
  and other hashlib algorithms are accepted). An unknown algorithm is "not checked", not a
  mismatch.
- ``Transfer-Encoding: chunked`` is undone, then ``Content-Encoding`` gzip/deflate/br. A body
  that does not decode as announced (servers mislabel) is kept as sent, as warcio does; a
  compressed body cut short decodes as far as it goes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import zlib


def payload_digest_ok(declared: str | None, raw: bytes) -> tuple[bool | None, str]:
    """(True/False, detail) for a declared ``algo:value`` digest of ``raw``; (None, "") when
    there is none or its algorithm is unknown."""
    if not declared or ":" not in declared:
        return None, ""
    algo, _, value = declared.strip().partition(":")
    try:
        h = hashlib.new(algo.lower().replace("-", ""), raw).digest()
    except ValueError:
        return None, ""
    value = value.strip()
    if value.upper() in (base64.b32encode(h).decode(), binascii.hexlify(h).decode().upper()):
        return True, ""
    return False, f"payload digest failed: declared {declared.strip()}, payload is {algo}:{base64.b32encode(h).decode()}"


def _dechunk(raw: bytes) -> bytes | None:
    out, pos = bytearray(), 0
    while True:
        end = raw.find(b"\r\n", pos)
        if end < 0:
            return bytes(out) if out else None  # cut inside the chunk framing: what we have
        try:
            size = int(raw[pos:end].split(b";", 1)[0].strip() or b"x", 16)
        except ValueError:
            return None
        if size == 0:
            return bytes(out)
        out += raw[end + 2:end + 2 + size]
        pos = end + 2 + size + 2


def _decompress(raw: bytes, encoding: str, limit: int) -> bytes | None:
    """At most ``limit`` bytes of output: a small compressed body can expand without bound."""
    try:
        if encoding in ("gzip", "x-gzip"):
            return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw, limit)
        if encoding == "deflate":
            try:
                return zlib.decompressobj().decompress(raw, limit)
            except zlib.error:  # raw deflate without the zlib header, as some servers send it
                return zlib.decompressobj(-zlib.MAX_WBITS).decompress(raw, limit)
        if encoding == "br":
            import brotli  # a dependency of fastwarc

            dec, out = brotli.Decompressor(), bytearray()
            for i in range(0, len(raw), 1 << 14):
                out += dec.process(raw[i:i + (1 << 14)])
                if len(out) >= limit:
                    break
            return bytes(out[:limit])
    except Exception:  # noqa: BLE001 - a mislabelled body is kept as sent
        return None
    return None


def decode_body(raw: bytes, transfer_encoding: str | None, content_encoding: str | None, limit: int) -> bytes:
    """The body with transfer and content encodings undone (at most ``limit`` bytes of it when
    decompressed), or as sent where they do not apply."""
    body = raw
    if transfer_encoding and "chunked" in transfer_encoding.lower():
        body = _dechunk(body) or body
    encoding = (content_encoding or "").strip().lower()
    if encoding and encoding != "identity":
        body = _decompress(body, encoding, limit) or body
    return body
