"""Natural long documents: books, papers, long documentation pages, chosen by token length
and (when a quality stage has scored them) quality score.

Works on any document dataset: the caller supplies each document's token count and its
metadata (the JSON every stage writes its score into, e.g. ``dclm_score``/``edu_score``).
Every decision has a reason, so a report can show why a document is not in a stage.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from pydantic import Field

from core.config import StrictModel


class NaturalConfig(StrictModel):
    min_tokens: int = Field(default=4096, gt=0)
    max_tokens: int | None = Field(default=None, gt=0)
    # only these metadata `source`s (e.g. [books, python-docs]); None = any
    sources: list[str] | None = None
    # metadata key holding a quality score; None = no quality condition
    quality_key: str | None = None
    min_quality: float = 0.0
    # documents without the score (the quality stages have not run on them)
    keep_unscored: bool = True


def natural_reason(n_tokens: int, metadata: dict[str, Any], cfg: NaturalConfig) -> str | None:
    """None to keep the document, else the reason it is not a natural long document."""
    if cfg.sources is not None and metadata.get("source") not in cfg.sources:
        return "other_source"
    if n_tokens < cfg.min_tokens:
        return "too_short"
    if cfg.max_tokens is not None and n_tokens > cfg.max_tokens:
        return "too_long"
    if cfg.quality_key is not None:
        score = metadata.get(cfg.quality_key)
        if score is None:
            return None if cfg.keep_unscored else "unscored"
        try:
            if float(score) < cfg.min_quality:
                return "low_quality"
        except (TypeError, ValueError):
            return "unscored"
    return None


def select_natural(
    docs: Iterable[tuple[str, int, dict[str, Any]]], cfg: NaturalConfig
) -> tuple[list[str], Counter]:
    """Ids of the kept documents (input order) and a count of reasons for the rest."""
    kept, reasons = [], Counter()
    for doc_id, n_tokens, meta in docs:
        reason = natural_reason(n_tokens, meta, cfg)
        if reason is None:
            kept.append(doc_id)
        else:
            reasons[reason] += 1
    return kept, reasons
