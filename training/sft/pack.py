"""Pack tokenized SFT samples (tokens + per-token loss mask) into Arrow shards.

The pre-training packer (``pipelines.pack.StreamPacker``, stream mode) streams documents and lets one
continue into the next sequence; an SFT sample cut in two would train its second half
without the conversation it answers, so here a sample is never split: samples are placed
whole, in order, into the current sequence while they fit, and the rest of a sequence is
one padding segment with loss mask 0 (its own ``doc_lens`` entry, so document masking keeps
it out of every sample's attention). A sample longer than ``seq_len`` cannot be placed and
is returned to the caller as a counted reject (``training.sft.data`` splits conversations
at user turns before that). Shards use the existing contract (``core.shards.ShardWriter``)
plus the ``loss_mask`` column.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from core.shards import Manifest, ShardWriter, TokenizerInfo, read_manifest


class SamplePacker:
    """Whole samples into fixed-length sequences, padding the tail of each sequence."""

    def __init__(self, seq_len: int, pad_id: int):
        self.seq_len, self.pad_id = seq_len, pad_id
        self._tokens: list[list[int]] = []
        self._masks: list[list[int]] = []
        self._used = 0

    def add(self, tokens: list[int], mask: list[int]) -> Iterator[tuple[np.ndarray, list[int], np.ndarray]]:
        if len(tokens) > self.seq_len:
            raise ValueError(f"sample of {len(tokens)} tokens exceeds seq_len {self.seq_len}")
        if self._used + len(tokens) > self.seq_len:
            yield self._emit()
        self._tokens.append(tokens)
        self._masks.append(mask)
        self._used += len(tokens)

    def flush(self) -> Iterator[tuple[np.ndarray, list[int], np.ndarray]]:
        if self._tokens:
            yield self._emit()

    def _emit(self) -> tuple[np.ndarray, list[int], np.ndarray]:
        pad = self.seq_len - self._used
        tokens = np.fromiter((t for s in self._tokens for t in s), dtype=np.int32, count=self._used)
        mask = np.fromiter((m for s in self._masks for m in s), dtype=np.int8, count=self._used)
        lens = [len(s) for s in self._tokens] + ([pad] if pad else [])
        tokens = np.concatenate([tokens, np.full(pad, self.pad_id, np.int32)])
        mask = np.concatenate([mask, np.zeros(pad, np.int8)])
        self._tokens, self._masks, self._used = [], [], 0
        return tokens, lens, mask


def write_sft_shards(
    samples: Iterable[tuple[list[int], list[int], str]],
    out_dir: str | Path,
    tokenizer: TokenizerInfo,
    seq_len: int,
    pad_id: int,
    stage: str = "sft",
    sequences_per_shard: int = 2048,
    config: dict[str, Any] | None = None,
) -> tuple[Manifest, dict[str, int]]:
    """Write ``(tokens, loss_mask, source)`` samples as SFT shards; one sequence holds one
    source (mixture accounting stays exact). Returns the manifest and rejects by reason."""
    packers: dict[str, SamplePacker] = {}
    rejects: dict[str, int] = {}
    with ShardWriter(
        out_dir, seq_len=seq_len, tokenizer=tokenizer, stage=stage,
        sequences_per_shard=sequences_per_shard, config=config or {}, loss_mask=True,
    ) as writer:  # fmt: skip
        for tokens, mask, source in samples:
            if len(tokens) > seq_len:
                rejects["longer_than_seq_len"] = rejects.get("longer_than_seq_len", 0) + 1
                continue
            if not any(mask):
                rejects["nothing_to_train"] = rejects.get("nothing_to_train", 0) + 1
                continue
            packer = packers.setdefault(source, SamplePacker(seq_len, pad_id))
            writer.add_docs(source)
            for seq, lens, m in packer.add(tokens, mask):
                writer.add(seq, lens, source, loss_mask=m)
        for source, packer in packers.items():
            for seq, lens, m in packer.flush():
                writer.add(seq, lens, source, loss_mask=m)
    return read_manifest(out_dir), rejects
