"""LLM educational-value scoring with chunk-and-aggregate (GLM-5: "LLM scoring keeps only the
most educational content, with a chunk-and-aggregate algorithm for long documents").

FineWeb-Edu's annotator scores only the first ~512 tokens of a page. Here every document is
split into token-bounded chunks that cover 100% of its text, every chunk is scored against an
additive 0–5 rubric, and the chunk scores are aggregated by a configurable policy. Per-chunk
scores, their token counts and the policy land in metadata, so a report can audit each call.

Two scoring modes:
* ``text``: the model writes a short justification ending in "Educational score: N"; parse N.
* ``logprobs``: the prompt ends at "Educational score:"; the score is the expected value of
  the digits 0–5 under the model's next-token distribution — robust for small models, which
  rarely follow the output format but still rank documents sensibly.

A chunk the endpoint fails on (after the client's retries) leaves its document *unscored*:
it is rejected with reason ``edu_unscored`` and the endpoint URL in its details — recorded,
never silently dropped, never silently kept.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Literal

from datatrove.data import Document
from datatrove.pipeline.filters.base_filter import BaseFilter
from pydantic import Field

from core.config import StrictModel
from core.llm import LLMClient, LLMConfig, LLMFailure, LLMResponse
from core.records import REJECT_DETAIL_KEY
from core.shipped import FileHandle

RUBRIC = """You are judging how useful the text below would be for teaching, from primary school to university. Start from 0 and add points:
+1 if it carries some factual or instructional information, even when mixed with adverts, navigation or unrelated material.
+1 if it deals with a subject people study at school or university, even if the treatment is partial or loosely organised.
+1 if a learner could study from it: it explains key ideas coherently, though it may be brief or hard to follow.
+1 if it is clearly written and well organised, like a section of a textbook or a tutorial, with little irrelevant content.
+1 if it is excellent teaching material: thorough, accurate, with examples or exercises, and free of distractions.

