"""Shard loader: memory-mapped Arrow shards -> ``(tokens, doc_lens)`` batches, resumable.

Every shard is opened with ``pa.memory_map`` and each record batch's token buffer is viewed
as a ``(rows, seq_len)`` int32 numpy array without copying; a training batch is gathered
from those views straight into the tensor torch gets. Shards are checked against the
manifest's sha256 before use.

The order is a pure function of ``(seed, epoch)``: a permutation of all sequences, split
across data-parallel ranks. The position is ``(epoch, batch)``, so ``state_dict()`` is a few
integers and a resumed run sees exactly the batches an uninterrupted one would.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import torch
from pydantic import Field

from core.config import StrictModel
from core.errors import ShardError
from core.shards import Manifest, map_shard, read_manifest, verify_shard


class LoaderConfig(StrictModel):
    batch_size: int = Field(default=8, gt=0)
    shuffle: bool = True
    seed: int = 0
    # check each shard's sha256 against the manifest when opening (reads every byte once)
    verify: bool = True
    # stop after this many epochs; None = cycle forever (the trainer counts steps)
    epochs: int | None = Field(default=None, gt=0)


@dataclass
class Batch:
    tokens: torch.Tensor  # (B, seq_len) int32
    # document segment lengths of all rows, concatenated (the cu_seqlens-style form that
    # varlen attention kernels want); doc_counts[i] = number of segments in row i
    doc_lens_flat: torch.Tensor
    doc_counts: list[int]
    sources: list[str]
    indices: np.ndarray  # global sequence indices (which rows of the dataset these are)
    # (B, seq_len) int8, 1 = trained token; only for SFT shards (those with a loss_mask column)
    loss_mask: torch.Tensor | None = None

    @property
    def doc_lens(self) -> list[torch.Tensor]:
        """Per row: int32 segment lengths summing to seq_len."""
        return list(self.doc_lens_flat.split(self.doc_counts))


@dataclass
class _Plan:
    indices: np.ndarray  # global sequence index per position
    chunk_ids: np.ndarray
    rows: np.ndarray  # row inside its chunk
    lens_flat: np.ndarray  # doc_lens of all positions, concatenated
    lens_bounds: np.ndarray  # position i's doc_lens are lens_flat[bounds[i]:bounds[i+1]]
    counts: np.ndarray
    source_codes: np.ndarray


def _list_views(arr: pa.ListArray, path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, values) numpy views of a list<int32> array, without copying."""
    if arr.null_count:
        raise ShardError(f"{path}: null rows in a list column")
    offsets = arr.offsets.to_numpy(zero_copy_only=True)
    values = arr.values.to_numpy(zero_copy_only=True)
    return offsets, values


class _Chunk:
    """One record batch of one shard: tokens as a (rows, seq_len) view + doc_lens views."""

    def __init__(self, batch: pa.RecordBatch, seq_len: int, path: Path):
        offsets, values = _list_views(batch.column(0), path)
        n = len(batch)
        if not np.array_equal(offsets - offsets[0], np.arange(n + 1, dtype=offsets.dtype) * seq_len):
            raise ShardError(f"{path}: sequences are not all seq_len={seq_len} tokens long")
        self.tokens = values[offsets[0] : offsets[0] + n * seq_len].reshape(n, seq_len)
        self.lens_offsets, self.lens_values = _list_views(batch.column(1), path)
        self.sources = np.asarray(batch.column(2).to_pylist(), dtype=object)
        self.rows = n
        self.loss_mask = None
        if batch.num_columns > 3:  # SFT shards: loss_mask, laid out exactly like tokens
            m_off, m_values = _list_views(batch.column(3), path)
            self.loss_mask = m_values[m_off[0] : m_off[0] + n * seq_len].reshape(n, seq_len)

    def doc_lens(self, row: int) -> np.ndarray:
        return self.lens_values[self.lens_offsets[row] : self.lens_offsets[row + 1]]


