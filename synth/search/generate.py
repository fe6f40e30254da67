"""Multi-hop deep-search questions over a corpus's link graph, rule-based, each one verified.

A chain d1 -> d2 -> ... -> dh follows real links. d1 is named by a phrase that occurs in d1 and
in no other document; each next page by a "bridge" clue: words that occur in exactly one of
the pages the previous page links to, but in several pages of the corpus (so the clue alone
does not find it). The answer is the last page's title. Each hop's fact is supported by a
cited document (the page that contains the clue, the page that holds the link).

Kept only if (every rejected candidate is counted with its reason):
- unique answer: the alternative-answer check re-walks the chain over the whole corpus and
  finds exactly one page at every hop;
- not answerable without retrieval: the answer is not readable off the question, the
  last-clue-only shortcut does not find it, and a closed-book LLM (if configured) fails k of k;
- answerable with retrieval: the BM25 tool solver succeeds at least once (search depths tried
  in turn).
An LLM may rephrase the templated question; the rephrasing is kept only if every clue survives
verbatim and the checks above still hold.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import Counter
from dataclasses import dataclass, field

from pydantic import Field

from core.cache import cache_field
from core.config import StrictModel
from core.llm import LLMClient, LLMConfig, LLMFailure
from synth.search.bm25 import BM25
from synth.search.corpus import Corpus, Doc, norm, words
from synth.search.grade import score
from synth.search.solvers import closed_book, question_only_guesses, shortcut_solve, tool_solve

STOP = set("""a about above after again against all also an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have having he her
here hers him his how i if in into is it its itself just me more most my no nor not now of off on once only or
other our out over own same she should so some such than that the their them then there these they this those
through to too under until up very was we were what when where which while who whom why will with would you your
new version changed see example examples note following use used using may must one two return returns value""".split())


class SearchConfig(StrictModel):
    hops: list[int] = Field(default_factory=lambda: [2, 3])  # documents per chain, cycled through
    seed: int = 0
    corpus_name: str = "document collection"
    anchor_words: int = Field(default=6, ge=3)  # length of the phrase naming the first page
    bridge_min_docs: int = Field(default=3, ge=2)  # corpus pages that must contain a bridge clue
    candidates_per_hop: int = Field(default=80, ge=1)
    min_doc_chars: int = Field(default=500, ge=0)
    search_depths: list[int] = Field(default_factory=lambda: [3, 10, 30])
    max_attempts_factor: int = Field(default=30, ge=1)  # give up after n * factor candidate chains
    closed_book_llm: LLMConfig | None = None
    # no closed_book_llm: serve the local model (SmolLM2-135M, cached under data_dir) for the closed-book check,
    # so a task is kept only when k closed-book samples of a real model all fail (the shipped config sets it)
    closed_book_local: bool = False
    data_dir: str = cache_field()  # default: the user cache (core.cache)
    closed_book_k: int = Field(default=4, ge=1)
    closed_book_temperature: float = Field(default=1.0, ge=0)
    closed_book_max_tokens: int = Field(default=48, gt=0)  # an answer is a page title
    paraphrase_llm: LLMConfig | None = None
    max_tokens: int = Field(default=160, gt=0)


@dataclass
class GenerateResult:
    tasks: list[dict] = field(default_factory=list)
    rejects: Counter = field(default_factory=Counter)
    attempts: int = 0
    paraphrased: int = 0


def _title_aliases(title: str) -> list[str]:
    parts = re.split(r"\s+[—–-]{1,2}\s+", title, maxsplit=1)
    return [parts[0]] if len(parts) == 2 and parts[0].strip() else []


def _anchor_phrase(doc: Doc, corpus: Corpus, n: int, rng: random.Random) -> str | None:
    toks = words(doc.text)
    if len(toks) < n * 3:
        return None
    starts = list(range(len(toks) // 10, len(toks) - n))
    rng.shuffle(starts)
    for s in starts[:40]:
        span = toks[s:s + n]
        if sum(w.isalpha() and w not in STOP for w in span) < n // 2 or any(len(w) > 25 for w in span):
            continue
        phrase = " ".join(span)
        if corpus.containing(phrase) == [doc.id]:
            return phrase
    return None


def _count_upto(corpus: Corpus, phrase: str, limit: int) -> int:
    n = 0
    key = norm(phrase)
    for d in corpus.docs.values():
        if key in d.normed:
            n += 1
            if n >= limit:
                break
    return n


def _bridge_clue(prev: Doc, target: Doc, corpus: Corpus, cfg: SearchConfig, rng: random.Random,
                 avoid: str) -> str | None:
    toks = words(target.text)
    pairs = list({(a, b) for a, b in zip(toks, toks[1:], strict=False)
                  if a.isalpha() and b.isalpha() and len(a) > 3 and len(b) > 3 and a not in STOP and b not in STOP})
    pairs.sort()
    rng.shuffle(pairs)
    bad = norm(avoid)
    for a, b in pairs[:cfg.candidates_per_hop]:
        clue = f"{a} {b}"
        if norm(clue).strip() in bad:
            continue  # the clue would spell out the answer
        if corpus.containing(clue, prev.links) != [target.id]:
            continue
        if _count_upto(corpus, clue, cfg.bridge_min_docs) >= cfg.bridge_min_docs:
            return clue
    return None


def question_text(clues: list[str], corpus_name: str) -> str:
    parts = [f'Start at the page of the {corpus_name} that contains the exact phrase "{clues[0]}".']
    for c in clues[1:]:
        parts.append(f'Among the pages it links to, exactly one contains the words "{c}"; go to that page.')
    parts.append("What is the title of the page you reach?")
    return " ".join(parts)


def walk(clues: list[str], corpus: Corpus) -> list[list[str]]:
    """Every page matching each hop over the whole corpus: the alternative-answer check."""
    level = corpus.containing(clues[0])
    out = [level]
    for c in clues[1:]:
        nxt = sorted({t for d in level for t in corpus.containing(c, corpus.docs[d].links)})
        out.append(nxt)
        level = nxt
    return out


class Generator:
    def __init__(self, corpus: Corpus, cfg: SearchConfig, closed_book_llm: LLMConfig | None = None):
        """``closed_book_llm``: the endpoint the caller serves (the CLI's local model) when the config names none."""
        self.corpus, self.cfg = corpus, cfg
        self.index = BM25(corpus)
        closed = cfg.closed_book_llm or closed_book_llm
        self.closed = LLMClient(closed) if closed else None
        self.para = LLMClient(cfg.paraphrase_llm) if cfg.paraphrase_llm else None

    def candidate(self, start: Doc, hops: int, rng: random.Random) -> tuple[list[Doc], list[str]] | str:
        anchor = _anchor_phrase(start, self.corpus, self.cfg.anchor_words, rng)
        if anchor is None:
            return "no_unique_anchor_phrase"
        chain, clues = [start], [anchor]
        for _ in range(hops - 1):
            cur = chain[-1]
            targets = [t for t in cur.links if t not in {d.id for d in chain}
                       and len(self.corpus.docs[t].text) >= self.cfg.min_doc_chars]
            if not targets:
                return "dead_end_no_links"
            rng.shuffle(targets)
            for t in targets[:5]:
                target = self.corpus.docs[t]
                clue = _bridge_clue(cur, target, self.corpus, self.cfg, rng, target.title)
                if clue:
                    chain.append(target)
                    clues.append(clue)
                    break
            else:
                return "no_bridge_clue"
        return chain, clues

    def verify(self, question: str, clues: list[str], chain: list[Doc], answers: list[str]) -> tuple[str | None, dict]:
        checks: dict = {}
        levels = walk(clues, self.corpus)
        checks["matches_per_hop"] = [len(x) for x in levels]
        if any(len(x) != 1 for x in levels) or levels[-1] != [chain[-1].id]:
            return "answer_not_unique", checks
        if any(score(g, answers) for g in question_only_guesses(question)):
            return "answer_in_question", checks
        shortcut = shortcut_solve(question, self.corpus, self.index)
        checks["shortcut_answer"] = shortcut
        if shortcut and score(shortcut, answers):
            return "last_clue_alone_finds_answer", checks
        if self.closed:
            right, samples = closed_book(self.closed, question, answers, self.cfg.closed_book_k,
                                         self.cfg.closed_book_max_tokens, self.cfg.closed_book_temperature)
            checks["closed_book"] = {"k": self.cfg.closed_book_k, "right": right, "samples": samples}
            if right:
                return "answerable_closed_book", checks
            if any(s.startswith("<failure:") for s in samples):
                # an unanswered sample is no evidence the model cannot answer: the check is inconclusive
                return "closed_book_check_failed", checks
        else:
            checks["closed_book"] = "skipped (no closed_book_llm configured; question-only guesses checked)"
        tries = []
        for depth in self.cfg.search_depths:
            got = tool_solve(question, self.corpus, self.index, depth)
            tries.append({"search_depth": depth, "answer": got, "correct": bool(got and score(got, answers))})
        checks["tool_solver"] = tries
        if not any(t["correct"] for t in tries):
            return "tool_solver_fails", checks
        return None, checks

    def paraphrase(self, question: str, clues: list[str]) -> str | None:
        prompt = ("Rewrite this search puzzle as one natural question. Keep every quoted phrase exactly, "
                  f"in double quotes and in the same order. Reply with the question only.\n\n{question}")
        res = self.para.request("chat/completions", {"messages": [{"role": "user", "content": prompt}],
                                                     "max_tokens": self.cfg.max_tokens, "temperature": 0.0})
        if isinstance(res, LLMFailure):
            return None
        text = res.text.strip()
        found = [m for m in re.findall(r'"([^"]+)"', text)]
        return text if found == clues and text.endswith("?") else None

    def generate(self, n: int, log=lambda m: None) -> GenerateResult:
        rng = random.Random(self.cfg.seed)
        res = GenerateResult()
        starts = sorted(d for d, doc in self.corpus.docs.items()
                        if doc.links and len(doc.text) >= self.cfg.min_doc_chars)
        if not starts:
            return res
        used: set[tuple[str, ...]] = set()
        while len(res.tasks) < n and res.attempts < n * self.cfg.max_attempts_factor:
            hops = self.cfg.hops[res.attempts % len(self.cfg.hops)]
            res.attempts += 1
            start = self.corpus.docs[rng.choice(starts)]
            cand = self.candidate(start, hops, rng)
            if isinstance(cand, str):
                res.rejects[cand] += 1
                continue
            chain, clues = cand
            key = tuple(d.id for d in chain)
            if key in used:
                res.rejects["duplicate_chain"] += 1
                continue
            answer = chain[-1].title
            answers = [answer, *_title_aliases(answer)]
            question = question_text(clues, self.cfg.corpus_name)
            why, checks = self.verify(question, clues, chain, answers)
            if why:
                res.rejects[why] += 1
                continue
            if self.para:
                better = self.paraphrase(question, clues)
                why2 = "paraphrase_dropped_clues" if better is None else self.verify(better, clues, chain, answers)[0]
                if why2:
                    res.rejects[f"paraphrase_rejected:{why2}"] += 1
                else:
                    question = better
                    res.paraphrased += 1
            used.add(key)
            res.tasks.append(self._row(question, answer, answers[1:], chain, clues, checks))
            log(f"task {len(res.tasks)}/{n}: {len(chain)} hops -> {answer!r}")
        return res

    @staticmethod
    def _row(question, answer, aliases, chain, clues, checks) -> dict:
        hops = []
        for i, (d, c) in enumerate(zip(chain, clues, strict=True)):
            fact = {"doc_id": d.id, "title": d.title, "clue": c, "fact": f'"{d.title}" contains "{c}"'}
            if i:
                fact["linked_from"] = chain[i - 1].id
                fact["link_fact"] = f'"{chain[i - 1].title}" links to "{d.title}"'
            hops.append(fact)
        ids = [d.id for d in chain]
        return {"id": "search-" + hashlib.sha1("\0".join(ids + clues).encode()).hexdigest()[:12],
                "question": question, "answer": answer, "aliases": aliases, "supporting_doc_ids": ids,
                "hop_count": len(chain), "hops": hops, "checks": checks}
