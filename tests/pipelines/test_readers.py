import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq

from core.records import REJECT_DETAIL_KEY, get_reject
from pipelines.inputs import InputSpec, ReadLimits, list_input_files
from pipelines.readers import read_files

LIMITS = ReadLimits(max_doc_bytes=1000, reject_text_chars=30)


def read(specs, limits=LIMITS):
    return list(read_files(list_input_files(specs), limits))


def test_jsonl_bad_lines_become_counted_rejects(tmp_path):
    p = tmp_path / "docs.jsonl"
    lines = [
        json.dumps({"id": "ok", "text": "a good document", "lang": "en"}).encode(),
        b"{not json",
        b'"just a string"',
        json.dumps({"id": "e", "text": "   "}).encode(),
        json.dumps({"id": "m", "body": "no text field"}).encode(),
        json.dumps({"id": "n", "text": 5}).encode(),
        b'{"id": "u", "text": "caf\xe9"}',  # latin-1 byte inside a UTF-8 file
        json.dumps({"id": "big", "text": "x" * 5000}).encode(),
        b"",
        json.dumps({"text": "no id", "metadata": {"url": "http://x"}}).encode(),
    ]
    p.write_bytes(b"\n".join(lines) + b"\n")
    docs = read([InputSpec(path=str(p), source="web")])
    by_id = {d.id: d for d in docs}
    outcome = {d.id: get_reject(d) for d in docs}
    assert outcome == {
        "ok": None,
        "web/docs.jsonl#L2": ("read", "malformed_json"),
        "web/docs.jsonl#L3": ("read", "malformed_json"),
        "e": ("read", "empty_text"),
        "m": ("read", "missing_text"),
        "n": ("read", "missing_text"),
        "web/docs.jsonl#L7": ("read", "undecodable"),
        "web/docs.jsonl#L8": ("read", "too_large"),
        "web/docs.jsonl#L10": None,
    }
    assert by_id["ok"].metadata == {
        "lang": "en",
        "source": "web",
        "file": "docs.jsonl",
        "content_type": "text/plain",
    }
    assert by_id["web/docs.jsonl#L10"].metadata["url"] == "http://x"
    assert "line 2" in by_id["web/docs.jsonl#L2"].metadata[REJECT_DETAIL_KEY]
    assert len(by_id["web/docs.jsonl#L8"].text) == 30  # reject text is bounded


def test_enormous_document_is_rejected_without_parsing(tmp_path):
    p = tmp_path / "huge.jsonl"
    big = 50 * 2**20
    with open(p, "w") as fh:
        fh.write('{"id": "huge", "text": "' + "a" * big + '"}\n')
        fh.write('{"id": "small", "text": "fine"}\n')
    docs = read([InputSpec(path=str(p))], ReadLimits())
    assert [(d.id, get_reject(d)) for d in docs] == [
        ("huge/huge.jsonl#L1", ("read", "too_large")),
        ("small", None),
    ]
    assert len(docs[0].text) <= ReadLimits().reject_text_chars
    (tmp_path / "page.html").write_bytes(b"<p>" + b"b" * big + b"</p>")
    [page] = read([InputSpec(path=str(tmp_path / "page.html"))], ReadLimits())
    assert get_reject(page) == ("read", "too_large")


def test_html_directory_glob_max_files_and_gzip(tmp_path):
    (tmp_path / "a.html").write_text("<html><body><p>A</p></body></html>")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.html.gz").write_bytes(gzip.compress(b"<p>B</p>"))
    (tmp_path / "sub" / "c.htm").write_text("<p>C</p>")
    (tmp_path / "style.css").write_text("body{}")
    (tmp_path / "notes.txt").write_text("plain text notes")
    (tmp_path / "empty.html").write_text("  \n")
    files = list_input_files([InputSpec(path=str(tmp_path), source="site")])
    assert [f.relpath for f in files] == ["a.html", "empty.html", "notes.txt", "sub/b.html.gz", "sub/c.htm"]
    docs = read([InputSpec(path=str(tmp_path), source="site", glob="*.htm*")])
    assert {d.id: get_reject(d) for d in docs} == {
        "site/a.html": None,
        "site/empty.html": ("read", "empty_text"),
        "site/sub/b.html.gz": None,
        "site/sub/c.htm": None,
    }
    assert docs[0].metadata["content_type"] == "text/html"
    assert [d.text for d in docs if d.id == "site/sub/b.html.gz"] == ["<p>B</p>"]
    assert len(list_input_files([InputSpec(path=str(tmp_path), max_files=2)])) == 2


def test_non_utf8_html_is_decoded_when_confident_else_rejected(tmp_path):
    text = "Les élèves étudient à l'école. " * 40
    (tmp_path / "fr.html").write_bytes(f"<p>{text}</p>".encode("cp1252"))
    (tmp_path / "declared.html").write_bytes(
        '<html><head><meta charset="koi8-r"></head><body>Привет, мир</body></html>'.encode("koi8-r")
    )
    (tmp_path / "bin.html").write_bytes(bytes(range(128, 256)) * 3)
    docs = {d.id.split("/")[-1]: d for d in read([InputSpec(path=str(tmp_path))], ReadLimits())}
    assert get_reject(docs["fr.html"]) is None and "élèves" in docs["fr.html"].text
    assert docs["fr.html"].metadata["encoding"] != "utf-8"
    assert (
        "Привет, мир" in docs["declared.html"].text and docs["declared.html"].metadata["encoding"] == "koi8-r"
    )
    assert get_reject(docs["bin.html"]) == ("read", "undecodable")


def test_corrupt_gzip_and_parquet(tmp_path):
    good = gzip.compress(
        b"".join(json.dumps({"id": f"d{i}", "text": f"doc {i}"}).encode() + b"\n" for i in range(50))
    )
    (tmp_path / "cut.jsonl.gz").write_bytes(good[: len(good) // 2])
    docs = read([InputSpec(path=str(tmp_path / "cut.jsonl.gz"))])
    assert get_reject(docs[-1]) == ("read", "corrupt_file")
    assert all(get_reject(d) is None for d in docs[:-1])
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not really")
    [bad] = read([InputSpec(path=str(tmp_path / "bad.parquet"))])
    assert get_reject(bad) == ("read", "corrupt_file")
    pq.write_table(
        pa.table({"id": ["p1", "p2"], "text": ["one", ""], "url": ["u1", "u2"]}), tmp_path / "ok.parquet"
    )
    docs = read([InputSpec(path=str(tmp_path / "ok.parquet"), source="pq")])
    assert [(d.id, get_reject(d)) for d in docs] == [("p1", None), ("p2", ("read", "empty_text"))]
    assert docs[0].metadata["url"] == "u1"
