"""Fuzzing the document readers (JSONL, Parquet, our documents datasets, HTML/text, WARC).

Properties, for any bytes: the reader does not raise; every record comes out once, kept or
rejected with a categorical reason (kept + rejected = in); what comes out is writable as Arrow
rows (valid UTF-8 ids, texts and metadata) — the writer is where a lone surrogate used to crash.
"""

from __future__ import annotations

import gzip
import io
import json
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.records import docs_to_batch, document_schema, get_reject, reject_schema, reject_to_row
from pipelines.inputs import InputFile, ReadLimits
from pipelines.readers import read_file
from tests.reliability.ledger import LEDGER, fuzz_settings
from tests.reliability.strategies import DEEP, JSON, RAW, TEXT, cut

LIMITS = ReadLimits(max_doc_bytes=4096, reject_text_chars=512)


def _input(path: Path, fmt: str) -> InputFile:
    return InputFile(path=str(path), relpath=path.name, source="fuzz", format=fmt)


def check_writable(docs) -> tuple[int, int]:
    """Every document is either kept or a reject with a reason, and both kinds write as Arrow."""
    kept = [d for d in docs if get_reject(d) is None]
    rejects = [d for d in docs if get_reject(d) is not None]
    for d in rejects:
        stage, reason = get_reject(d)
        assert stage == "read" and reason and isinstance(reason, str)
    for d in kept:
        assert isinstance(d.id, str) and isinstance(d.text, str) and d.text.strip()
    docs_to_batch(kept, document_schema())
    pa.RecordBatch.from_pylist([reject_to_row(d) for d in rejects], schema=reject_schema())
    return len(kept), len(rejects)


# -- JSONL ---------------------------------------------------------------------------------------

@st.composite
def jsonl_line(draw) -> tuple[bytes, bool]:
    """(line bytes without newline, is it deliberately malformed)."""
    kind = draw(st.sampled_from(["record", "record", "record", "wrong_types", "not_object", "raw",
                                 "truncated", "deep", "huge", "bad_utf8"]))
    record = {"id": draw(st.text(max_size=20) | st.integers()), "text": draw(TEXT),
              "metadata": draw(st.dictionaries(st.text(max_size=8), JSON, max_size=3)),
              draw(st.text(max_size=8)): draw(JSON)}
    if draw(st.booleans()):
        record["metadata"] = json.dumps(record["metadata"])  # our own datasets store it as a JSON string
    if kind == "record":
        return json.dumps(record).encode(), False
    if kind == "wrong_types":
        key = draw(st.sampled_from(["id", "text", "metadata"]))
        record[key] = draw(JSON)
        return json.dumps(record).encode(), True
    if kind == "not_object":
        return json.dumps(draw(JSON)).encode(), True
    if kind == "raw":
        return draw(RAW).replace(b"\n", b" "), True
    if kind == "truncated":
        return cut(json.dumps(record).encode(), draw), True
    if kind == "deep":
        return draw(DEEP).encode(), True
    if kind == "huge":
        return json.dumps({"id": "big", "text": "x" * (LIMITS.max_doc_bytes + 1)}).encode(), True
    raw = json.dumps(record).encode()
    at = draw(st.integers(min_value=0, max_value=len(raw)))
    return raw[:at] + b"\xff\xc3" + raw[at:], True


@pytest.mark.area("readers: JSONL")
@pytest.mark.timeout(300)
@fuzz_settings(ci_examples=40)
@given(lines=st.lists(jsonl_line(), min_size=1, max_size=8), gz=st.booleans())
def test_jsonl_every_line_accounted_for(lines, gz):
    body = b"".join(line + b"\n" for line, _ in lines)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("x.jsonl.gz" if gz else "x.jsonl")
        path.write_bytes(gzip.compress(body) if gz else body)
        docs = list(read_file(_input(path, "jsonl"), LIMITS))
    expected = sum(1 for line, _ in lines if line.strip() or len(line) > LIMITS.max_doc_bytes)
    kept, rejected = check_writable(docs)
    LEDGER.add("readers: JSONL", tried=len(lines), faults=sum(f for _, f in lines),
               lost=max(0, expected - kept - rejected))
    assert kept + rejected == expected


