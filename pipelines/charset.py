"""Bytes of a web page -> text, the way a browser decides its encoding, then a real detector.

Order (WHATWG HTML "determining the character encoding", simplified to what a crawl needs):
a byte-order mark; the charset of the HTTP ``Content-Type`` header; a ``<meta>`` charset in the
first bytes; then, for an undeclared page, strict UTF-8; then ``charset-normalizer``'s best
guess, whose confidence is recorded. Labels are mapped as the WHATWG Encoding Standard maps
them, which is how every browser reads the web: ``gb2312`` is decoded as GBK (its superset,
whose WHATWG decoder is GB18030's), ``iso-8859-1``/``latin1``/``ascii`` as windows-1252, a
``<meta>`` that says ``utf-16`` as UTF-8 (an ASCII-readable meta cannot be UTF-16). A label the
standard does not know (``utf-7``, ``unicode_escape``, ``bogus``) is ignored, as browsers
ignore it — which also keeps codecs that can produce lone surrogates out.

A declared encoding that does not decode strictly is used with replacement characters when
they are rare (a few damaged bytes, shown as a browser shows them); otherwise it is not
trusted, and the detector is asked. Only when nothing decodes is the page undecodable, and that
word then means it.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

# WHATWG encoding name -> (Python codec, its labels besides the name). Python's codecs match
# the standard's decoders for these (windows-1252 and friends: see _c1 below).
_ENCODINGS: dict[str, tuple[str, tuple[str, ...]]] = {
    "utf-8": ("utf-8", ("unicode-1-1-utf-8", "unicode11utf8", "unicode20utf8", "utf8", "x-unicode20utf8")),
    "ibm866": ("cp866", ("866", "cp866", "csibm866")),
    "iso-8859-2": ("iso8859_2", ("csisolatin2", "iso-ir-101", "iso8859-2", "iso88592", "iso_8859-2",
                                 "iso_8859-2:1987", "l2", "latin2")),
    "iso-8859-3": ("iso8859_3", ("csisolatin3", "iso-ir-109", "iso8859-3", "iso88593", "iso_8859-3",
                                 "iso_8859-3:1988", "l3", "latin3")),
    "iso-8859-4": ("iso8859_4", ("csisolatin4", "iso-ir-110", "iso8859-4", "iso88594", "iso_8859-4",
                                 "iso_8859-4:1988", "l4", "latin4")),
    "iso-8859-5": ("iso8859_5", ("csisolatincyrillic", "cyrillic", "iso-ir-144", "iso8859-5", "iso88595",
                                 "iso_8859-5", "iso_8859-5:1988")),
    "iso-8859-6": ("iso8859_6", ("arabic", "asmo-708", "csiso88596e", "csiso88596i", "csisolatinarabic",
                                 "ecma-114", "iso-8859-6-e", "iso-8859-6-i", "iso-ir-127", "iso8859-6",
                                 "iso88596", "iso_8859-6", "iso_8859-6:1987")),
    "iso-8859-7": ("iso8859_7", ("csisolatingreek", "ecma-118", "elot_928", "greek", "greek8", "iso-ir-126",
                                 "iso8859-7", "iso88597", "iso_8859-7", "iso_8859-7:1987", "sun_eu_greek")),
    "iso-8859-8": ("iso8859_8", ("csiso88598e", "csisolatinhebrew", "hebrew", "iso-8859-8-e", "iso-ir-138",
                                 "iso8859-8", "iso88598", "iso_8859-8", "iso_8859-8:1988", "visual")),
    "iso-8859-8-i": ("iso8859_8", ("csiso88598i", "logical")),
    "iso-8859-10": ("iso8859_10", ("csisolatin6", "iso-ir-157", "iso8859-10", "iso885910", "l6", "latin6")),
    "iso-8859-13": ("iso8859_13", ("iso8859-13", "iso885913")),
    "iso-8859-14": ("iso8859_14", ("iso8859-14", "iso885914")),
    "iso-8859-15": ("iso8859_15", ("csisolatin9", "iso8859-15", "iso885915", "iso_8859-15", "l9")),
    "iso-8859-16": ("iso8859_16", ()),
    "koi8-r": ("koi8_r", ("cskoi8r", "koi", "koi8", "koi8_r")),
    "koi8-u": ("koi8_u", ("koi8-ru",)),
    "macintosh": ("mac_roman", ("csmacintosh", "mac", "x-mac-roman")),
    "windows-874": ("cp874", ("dos-874", "iso-8859-11", "iso8859-11", "iso885911", "tis-620")),
    "windows-1250": ("cp1250", ("cp1250", "x-cp1250")),
    "windows-1251": ("cp1251", ("cp1251", "x-cp1251")),
    # the most consequential mapping on the web: pages that say latin-1 or ASCII are cp1252
    "windows-1252": ("cp1252", ("ansi_x3.4-1968", "ascii", "cp1252", "cp819", "csisolatin1", "ibm819",
                                "iso-8859-1", "iso-ir-100", "iso8859-1", "iso88591", "iso_8859-1",
                                "iso_8859-1:1987", "l1", "latin1", "us-ascii", "x-cp1252")),
    "windows-1253": ("cp1253", ("cp1253", "x-cp1253")),
    "windows-1254": ("cp1254", ("cp1254", "csisolatin5", "iso-8859-9", "iso-ir-148", "iso8859-9", "iso88599",
                                "iso_8859-9", "iso_8859-9:1989", "l5", "latin5", "x-cp1254")),
    "windows-1255": ("cp1255", ("cp1255", "x-cp1255")),
    "windows-1256": ("cp1256", ("cp1256", "x-cp1256")),
    "windows-1257": ("cp1257", ("cp1257", "x-cp1257")),
    "windows-1258": ("cp1258", ("cp1258", "x-cp1258")),
    "x-mac-cyrillic": ("mac_cyrillic", ("x-mac-ukrainian",)),
    # WHATWG's GBK decoder is its GB18030 decoder: gb2312 pages routinely use GBK-only characters
    "gbk": ("gb18030", ("chinese", "csgb2312", "csiso58gb231280", "gb2312", "gb_2312", "gb_2312-80",
                        "iso-ir-58", "x-gbk")),
    "gb18030": ("gb18030", ()),
    "big5": ("big5hkscs", ("big5-hkscs", "cn-big5", "csbig5", "x-x-big5")),
    "euc-jp": ("euc_jp", ("cseucpkdfmtjapanese", "x-euc-jp")),
    "iso-2022-jp": ("iso2022_jp", ("csiso2022jp",)),
    "shift_jis": ("cp932", ("csshiftjis", "ms932", "ms_kanji", "shift-jis", "sjis", "windows-31j", "x-sjis")),
    # WHATWG's euc-kr is Microsoft's superset (UHC, windows-949)
    "euc-kr": ("cp949", ("cseuckr", "csksc56011987", "iso-ir-149", "korean", "ks_c_5601-1987",
                         "ks_c_5601-1989", "ksc5601", "ksc_5601", "windows-949")),
    "utf-16be": ("utf-16-be", ("unicodefffe",)),
    "utf-16le": ("utf-16-le", ("csunicode", "iso-10646-ucs-2", "ucs-2", "unicode", "unicodefeff", "utf-16")),
}
# The standard's "replacement" labels (iso-2022-kr, hz-gb-2312, …) decode to one U+FFFD, a
# defence against script injection in a browser; for a corpus they are simply not a usable
# declaration, so they are left out here and the page goes on to detection.

WHATWG_LABELS: dict[str, str] = {
    label: name for name, (_, labels) in _ENCODINGS.items() for label in (name, *labels)
}
_CODEC = {name: codec for name, (codec, _) in _ENCODINGS.items()}

_HEADER_CHARSET = re.compile(r"""charset\s*=\s*["']?([^"';,\s]+)""", re.IGNORECASE)
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
META_PRESCAN_BYTES = 4096  # WHATWG prescans 1024; real pages put long <head>s before the meta
DETECT_BYTES = 1 << 20
# replacement characters tolerated when a declared encoding is used leniently (last resort)
MAX_REPLACED_FRACTION = 0.01
_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_BE, "utf-16be"), (codecs.BOM_UTF16_LE, "utf-16le"))
_SINGLE_BYTE_WINDOWS = frozenset(c for n, c in _CODEC.items() if n.startswith("windows-"))


