"""WARC input, on archives written with warcio from real documentation pages: every record one
outcome, digest mismatches per record (a ClueWeb-like archive), truncation, charsets."""

import base64
import hashlib
import io
import json
import subprocess
import sys
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from core.records import get_reject
from pipelines.inputs import InputSpec, ReadLimits, list_input_files
from pipelines.readers import read_files

ROOT = Path(__file__).resolve().parents[2]


def write_warc(path, pages, gzip=True, requests=True, wrong_digest=False):
    """``pages``: (url, content type, body). ``wrong_digest``: each response announces the
    (valid-looking) digest of other bytes, as ClueWeb's records do; warcio's writer computes
    digests itself, so the header line is replaced afterwards (same length: the record's
    Content-Length, which counts only the block, still holds)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        for url, ctype, body in pages:
            buf = io.BytesIO()
            w = WARCWriter(buf, gzip=gzip and not wrong_digest)
            if requests:
                w.write_record(w.create_warc_record(url, "request", payload=io.BytesIO(b"GET / HTTP/1.1\r\n\r\n")))
            headers = StatusAndHeaders("200 OK", [("Content-Type", ctype)], protocol="HTTP/1.0")
            w.write_record(w.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=headers))
            data = buf.getvalue()
            if wrong_digest:
                right = "sha1:" + base64.b32encode(hashlib.sha1(body).digest()).decode()
                other = "sha1:" + base64.b32encode(hashlib.sha1(body + b"x").digest()).decode()
                assert data.count(right.encode()) == 1
                data = data.replace(f"WARC-Payload-Digest: {right}".encode(), f"WARC-Payload-Digest: {other}".encode())
            fh.write(data)


def read_dir(path, **limits):
    return list(read_files(list_input_files([InputSpec(path=str(path), source="cc")]), ReadLimits(**limits)))


def test_warc_responses_become_documents_and_every_record_is_accounted(sample_corpus, tmp_path):
    html = (sample_corpus.html_dir / "tutorial" / "classes.html").read_bytes()
    latin = "<html><body><p>Café crème, naïve résumé.</p></body></html>".encode("latin-1")
    pages = [
        ("https://docs.example/tutorial/classes.html", "text/html; charset=utf-8", html),
        ("https://docs.example/logo.png", "image/png", b"\x89PNG\r\n\x1a\n" + bytes(100)),
        ("https://cafe.example/", "text/html; charset=iso-8859-1", latin),
        ("https://big.example/", "text/html", b"<p>" + b"x" * 5000 + b"</p>"),
    ]
    write_warc(tmp_path / "crawl.warc.gz", pages)
    files = list_input_files([InputSpec(path=str(tmp_path), source="cc")])
    assert [f.format for f in files] == ["warc"]
    docs = list(read_files(files, ReadLimits(max_doc_bytes=len(html) + 10, reject_text_chars=100)))
    assert len(docs) == 8  # 4 requests + 4 responses: each record one document or one reject
    assert [get_reject(d) for d in docs if d.metadata["warc_type"] == "request"] == [("read", "request_record")] * 4
    by_url = {d.metadata.get("url"): d for d in docs if d.metadata["warc_type"] == "response"}
    page = by_url["https://docs.example/tutorial/classes.html"]
    assert get_reject(page) is None and page.metadata["content_type"] == "text/html"
    assert page.text == html.decode() and page.id.startswith("cc/urn:uuid:")
    assert get_reject(by_url["https://docs.example/logo.png"]) == ("read", "not_html")
    cafe = by_url["https://cafe.example/"]
    # WHATWG: iso-8859-1 is windows-1252; the label as declared is kept beside it
    assert get_reject(cafe) is None and "Café crème" in cafe.text
    assert cafe.metadata["encoding"] == "windows-1252" and cafe.metadata["charset_declared"] == "iso-8859-1"
    assert "read_flags" not in page.metadata  # warcio's own digests match
    docs = read_dir(tmp_path, max_doc_bytes=1000, reject_text_chars=100)
    assert {get_reject(d)[1] for d in docs if get_reject(d)} == {"not_html", "too_large", "request_record"}
    # a reject keeps the record's url (and date, record id) so it can be traced to its page
    too_large = {d.metadata["url"] for d in docs if get_reject(d) == ("read", "too_large")}
    assert too_large == {"https://docs.example/tutorial/classes.html", "https://big.example/"}
    assert all(d.metadata.get("warc_record_id") for d in docs)


def clueweb_like(sample_corpus, path, n=29):
    """29 real documentation pages as responses whose payload digests do not match (ClueWeb's
    quirk), each after its request record, plain (uncompressed) WARC."""
    files = sorted((sample_corpus.html_dir / "library").glob("*.html"))[:n]
    pages = [(f"https://docs.python.org/3/library/{p.name}", "text/html; charset=utf-8", p.read_bytes())
             for p in files]
    write_warc(path, pages, gzip=False, wrong_digest=True)
    return pages


def test_digest_mismatch_keeps_every_record_by_default_and_rejects_on_request(sample_corpus, tmp_path):
    pages = clueweb_like(sample_corpus, tmp_path / "clueweb.warc")
    docs = read_dir(tmp_path)
    responses = [d for d in docs if d.metadata["warc_type"] == "response"]
    assert len(docs) == 2 * len(pages) and len(responses) == 29  # all 29, not one and the end of the file
    assert all(get_reject(d) is None for d in responses)
    assert all(d.metadata["read_flags"] == ["digest_mismatch"] for d in responses)
    assert "payload digest failed" in responses[0].metadata["digest_detail"]
    assert [d.text for d in responses] == [body.decode() for _, _, body in pages]
    strict = read_dir(tmp_path, on_digest_mismatch="reject")
    assert [get_reject(d) for d in strict if d.metadata["warc_type"] == "response"] == [("read", "digest_mismatch")] * 29


def cli(*args):
    res = subprocess.run([sys.executable, "-m", "pipelines", *args], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, f"exit {res.returncode}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res.stdout


def test_documents_job_counts_digest_mismatch_in_the_read_stage(sample_corpus, tmp_path):
    clueweb_like(sample_corpus, tmp_path / "in" / "clueweb.warc")
    cli("documents", "--input", str(tmp_path / "in"), "--output", str(tmp_path / "keep"))
    read = json.loads((tmp_path / "keep" / "job.json").read_text())["counts"]["read"]
    assert read["docs_in"] == 58 == read["kept"] + read["rejected"]
    assert read["kept"] == 29 and read["reasons"] == {"request_record": 29}
    assert read["flags"] == {"digest_mismatch": 29}
    cli("documents", "--input", str(tmp_path / "in"), "--output", str(tmp_path / "reject"),
        "--set", "read.on_digest_mismatch=reject")
    read = json.loads((tmp_path / "reject" / "job.json").read_text())["counts"]["read"]
    assert read["docs_in"] == 58 and read["kept"] == 0
    assert read["reasons"] == {"digest_mismatch": 29, "request_record": 29} and "flags" not in read


def test_truncated_warc_rejects_only_the_cut_record(sample_corpus, tmp_path):
    html = (sample_corpus.html_dir / "tutorial" / "classes.html").read_bytes()
    pages = [(f"https://docs.example/{i}", "text/html", html) for i in range(3)]
    for gz in (True, False):
        name = "full.warc.gz" if gz else "full.warc"
        write_warc(tmp_path / name, pages, gzip=gz, requests=False)
        data = (tmp_path / name).read_bytes()
        cut = tmp_path / "cut" / name
        cut.parent.mkdir(exist_ok=True)
        cut.write_bytes(data[: int(len(data) * 0.8)])  # inside the third response
        docs = read_dir(cut)
        assert [get_reject(d) for d in docs] == [None, None, ("read", "corrupt_file")], gz
        assert docs[-1].metadata["url"] == "https://docs.example/2"  # the cut record is named
        cut.unlink()


def test_a_gb2312_page_encoded_in_gbk_decodes(tmp_path):
    # 镕 and 喆 are in GBK, not in GB2312: real "gb2312" pages use them, browsers decode them
    zh = "<html><body><p>朱镕基和陶喆：这是一个声明为 GB2312、实际以 GBK 编码的网页。</p></body></html>"
    body = zh.encode("gbk")
    try:
        body.decode("gb2312")
        raise AssertionError("the page must need GBK")
    except UnicodeDecodeError:
        pass
    write_warc(tmp_path / "zh.warc.gz", [("https://zh.example/", "text/html; charset=gb2312", body)])
    (doc,) = [d for d in read_dir(tmp_path) if d.metadata["warc_type"] == "response"]
    assert get_reject(doc) is None and doc.text == zh
    assert doc.metadata["encoding"] == "gbk" and doc.metadata["charset_source"] == "http"


def test_wet_conversion_records_are_text_documents(tmp_path):
    with open(tmp_path / "crawl.warc.wet.gz", "wb") as fh:
        w = WARCWriter(fh, gzip=True)
        text = b"Plain text a crawler extracted from a page.\nSecond line of it."
        w.write_record(w.create_warc_record("https://wet.example/", "conversion", payload=io.BytesIO(text),
                                            warc_content_type="text/plain"))
    (doc,) = read_dir(tmp_path)
    assert get_reject(doc) is None and doc.metadata["content_type"] == "text/plain"
    assert doc.text.startswith("Plain text") and doc.metadata["warc_type"] == "conversion"


def test_a_glob_names_the_archives(sample_corpus, tmp_path):
    html = (sample_corpus.html_dir / "tutorial" / "classes.html").read_bytes()
    for i in range(3):
        write_warc(tmp_path / f"part-{i}.warc.gz", [("https://docs.example/", "text/html", html)], requests=False)
    (tmp_path / "notes.txt").write_text("not an archive")
    files = list_input_files([InputSpec(path=str(tmp_path / "part-*.warc.gz"))])
    assert [f.relpath for f in files] == ["part-0.warc.gz", "part-1.warc.gz", "part-2.warc.gz"]
    assert {f.source for f in files} == {tmp_path.name}


def test_both_backends_account_for_a_cut_anywhere_in_a_gzipped_archive(tmp_path):
    """FastWARC ends quietly at a gzip member cut in its first bytes; the reader holds the last
    record back until warcio has checked the rest of the file, so a cut anywhere gives what
    warcio alone gives: the records before it, and one corrupt_file."""
    buf = io.BytesIO()
    w = WARCWriter(buf, gzip=True)
    ends = []
    for i in range(3):
        headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.0")
        w.write_record(w.create_warc_record(f"https://docs.example/{i}", "response", http_headers=headers,
                                            payload=io.BytesIO(b"<p>A page of the test archive.</p>" * 20)))
        ends.append(buf.tell())
    data = buf.getvalue()
    path = tmp_path / "cut.warc.gz"
    for at in range(1, len(data), 5):
        path.write_bytes(data[:at])
        got = {}
        for backend in ("fastwarc", "warcio"):
            docs = read_dir(path, warc_reader=backend)
            got[backend] = [(d.metadata.get("url"), get_reject(d)) for d in docs]
        assert got["fastwarc"] == got["warcio"], at
        # every record whose gzip member began before the cut (by more than its 10-byte header)
        # is there: kept, rejected, or the corrupt_file that names the cut
        begun = sum(start + 10 < at for start in [0, *ends[:-1]])
        assert len(got["fastwarc"]) >= begun, at
