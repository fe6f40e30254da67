"""Distil LLM educational scores into a fastText classifier for corpus-scale scoring.

The LLM scores a bounded sample; a fastText model learns those scores as classes 0–5
(regression by bins) and predicts the expected score Σ p(k)·k for everything else. The
agreement with the LLM on held-out documents (MAE, rank correlation, keep/drop decisions at
the threshold) is measured at training time and recorded with the job.
"""

from __future__ import annotations

import random
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from datatrove.data import Document
from datatrove.pipeline.filters.base_filter import BaseFilter

from core.errors import InputError
from filters.dclm import FastTextArgs, _LazyModel, normalize, train_supervised

LABEL = "__label__edu"


@dataclass
class Agreement:
    n_train: int
    n_valid: int
    mae: float
    spearman: float
    decision_agreement: float  # fraction with the same keep/drop decision at the threshold

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return (f"distilled vs LLM on {self.n_valid} held-out docs: MAE {self.mae:.3f}, "
                f"Spearman {self.spearman:.3f}, same keep/drop decision {self.decision_agreement:.1%} "
                f"(trained on {self.n_train})")


def expected_score(model, text: str) -> float:
    labels, probs = model.predict(normalize(text), k=-1)
    total = float(sum(probs))
    if total <= 0:
        return 0.0
    return float(sum(int(lab[len(LABEL):]) * p for lab, p in zip(labels, probs, strict=True)) / total)


def _ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x))
    # average ranks over ties
    for v in np.unique(x):
        idx = np.nonzero(x == v)[0]
        ranks[idx] = ranks[idx].mean()
    return ranks


def spearman(a: list[float], b: list[float]) -> float:
    if len(a) < 2:
        return float("nan")
    ra, rb = _ranks(np.asarray(a, float)), _ranks(np.asarray(b, float))
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def train_distilled(texts: list[str], scores: list[float], out: str | Path, threshold: float,
                    args: FastTextArgs | None = None, valid_fraction: float = 0.25, seed: int = 0) -> Agreement:
    if len(texts) != len(scores):
        raise ValueError("texts and scores differ in length")
    if len(texts) < 4:
        raise InputError(f"need at least 4 LLM-scored documents to distil, got {len(texts)}")
    data = list(zip(texts, scores, strict=True))
    random.Random(seed).shuffle(data)
    n_valid = max(1, int(len(data) * valid_fraction))
    valid, train = data[:n_valid], data[n_valid:]
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as fh:
        for text, score in train:
            fh.write(f"{LABEL}{int(round(score))} {normalize(text)}\n")
        path = fh.name
    try:
        # a few dozen LLM-scored documents: fastText needs many passes at a high rate to fit them
        model = train_supervised(path, args or FastTextArgs(epoch=25, lr=0.5), out)
    finally:
        Path(path).unlink(missing_ok=True)
    pred = [expected_score(model, t) for t, _ in valid]
    true = [s for _, s in valid]
    same = sum((p >= threshold) == (t >= threshold) for p, t in zip(pred, true, strict=True)) / len(valid)
    mae = float(np.mean(np.abs(np.asarray(pred) - np.asarray(true))))
    return Agreement(len(train), len(valid), mae, spearman(pred, true), same)


class LlmScoredRows:
    """Corpus pass: (text, edu_score) of the documents the LLM itself scored, in id order — the
    distillation's training set."""

    def local(self, documents_dir: str) -> list[tuple[str, float]]:
        import duckdb

        q = (f"SELECT text, edu_score FROM read_parquet('{documents_dir}/*.parquet') "
             "WHERE json_extract_string(metadata, '$.edu_source') = 'llm' ORDER BY id")
        return [(r[0], r[1]) for r in duckdb.connect().execute(q).fetchall()]

    def spark(self, df) -> list[tuple[str, float]]:
        from pyspark.sql import functions as F

        rows = (df.filter(F.get_json_object("metadata", "$.edu_source") == "llm")
                .orderBy("id").select("text", "edu_score").collect())
        return [(r.text, r.edu_score) for r in rows]


class EduDistilledScore(BaseFilter):
    """Give documents the LLM did not score a distilled ``edu_score`` (never drops)."""

    name = "🎓 edu_distilled"
    stage_name = "edu_distilled_score"
    promotes = {"edu_score": "float64"}

    def __init__(self, model_path: str | Path):
        super().__init__()
        self.lazy = _LazyModel(str(model_path), load_now=True)
        self.model_path = str(model_path)

    def filter(self, doc: Document) -> bool:
        if doc.metadata.get("edu_score") is None:
            doc.metadata["edu_score"] = expected_score(self.lazy.model, doc.text)
            doc.metadata["edu_source"] = "distilled"
        return True
