"""Tokenize + pack: the one packer, and the pretraining pass that packs documents with it.

``StreamPacker`` copies token pieces straight into one preallocated ``seq_len`` int32 buffer
per source, so the memory held is one sequence plus one piece whatever the sequence length
(200K tokens = 800 KB), never a Python list of tokens. Two modes:

* ``add_stream`` (pretraining documents, natural and regular long documents): a document
  fills the buffer and continues in the next sequence; ``doc_lens`` records each piece of it.
* ``add_whole`` (synthetic samples: interleaved, EntropyLong, MRCR): a sample is never cut —
  its dependencies span all of it — so when it does not fit the rest of the buffer, the
  rest becomes an end-of-document padding segment and the sample starts a new sequence.

Sequences go through a ``StageWriter`` (a ShardWriter plus the global sequence counter); given
a log, every sample (and padding segment) is written to it with the global index of its first
sequence, its offset there and its emitted length, so document masks can be checked against
what was packed (the long-context job's ``samples.jsonl``).

``pack_documents`` (``python -m pipelines pack``, the demo, swe-mine): documents (a directory of
Parquet files, or an object-storage prefix holding them) are read in id
order (the same order whichever engine produced them, so the shards are byte-identical),
tokenized, terminated with the end-of-document token and streamed per source into ``seq_len``
sequences. Each sequence holds one source, so mixture accounting stays exact. The last partial
sequence of a source is not emitted; its tokens are counted as dropped.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import duckdb
import numpy as np
from pydantic import Field
from tokenizers import Tokenizer
from tqdm import tqdm

from core.config import StrictModel
from core.errors import InputError
from core.shards import Manifest, ShardWriter, TokenizerInfo, read_manifest
from core.storage import duckdb_reads, is_url, url_files
from core.tokenizer import encode_documents


class PackConfig(StrictModel):
    seq_len: int = Field(default=1024, gt=1)
    sequences_per_shard: int = Field(default=2048, gt=0)
    # the mid-training stage these shards serve (recorded in the manifest)
    stage: str = "pretrain"
    # documents tokenized per batch (tokenizers parallelises inside a batch)
    batch_docs: int = Field(default=64, gt=0)


@dataclass
class Record:
    kind: str
    meta: dict[str, Any]
    offset: int
    seq: int | None = None  # global index of the first sequence, known once it is written
    tokens: int = 0  # tokens of this sample in written sequences
    finished: bool = False
    truncated: bool = False


class StageWriter:
    """A ShardWriter plus the global sequence counter and the samples log of one stage."""

    def __init__(self, writer: ShardWriter, log: IO[str] | None = None):
        self.writer, self.log = writer, log
        self.sequences = 0
        self.pad_tokens = 0

    def write(self, tokens: np.ndarray, lens: list[int], source: str) -> int:
        self.writer.add(tokens.copy(), lens, source)  # the buffer is reused: hand over a copy
        self.sequences += 1
        return self.sequences - 1

    def record(self, r: Record) -> None:
        if self.log is None:
            return
        row = {"kind": r.kind, "seq": r.seq, "offset": r.offset, "tokens": r.tokens, **r.meta}
        if r.truncated:
            row["truncated"] = True
        self.log.write(json.dumps(row, ensure_ascii=False) + "\n")


@dataclass
class StreamPacker:
    out: StageWriter
    source: str
    seq_len: int
    eos_id: int
    emitted: int = 0
    buf: np.ndarray = field(init=False)
    fill: int = 0
    # segments of the current buffer: (record, length); the last may still be growing
    _segs: list[list] = field(default_factory=list)
    _open: list[Record] = field(default_factory=list)  # records not yet logged

    def __post_init__(self) -> None:
        self.buf = np.empty(self.seq_len, dtype=np.int32)

    # -- internals ---------------------------------------------------------------------------
    def _copy(self, rec: Record, arr: np.ndarray) -> int:
        """Copy as much of ``arr`` as fits; returns how many tokens were taken."""
        take = min(len(arr), self.seq_len - self.fill)
        self.buf[self.fill : self.fill + take] = arr[:take]
        self.fill += take
        if self._segs and self._segs[-1][0] is rec:
            self._segs[-1][1] += take
        else:
            self._segs.append([rec, take])
        return take

    def _emit(self) -> None:
        seq = self.out.write(self.buf, [n for _, n in self._segs], self.source)
        self.emitted += 1
        for rec, n in self._segs:
            if rec.seq is None:
                rec.seq = seq
            rec.tokens += n
        self._segs, self.fill = [], 0
        self._flush_log()

    def _flush_log(self) -> None:
        pending = {id(r) for r, _ in self._segs}
        keep = []
        for rec in self._open:
            if rec.finished and rec.seq is not None and id(rec) not in pending:
                self.out.record(rec)
            else:
                keep.append(rec)
        self._open = keep

    def _start(self, kind: str, meta: dict) -> Record:
        rec = Record(kind, meta, offset=self.fill)
        self._open.append(rec)
        return rec

    # -- adding --------------------------------------------------------------------------------
    def add_stream(self, pieces: Iterable[np.ndarray], kind: str, meta: dict, budget: float) -> bool:
        """Add a document that may span sequences (+ end-of-document). Returns False once
        ``budget`` sequences are emitted (the rest of the document is not packed)."""
        rec = self._start(kind, meta)
        eos = np.array([self.eos_id], dtype=np.int32)
        for arr in _chain(pieces, eos):
            is_eos = arr is eos
            while len(arr):
                arr = arr[self._copy(rec, arr) :]
                if self.fill == self.seq_len:
                    self._emit()
                    if self.emitted >= budget:
                        rec.finished, rec.truncated = True, not (is_eos and len(arr) == 0)
                        self._flush_log()
                        return False
        rec.finished = True
        self._flush_log()
        return True

    def fits(self, n_tokens: int) -> bool:
        """Whether a sample of ``n_tokens`` (+ end-of-document) fits the current buffer."""
        return self.fill + n_tokens + 1 <= self.seq_len

    def add_whole(self, parts: list[np.ndarray], kind: str, meta: dict) -> None:
        """Add a sample of at most ``seq_len - 1`` tokens (+ end-of-document), uncut."""
        n = sum(len(p) for p in parts) + 1
        if n > self.seq_len:
            raise ValueError(f"a {kind} sample of {n} tokens does not fit seq_len={self.seq_len}")
        if self.fill + n > self.seq_len:
            self.pad()
        rec = self._start(kind, meta)
        for p in (*parts, np.array([self.eos_id], dtype=np.int32)):
            self._copy(rec, p)
        rec.finished = True
        if self.fill == self.seq_len:
            self._emit()
        else:
            self._flush_log()

    def pad(self) -> None:
        """Close the current buffer with an end-of-document padding segment and emit it."""
        if self.fill == 0:
            return
        n = self.seq_len - self.fill
        rec = self._start("pad", {"source": self.source})
        self._copy(rec, np.full(n, self.eos_id, dtype=np.int32))
        rec.finished = True
        self.out.pad_tokens += n
        self._emit()

    def drop_partial(self) -> int:
        """Discard an unfinished buffer (its samples are not logged); returns tokens dropped."""
        n = self.fill
        started_here = {id(r) for r, _ in self._segs}
        for rec in self._open:
            if id(rec) in started_here and rec.seq is not None:
                rec.truncated = True  # it began in a written sequence: log what was written
        self._open = [r for r in self._open if r.seq is not None]
        for r in self._open:
            r.finished = True
        self._segs, self.fill = [], 0
        self._flush_log()
        return n


def _chain(pieces: Iterable[np.ndarray], eos: np.ndarray) -> Iterator[np.ndarray]:
    yield from pieces
    yield eos


def _relation(con: duckdb.DuckDBPyConnection, doc_dirs: str | Path | list) -> str:
    """DuckDB relation over one documents dataset or several (a mixture of job outputs), each a
    directory or an object-storage prefix (read in ranges through fsspec: ``duckdb_reads``)."""
    dirs = [str(d) for d in (doc_dirs if isinstance(doc_dirs, list) else [doc_dirs])]
    for d in dirs:
        if is_url(d):
            found = [rel for _, rel in url_files(d) if "/" not in rel and rel.endswith(".parquet")]
        else:
            found = sorted(Path(d).glob("*.parquet"))
        if not found:
            raise InputError(f"{d}: no Parquet documents to pack")
    duckdb_reads(con, dirs)
    globs = ", ".join(f"'{d.rstrip('/')}/*.parquet'" for d in dirs)
    # jobs promote different typed columns: only id, text and metadata are read
    return f"read_parquet([{globs}], union_by_name=true)"


def iter_documents(doc_dir: str | Path | list, batch_rows: int) -> Iterator[list[tuple[str, str, str]]]:
    """(id, text, source) batches from a documents dataset (or several), in id order."""
    con = duckdb.connect()
    query = con.execute(
        f"SELECT id, text, coalesce(json_extract_string(metadata, '$.source'), 'default') AS source "
        f"FROM {_relation(con, doc_dir)} ORDER BY id"
    )
    while rows := query.fetchmany(batch_rows):
        yield rows


def count_documents(doc_dir: str | Path | list) -> int:
    con = duckdb.connect()
    return con.execute(f"SELECT count(*) FROM {_relation(con, doc_dir)}").fetchone()[0]


def pack_documents(
    doc_dir: str | Path | list,
    tok: Tokenizer,
    info: TokenizerInfo,
    out_dir: str | Path,
    cfg: PackConfig,
    job_config: dict[str, Any] | None = None,
    progress: bool = True,
) -> Manifest:
    packers: dict[str, StreamPacker] = {}
    total = count_documents(doc_dir)
    with ShardWriter(
        out_dir,
        seq_len=cfg.seq_len,
        tokenizer=info,
        stage=cfg.stage,
        sequences_per_shard=cfg.sequences_per_shard,
        config=job_config or {},
    ) as writer:
        out = StageWriter(writer)
        bar = tqdm(total=total, desc="tokenize+pack", unit="doc", disable=not progress)
        for rows in iter_documents(doc_dir, cfg.batch_docs):
            texts = [r[1] for r in rows]
            for (_, _, source), ids in zip(rows, encode_documents(tok, texts), strict=True):
                packer = packers.get(source)
                if packer is None:
                    packer = packers[source] = StreamPacker(out, source, cfg.seq_len, info.eos_id)
                writer.add_docs(source)
                packer.add_stream([np.asarray(ids, dtype=np.int32)], "document", {}, budget=math.inf)
            bar.update(len(rows))
        bar.close()
        for source, packer in packers.items():
            writer.add_dropped_tokens(source, packer.fill)
    return read_manifest(out_dir)
