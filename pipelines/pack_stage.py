"""Pack one mid-training stage from its mixture: a sample stream per component, each up to its
budget of sequences, into one shard directory.

Each component fills its own sequences (mixture accounting stays exact): streamed documents
continue from one sequence into the next (``StreamPacker.add_stream``), whole samples are never
cut (``add_whole``). A component that runs out of data before its budget keeps its finished
samples (the last sequence padded) — except streamed documents, whose partial last sequence is
dropped and counted. Every sample and padding segment goes to ``samples.jsonl`` with where it
sits, so document masks can be checked against what was packed.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.shards import ShardWriter, TokenizerInfo
from pipelines.pack import StageWriter, StreamPacker


@dataclass
class Component:
    kind: str  # the shards' ``source``
    target: int  # sequences
    # streamed: (token pieces, metadata) per document; else (token arrays, metadata, record or None)
    # per whole sample, the record (e.g. an MRCR row) kept for the stage's own files
    samples: Iterator[tuple]
    streamed: bool = False
    skips: Counter = field(default_factory=Counter)


@dataclass
class StageReport:
    name: str
    seq_len: int
    dir: Path
    targets: dict[str, int]
    sequences: dict[str, int] = field(default_factory=dict)
    samples: dict[str, int] = field(default_factory=dict)
    skips: dict[str, dict[str, int]] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    pad_tokens: int = 0
    dropped_tokens: int = 0
    seconds: float = 0.0

    def stats(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "dir"}


def pack_stage(
    out: Path, name: str, seq_len: int, components: Iterable[Component], info: TokenizerInfo,
    config: dict, shard_tokens: int, notes: dict[str, str], log=print,
) -> tuple[StageReport, list[dict]]:
    """The stage's shards and ``samples.jsonl`` in ``out``; its report and the records its
    whole samples carried, in packing order. ``notes`` (shared with the streams) lands in the report."""
    components = list(components)
    report = StageReport(name, seq_len, out, {c.kind: c.target for c in components}, notes=notes)
    t0 = time.monotonic()
    records: list[dict] = []
    out.mkdir(parents=True, exist_ok=True)
    with (
        ShardWriter(out, seq_len=seq_len, tokenizer=info, stage=name,
                    sequences_per_shard=max(1, shard_tokens // seq_len), config=config) as writer,
        open(out / "samples.jsonl", "w", encoding="utf-8") as log_fh,
    ):
        sw = StageWriter(writer, log_fh)
        for c in components:
            if c.target == 0:
                continue
            packer = StreamPacker(sw, c.kind, seq_len, info.eos_id)
            n_samples = 0
            if c.streamed:
                for pieces, meta in c.samples:
                    n_samples += 1
                    writer.add_docs(c.kind)
                    if not packer.add_stream(pieces, c.kind, meta, c.target):
                        break
            else:
                for parts, meta, record in c.samples:
                    if packer.emitted >= c.target:
                        break
                    if not packer.fits(sum(len(p) for p in parts)) and packer.emitted + 1 >= c.target:
                        packer.pad()  # the sample would open a sequence past the budget
                        break
                    n_samples += 1
                    writer.add_docs(c.kind)
                    packer.add_whole(parts, c.kind, meta)
                    if record is not None:
                        records.append(record)
                if packer.emitted < c.target:  # out of data: keep the finished samples
                    packer.pad()
            dropped = packer.drop_partial()
            writer.add_dropped_tokens(c.kind, dropped)
            report.dropped_tokens += dropped
            report.sequences[c.kind] = packer.emitted
            report.samples[c.kind] = n_samples
            report.skips[c.kind] = {k: v for k, v in c.skips.items() if v}
            if packer.emitted < c.target:
                report.notes.setdefault(c.kind, f"ran out of data: {packer.emitted} of {c.target} sequences")
            log(f"   {name}/{c.kind}: {packer.emitted}/{c.target} sequences from {n_samples} samples")
        report.pad_tokens = sw.pad_tokens
    report.seconds = time.monotonic() - t0
    return report, records
