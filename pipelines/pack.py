"""Tokenize kept documents and pack them into fixed-length sequences -> Arrow shards.

Documents are read in id order (the same order whichever engine produced them, so the
shards are byte-identical), tokenized, terminated with the end-of-document token, and
concatenated per source into ``seq_len`` sequences. ``doc_lens`` records the length of each
document segment in a sequence (a document may continue into the next sequence), for
document masking. Each sequence holds one source, so mixture accounting stays exact. The
last partial sequence of a source is not emitted; its tokens are counted as dropped.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
from pydantic import Field
from tokenizers import Tokenizer
from tqdm import tqdm

from core.config import StrictModel
from core.errors import InputError
from core.shards import Manifest, ShardWriter, TokenizerInfo, read_manifest
from pipelines.bpe_tokenizer import encode_documents


class PackConfig(StrictModel):
    seq_len: int = Field(default=1024, gt=1)
    sequences_per_shard: int = Field(default=2048, gt=0)
    # the mid-training stage these shards serve (recorded in the manifest)
    stage: str = "pretrain"
    # documents tokenized per batch (tokenizers parallelises inside a batch)
    batch_docs: int = Field(default=64, gt=0)


class SequencePacker:
    """Concatenate documents into fixed-length sequences, tracking document segments."""

    def __init__(self, seq_len: int):
        self.seq_len = seq_len
        self._chunks: list[np.ndarray] = []  # pending token arrays (one per document piece)
        self._pending = 0

    def add(self, tokens: np.ndarray) -> Iterator[tuple[np.ndarray, list[int]]]:
        if len(tokens) == 0:
            return
        self._chunks.append(tokens)
        self._pending += len(tokens)
        while self._pending >= self.seq_len:
            yield self._emit()

    def _emit(self) -> tuple[np.ndarray, list[int]]:
        need, parts, lens = self.seq_len, [], []
        while need:
            head = self._chunks[0]
            take = min(need, len(head))
            parts.append(head[:take])
            lens.append(take)
            if take == len(head):
                self._chunks.pop(0)
            else:
                self._chunks[0] = head[take:]
            need -= take
        self._pending -= self.seq_len
        return np.concatenate(parts).astype(np.int32, copy=False), lens

    @property
    def leftover(self) -> int:
        return self._pending


def _relation(doc_dirs: Path | list[Path]) -> str:
    """DuckDB relation over one documents dataset or several (a mixture of job outputs)."""
    dirs = [Path(d) for d in (doc_dirs if isinstance(doc_dirs, list) else [doc_dirs])]
    for d in dirs:
        if not sorted(d.glob("*.parquet")):
            raise InputError(f"{d}: no Parquet documents to pack")
    globs = ", ".join(f"'{d}/*.parquet'" for d in dirs)
    # jobs promote different typed columns: only id, text and metadata are read
    return f"read_parquet([{globs}], union_by_name=true)"


def iter_documents(doc_dir: Path | list[Path], batch_rows: int) -> Iterator[list[tuple[str, str, str]]]:
    """(id, text, source) batches from a documents dataset (or several), in id order."""
    con = duckdb.connect()
    query = con.execute(
        f"SELECT id, text, coalesce(json_extract_string(metadata, '$.source'), 'default') AS source "
        f"FROM {_relation(doc_dir)} ORDER BY id"
    )
    while rows := query.fetchmany(batch_rows):
        yield rows


def count_documents(doc_dir: Path | list[Path]) -> int:
    return duckdb.connect().execute(f"SELECT count(*) FROM {_relation(doc_dir)}").fetchone()[0]


def pack_documents(
    doc_dir: str | Path | list[Path],
    tok: Tokenizer,
    info: TokenizerInfo,
    out_dir: str | Path,
    cfg: PackConfig,
    job_config: dict[str, Any] | None = None,
    progress: bool = True,
) -> Manifest:
    doc_dir = [Path(d) for d in doc_dir] if isinstance(doc_dir, list) else Path(doc_dir)
    packers: dict[str, SequencePacker] = {}
    eos = np.array([info.eos_id], dtype=np.int32)
    total = count_documents(doc_dir)
    with ShardWriter(
        out_dir,
        seq_len=cfg.seq_len,
        tokenizer=info,
        stage=cfg.stage,
        sequences_per_shard=cfg.sequences_per_shard,
        config=job_config or {},
    ) as writer:
        bar = tqdm(total=total, desc="tokenize+pack", unit="doc", disable=not progress)
        for rows in iter_documents(doc_dir, cfg.batch_docs):
            texts = [r[1] for r in rows]
            for (_, _, source), ids in zip(rows, encode_documents(tok, texts), strict=True):
                packer = packers.setdefault(source, SequencePacker(cfg.seq_len))
                writer.add_docs(source)
                doc = np.concatenate([np.asarray(ids, dtype=np.int32), eos])
                for seq, lens in packer.add(doc):
                    writer.add(seq, lens, source)
            bar.update(len(rows))
        bar.close()
        for source, packer in packers.items():
            writer.add_dropped_tokens(source, packer.leftover)
    return read_manifest(out_dir)
