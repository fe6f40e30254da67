"""The WARC read benchmark compares equal work: FastWARC and warcio frame the same records and
read the same stored payload bytes, whether FastWARC gets a Python file or the path, on a plain
WARC, one gzipped per record, one gzipped as a whole (warcio refuses those after a record) and
one whose records say chunked but are stored dechunked (warcio's content_stream would try to
dechunk them; FastWARC reads them as stored)."""

import gzip
import importlib
import io
import shutil
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def warc_read(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))  # the script imports its sibling _report as a top-level module
    return importlib.import_module("warc_read")


def _write(path: Path, gz: bool, pages: list[tuple[str, list[tuple[str, str]], bytes]]) -> None:
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    with open(path, "wb") as fh:
        w = WARCWriter(fh, gzip=gz)
        for url, headers, body in pages:
            http = StatusAndHeaders("200 OK", headers, protocol="HTTP/1.1")
            w.write_record(w.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=http))


def test_both_sides_frame_the_same_records_and_payload_bytes(tmp_path, warc_read):
    html = [(f"https://e.example/{i}", [("Content-Type", "text/html")], f"<p>page {i}</p>".encode() * (i + 1))
            for i in range(5)]
    stored_dechunked = [("https://c.example/", [("Content-Type", "text/html"), ("Transfer-Encoding", "chunked")],
                         b"<!doctype html><p>not chunked as stored</p>")]
    _write(tmp_path / "plain.warc", False, html)
    _write(tmp_path / "per-record.warc.gz", True, html + stored_dechunked)
    with open(tmp_path / "plain.warc", "rb") as src, gzip.open(tmp_path / "whole.warc.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    paths = sorted(tmp_path.iterdir())
    payload = sum(len(b) for _, _, b in html) * 3 + len(stored_dechunked[0][2])
    assert warc_read.warcio_records(paths) == (16, payload)
    assert warc_read.fastwarc_records(paths) == (16, payload)
    assert warc_read.fastwarc_records(paths, native=True) == (16, payload)