class ShardLoader:
    def __init__(
        self, shard_dir: str | Path, cfg: LoaderConfig | None = None, rank: int = 0, world_size: int = 1
    ):
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} outside world_size {world_size}")
        self.cfg = cfg or LoaderConfig()
        self.dir = Path(shard_dir)
        self.manifest: Manifest = read_manifest(self.dir)
        self.seq_len = self.manifest.seq_len
        self.rank, self.world_size = rank, world_size
        self._chunks: list[_Chunk] = []
        self._maps: list[pa.MemoryMappedFile] = []  # keep the mappings the views point into
        for info in self.manifest.shards:
            path = verify_shard(self.dir, info) if self.cfg.verify else self.dir / info.file
            mapping, table = map_shard(path)
            self._maps.append(mapping)
            if table.num_rows != info.sequences:
                raise ShardError(f"{path}: {table.num_rows} rows but the manifest says {info.sequences}")
            for batch in table.to_batches():
                if len(batch):
                    self._chunks.append(_Chunk(batch, self.seq_len, path))
        if len({c.loss_mask is None for c in self._chunks}) > 1:
            raise ShardError(f"{self.dir}: mixes shards with and without a loss_mask column")
        self._starts = np.cumsum([0] + [c.rows for c in self._chunks])
        # doc_lens and sources are a few bytes per sequence: one in-memory index over all
        # shards makes their gather a single vectorised step instead of a loop per chunk
        self._lens_values = np.concatenate(
            [c.lens_values[c.lens_offsets[0] : c.lens_offsets[-1]] for c in self._chunks]
            or [np.empty(0, np.int32)]
        )
        counts = np.concatenate([np.diff(c.lens_offsets) for c in self._chunks] or [np.empty(0, np.int64)])
        self._lens_offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        all_sources = np.concatenate([c.sources for c in self._chunks] or [np.empty(0, object)])
        self._source_names, codes = np.unique(all_sources.astype(str), return_inverse=True)
        self._source_names = self._source_names.tolist()
        self._source_codes = codes.astype(np.int32)
        self.num_sequences = int(self._starts[-1])
        self.per_rank = self.num_sequences // world_size
        self.batches_per_epoch = self.per_rank // self.cfg.batch_size
        if self.batches_per_epoch == 0:
            raise ShardError(
                f"{self.dir}: {self.num_sequences} sequences are not enough for one batch of "
                f"{self.cfg.batch_size} on each of {world_size} ranks"
            )
        self.epoch = 0
        self.batch_in_epoch = 0

    # -- order ------------------------------------------------------------------------------
    def _epoch_order(self, epoch: int) -> np.ndarray:
        if self.cfg.shuffle:
            order = np.random.default_rng([self.cfg.seed, epoch]).permutation(self.num_sequences)
        else:
            order = np.arange(self.num_sequences)
        # equal share per rank; the remainder of an epoch is left out (it differs per epoch)
        return order[: self.per_rank * self.world_size][self.rank :: self.world_size]

    def _plan(self, indices: np.ndarray) -> _Plan:
        """Everything about these sequences except their tokens, computed in a few vectorised
        steps (once per epoch when iterating), so a batch is slices plus one token copy."""
        indices = np.asarray(indices, dtype=np.int64)
        chunk_ids = np.searchsorted(self._starts, indices, side="right") - 1
        start, end = self._lens_offsets[indices], self._lens_offsets[indices + 1]
        counts = end - start
        bounds = np.zeros(len(indices) + 1, dtype=np.int64)
        np.cumsum(counts, out=bounds[1:])
        flat = self._lens_values[np.repeat(start - bounds[:-1], counts) + np.arange(bounds[-1])]
        return _Plan(
            indices,
            chunk_ids,
            indices - self._starts[chunk_ids],
            flat,
            bounds,
            counts,
            self._source_codes[indices],
        )

    def _assemble(self, plan: _Plan, b0: int, b1: int) -> Batch:
        chunk_ids, rows = plan.chunk_ids[b0:b1], plan.rows[b0:b1]
        tokens = np.empty((b1 - b0, self.seq_len), dtype=np.int32)
        if chunk_ids[0] == chunk_ids[-1] and (chunk_ids == chunk_ids[0]).all():
            np.take(self._chunks[chunk_ids[0]].tokens, rows, axis=0, out=tokens)
        else:  # rows from several shards: copy each straight from its mapping
            chunks = self._chunks
            for i, (c, r) in enumerate(zip(chunk_ids.tolist(), rows.tolist(), strict=True)):
                tokens[i] = chunks[c].tokens[r]
        flat = plan.lens_flat[plan.lens_bounds[b0] : plan.lens_bounds[b1]]
        sources = [self._source_names[k] for k in plan.source_codes[b0:b1].tolist()]
        mask = None
        if self._chunks[0].loss_mask is not None:
            mask = np.stack([self._chunks[c].loss_mask[r] for c, r in zip(chunk_ids.tolist(), rows.tolist(), strict=True)])
            mask = torch.from_numpy(mask)
        return Batch(
            torch.from_numpy(tokens),
            torch.from_numpy(flat),
            plan.counts[b0:b1].tolist(),
            sources,
            plan.indices[b0:b1],
            mask,
        )

    def gather(self, indices: np.ndarray) -> Batch:
        """The batch of global sequence ``indices`` (random access)."""
        plan = self._plan(indices)
        return self._assemble(plan, 0, len(plan.indices))

    def __len__(self) -> int:
        return self.batches_per_epoch

    def __iter__(self) -> Iterator[Batch]:
        bs = self.cfg.batch_size
        while self.cfg.epochs is None or self.epoch < self.cfg.epochs:
            plan = self._plan(self._epoch_order(self.epoch))
            while self.batch_in_epoch < self.batches_per_epoch:
                b = self.batch_in_epoch * bs
                # advance before yielding: a state saved after consuming this batch resumes after it
                self.batch_in_epoch += 1
                yield self._assemble(plan, b, b + bs)
            self.epoch += 1
            self.batch_in_epoch = 0

    # -- resume -----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "batch_in_epoch": self.batch_in_epoch,
            "seed": self.cfg.seed,
            "shuffle": self.cfg.shuffle,
            "batch_size": self.cfg.batch_size,
            "rank": self.rank,
            "world_size": self.world_size,
            "num_sequences": self.num_sequences,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue where ``state`` stopped. Another rank layout is fine when the global batch
        (batch_size x world_size) is the same: global batch b of an epoch is positions
        [b*G, (b+1)*G) of the epoch's order whatever the split, and an epoch has N // G of them,
        so a run resumed on a different number of ranks reads exactly the same sequences."""
        mine = self.state_dict()
        for key in ("seed", "shuffle", "num_sequences"):
            if state.get(key) != mine[key]:
                raise ValueError(
                    f"loader state has {key}={state.get(key)!r} but this loader has {mine[key]!r}"
                )
        theirs = int(state.get("batch_size", 0)) * int(state.get("world_size", 0))
        if theirs != self.cfg.batch_size * self.world_size:
            raise ValueError(
                f"loader state has a global batch of {theirs} (batch_size {state.get('batch_size')} x "
                f"{state.get('world_size')} ranks) but this loader has {self.cfg.batch_size} x {self.world_size}"
            )
        self.epoch = int(state["epoch"])
        self.batch_in_epoch = int(state["batch_in_epoch"])
