"""BM25 (Okapi, k1=1.2, b=0.75) over a corpus: the search tool of the retrieval solver."""

from __future__ import annotations

import math
from collections import Counter, defaultdict

from synth.search.corpus import Corpus, words


class BM25:
    def __init__(self, corpus: Corpus, k1: float = 1.2, b: float = 0.75):
        self.k1, self.b = k1, b
        self.ids = list(corpus.docs)
        self.postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
        self.lengths = []
        for i, doc_id in enumerate(self.ids):
            d = corpus.docs[doc_id]
            toks = words(d.title + "\n" + d.text)
            self.lengths.append(len(toks))
            for w, c in Counter(toks).items():
                self.postings[w].append((i, c))
        self.avg = sum(self.lengths) / max(1, len(self.lengths))
        n = len(self.ids)
        self.idf = {w: math.log(1 + (n - len(p) + 0.5) / (len(p) + 0.5)) for w, p in self.postings.items()}

    def search(self, query: str, k: int = 10) -> list[tuple[str, float]]:
        scores: dict[int, float] = defaultdict(float)
        for w in set(words(query)):
            idf = self.idf.get(w)
            if idf is None:
                continue
            for i, tf in self.postings[w]:
                denom = tf + self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avg)
                scores[i] += idf * tf * (self.k1 + 1) / denom
        top = sorted(scores.items(), key=lambda x: (-x[1], x[0]))[:k]
        return [(self.ids[i], s) for i, s in top]
