"""Page bytes -> text as browsers decide it (WHATWG labels), then charset-normalizer."""

import pytest

from pipelines.charset import WHATWG_LABELS, decode_page, whatwg_encoding


@pytest.mark.parametrize("label, name", [
    ("gb2312", "gbk"), ("GB_2312-80", "gbk"), ("x-gbk", "gbk"), ("iso-8859-1", "windows-1252"),
    ("latin1", "windows-1252"), ("US-ASCII", "windows-1252"), (" ascii ", "windows-1252"),
    ("iso-8859-9", "windows-1254"), ("tis-620", "windows-874"), ("ks_c_5601-1987", "euc-kr"),
    ("sjis", "shift_jis"), ("big5-hkscs", "big5"), ("utf8", "utf-8"), ("utf-16", "utf-16le"),
    ("utf-7", None), ("unicode_escape", None), ("bogus", None), ("iso-2022-kr", None),
])
def test_labels_map_as_the_encoding_standard_says(label, name):
    assert whatwg_encoding(label) == name
    assert len(WHATWG_LABELS) > 200


def test_declared_header_then_meta_then_utf8_then_detector():
    cafe = "<p>Café crème</p>".encode("cp1252")
    d = decode_page(cafe, "text/html; charset=ISO-8859-1")
    assert (d.text, d.encoding, d.source, d.declared) == ("<p>Café crème</p>", "windows-1252", "http", "ISO-8859-1")
    # bytes cp1252 leaves undefined decode to the C1 control of the same value, as in browsers
    assert decode_page(b"<p>a\x81b</p>", "text/html; charset=latin1").text == "<p>a\x81b</p>"
    meta = '<html><head><meta charset="koi8-r"></head><body>Привет</body></html>'.encode("koi8-r")
    d = decode_page(meta, "text/html")
    assert "Привет" in d.text and (d.encoding, d.source) == ("koi8-r", "meta")
    # an ASCII-readable <meta> that says UTF-16 means UTF-8
    d = decode_page('<meta charset="utf-16"><p>naïve</p>'.encode(), "text/html")
    assert d.text.endswith("naïve</p>") and d.encoding == "utf-8"
    d = decode_page("<p>sans déclaration</p>".encode(), None)
    assert (d.encoding, d.source, d.confidence) == ("utf-8", "utf-8", None)
    ru = ("<p>Это русский текст в кодировке windows-1251, довольно длинный, "
          "чтобы детектор был уверен в ответе.</p>").encode("cp1251")
    d = decode_page(ru, "text/html")
    assert d.source == "detected" and "русский" in d.text and 0.8 <= d.confidence <= 1.0
    assert d.metadata()["charset_confidence"] == d.confidence


def test_bom_wins_and_a_failing_declaration_is_not_trusted_blindly():
    assert decode_page(b"\xef\xbb\xbf<p>x</p>", "text/html; charset=latin1").source == "bom"
    # declared UTF-8, one damaged byte in a long page: the detector or the lenient declared decode
    page = ("<p>" + "Grüße aus Köln. " * 200 + "</p>").encode() + b"\xff"
    d = decode_page(page, "text/html; charset=utf-8")
    assert "Grüße aus Köln" in d.text and d.text.endswith("\ufffd") and d.source == "http-lenient"
    d = decode_page(page, None)  # undeclared: its valid UTF-8 letters say what it is
    assert "Grüße aus Köln" in d.text and d.source == "utf-8-lenient"


def test_undecodable_means_undecodable():
    d = decode_page(bytes(range(256)) * 20, "text/html; charset=utf-8")
    assert d.text is None and d.source == "none" and d.declared == "utf-8"