def _c1(err: UnicodeDecodeError):
    """WHATWG's windows-125x decoders map the few bytes Python leaves undefined (0x81, 0x8D,
    0x8F, 0x90, 0x9D in cp1252) to the C1 control of the same value."""
    return chr(err.object[err.start]), err.start + 1


codecs.register_error("whatwg_c1", _c1)


@dataclass(frozen=True)
class Decoded:
    text: str | None  # None: undecodable
    encoding: str | None  # the WHATWG name (or the detector's codec name)
    source: str  # bom | http | meta | utf-8 | detected | http-lenient | meta-lenient | utf-8-lenient | none
    confidence: float | None = None  # the detector's (1 - its mess ratio); None when declared
    declared: str | None = None  # the label the page declared, as written

    def metadata(self) -> dict:
        """What a document records about how it was decoded."""
        out = {"encoding": self.encoding, "charset_source": self.source}
        if self.confidence is not None:
            out["charset_confidence"] = self.confidence
        if self.declared is not None and self.declared.lower() != self.encoding:
            out["charset_declared"] = self.declared
        return out


def whatwg_encoding(label: str | None) -> str | None:
    """The WHATWG encoding a label names (case-insensitive, surrounding whitespace ignored), or None."""
    return WHATWG_LABELS.get(label.strip().strip("\"'").lower()) if label else None


