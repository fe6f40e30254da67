"""The real text behind MRCR conversations: paragraphs of the sample's documents, by title.

A conversation turn asks for "a passage from <title>" and the reply is a real paragraph of
that document, so needles and distractors read like natural text and differ only in which
document (and which paragraph) they quote. Input is any documents dataset: a directory of
Parquet files (``id``, ``text``, ``metadata`` JSON — e.g. ``out/demo/documents``) or JSON
lines with ``id`` and ``text`` (e.g. the cached sample novels, ``sample/books.jsonl`` in the cache).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

from pydantic import Field

from core.config import StrictModel
from core.errors import InputError
from core.io import numbered_jsonl

_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


class PassageConfig(StrictModel):
    min_chars: int = Field(default=200, gt=0)
    max_chars: int = Field(default=1500, gt=0)
    # paragraphs per document, taken evenly through it (bounds memory on big corpora)
    max_per_title: int = Field(default=400, gt=0)


def _title(doc_id: str, meta: dict) -> str:
    if meta.get("title"):
        return str(meta["title"])
    # python-docs/library/pathlib.html -> "the documentation page library/pathlib"
    stem = re.sub(r"\.(html?|rst\.txt|txt)$", "", doc_id.split("/", 1)[-1]).replace("_sources/", "")
    return f"the documentation page {stem}"


def iter_documents(path: str | Path) -> Iterator[tuple[str, str, dict]]:
    """(id, text, metadata) from a Parquet documents dataset (file or directory) or JSONL."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such documents file or directory")
    if path.is_dir() or path.suffix == ".parquet":
        import pyarrow.parquet as pq

        files = sorted(path.glob("*.parquet")) if path.is_dir() else [path]
        if not files:
            raise InputError(f"{path}: no Parquet files in this directory")
        for f in files:
            table = pq.read_table(f, columns=None)
            names = table.column_names
            for row in table.to_pylist():
                meta = row.get("metadata") if "metadata" in names else None
                yield str(row["id"]), row["text"] or "", json.loads(meta) if meta else {}
        return
    for n, row in numbered_jsonl(path, "documents"):
        if not isinstance(row.get("text"), str):
            raise InputError(f"{path}:{n}: expected an object with a string 'text' field")
        yield str(row.get("id", f"{path.name}:{n}")), row["text"], row


def _blocks(text: str, cfg: PassageConfig) -> Iterator[str]:
    """Paragraphs; a block longer than ``max_chars`` (text extracted from HTML often separates
    paragraphs by one newline, not a blank line) is cut at line breaks into runs of whole lines
    of ``min_chars``-``max_chars``, so such a document still yields passages."""
    for block in _PARAGRAPH_BREAK.split(text):
        block = block.strip()
        if len(block) <= cfg.max_chars:
            yield block
            continue
        run: list[str] = []
        size = 0
        for line in block.split("\n"):
            line = line.strip()
            if run and size + 1 + len(line) > cfg.max_chars:
                yield "\n".join(run)
                run, size = [], 0
            if line:
                run.append(line)
                size += len(line) + (1 if size else 0)
        if run:
            yield "\n".join(run)


def split_passages(text: str, cfg: PassageConfig) -> list[str]:
    out, seen = [], set()
    for p in _blocks(text, cfg):
        if cfg.min_chars <= len(p) <= cfg.max_chars and sum(c.isalpha() for c in p) > len(p) // 2:
            if p not in seen:
                seen.add(p)
                out.append(p)
    if len(out) > cfg.max_per_title:
        step = len(out) / cfg.max_per_title
        out = [out[int(i * step)] for i in range(cfg.max_per_title)]
    return out


def passage_pool(paths: list[str | Path], cfg: PassageConfig) -> dict[str, list[str]]:
    """title -> its paragraphs (documents sharing a title are merged), titles sorted."""
    pool: dict[str, list[str]] = {}
    for path in paths:
        for doc_id, text, meta in iter_documents(path):
            passages = split_passages(text, cfg)
            if passages:
                pool.setdefault(_title(doc_id, meta), []).extend(passages)
    if not pool:
        raise InputError(
            f"no paragraphs of {cfg.min_chars}-{cfg.max_chars} characters in {[str(p) for p in paths]}"
        )
    return {t: list(dict.fromkeys(ps)) for t, ps in sorted(pool.items())}