Text:
\"\"\"
{text}
\"\"\"
"""
TEXT_MODE_SUFFIX = 'Justify your points in at most 50 words, then end with a line "Educational score: <points>".'
# The trailing space matters for small models whose tokenizers split digits from the space
# before them: without it the most likely next token is " " and the digits barely appear.
LOGPROBS_SUFFIX = "Educational score: "
SCORE_RE = re.compile(r"Educational score:\s*\**\s*([0-5](?:\.\d+)?)", re.IGNORECASE)

Aggregation = Literal["mean", "length_weighted", "max", "top_k_mean"]


class EduConfig(StrictModel):
    llm: LLMConfig | None = None
    mode: Literal["text", "logprobs"] = "logprobs"
    # completions suit logprobs mode (the prompt ends right before the score); chat suits text mode
    route: Literal["chat", "completions"] = "completions"
    max_chunk_tokens: int = Field(default=512, ge=16)
    # tokenizer.json used to bound chunks (ideally the scoring model's); None: ~1 token per word
    tokenizer_path: str | None = None
    aggregation: Aggregation = "length_weighted"
    top_k: int = Field(default=3, gt=0)
    threshold: float = Field(default=3.0, ge=0, le=5)
    text_mode_max_tokens: int = Field(default=160, gt=0)
    logprobs_suffix: str = LOGPROBS_SUFFIX
    # documents whose chunks are in flight together (the client bounds actual concurrency)
    batch_docs: int = Field(default=8, gt=0)


# -- chunking ----------------------------------------------------------------------------------
_PARA = re.compile(r"\n\s*\n")


class TokenCounter(FileHandle):
    """Counts tokens with a tokenizers JSON file, or whitespace words without one. Picklable."""

    def __init__(self, tokenizer_path: str | None):
        self.path = tokenizer_path
        self._tok = None

    def _tokenizer(self):
        if self._tok is None and self.path:
            from tokenizers import Tokenizer

            self._tok = Tokenizer.from_file(self.local_path())
        return self._tok

    def offsets(self, text: str) -> list[tuple[int, int]]:
        tok = self._tokenizer()
        if tok is not None:
            return [o for o in tok.encode(text, add_special_tokens=False).offsets if o[1] > o[0]]
        return [m.span() for m in re.finditer(r"\S+", text)]

    def __getstate__(self):
        return {"path": self.path, "_tok": None}


def chunk_spans(text: str, max_tokens: int, counter: TokenCounter) -> list[tuple[int, int]]:
    """Character spans of token-bounded chunks covering all of ``text`` (joined, they give
    ``text`` back exactly). Paragraphs are kept whole when they fit; longer ones are cut at
    token boundaries."""
    if not text:
        return []
    units, start = [], 0
    for m in _PARA.finditer(text):
        units.append((start, m.end()))
        start = m.end()
    units.append((start, len(text)))
    pieces: list[tuple[int, int, int]] = []  # (start, end, tokens)
    for a, b in units:
        offs = counter.offsets(text[a:b])
        if len(offs) <= max_tokens:
            pieces.append((a, b, len(offs)))
            continue
        cut = a
        for i in range(max_tokens, len(offs), max_tokens):
            nxt = a + offs[i][0]
            pieces.append((cut, nxt, max_tokens))
            cut = nxt
        pieces.append((cut, b, len(offs) - (len(offs) - 1) // max_tokens * max_tokens))
    spans: list[tuple[int, int]] = []
    cur_start, cur_end = pieces[0][0], pieces[0][0]
    for a, b, _ in pieces:
        # count the joined text, not the sum of the pieces: BPE merges across their borders
        if cur_end > cur_start and len(counter.offsets(text[cur_start:b])) > max_tokens:
            spans.append((cur_start, cur_end))
            cur_start = a
        cur_end = b
    spans.append((cur_start, cur_end))
    return spans


# -- scoring -----------------------------------------------------------------------------------
def parse_text_score(text: str) -> float | None:
    matches = SCORE_RE.findall(text)
    return float(matches[-1]) if matches else None


def expected_digit_score(top_logprobs: dict[str, float]) -> float | None:
    """E[score] over the digit tokens 0–5 in the next-token distribution (renormalised)."""
    mass = [0.0] * 6
    for token, lp in top_logprobs.items():
        t = token.strip()
        if len(t) == 1 and t in "012345":
            mass[int(t)] += math.exp(lp)
    total = sum(mass)
    if total <= 0:
        return None
    return sum(i * m for i, m in enumerate(mass)) / total


def aggregate(scores: list[float], tokens: list[int], policy: Aggregation, top_k: int = 3) -> float:
    if not scores:
        raise ValueError("no chunk scores to aggregate")
    if policy == "mean":
        return sum(scores) / len(scores)
    if policy == "length_weighted":
        total = sum(tokens)
        return sum(s * t for s, t in zip(scores, tokens, strict=True)) / total if total else sum(scores) / len(scores)
    if policy == "max":
        return max(scores)
    top = sorted(scores, reverse=True)[:top_k]
    return sum(top) / len(top)


def build_request(chunk: str, cfg: EduConfig) -> tuple[str, dict]:
    prompt = RUBRIC.format(text=chunk)
    if cfg.mode == "text":
        content = prompt + "\n" + TEXT_MODE_SUFFIX
        params = {"max_tokens": cfg.text_mode_max_tokens, "temperature": 0}
    else:
        content = prompt + "\n" + cfg.logprobs_suffix
        params = {"max_tokens": 1, "temperature": 0}
    if cfg.route == "chat":
        payload = {"messages": [{"role": "user", "content": content}], **params}
        if cfg.mode == "logprobs":
            payload.update(logprobs=True, top_logprobs=20)
        return "chat/completions", payload
    payload = {"prompt": content, **params}
    if cfg.mode == "logprobs":
        payload["logprobs"] = 20
    return "completions", payload


def score_response(res: LLMResponse, mode: str) -> float | None:
    return parse_text_score(res.text) if mode == "text" else expected_digit_score(res.first_token_top_logprobs())


class EduScore(BaseFilter):
    """Scores documents with the LLM (all of them, or those ``select`` picks); never drops a
    scored document — thresholding is ``EduThreshold``'s job, after distillation."""

    name = "🎓 edu_score"
    stage_name = "edu_score"
    promotes = {"edu_score": "float64"}
    # answers depend on (model, prompt, params), as the LLM cache's key does; the endpoint's address
    # does not, and a locally served model gets a new port each run (which made --resume refuse)
    not_fingerprinted = {"cfg": {"llm": {"base_url"}}}

    def __init__(self, cfg: EduConfig, select: Callable[[Document], bool] | None = None):
        if cfg.llm is None:
            raise ValueError("EduScore needs edu.llm (an OpenAI-compatible endpoint)")
        super().__init__(batch_size=cfg.batch_docs)
        self.cfg = cfg
        self.select = select
        self.client = LLMClient(cfg.llm)
        self.counter = TokenCounter(cfg.tokenizer_path)

    def filter(self, doc: Document) -> bool | tuple[bool, str]:
        return self.filter_batch([doc])[0]

    def filter_batch(self, batch: list[Document]) -> list[bool | tuple[bool, str]]:
        todo = [d for d in batch if self.select is None or self.select(d)]
        requests, owners, lengths = [], [], []
        for d in todo:
            spans = chunk_spans(d.text, self.cfg.max_chunk_tokens, self.counter)
            for a, b in spans:
                route, payload = build_request(d.text[a:b], self.cfg)  # one route for the config
                requests.append(payload)
                owners.append(d)
                lengths.append(len(self.counter.offsets(d.text[a:b])))
        responses = self.client.map(route, requests) if requests else []
        per_doc: dict[int, list[tuple[float | None, int, LLMFailure | None]]] = {id(d): [] for d in todo}
        for d, res, n in zip(owners, responses, lengths, strict=True):
            if isinstance(res, LLMFailure):
                per_doc[id(d)].append((None, n, res))
            else:
                per_doc[id(d)].append((score_response(res, self.cfg.mode), n, None))
        results: list[bool | tuple[bool, str]] = []
        for d in batch:
            if id(d) not in per_doc:
                results.append(True)  # not selected for LLM scoring: passes through unscored
                continue
            results.append(self._finish(d, per_doc[id(d)]))
        return results

    def _finish(self, doc: Document, chunks) -> bool | tuple[bool, str]:
        failures = [f for _, _, f in chunks if f is not None]
        if failures:
            doc.metadata[REJECT_DETAIL_KEY] = f"{len(failures)}/{len(chunks)} chunks failed: {failures[0]}"
            self.stat_update("unscored")
            return False, "edu_unscored"
        if not chunks:  # nothing to score: no request was sent
            doc.metadata[REJECT_DETAIL_KEY] = "the document has no text to score"
            return False, "edu_empty_text"
        scores = [s for s, _, _ in chunks]
        if any(s is None for s in scores):
            doc.metadata[REJECT_DETAIL_KEY] = "the model's answer held no score for some chunk"
            return False, "edu_unparseable"
        tokens = [n for _, n, _ in chunks]
        doc.metadata.update(
            edu_score=aggregate(scores, tokens, self.cfg.aggregation, self.cfg.top_k),
            edu_chunk_scores=[round(s, 4) for s in scores],
            edu_chunk_tokens=tokens,
            edu_aggregation=self.cfg.aggregation,
            edu_mode=self.cfg.mode,
            edu_source="llm",
        )
        return True


