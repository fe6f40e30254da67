"""Arrow shards: the handoff between the data pipelines and the trainer.

A shard directory holds ``manifest.json`` and ``shard-00000.arrow``, ... in Arrow IPC *file*
format (memory-mappable). Each row is one packed training sequence:
``tokens: list<int32>`` (exactly ``seq_len`` long), ``doc_lens: list<int32>`` (lengths of the
document segments inside the sequence, summing to ``seq_len``; used for document masking)
and ``source: string`` (for mixture accounting).

Writers write every file under a temporary name and rename it, and write the manifest last:
a shard listed in a manifest is complete by construction, and a directory without a manifest
is an unfinished write. The manifest records sha256 per shard; readers refuse mismatches.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
from pydantic import Field, ValidationError

from core.config import StrictModel, format_validation_error
from core.errors import ShardError
from core.io import atomic_write_text

MANIFEST = "manifest.json"
FORMAT = "glm5-recipe.shards/v1"
SHARD_GLOB = "shard-*.arrow"

SHARD_SCHEMA = pa.schema(
    [
        pa.field("tokens", pa.list_(pa.int32()), nullable=False),
        pa.field("doc_lens", pa.list_(pa.int32()), nullable=False),
        pa.field("source", pa.string(), nullable=False),
    ]
)
# SFT shards add a per-token loss mask (1 = trained token), as long as ``tokens``
LOSS_MASK_FIELD = pa.field("loss_mask", pa.list_(pa.int8()), nullable=False)
SFT_SHARD_SCHEMA = SHARD_SCHEMA.append(LOSS_MASK_FIELD)


class TokenizerInfo(StrictModel):
    id: str
    vocab_size: int = Field(gt=0)
    eos_id: int = Field(ge=0)
    path: str | None = None


class Counts(StrictModel):
    docs: int = 0
    sequences: int = 0
    tokens: int = 0
    # tokens of the final partial sequence of a source, which packing does not emit
    tokens_dropped: int = 0

    def add(self, other: Counts) -> None:
        self.docs += other.docs
        self.sequences += other.sequences
        self.tokens += other.tokens
        self.tokens_dropped += other.tokens_dropped


class ShardInfo(StrictModel):
    file: str
    sha256: str
    bytes: int
    sequences: int
    tokens: int


class Manifest(StrictModel):
    format: Literal["glm5-recipe.shards/v1"] = FORMAT
    stage: str
    seq_len: int = Field(gt=0)
    token_dtype: Literal["int32"] = "int32"
    tokenizer: TokenizerInfo
    counts: dict[str, Counts]
    totals: Counts
    shards: list[ShardInfo]
    config: dict[str, Any] = {}
    created_at: str = ""


def sha256_file(path: str | Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


class ShardWriter:
    """Accumulates packed sequences and writes shards + manifest.

    Use as a context manager; the manifest is written only when the block exits cleanly.
    """

    def __init__(
        self,
        out_dir: str | Path,
        *,
        seq_len: int,
        tokenizer: TokenizerInfo,
        stage: str,
        sequences_per_shard: int = 4096,
        config: dict[str, Any] | None = None,
        loss_mask: bool = False,
    ):
        if sequences_per_shard <= 0:
            raise ValueError("sequences_per_shard must be positive")
        self.out_dir = Path(out_dir)
        self.seq_len = seq_len
        self.tokenizer = tokenizer
        self.stage = stage
        self.sequences_per_shard = sequences_per_shard
        self.config = config or {}
        self.counts: dict[str, Counts] = {}
        self.shards: list[ShardInfo] = []
        self._tokens: list[np.ndarray] = []
        self._doc_lens: list[Sequence[int]] = []
        self._sources: list[str] = []
        # loss_mask=True writes SFT shards (SFT_SHARD_SCHEMA): every add() then passes a mask
        self.schema = SFT_SHARD_SCHEMA if loss_mask else SHARD_SCHEMA
        self._masks: list[np.ndarray] = []

    # -- context ----------------------------------------------------------------------------
    def __enter__(self) -> ShardWriter:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        # Drop the old manifest first: while we rewrite, the directory must not look complete.
        (self.out_dir / MANIFEST).unlink(missing_ok=True)
        for old in self.out_dir.glob(SHARD_GLOB):
            old.unlink()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            return
        self._flush()
        self.write_manifest()

    # -- writing ----------------------------------------------------------------------------
    def _counts(self, source: str) -> Counts:
        return self.counts.setdefault(source, Counts())

    def add_docs(self, source: str, n: int = 1) -> None:
        self._counts(source).docs += n

    def add_dropped_tokens(self, source: str, n: int) -> None:
        self._counts(source).tokens_dropped += n

    def add(
        self, tokens: np.ndarray, doc_lens: Sequence[int], source: str, loss_mask: np.ndarray | None = None
    ) -> None:
        if tokens.shape != (self.seq_len,):
            raise ValueError(f"sequence has shape {tokens.shape}, expected ({self.seq_len},)")
        if (loss_mask is not None) != (self.schema is SFT_SHARD_SCHEMA):
            raise ValueError("pass a loss_mask exactly when the writer was opened with loss_mask=True")
        if loss_mask is not None:
            if np.shape(loss_mask) != (self.seq_len,):
                raise ValueError(f"loss_mask has shape {np.shape(loss_mask)}, expected ({self.seq_len},)")
            self._masks.append(np.asarray(loss_mask, dtype=np.int8))
        if sum(doc_lens) != self.seq_len or any(n <= 0 for n in doc_lens):
            raise ValueError(f"doc_lens {list(doc_lens)} must be positive and sum to seq_len={self.seq_len}")
        self._tokens.append(np.asarray(tokens, dtype=np.int32))
        self._doc_lens.append(list(doc_lens))
        self._sources.append(source)
        c = self._counts(source)
        c.sequences += 1
        c.tokens += self.seq_len
        if len(self._tokens) >= self.sequences_per_shard:
            self._flush()

    def _flush(self) -> None:
        if not self._tokens:
            return
        n = len(self._tokens)
        flat = np.concatenate(self._tokens)
        offsets = np.arange(0, (n + 1) * self.seq_len, self.seq_len, dtype=np.int32)
        tokens = pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat, pa.int32()))
        lens_flat = np.fromiter((x for dl in self._doc_lens for x in dl), dtype=np.int32)
        lens_off = np.zeros(n + 1, dtype=np.int32)
        np.cumsum([len(dl) for dl in self._doc_lens], out=lens_off[1:])
        doc_lens = pa.ListArray.from_arrays(pa.array(lens_off), pa.array(lens_flat, pa.int32()))
        columns = [tokens, doc_lens, pa.array(self._sources, pa.string())]
        if self._masks:
            columns.append(pa.ListArray.from_arrays(pa.array(offsets), pa.array(np.concatenate(self._masks))))
        table = pa.Table.from_arrays(columns, schema=self.schema)

        name = f"shard-{len(self.shards):05d}.arrow"
        final = self.out_dir / name
        tmp = self.out_dir / f".{name}.tmp-{os.getpid()}"
        with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, self.schema) as writer:
            # several record batches so readers can stream; each is a zero-copy slice
            writer.write_table(table, max_chunksize=1024)
        os.replace(tmp, final)
        self.shards.append(
            ShardInfo(
                file=name,
                sha256=sha256_file(final),
                bytes=final.stat().st_size,
                sequences=n,
                tokens=n * self.seq_len,
            )
        )
        self._tokens, self._doc_lens, self._sources, self._masks = [], [], [], []

    def write_manifest(self) -> Manifest:
        totals = Counts()
        for c in self.counts.values():
            totals.add(c)
        manifest = Manifest(
            stage=self.stage,
            seq_len=self.seq_len,
            tokenizer=self.tokenizer,
            counts=dict(sorted(self.counts.items())),
            totals=totals,
            shards=self.shards,
            config=self.config,
            created_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        )
        atomic_write_text(self.out_dir / MANIFEST, manifest.model_dump_json(indent=2))
        return manifest


# -- reading ---------------------------------------------------------------------------------


def read_manifest(shard_dir: str | Path) -> Manifest:
    path = Path(shard_dir) / MANIFEST
    if not path.is_file():
        raise ShardError(f"{shard_dir}: no {MANIFEST} (not a shard directory, or its write did not finish)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Manifest.model_validate(data)
    except json.JSONDecodeError as err:
        raise ShardError(f"{path}: not valid JSON: {err}") from None
    except ValidationError as err:
        raise ShardError(format_validation_error(err, str(path))) from None


def verify_shard(shard_dir: str | Path, info: ShardInfo) -> Path:
    """Check a shard's size and sha256 against its manifest entry; return its path."""
    path = Path(shard_dir) / info.file
    if not path.is_file():
        raise ShardError(f"{path}: listed in the manifest but missing")
    size = path.stat().st_size
    if size != info.bytes:
        raise ShardError(f"{path}: size {size} does not match the manifest ({info.bytes} bytes)")
    digest = sha256_file(path)
    if digest != info.sha256:
        raise ShardError(f"{path}: sha256 {digest[:16]}… does not match the manifest ({info.sha256[:16]}…)")
    return path


def map_shard(path: str | Path) -> tuple[pa.MemoryMappedFile, pa.Table]:
    """Memory-map one shard; the table's buffers point into the returned mapping."""
    source = pa.memory_map(str(path), "r")
    try:
        table = pa.ipc.open_file(source).read_all()
    except pa.ArrowInvalid as err:
        raise ShardError(f"{path}: not a readable Arrow IPC file: {err}") from None
    if not (table.schema.equals(SHARD_SCHEMA) or table.schema.equals(SFT_SHARD_SCHEMA)):
        raise ShardError(f"{path}: schema {table.schema} does not match the shard schema")
    return source, table


def open_shard(path: str | Path) -> pa.Table:
    return map_shard(path)[1]