def _strict(raw: bytes, name: str) -> str | None:
    codec = _CODEC[name]
    try:
        return raw.decode(codec, "whatwg_c1" if codec in _SINGLE_BYTE_WINDOWS else "strict")
    except UnicodeDecodeError:
        return None


def header_charset(content_type: str | None) -> str | None:
    m = _HEADER_CHARSET.search(content_type or "")
    return m.group(1) if m else None


def meta_charset(raw: bytes) -> str | None:
    head = raw[:META_PRESCAN_BYTES]
    if b"harset" not in head and b"HARSET" not in head:  # spare the regex a head it cannot match
        return None
    m = _META_CHARSET.search(head)
    return m.group(1).decode("ascii") if m else None


def _detect(raw: bytes) -> tuple[str, str, float] | None:
    """(text, codec, confidence) from charset-normalizer, decoding all of ``raw``, or None."""
    from charset_normalizer import from_bytes

    best = from_bytes(raw[:DETECT_BYTES]).best()
    if best is None or best.encoding is None:
        return None
    try:
        text = raw.decode(best.encoding)
    except (UnicodeDecodeError, LookupError):  # the sample decoded, a later byte does not
        return None
    return text, best.encoding.replace("_", "-").lower(), round(1.0 - float(best.chaos), 3)


def decode_page(raw: bytes, content_type: str | None = None, html: bool = True) -> Decoded:
    """``raw`` as text (see the module doc for the order); ``Decoded.text`` None: undecodable."""
    for bom, name in _BOMS:
        if raw.startswith(bom):
            text = _strict(raw[len(bom):], name)
            if text is not None:
                return Decoded(text, name, "bom")
    declared: list[tuple[str, str, str]] = []  # (source, label, WHATWG name)
    label = header_charset(content_type)
    if whatwg_encoding(label):
        declared.append(("http", label, whatwg_encoding(label)))
    if html:
        label = meta_charset(raw)
        name = whatwg_encoding(label)
        if name in ("utf-16be", "utf-16le"):
            name = "utf-8"  # the meta was readable as ASCII, so the page is not UTF-16
        if name:
            declared.append(("meta", label, name))
    for source, label, name in declared:
        text = _strict(raw, name)
        if text is not None:
            return Decoded(text, name, source, declared=label)
    # a few damaged bytes in a declared page: shown replaced, as a browser shows them (a
    # detector would rather pick another encoding and turn every accented letter into mojibake)
    for source, label, name in declared:
        text = raw.decode(_CODEC[name], "replace")
        if _rarely_replaced(text):
            return Decoded(text, name, f"{source}-lenient", declared=label)
    if not declared:
        try:
            return Decoded(raw.decode("utf-8"), "utf-8", "utf-8")
        except UnicodeDecodeError:
            text = raw.decode("utf-8", "replace")
            # UTF-8 with a damaged byte, told from a legacy encoding by its valid multi-byte letters
            replaced = text.count("\ufffd")
            if _rarely_replaced(text) and sum(ord(c) > 127 for c in text) - replaced > 2 * replaced:
                return Decoded(text, "utf-8", "utf-8-lenient")
    found = _detect(raw)
    if found is not None:
        text, codec, confidence = found
        return Decoded(text, codec, "detected", confidence, declared[0][1] if declared else None)
    return Decoded(None, None, "none", declared=declared[0][1] if declared else None)


def _rarely_replaced(text: str) -> bool:
    return text.count("\ufffd") <= MAX_REPLACED_FRACTION * max(len(text), 1)
