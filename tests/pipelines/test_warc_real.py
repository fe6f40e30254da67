"""Real web archives no one here wrote (warcio's and pywb's test archives, from their sdists):
every record of every file is accounted for one by one, against warcio's own walk of the file."""

import gzip
from collections import Counter
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed

from core.cache import cache_dir
from core.records import get_reject
from pipelines.charset import decode_page
from pipelines.inputs import InputFile, ReadLimits
from pipelines.readers import read_file
from samples.web_archives import obtain_web_archives

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def web_archives():
    return obtain_web_archives(cache_dir(), log=lambda m: None)


def warcio_walk(path: Path) -> list[dict]:
    """The oracle: warcio's own records (type, url, content type, payload, digest verdict), read
    as one decompressed stream when the file is gzipped as a whole (warcio stops there)."""
    def walk(stream):
        out = []
        for rec in ArchiveIterator(stream, check_digests=True, arc2warc=False):
            http = rec.http_headers.get_header("Content-Type") if rec.http_headers else None
            body = rec.content_stream().read()
            url = rec.rec_headers.get_header("uri" if rec.format == "arc" else "WARC-Target-URI") or ""
            out.append({"type": rec.rec_type, "url": url,
                        "ctype": http if rec.rec_type == "response" else rec.rec_headers.get_header("Content-Type"),
                        "body": body, "digest": rec.digest_checker.passed})
        return out

    try:
        with open(path, "rb") as fh:
            return walk(fh)
    except ArchiveLoadFailed:
        with gzip.open(path, "rb") as gz:
            return walk(gz)


def read(path: Path):
    return list(read_file(InputFile(path=str(path), relpath=path.name, source="real", format="warc"), ReadLimits()))


def test_every_record_of_every_real_archive_is_accounted_one_by_one(web_archives):
    assert len(web_archives) >= 20
    for path in web_archives:
        records, docs = warcio_walk(path), read(path)
        # one output per record, in order, each naming its record: nothing lost, nothing invented
        assert [(d.metadata.get("warc_type"), d.metadata.get("url")) for d in docs] == [
            (r["type"], r["url"]) for r in records], path.name
        for rec, doc in zip(records, docs, strict=True):
            mark = get_reject(doc)
            if mark is None:
                assert rec["type"] in ("response", "resource") and "html" in (rec["ctype"] or "").lower()
                assert doc.text.strip() and doc.metadata["content_type"] == "text/html"
                # our chunked/gzip decoding of the stored payload gives warcio's decoded body
                assert doc.text == decode_page(rec["body"], rec["ctype"]).text
                assert ("digest_mismatch" in doc.metadata.get("read_flags", [])) == (rec["digest"] is False)
            else:
                assert mark[0] == "read" and mark[1], (path.name, mark)
                if rec["type"] not in ("response", "resource", "conversion"):
                    assert mark[1] in (f"{rec['type']}_record", "malformed_record")


def test_what_the_real_archives_hold(web_archives):
    by_name = {p.name: p for p in web_archives}
    summary = {}
    for name, path in by_name.items():
        docs = read(path)
        summary[name] = (len(docs), sum(get_reject(d) is None for d in docs),
                         Counter(get_reject(d)[1] for d in docs if get_reject(d)))
    # the iana.org crawl: 343 records, every HTML response with a body kept
    n, kept, reasons = summary["pywb-iana.warc.gz"]
    html = [r for r in warcio_walk(by_name["pywb-iana.warc.gz"])
            if r["type"] == "response" and "html" in (r["ctype"] or "") and r["body"].strip()]
    assert n == 343 and kept == len(html) == 18
    assert reasons["request_record"] == 171 and reasons["revisit_record"] == 123
    # a payload that does not match its digest (pywb's "extra" capture) is kept and flagged
    extra = read(by_name["pywb-example-extra.warc"])
    flagged = [d for d in extra if "digest_mismatch" in d.metadata.get("read_flags", [])]
    assert len(flagged) == 1 and get_reject(flagged[0]) is None and "Example Domain" in flagged[0].text
    strict = list(read_file(InputFile(path=str(by_name["pywb-example-extra.warc"]), relpath="x", source="real",
                                      format="warc"), ReadLimits(on_digest_mismatch="reject")))
    assert Counter(get_reject(d)[1] for d in strict if get_reject(d))["digest_mismatch"] == 1
    # warcio's truncated record: its digests fail, its gzip body still decodes to the whole page
    (page,) = [d for d in read(by_name["warcio-example-trunc.warc"]) if get_reject(d) is None]
    assert page.metadata["read_flags"] == ["digest_mismatch"] and "</html>" in page.text
    # a gzip over the whole file (warcio refuses it after record 1): all 6 records read
    assert summary["warcio-example-bad-non-chunked.warc.gz"][0] == 6
    # an ARC file with lengths -1 and "abc": counted rejects, not an end of the file
    assert summary["warcio-bad.arc"] == (4, 0, Counter({"malformed_record": 3, "not_html": 1}))
    assert summary["warcio-example.arc.gz"][1] == 1  # ARC responses are pages like WARC ones


def test_fastwarc_and_warcio_give_the_same_documents(web_archives):
    def outputs(path, backend):
        f = InputFile(path=str(path), relpath=path.name, source="real", format="warc")
        return [(d.id, d.text, get_reject(d), {k: v for k, v in d.metadata.items() if k != "reject_detail"})
                for d in read_file(f, ReadLimits(warc_reader=backend))]

    for path in web_archives:
        assert outputs(path, "fastwarc") == outputs(path, "warcio"), path.name
