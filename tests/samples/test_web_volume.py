"""The real-volume WARC builder on a small subset: 30 pages of the Python docs (already in the cache
for the sample corpus) in two files — distinct pages, every record read back by our own reader,
digests right, HTTP headers that parse, and the same bytes when built again."""

import base64
import gzip
import hashlib
from collections import Counter

import pytest
from warcio.archiveiterator import ArchiveIterator

from core.records import get_reject
from pipelines.inputs import InputFile, ReadLimits
from pipelines.readers import read_file
from samples.web_volume import (
    MANIFEST,
    MAX_PAYLOAD,
    SITES,
    Site,
    build_web_volume,
    page_charset,
    page_url,
    split_evenly,
)

PAGES = 30


@pytest.fixture(scope="module")
def volume(sample_corpus, tmp_path_factory):
    return build_web_volume(dest=tmp_path_factory.mktemp("wv") / "a", sites=SITES[:1], max_pages=PAGES, files=2,
                            log=lambda m: None)


def test_every_record_is_read_back_by_our_reader(volume):
    outcomes, urls = Counter(), []
    for warc in volume.warcs:
        f = InputFile(path=str(warc), relpath=warc.name, source="wv", format="warc")
        for doc in read_file(f, ReadLimits()):
            outcomes[get_reject(doc)] += 1
            if get_reject(doc) is None:
                urls.append(doc.metadata["url"])
                assert doc.metadata["charset_source"] == "http" and doc.metadata["content_type"] == "text/html"
                assert "read_flags" not in doc.metadata  # no digest mismatch
    # one warcinfo per file, one response per page: nothing else, nothing lost
    assert outcomes == {None: PAGES, ("read", "warcinfo_record"): len(volume.warcs)}
    assert len(set(urls)) == PAGES and all(u.startswith("https://docs.python.org/3.11/") for u in urls)
    assert [f["records"] for f in volume.manifest["files"]] == [PAGES // 2 + 1] * 2


def test_pages_are_distinct_and_digests_and_headers_are_right(volume):
    bodies = []
    for warc in volume.warcs:
        with open(warc, "rb") as fh:
            records = list(ArchiveIterator(fh, check_digests="raise"))  # warcio checks block and payload
        with open(warc, "rb") as fh:
            for rec in ArchiveIterator(fh):
                h = rec.rec_headers
                assert h.protocol == "WARC/1.1" and h.get_header("WARC-Date").endswith("Z")
                if rec.rec_type == "warcinfo":
                    assert h.get_header("WARC-Filename") == warc.name
                    continue
                body = rec.raw_stream.read()
                algo, _, value = h.get_header("WARC-Payload-Digest").partition(":")
                assert algo == "sha1" and value == base64.b32encode(hashlib.sha1(body).digest()).decode()
                http = rec.http_headers
                assert http.protocol == "HTTP/1.1" and http.get_statuscode() == "200"
                assert int(http.get_header("Content-Length")) == len(body) <= MAX_PAYLOAD
                assert http.get_header("Content-Type") == f"text/html; charset={page_charset(body)}"
                assert http.get_header("Date").endswith("GMT") and http.get_header("Server")
                assert http.get_header("Last-Modified")
                bodies.append(body)
        assert [r.rec_type for r in records] == ["warcinfo"] + ["response"] * (len(records) - 1)
    assert len(bodies) == PAGES == len({hashlib.sha256(b).digest() for b in bodies})
    assert volume.manifest["pages"] == PAGES and volume.manifest["html_bytes"] == sum(map(len, bodies))
    assert all(gzip.open(w).read(8) == b"WARC/1.1" for w in volume.warcs)


def test_the_build_is_deterministic_and_cached(volume, tmp_path):
    again = build_web_volume(dest=tmp_path / "b", sites=SITES[:1], max_pages=PAGES, files=2, log=lambda m: None)
    assert [w.read_bytes() for w in again.warcs] == [w.read_bytes() for w in volume.warcs]
    logged = []
    same = build_web_volume(dest=volume.folder, sites=SITES[:1], max_pages=PAGES, files=2, log=logged.append)
    assert same.warcs == volume.warcs and logged == []  # the manifest says it is built: nothing redone
    assert (volume.folder / MANIFEST).is_file()


def test_duplicates_and_long_pages(tmp_path, monkeypatch):
    """A copy of a page is dropped by content; a body over 1 MiB is cut there and says so
    (a package made here: no real one has both)."""
    import samples.web_volume as wv

    tree = tmp_path / "pkg" / "doc"
    tree.mkdir(parents=True)
    (tree / "a.html").write_bytes(b"<html><head><meta charset='ISO-8859-1'></head><body>caf\xe9</body></html>")
    (tree / "b.html").write_bytes((tree / "a.html").read_bytes())
    (tree / "big.htm").write_bytes(b"<html><body>" + b"x" * (MAX_PAYLOAD + 10) + b"</body></html>")
    (tree / "link.html").symlink_to(tree / "big.htm")
    (tmp_path / "pkg" / ".unpacked").write_text("pkg_1.0_all.deb")
    site = Site("pkg", "doc", "https://example.org/", "nginx")
    monkeypatch.setattr(wv, "fetch_package", lambda name, root, log: tmp_path / "pkg")
    vol = build_web_volume(tmp_path / "cache", dest=tmp_path / "out", sites=(site,), files=1, log=lambda m: None)
    assert vol.manifest["packages"]["pkg"] | {"html_bytes": 0} == {
        "deb": "pkg_1.0_all.deb", "url": "https://example.org/", "pages": 2, "duplicates_dropped": 1,
        "html_bytes": 0, "truncated": 1}
    with open(vol.warcs[0], "rb") as fh:
        recs = {r.rec_headers.get_header("WARC-Target-URI"): (r.rec_headers.get_header("WARC-Truncated"),
                                                              r.http_headers.get_header("Content-Type"),
                                                              len(r.content_stream().read()))
                for r in ArchiveIterator(fh, check_digests="raise") if r.rec_type == "response"}
    assert recs["https://example.org/big.htm"] == ("length", "text/html; charset=utf-8", MAX_PAYLOAD)
    assert recs["https://example.org/a.html"][:2] == (None, "text/html; charset=iso-8859-1")


def test_urls_and_charsets():
    django = next(s for s in SITES if s.pretty)
    assert page_url(django, "topics/db/models.html") == "https://docs.djangoproject.com/en/3.2/topics/db/models/"
    assert page_url(django, "index.html") == "https://docs.djangoproject.com/en/3.2/"
    assert page_url(SITES[0], "library/os.html") == "https://docs.python.org/3.11/library/os.html"
    assert page_charset(b'<meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-1">') == "iso-8859-1"
    assert page_charset("<p>caf\u00e9</p>".encode()) == "utf-8"
    assert page_charset(b"<p>caf\xe9</p>") == "windows-1252"
    assert [len(c) for c in split_evenly(list(range(10)), 3)] == [4, 3, 3]
    assert split_evenly([1], 8) == [[1]]
