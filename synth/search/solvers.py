"""Solvers that decide whether a question needs retrieval.

* ``tool_solve``: a scripted agent with two tools, BM25 ``search`` and ``open`` (a page's text
  and links). It reads the question's quoted clues in order: search for the first, keep the
  hit that really contains it, then follow the one link whose page contains the next clue.
  It succeeds only if every hop is unambiguous with the search depth it is given.
* ``shortcut_solve``: searches only the last clue and answers the top hit containing it; a
  question it answers is not really multi-hop.
* ``closed_book``: an LLM (any OpenAI-compatible endpoint) asked k times without tools;
  ``question_only_guesses``: what can be read off the question itself (a leaked answer).
"""

from __future__ import annotations

import re

from core.llm import LLMClient, LLMFailure
from synth.search.bm25 import BM25
from synth.search.corpus import Corpus
from synth.search.grade import score

CLUE = re.compile(r'"([^"]+)"')


def tool_solve(question: str, corpus: Corpus, index: BM25, depth: int) -> str | None:
    clues = CLUE.findall(question)
    if len(clues) < 2:
        return None
    hits = [d for d, _ in index.search(clues[0], depth) if corpus.docs[d].contains(clues[0])]
    if len(hits) != 1:
        return None
    cur = hits[0]
    for clue in clues[1:]:
        nxt = corpus.containing(clue, corpus.docs[cur].links)
        if len(nxt) != 1:
            return None
        cur = nxt[0]
    return corpus.docs[cur].title


def shortcut_solve(question: str, corpus: Corpus, index: BM25, depth: int = 10) -> str | None:
    clues = CLUE.findall(question)
    if not clues:
        return None
    for d, _ in index.search(clues[-1], depth):
        if corpus.docs[d].contains(clues[-1]):
            return corpus.docs[d].title
    return None


def question_only_guesses(question: str) -> list[str]:
    """Candidate answers visible in the question: quoted clues, code-like and capitalised tokens."""
    out = CLUE.findall(question)
    out += re.findall(r"`([^`]+)`", question)
    out += re.findall(r"\b[A-Z][\w.]+(?:\s+[A-Z][\w.]+)*", question)
    return out


CLOSED_BOOK_PROMPT = ("Answer the question from memory, without searching. Reply with the answer only.\n\n"
                      "Question: {question}\nAnswer:")


def closed_book(client: LLMClient, question: str, answers: list[str], k: int, max_tokens: int,
                temperature: float) -> tuple[int, list[str]]:
    """(how many of k closed-book samples were right, the samples)."""
    payloads = [{"messages": [{"role": "user", "content": CLOSED_BOOK_PROMPT.format(question=question)}],
                 "max_tokens": max_tokens, "temperature": temperature, "seed": i} for i in range(k)]
    samples = []
    right = 0
    for res in client.map("chat/completions", payloads):
        text = "" if isinstance(res, LLMFailure) else res.text
        samples.append(text if not isinstance(res, LLMFailure) else f"<failure: {res.kind}>")
        right += score(text, answers) == 1.0
    return right, samples
