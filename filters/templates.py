"""Cross-document template detection: text that recurs across many documents is templated.

Generated and templated pages (listing pages, auto-filled product or profile pages,
boilerplate legal text, machine-made "articles" stamped from one skeleton) share lines with
many other documents, often across sites. A corpus pass counts, for every normalised line
(lower-cased, digits folded, whitespace collapsed), how many documents and how many sites
contain it; lines over both thresholds are template lines. A per-document step then rejects
documents whose text is mostly template lines.

The corpus pass ``TemplateLines`` has two implementations with the same result — ``local``
(one process, over Arrow batches) and ``spark`` (``mapInArrow`` + group by) — and both hash
lines with the same 64-bit xxh3; the engine picks one (``engine.compute``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.parquet as pq
import xxhash
from datatrove.data import Document
from datatrove.pipeline.filters.base_filter import BaseFilter
from pydantic import Field

from core.config import StrictModel
from core.records import parse_metadata

_DIGITS = re.compile(r"\d+")


class TemplateConfig(StrictModel):
    min_line_chars: int = Field(default=30, ge=1)  # short lines ("Next", "Home") say little
    min_docs: int = Field(default=10, ge=2)  # a template line is in at least this many documents
    min_sites: int = Field(default=1, ge=1)  # ... on at least this many sites
    max_template_fraction: float = Field(default=0.5, gt=0, le=1)


def normalize_line(line: str) -> str:
    return _DIGITS.sub("0", " ".join(line.lower().split()))


def line_keys(text: str, min_chars: int) -> Iterator[tuple[int, int]]:
    """(xxh3-64 of the normalised line, characters of the original line) per long line."""
    for line in text.splitlines():
        norm = normalize_line(line)
        if len(norm) >= min_chars:
            # signed: Spark and Arrow int64 columns hold it as is
            yield xxhash.xxh3_64_intdigest(norm.encode()) - (1 << 63), len(line.strip())


def site_of(metadata: dict) -> str:
    url = metadata.get("url")
    if isinstance(url, str) and url:
        return urlparse(url).hostname or url
    return str(metadata.get("source", ""))


def _doc_rows(ids: Iterable[str], texts: Iterable[str], metas: Iterable[str], min_chars: int):
    for doc_id, text, meta in zip(ids, texts, metas, strict=True):
        site = site_of(parse_metadata(meta))
        for key in {k for k, _ in line_keys(text or "", min_chars)}:
            yield doc_id, site, key


class TemplateLines:
    """Corpus pass: the keys of template lines. ``local`` and ``spark`` give the same set."""

    def __init__(self, cfg: TemplateConfig):
        self.cfg = cfg

    def _keep(self, docs: int, sites: int) -> bool:
        return docs >= self.cfg.min_docs and sites >= self.cfg.min_sites

    def local(self, documents_dir: str) -> set[int]:
        """One process, over Arrow batches of the Parquet files."""
        docs: dict[int, int] = {}
        sites: dict[int, set[str]] = {}
        for path in sorted(Path(documents_dir).glob("*.parquet")):
            for batch in pq.ParquetFile(path).iter_batches(columns=["id", "text", "metadata"], batch_size=1024):
                cols = batch.to_pydict()
                for _, site, key in _doc_rows(cols["id"], cols["text"], cols["metadata"], self.cfg.min_line_chars):
                    docs[key] = docs.get(key, 0) + 1
                    sites.setdefault(key, set()).add(site)
        return {k for k, n in docs.items() if self._keep(n, len(sites[k]))}

    def spark(self, df) -> set[int]:
        """``mapInArrow`` explodes documents into (id, site, line key) rows, then a group by."""
        from pyspark.sql import functions as F

        min_chars = self.cfg.min_line_chars

        def explode(batches):
            for b in batches:
                rows = list(_doc_rows(b.column("id").to_pylist(), b.column("text").to_pylist(),
                                      b.column("metadata").to_pylist(), min_chars))
                yield pa.RecordBatch.from_pydict({
                    "id": [r[0] for r in rows], "site": [r[1] for r in rows],
                    "key": pa.array([r[2] for r in rows], pa.int64())})

        lines = df.select("id", "text", "metadata").mapInArrow(explode, "id string, site string, key bigint")
        agg = lines.groupBy("key").agg(F.count("id").alias("docs"), F.countDistinct("site").alias("sites"))
        hits = agg.filter((F.col("docs") >= self.cfg.min_docs) & (F.col("sites") >= self.cfg.min_sites))
        return {r.key for r in hits.select("key").collect()}


class Templated(BaseFilter):
    name = "🧩 templated"
    stage_name = "templated"
    promotes = {"template_fraction": "float64"}

    def __init__(self, template_keys: set[int], cfg: TemplateConfig):
        super().__init__()
        self.keys = frozenset(template_keys)
        self.n_template_lines = len(self.keys)  # (recorded with the job's step settings)
        self.cfg = cfg

    def filter(self, doc: Document) -> bool | tuple[bool, str]:
        total = len(doc.text.strip()) or 1
        templated = sum(n for k, n in line_keys(doc.text, self.cfg.min_line_chars) if k in self.keys)
        frac = min(1.0, templated / total)
        doc.metadata["template_fraction"] = round(frac, 4)
        return frac < self.cfg.max_template_fraction or (False, "templated")
