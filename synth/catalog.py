"""A documents dataset as a catalog for building long-context data, and the retrieval index
over its meta-chunks.

The catalog keeps per document only what selection needs (source, sizes in characters and
tokens, metadata); texts are fetched by id, a batch at a time, so a corpus of long books is
never held in memory whole. Token counts come from the packing tokenizer (``core.tokenizer``),
so targets set in tokens are met exactly.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
from tokenizers import Tokenizer

from core.errors import InputError
from core.records import parse_metadata
from core.tokenizer import count_tokens
from synth.chunking import ChunkConfig, split_meta_chunks
from synth.retrieval import ChunkIndex, ChunkRef


@dataclass
class DocInfo:
    id: str
    source: str
    n_chars: int
    n_tokens: int
    meta: dict[str, Any]


class DocumentCatalog:
    """Catalog of a documents dataset (no text kept) + text by id, streamed in batches."""

    def __init__(self, doc_dir: str | Path, tok: Tokenizer, batch: int = 64, log=print):
        self.dir = Path(doc_dir)
        if not sorted(self.dir.glob("*.parquet")):
            raise InputError(f"{self.dir}: no Parquet documents (run `make demo` or set documents:)")
        self.glob = str(self.dir / "*.parquet")
        self.batch = batch
        self.con = duckdb.connect()
        self.docs: list[DocInfo] = []
        query = self.con.execute(f"SELECT id, text, metadata FROM read_parquet('{self.glob}') ORDER BY id")
        while rows := query.fetchmany(batch):
            counts = count_tokens(tok, [r[1] or "" for r in rows])
            for (doc_id, text, raw), n in zip(rows, counts, strict=True):
                meta = parse_metadata(raw)
                self.docs.append(
                    DocInfo(doc_id, str(meta.get("source", "default")), len(text or ""), n, meta)
                )
        if not self.docs:
            raise InputError(f"{self.dir}: the documents dataset is empty")
        self.by_id = {d.id: d for d in self.docs}
        log(f"   catalog: {len(self.docs)} documents, {sum(d.n_tokens for d in self.docs):,} tokens")

    def texts(self, ids: list[str]) -> Iterator[tuple[str, str]]:
        """(id, text) in the order of ``ids``, fetched ``batch`` documents at a time."""
        for i in range(0, len(ids), self.batch):
            want = ids[i : i + self.batch]
            rows = dict(
                self.con.execute(
                    f"SELECT id, text FROM read_parquet('{self.glob}') WHERE list_contains(?, id)", [want]
                ).fetchall()
            )
            for doc_id in want:
                yield doc_id, rows[doc_id] or ""

    def shuffled_ids(self, rng: np.random.Generator) -> list[str]:
        return [self.docs[i].id for i in rng.permutation(len(self.docs))]

    def choose(self, n: int, seed: list[int], min_chars: int, sources: list[str] | None) -> list[str]:
        """``n`` documents drawn at random (seeded) among those of at least ``min_chars`` from
        ``sources`` (None: any source)."""
        pool = [d.id for d in self.docs if d.n_chars >= min_chars and (sources is None or d.source in sources)]
        order = np.random.default_rng(seed).permutation(len(pool))
        return [pool[i] for i in order[:n]]


def index_catalog(
    catalog: DocumentCatalog, index: ChunkIndex, chunk: ChunkConfig, max_chunks: int, tok: Tokenizer
) -> ChunkIndex:
    """Index every ``stride``-th meta-chunk of the catalog (about ``max_chunks`` in all),
    each with its token length, so retrieval requests can be sized in tokens."""
    est = sum(max(1, d.n_chars // chunk.chunk_chars) for d in catalog.docs)
    stride = max(1, math.ceil(est / max_chunks))
    seen, refs = 0, []
    for doc_id, text in catalog.texts([d.id for d in catalog.docs]):
        for i, c in enumerate(split_meta_chunks(text, chunk)):
            if seen % stride == 0 and len(c) >= chunk.min_chunk_chars:
                refs.append((doc_id, i, c))
            seen += 1
    lengths = count_tokens(tok, [c for _, _, c in refs])
    index.add(ChunkRef(d, i, c, n) for (d, i, c), n in zip(refs, lengths, strict=True))
    return index.build()