@pytest.mark.area("readers: JSONL")
@fuzz_settings(ci_examples=15, long_examples=300)
@given(data=st.data())
def test_truncated_gzip_jsonl_is_read_up_to_the_damage(data):
    lines = [json.dumps({"id": f"d{i}", "text": data.draw(TEXT) + " words"}).encode() for i in range(6)]
    blob = gzip.compress(b"\n".join(lines) + b"\n")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "x.jsonl.gz"
        path.write_bytes(cut(blob, data.draw))
        docs = list(read_file(_input(path, "jsonl"), LIMITS))
    check_writable(docs)
    reasons = [get_reject(d)[1] for d in docs if get_reject(d)]
    LEDGER.add("readers: JSONL", tried=1, faults=1)
    assert "corrupt_file" in reasons  # the damage itself is a counted reject, never silence


# -- Parquet and our documents datasets ----------------------------------------------------------

COLUMN_VALUES = st.one_of(TEXT, st.integers(min_value=-(2**63), max_value=2**63 - 1), st.none(),
                          st.binary(max_size=30), st.lists(st.integers(min_value=0, max_value=9), max_size=3))


def _utf8(value):
    # Arrow strings are UTF-8 by construction: a lone surrogate cannot even be written to Parquet
    return value.encode("utf-8", "replace").decode("utf-8") if isinstance(value, str) else value


@pytest.mark.area("readers: Parquet")
@pytest.mark.timeout(300)
@fuzz_settings(ci_examples=30)
@given(rows=st.lists(st.fixed_dictionaries({"id": COLUMN_VALUES, "text": COLUMN_VALUES, "metadata": COLUMN_VALUES}),
                     min_size=1, max_size=6),
       fmt=st.sampled_from(["parquet", "documents"]), damage=st.sampled_from([None, None, "cut", "garbage"]),
       data=st.data())
def test_parquet_rows_accounted_for(rows, fmt, damage, data):
    columns = {}
    for key in ("id", "text", "metadata"):
        values = [_utf8(r[key]) for r in rows]
        types = {type(v) for v in values if v is not None}
        # one Arrow type per column: mixed columns become strings of their repr
        columns[key] = values if len(types) <= 1 else [None if v is None else repr(v) for v in values]
    buf = io.BytesIO()
    pq.write_table(pa.table(columns), buf)
    blob = buf.getvalue()
    if damage == "cut":
        blob = cut(blob, data.draw)
    elif damage == "garbage":
        at = data.draw(st.integers(min_value=0, max_value=len(blob) - 1))
        blob = blob[:at] + data.draw(RAW) + blob[at + 1:]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "x.parquet"
        path.write_bytes(blob)
        docs = list(read_file(_input(path, fmt), LIMITS))
    kept, rejected = check_writable(docs)
    reasons = [get_reject(d)[1] for d in docs if get_reject(d)]
    # a damaged file is read up to the damage and the rest is one corrupt_file reject; a file
    # lacking id/text/metadata is not one of our documents datasets (one reject says so)
    whole_file = ({"corrupt_file"} if damage else set()) | ({"not_a_documents_dataset"} if fmt == "documents" else set())
    ok = kept + rejected == len(rows) or bool(whole_file & set(reasons))
    faults = sum(not isinstance(r["text"], str) or not r["text"].strip() for r in rows) + (damage is not None)
    LEDGER.add("readers: Parquet", tried=len(rows), faults=faults, lost=0 if ok else len(rows) - kept - rejected)
    assert ok, (kept, rejected, reasons)


# -- HTML / text files -------------------------------------------------------------------------

CHARSETS = ["utf-8", "latin-1", "utf-7", "unicode_escape", "raw_unicode_escape", "utf-16", "utf-32", "shift_jis",
            "cp1252", "idna", "punycode", "rot13", "base64", "zlib", "nonexistent", "x" * 40]


@st.composite
def html_bytes(draw) -> tuple[bytes, bool]:
    body = draw(TEXT).encode("utf-8", "surrogatepass")
    charset = draw(st.sampled_from(CHARSETS))
    head = f'<html><head><meta charset="{charset}"></head><body><p>'.encode()
    raw = head + body + b"</p>" + draw(RAW)
    return raw, charset != "utf-8" or b"\xed" in body


