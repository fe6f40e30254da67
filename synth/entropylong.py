"""EntropyLong-style verification: keep a retrieved context only if it provably helps.

For a document we find the positions where a small causal LM is most uncertain (entropy
above an adaptive threshold: mean + ``threshold_std`` standard deviations of the document's
own entropies, and at least the ``min_positions`` highest). Candidate chunks are retrieved
from other documents; each is placed before the document and kept only if the model's mean
entropy at those positions drops by at least ``delta`` nats. Verified chunks + the document
make one long training sample whose long-range dependencies are real: the model measurably
predicts the document better with them. The measured reduction of every candidate, kept or
rejected, is recorded.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from pydantic import Field

from core.config import StrictModel
from core.errors import InputError
from synth.retrieval import ChunkIndex, ChunkRef


class EntropyModel(Protocol):
    def encode(self, text: str) -> list[int]: ...
    def decode(self, ids: list[int]) -> str: ...
    def entropies(self, context: list[int], target: list[int]) -> np.ndarray: ...


class EntropyLongConfig(StrictModel):
    # LM tokens of a document that are evaluated (the LM is the cost: keep it small on CPU)
    max_doc_tokens: int = Field(default=192, ge=8)
    # LM tokens of a candidate chunk placed before the document when verifying it
    max_context_tokens: int = Field(default=512, gt=0)
    # adaptive threshold: entropy > mean + threshold_std * std over the document
    threshold_std: float = 1.0
    min_positions: int = Field(default=4, gt=0)
    candidates: int = Field(default=8, gt=0)
    # keep a chunk when the mean entropy at the high-entropy positions drops by >= delta nats
    delta: float = 0.1
    max_kept: int = Field(default=8, gt=0)
    # one more forward pass per document: entropy with all kept chunks together
    check_assembled: bool = True


@dataclass
class Verdict:
    ref: ChunkRef
    reduction: float  # mean entropy drop at the high-entropy positions (nats); < 0 = it hurt
    kept: bool


@dataclass
class EntropyLongSample:
    doc_id: str
    doc_text: str  # the evaluated part of the document
    positions: np.ndarray  # indices into the document's predicted tokens (target[1:])
    base_entropy: float  # mean entropy at the positions without any context
    verdicts: list[Verdict] = field(default_factory=list)
    assembled_reduction: float | None = None

    @property
    def kept(self) -> list[Verdict]:
        # most useful first: it ends up farthest from the document, the longest dependency
        return sorted((v for v in self.verdicts if v.kept), key=lambda v: -v.reduction)

    def segments(self) -> list[tuple[str, str, str, int]]:
        """(text, kind, doc_id, chunk_index): verified contexts, then the document."""
        out = [(v.ref.text, "context", v.ref.doc_id, v.ref.index) for v in self.kept]
        return out + [(self.doc_text, "document", self.doc_id, -1)]

    def metadata(self) -> dict:
        return {
            "doc_id": self.doc_id,
            "positions": len(self.positions),
            "base_entropy": round(self.base_entropy, 4),
            "kept": [[v.ref.doc_id, v.ref.index, round(v.reduction, 4)] for v in self.kept],
            "rejected": [
                [v.ref.doc_id, v.ref.index, round(v.reduction, 4)] for v in self.verdicts if not v.kept
            ],
            "assembled_reduction": None
            if self.assembled_reduction is None
            else round(self.assembled_reduction, 4),
        }


def high_entropy_positions(entropy: np.ndarray, cfg: EntropyLongConfig) -> np.ndarray:
    threshold = entropy.mean() + cfg.threshold_std * entropy.std()
    pos = np.flatnonzero(entropy > threshold)
    if len(pos) < cfg.min_positions:  # a flat profile: fall back to the top few
        pos = np.sort(np.argsort(-entropy, kind="stable")[: cfg.min_positions])
    return pos


def verify_document(
    doc_id: str, text: str, candidates: list[ChunkRef], lm: EntropyModel, cfg: EntropyLongConfig
) -> EntropyLongSample:
    ids = lm.encode(text)
    if len(ids) < cfg.min_positions + 2:
        raise InputError(f"{doc_id}: {len(ids)} LM tokens, too short to find {cfg.min_positions} positions")
    if len(ids) > cfg.max_doc_tokens:
        ids = ids[: cfg.max_doc_tokens]
        text = lm.decode(ids)
    base = lm.entropies([], ids)
    pos = high_entropy_positions(base, cfg)
    sample = EntropyLongSample(doc_id, text, pos, float(base[pos].mean()))
    for ref in candidates:
        ctx = lm.encode(ref.text)[: cfg.max_context_tokens]
        h = lm.entropies(ctx, ids)
        reduction = sample.base_entropy - float(h[pos].mean())
        sample.verdicts.append(Verdict(ref, reduction, reduction >= cfg.delta))
    # beyond max_kept, the weakest verified chunks are demoted (they still passed delta)
    for v in sample.kept[cfg.max_kept :]:
        v.kept = False
    if cfg.check_assembled and sample.kept:
        ctx = [t for v in sample.kept for t in lm.encode(v.ref.text)[: cfg.max_context_tokens]]
        sample.assembled_reduction = sample.base_entropy - float(lm.entropies(ctx, ids)[pos].mean())
    return sample


def build_sample(
    doc_id: str, text: str, index: ChunkIndex, lm: EntropyModel, cfg: EntropyLongConfig
) -> EntropyLongSample:
    """Retrieve candidates for the document from ``index`` (other documents only) and verify."""
    query = text[: cfg.max_doc_tokens * 8]  # about the evaluated part; chars, not tokens
    candidates = [ref for ref, _ in index.query(query, cfg.candidates, exclude_docs={doc_id})]
    return verify_document(doc_id, text, candidates, lm, cfg)


def build_samples(
    docs: Iterable[tuple[str, str]], n: int, index: ChunkIndex, lm: EntropyModel,
    cfg: EntropyLongConfig, log=print,
) -> list[EntropyLongSample]:
    """``build_sample`` for each (id, text) of ``n`` documents, saying per document what each
    candidate did to the entropy (the LM is slow on CPU: progress is worth a line each)."""
    samples = []
    for i, (doc_id, text) in enumerate(docs, 1):
        s = build_sample(doc_id, text, index, lm, cfg)
        samples.append(s)
        red = [f"{v.reduction:+.2f}{'*' if v.kept else ''}" for v in s.verdicts]
        log(
            f"   entropylong {i}/{n} {doc_id}: H={s.base_entropy:.2f} at {len(s.positions)} "
            f"positions; reductions {' '.join(red)} (* kept)"
        )
    return samples


def summarize(samples: list[EntropyLongSample]) -> dict:
    """Mean entropy reduction of kept vs rejected chunks (the measured claim)."""
    kept = [v.reduction for s in samples for v in s.verdicts if v.kept]
    rejected = [v.reduction for s in samples for v in s.verdicts if not v.kept]
    assembled = [s.assembled_reduction for s in samples if s.assembled_reduction is not None]

    def mean(xs: list[float]) -> float | None:
        return round(float(np.mean(xs)), 4) if xs else None

    return {
        "documents": len(samples),
        "with_context": sum(1 for s in samples if s.kept),
        "kept": len(kept),
        "rejected": len(rejected),
        "mean_reduction_kept": mean(kept),
        "mean_reduction_rejected": mean(rejected),
        "mean_reduction_assembled": mean(assembled),
    }
