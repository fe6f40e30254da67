"""A document corpus with its link graph, for deep-search tasks.

Inputs: a directory of HTML pages (links are the pages' own ``<a href>`` between pages of the
corpus, e.g. the sample's Python documentation: ``python -m pipelines sample --data-dir data``),
or JSONL documents ``{"id", "text", "title"?, "links"?: [ids]}``. Phrase matching works on
lower-cased word sequences, so "contains the phrase" means the same thing to the generator,
its checks and the solvers.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path

from core.errors import InputError, UserError
from core.io import numbered_jsonl

_WORD = re.compile(r"[A-Za-z0-9_]+(?:[.'][A-Za-z0-9_]+)*")
_TITLE_SUFFIX = re.compile(r"\s+[—-]+\s+Python [\d.]+ documentation\s*$")


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def norm(text: str) -> str:
    """Lower-cased words joined by single spaces, padded so `' ' + phrase + ' '` matches whole words."""
    return " " + " ".join(words(text)) + " "


@dataclass
class Doc:
    id: str
    title: str
    text: str
    links: list[str] = field(default_factory=list)
    _norm: str = ""

    @property
    def normed(self) -> str:
        if not self._norm:
            self._norm = norm(self.text)
        return self._norm

    def contains(self, phrase: str) -> bool:
        return norm(phrase) in self.normed


@dataclass
class Corpus:
    docs: dict[str, Doc]
    rejected: dict[str, str] = field(default_factory=dict)  # path -> why it is not in the corpus

    def __len__(self) -> int:
        return len(self.docs)

    def containing(self, phrase: str, within: list[str] | None = None) -> list[str]:
        ids = within if within is not None else list(self.docs)
        return [i for i in ids if self.docs[i].contains(phrase)]


def _html_doc(path: Path, rel: str) -> Doc | None:
    import lxml.html

    raw = path.read_bytes()
    if not raw.strip():
        return None
    tree = lxml.html.fromstring(raw)
    main = tree.xpath("//div[@role='main']") or tree.xpath("//div[contains(@class,'body')]") or [tree]
    root = main[0]
    h1 = root.xpath(".//h1")
    title = (h1[0].text_content() if h1 else (tree.findtext(".//title") or rel)).replace("¶", "").strip()
    title = _TITLE_SUFFIX.sub("", title)
    links = []
    base = posixpath.dirname(rel)
    for href in root.xpath(".//a/@href"):
        if re.match(r"^[a-z]+:", href) or href.startswith(("#", "/")):
            continue  # external, in-page, or absolute: not a corpus page
        target = posixpath.normpath(posixpath.join(base, href.split("#", 1)[0]))
        if target != rel and target.endswith(".html") and target not in links:
            links.append(target)
    text = re.sub(r"[ \t]*¶", "", root.text_content())
    text = re.sub(r"\n\s*\n+", "\n\n", text).strip()
    return Doc(rel, title, text, links)


def load_corpus(path: str | Path, max_docs: int | None = None) -> Corpus:
    """Load HTML pages (a directory) or JSONL documents; links to missing pages are dropped."""
    p = Path(path)
    if not p.exists():
        raise UserError(f"corpus not found: {p}")
    docs: dict[str, Doc] = {}
    rejected: dict[str, str] = {}
    if p.is_dir():
        files = sorted(p.rglob("*.html"))
        if not files:
            raise UserError(f"{p}: no .html pages (give a directory of HTML pages or a JSONL file)")
        for f in files[:max_docs] if max_docs else files:
            rel = f.relative_to(p).as_posix()
            if rel.startswith(("_", "genindex", "py-modindex", "search")):
                rejected[rel] = "index or asset page"
                continue
            try:
                d = _html_doc(f, rel)
            except Exception as err:  # lxml on a broken page: count it, keep going
                rejected[rel] = f"unparseable HTML: {type(err).__name__}"
                continue
            if d is None or len(d.text) < 200:
                rejected[rel] = "too little text"
                continue
            docs[rel] = d
    else:
        for n, row in numbered_jsonl(p, "corpus"):
            if not isinstance(row.get("text"), str) or "id" not in row:
                raise InputError(f"{p}:{n}: expected an object with 'id' and string 'text'")
            doc_id = str(row["id"])
            docs[doc_id] = Doc(doc_id, str(row.get("title") or doc_id), row["text"],
                               [str(x) for x in row.get("links") or []])
            if max_docs and len(docs) >= max_docs:
                break
    for d in docs.values():
        d.links = [x for x in d.links if x in docs and x != d.id]
    if not docs:
        raise UserError(f"{p}: no usable documents")
    return Corpus(docs, rejected)
