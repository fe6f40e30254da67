"""Labelled data for the web job's classifiers, assembled from what the job has.

DCLM: positives are high-quality explanatory passages (files the user passes — the demo's
novels — plus passages of documents that passed the heuristic phase, i.e. documentation
prose); negatives are boilerplate (files the user passes, plus the navigation/chrome regions
of the input HTML pages — files or web-archive records — which are boilerplate by construction).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from pydantic import Field

from core.config import StrictModel
from core.errors import InputError
from core.io import iter_jsonl
from core.records import get_reject
from filters.extract import boilerplate_text
from pipelines.inputs import InputFile, ReadLimits
from pipelines.pack import iter_documents
from pipelines.readers import read_file

MIN_CLASS_EXAMPLES = 10  # fewer passages of a class than this train no usable classifier


class DclmTrainData(StrictModel):
    positives: list[str] = []  # .jsonl (text field) or text files of high-quality prose
    use_kept_documents: bool = True  # passages of documents that passed the heuristics
    negatives: list[str] = []
    use_html_boilerplate: bool = True  # navigation/chrome text of the input HTML pages (files and WARC records)
    passage_words: int = Field(default=120, ge=10)
    max_per_class: int = Field(default=3000, gt=0)
    # the scarcer class (usually the boilerplate: one example per page) caps the other at
    # this multiple, so the classifier is not swamped by one class
    max_class_ratio: float = Field(default=3.0, ge=1)
    seed: int = 0


def passages(texts: Iterable[str], words: int) -> Iterator[str]:
    """Consecutive paragraph groups of about ``words`` words (whole paragraphs)."""
    for text in texts:
        buf: list[str] = []
        for para in re.split(r"\n\s*\n", text):
            buf += para.split()
            if len(buf) >= words:
                yield " ".join(buf)
                buf = []
        if len(buf) >= words // 3:
            yield " ".join(buf)


def _file_texts(path: str) -> Iterator[str]:
    p = Path(path)
    if not p.is_file():
        raise InputError(f"DCLM training file not found: {p}")
    if p.suffix == ".jsonl":
        for rec in iter_jsonl(p, "DCLM training"):
            yield rec.get("text", "")
    else:
        with open(p, encoding="utf-8", errors="replace") as fh:
            yield fh.read()


def _kept_texts(documents_dir: Path) -> Iterator[str]:
    return (text for rows in iter_documents(documents_dir, 256) for _, text, _ in rows)


HTML_SOURCES = ("html", "warc")  # input formats whose pages have chrome: HTML files, web archives


def boilerplate_negatives(files: list[InputFile], limits: ReadLimits, limit: int | None = None) -> Iterator[str]:
    """The chrome text of each HTML page of the input — HTML files and the HTML records of
    WARC/ARC archives alike — one negative per page with at least 10 words of it; at most
    ``limit`` (files are read in order and reading stops there: a crawl need not be read twice)."""
    found = 0
    for f in files:
        if f.format not in HTML_SOURCES:
            continue
        for doc in read_file(f, limits):
            if get_reject(doc) is not None or doc.metadata.get("content_type") != "text/html":
                continue
            text = boilerplate_text(doc.text)
            if len(text.split()) >= 10:
                yield text
                found += 1
                if limit is not None and found >= limit:
                    return


def build_dclm_examples(cfg: DclmTrainData, kept_dir: Path | None, html_files: list[InputFile],
                        limits: ReadLimits) -> tuple[list[str], list[str]]:
    pos_texts: list[Iterable[str]] = [_file_texts(p) for p in cfg.positives]
    if cfg.use_kept_documents and kept_dir is not None:
        pos_texts.append(_kept_texts(kept_dir))
    neg_texts: list[Iterable[str]] = [_file_texts(p) for p in cfg.negatives]
    pos = [x for src in pos_texts for x in passages(src, cfg.passage_words)]
    neg = [x for src in neg_texts for x in passages(src, cfg.passage_words)]
    if cfg.use_html_boilerplate:
        # chrome regions are short: each page's chrome is one example, not cut into passages
        neg += list(boilerplate_negatives(html_files, limits, cfg.max_per_class))
    rng = random.Random(cfg.seed)
    rng.shuffle(pos)
    rng.shuffle(neg)
    if min(len(pos), len(neg)) < MIN_CLASS_EXAMPLES:
        raise InputError(f"too little DCLM training data: {len(pos)} positive, {len(neg)} negative passages")
    n_pos = min(cfg.max_per_class, len(pos), int(cfg.max_class_ratio * len(neg)))
    n_neg = min(cfg.max_per_class, len(neg), int(cfg.max_class_ratio * n_pos))
    return pos[:n_pos], neg[:n_neg]
