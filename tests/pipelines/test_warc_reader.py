"""WARC input, on archives written with warcio from real documentation pages."""

import io

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from core.records import get_reject
from pipelines.inputs import InputSpec, ReadLimits, list_input_files
from pipelines.readers import read_files


def write_warc(path, pages, gzip=True):
    with open(path, "wb") as fh:
        w = WARCWriter(fh, gzip=gzip)
        for url, ctype, body in pages:
            req = w.create_warc_record(url, "request", payload=io.BytesIO(b"GET / HTTP/1.1\r\n\r\n"))
            w.write_record(req)
            headers = StatusAndHeaders("200 OK", [("Content-Type", ctype)], protocol="HTTP/1.0")
            w.write_record(w.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=headers))


def test_warc_responses_become_documents_and_rejects(sample_corpus, tmp_path):
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
    assert len(docs) == 4  # request records are not documents
    by_url = {d.metadata.get("url"): d for d in docs}
    page = by_url["https://docs.example/tutorial/classes.html"]
    assert get_reject(page) is None and page.metadata["content_type"] == "text/html"
    assert page.text == html.decode() and page.id.startswith("cc/urn:uuid:")
    assert get_reject(by_url["https://docs.example/logo.png"]) == ("read", "not_html")
    cafe = by_url["https://cafe.example/"]
    assert get_reject(cafe) is None and "Café crème" in cafe.text and cafe.metadata["encoding"] == "iso-8859-1"
    docs = list(read_files(files, ReadLimits(max_doc_bytes=1000, reject_text_chars=100)))
    assert {get_reject(d)[1] for d in docs if get_reject(d)} == {"not_html", "too_large"}
    # a reject keeps the record's url (and date, record id) so it can be traced to its page
    too_large = {d.metadata["url"] for d in docs if get_reject(d) == ("read", "too_large")}
    assert too_large == {"https://docs.example/tutorial/classes.html", "https://big.example/"}
    assert all(d.metadata.get("warc_record_id") for d in docs)


def test_truncated_warc_is_read_up_to_the_damage(sample_corpus, tmp_path):
    html = (sample_corpus.html_dir / "tutorial" / "classes.html").read_bytes()
    pages = [(f"https://docs.example/{i}", "text/html", html) for i in range(3)]
    write_warc(tmp_path / "full.warc.gz", pages)
    data = (tmp_path / "full.warc.gz").read_bytes()
    (tmp_path / "cut.warc.gz").write_bytes(data[: int(len(data) * 0.8)])
    docs = list(read_files(list_input_files([InputSpec(path=str(tmp_path / "cut.warc.gz"))]), ReadLimits()))
    assert [get_reject(d) for d in docs[:2]] == [None, None]
    assert get_reject(docs[-1]) == ("read", "corrupt_file")
