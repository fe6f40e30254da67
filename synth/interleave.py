"""NExtLong-style interleaving: a document's meta-chunks with retrieved hard negatives
between them, up to a target length.

For each meta-chunk of the document we retrieve its nearest chunks from *other* documents
(hard negatives: similar wording, unrelated content). Distractors are added round-robin —
the best remaining one after each original chunk in turn — until the target length is
reached, so every gap between original chunks grows evenly and the hardest negatives go in
first. A model trained on the result must look across long stretches of plausible but
irrelevant text to continue the document. The positions of the original chunks are
recorded so the sample can be inspected (or the loss restricted) later.

Lengths are in whatever unit the caller's ``length_fn`` counts (tokens of the packing
tokenizer in the pipeline, characters in quick uses).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from pydantic import Field

from core.config import StrictModel
from core.errors import InputError
from synth.chunking import ChunkConfig, split_meta_chunks
from synth.retrieval import ChunkIndex, ChunkRef

LengthFn = Callable[[list[str]], list[int]]


class InterleaveConfig(StrictModel):
    chunk: ChunkConfig = ChunkConfig()
    # distractors retrieved per meta-chunk: as many as the target needs, capped here
    max_distractors_per_chunk: int = Field(default=32, gt=0)


class TooShort(InputError):
    """The document is shorter than one meta-chunk: nothing to interleave."""


class TargetUnreachable(InputError):
    """Even with every retrievable distractor the sample stays short of the target."""

    def __init__(self, message: str, reached: int, target: int):
        super().__init__(message)
        self.reached, self.target = reached, target


@dataclass
class Segment:
    text: str
    kind: Literal["original", "distractor"]
    doc_id: str
    chunk_index: int
    length: int
    similarity: float = 1.0  # retrieval score for distractors


@dataclass
class InterleavedSample:
    doc_id: str
    target: int
    segments: list[Segment] = field(default_factory=list)

    @property
    def length(self) -> int:
        return sum(s.length for s in self.segments)

    def original_spans(self) -> list[tuple[int, int]]:
        """[start, end) of every original chunk, in order, in the length unit."""
        spans, pos = [], 0
        for s in self.segments:
            if s.kind == "original":
                spans.append((pos, pos + s.length))
            pos += s.length
        return spans

    def trim_to(self, target: int) -> None:
        """Cut the overshoot of the last round off distractors (from the end), never off an
        original chunk, so the sample is exactly ``target`` long."""
        over = self.length - target
        for s in reversed(self.segments):
            if over <= 0:
                break
            if s.kind == "distractor":
                cut = min(over, s.length)
                s.length -= cut
                over -= cut
        self.segments = [s for s in self.segments if s.length > 0]

    def metadata(self) -> dict:
        return {
            "doc_id": self.doc_id,
            "target": self.target,
            "length": self.length,
            "original_spans": self.original_spans(),
            "n_original": sum(s.kind == "original" for s in self.segments),
            "distractors": [[s.doc_id, s.chunk_index] for s in self.segments if s.kind == "distractor"],
        }


def document_chunks(doc_id: str, text: str, length_fn: LengthFn, cfg: ChunkConfig) -> list[ChunkRef]:
    if len(text.strip()) < cfg.min_chunk_chars:
        raise TooShort(
            f"{doc_id}: {len(text.strip())} characters, shorter than one meta-chunk "
            f"(chunk.min_chunk_chars={cfg.min_chunk_chars})"
        )
    chunks = split_meta_chunks(text, cfg)
    return [ChunkRef(doc_id, i, c, n) for i, (c, n) in enumerate(zip(chunks, length_fn(chunks), strict=True))]


def _round_robin(
    originals: list[ChunkRef], lists: list[list[tuple[ChunkRef, float]]], target: int
) -> tuple[list[list[tuple[ChunkRef, float]]], int]:
    """Pick distractors for each gap, one per gap per round, skipping repeats."""
    total = sum(c.length for c in originals)
    picked: list[list[tuple[ChunkRef, float]]] = [[] for _ in originals]
    cursors = [0] * len(originals)
    used: set[tuple[str, int]] = set()
    while total < target:
        added = False
        for i, cands in enumerate(lists):
            while cursors[i] < len(cands) and cands[cursors[i]][0].key in used:
                cursors[i] += 1
            if cursors[i] < len(cands):
                ref, score = cands[cursors[i]]
                cursors[i] += 1
                used.add(ref.key)
                picked[i].append((ref, score))
                total += ref.length
                added = True
                if total >= target:
                    break
        if not added:
            break
    return picked, total


def interleave_document(
    doc_id: str, text: str, index: ChunkIndex, target: int, length_fn: LengthFn, cfg: InterleaveConfig
) -> InterleavedSample:
    """The document's meta-chunks interleaved with hard negatives, at least ``target`` long
    (call ``trim_to`` for exactly). Raises TooShort / TargetUnreachable."""
    originals = document_chunks(doc_id, text, length_fn, cfg.chunk)
    doc_len = sum(c.length for c in originals)
    sample = InterleavedSample(doc_id, target)
    need = target - doc_len
    if need <= 0:  # already long enough: a natural long document, nothing to add
        sample.segments = [Segment(c.text, "original", doc_id, c.index, c.length) for c in originals]
        return sample
    # ask each gap for about twice its share, so repeats and short chunks still leave enough
    share = math.ceil(need / (len(originals) * max(1.0, index.mean_length())))
    ks = [min(cfg.max_distractors_per_chunk, 2 * share + 2), cfg.max_distractors_per_chunk]
    for k in dict.fromkeys(ks):  # the adaptive k first; the cap only if that falls short
        lists = [index.query(c.text, k, exclude_docs={doc_id}) for c in originals]
        picked, total = _round_robin(originals, lists, target)
        if total >= target:
            break
    else:
        raise TargetUnreachable(
            f"{doc_id}: reached {total} of {target} (target) with {len(originals)} meta-chunks x "
            f"up to {cfg.max_distractors_per_chunk} distractors from an index of {len(index)} chunks; "
            f"raise interleave.max_distractors_per_chunk or index more documents",
            reached=total,
            target=target,
        )
    for orig, distractors in zip(originals, picked, strict=True):
        sample.segments.append(Segment(orig.text, "original", doc_id, orig.index, orig.length))
        for ref, score in distractors:
            sample.segments.append(Segment(ref.text, "distractor", ref.doc_id, ref.index, ref.length, score))
    return sample