class EduThreshold(BaseFilter):
    """Keep documents whose (LLM or distilled) educational score is at least the threshold."""

    name = "🎓 edu_threshold"
    stage_name = "edu_threshold"

    def __init__(self, threshold: float):
        super().__init__()
        self.threshold = threshold

    def filter(self, doc: Document) -> bool | tuple[bool, str]:
        score = doc.metadata.get("edu_score")
        if score is None:
            return False, "edu_unscored"
        return score >= self.threshold or (False, "edu_below_threshold")


class LlmSample:
    """Corpus pass: which documents the LLM scores — the ``n`` with the smallest sha256(id) among
    those whose ``score_column`` is above ``above``. Deterministic and the same on both engines."""

    def __init__(self, n: int, score_column: str, above: float):
        self.n, self.column, self.above = n, score_column, above

    def local(self, documents_dir: str) -> list[str]:
        import duckdb

        q = (f"SELECT id FROM read_parquet('{documents_dir}/*.parquet') WHERE {self.column} > {self.above!r} "
             f"ORDER BY sha256(id) LIMIT {self.n}")
        return [r[0] for r in duckdb.connect().execute(q).fetchall()]

    def spark(self, df) -> list[str]:
        from pyspark.sql import functions as F

        rows = (df.filter(F.col(self.column) > self.above).select("id", F.sha2("id", 256).alias("h"))
                .orderBy("h").limit(self.n).collect())
        return [r.id for r in rows]