@pytest.mark.area("readers: HTML/text")
@pytest.mark.timeout(300)
@fuzz_settings(ci_examples=40)
@given(page=html_bytes(), fmt=st.sampled_from(["html", "text"]), gz=st.sampled_from([None, "ok", "cut"]),
       data=st.data())
def test_whole_file_readers_give_one_document_per_file(page, fmt, gz, data):
    raw, fault = page
    suffix = {"html": ".html", "text": ".txt"}[fmt]
    if gz:
        raw = gzip.compress(raw)
        raw = cut(raw, data.draw) if gz == "cut" else raw
        suffix += ".gz"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"page{suffix}"
        path.write_bytes(raw)
        docs = list(read_file(_input(path, fmt), LIMITS))
    kept, rejected = check_writable(docs)
    LEDGER.add("readers: HTML/text", tried=1, faults=int(fault or gz == "cut"), lost=max(0, 1 - kept - rejected))
    assert kept + rejected == 1


# -- WARC ----------------------------------------------------------------------------------------

@st.composite
def warc_archive(draw) -> tuple[bytes, int, str | None, list[int], int]:
    """(archive bytes, response records written, damage, record end offsets, cut point) built
    with warcio's own writer."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=draw(st.booleans()))
    n = draw(st.integers(min_value=1, max_value=4))
    ends = []
    for i in range(n):
        ctype = draw(st.sampled_from(["text/html", "text/html; charset=utf-7", "text/html; charset=unicode_escape",
                                      "text/html; charset=bogus", "application/pdf", "", "text/HTML;charset=latin-1"]))
        payload = draw(TEXT).encode("utf-8", "surrogatepass") + draw(RAW)
        http = StatusAndHeaders("200 OK", [("Content-Type", ctype)] if ctype else [], protocol="HTTP/1.1")
        rec = writer.create_warc_record(f"http://example.test/{i}", "response", payload=io.BytesIO(payload),
                                        http_headers=http)
        writer.write_record(rec)
        ends.append(buf.tell())
    blob = buf.getvalue()
    damage = draw(st.sampled_from([None, None, "cut", "flip"]))
    # a fraction, not a byte offset: record ids and dates (hence lengths) differ between replays
    at = draw(st.integers(min_value=0, max_value=9999)) * len(blob) // 10_000
    if damage == "cut":
        blob = blob[:at]
    elif damage == "flip":
        blob = blob[:at] + bytes([blob[at] ^ 0xFF]) + blob[at + 1:]
    return blob, n, damage, ends, at


# a record's last bytes are a separator (plain: CRLF CRLF) or a gzip member's CRC + size: a cut
# there loses nothing, and the archive before it is complete and valid
SLACK = 8


@pytest.mark.area("readers: WARC/ARC")
@pytest.mark.timeout(300)
@fuzz_settings(ci_examples=30)
@given(archive=warc_archive())
def test_warc_records_accounted_for(archive):
    blob, n, damage, ends, at = archive
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "x.warc.gz"
        path.write_bytes(blob)
        docs = list(read_file(_input(path, "warc"), LIMITS))
    kept, rejected = check_writable(docs)
    accounted, corrupt = kept + rejected, "corrupt_file" in [get_reject(d)[1] for d in docs if get_reject(d)]
    if damage is None:
        ok = accounted == n
    elif damage == "cut":  # a cut at a record boundary leaves a valid, shorter archive
        complete = sum(e - SLACK <= at for e in ends)
        at_boundary = at > 0 and any(e - SLACK <= at <= e for e in ends)
        ok = corrupt or (at_boundary and accounted == complete)
    else:  # a flipped byte: every record still accounted for, or the damage reported
        ok = accounted >= n or corrupt
    LEDGER.add("readers: WARC/ARC", tried=n, faults=int(damage is not None), lost=0 if ok else n - accounted)
    assert ok, (n, damage, at, ends, kept, rejected, [get_reject(d) for d in docs])
