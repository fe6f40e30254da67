"""One spaCy word tokenizer shared by all of datatrove's heuristic filters of a worker.

datatrove's ``SpaCyTokenizer`` wraps every call in a spaCy ``memory_zone`` — each call builds
the lexemes of every word it meets and then throws them away, which is most of the cost of
the Gopher/C4/FineWeb filters. This tokenizer keeps one warm vocabulary per worker (reset
every ``reset_every`` calls so it cannot grow without bound) and gives exactly the same
tokens, sentences and spans, so keep decisions do not change. Filters take it through their
``language`` argument, which datatrove resolves with ``load_word_tokenizer`` (a
``WordTokenizer`` instance is used as is) — one instance, shared, tokenises once.

Past the warm vocabulary, a profile of the heuristic stage list was dominated by spaCy's
Python-level ``Token`` objects (one per token, built by ``for t in doc`` and again by the
sentencizer) and by running the sentencizer for word splits that do not need it: C4's filter
splits every line into sentences. So this tokenizer runs spaCy's tokenizer only, reads token
offsets and punctuation flags as one array, and applies spaCy's ``Sentencizer`` rule to that
array itself (the rule is copied from ``spacy/pipeline/sentencizer.pyx``; tests compare every
output with datatrove's tokenizer on real pages and their lines).
"""

from __future__ import annotations

from functools import cache

from datatrove.utils.word_tokenizers import WordTokenizer, strip_strings


@cache
def _sent_end() -> frozenset[str]:
    from spacy.pipeline import Sentencizer  # (spaCy is imported on first use, as before)

    return frozenset(Sentencizer.default_punct_chars)  # what spacy's "sentencizer" pipe uses


class SharedSpacyTokenizer(WordTokenizer):
    def __init__(self, language: str = "en", reset_every: int = 20_000):
        super().__init__(language)
        self.reset_every = reset_every
        self._nlp = None
        self._calls = 0

    def __getstate__(self):  # workers build their own pipeline
        return {"language": self.language, "reset_every": self.reset_every, "_nlp": None, "_calls": 0}

    def __setstate__(self, state):
        self.__dict__.update(state)

    # datatrove's lru_cache keys on the tokenizer object: hash by identity is what we want
    __hash__ = object.__hash__

    def _pipeline(self):
        if self._nlp is None or self._calls >= self.reset_every:
            import spacy

            self._nlp = spacy.blank(self.language)  # the tokenizer only: sentences are ours
            self._calls = 0
        self._calls += 1
        return self._nlp

    def _tokens(self, text: str) -> tuple[str, list[list[int]]]:
        """(the text spaCy tokenised, [char offset, length, is_punct] per token)."""
        nlp = self._pipeline()
        nlp.max_length = len(text) + 10
        # datatrove's workaround for the string that crashes spaCy, as in its own call
        try:
            doc = nlp.make_doc(text)
        except Exception:
            if "IS_ALPHA" not in text:
                raise
            text = text.replace("IS_ALPHA", "")
            doc = nlp.make_doc(text)
        from spacy.attrs import IDX, IS_PUNCT, LENGTH

        # `text`, not doc.text: spaCy keeps the text verbatim, and doc.text rebuilds it token by token
        return text, doc.to_array([IDX, LENGTH, IS_PUNCT]).tolist() if len(doc) else []

    def _sentences(self, text: str) -> tuple[str, list[tuple[int, int]]]:
        """Sentence (start_char, end_char) spans by the Sentencizer's rule: a sentence starts
        at the first token that is neither punctuation nor a sentence-end character after a
        token that is a sentence-end character."""
        t, toks = self._tokens(text)
        if not toks:
            return t, []
        sent_end, starts, seen_end = _sent_end(), [0], False
        for i, (idx, n, is_punct) in enumerate(toks):
            is_end = t[idx : idx + n] in sent_end
            if seen_end and not is_punct and not is_end:
                if i:  # (token 0 always starts the first sentence)
                    starts.append(i)
                seen_end = False
            elif is_end:
                seen_end = True
        ends = starts[1:] + [len(toks)]
        return t, [(toks[a][0], toks[b - 1][0] + toks[b - 1][1]) for a, b in zip(starts, ends, strict=True)]

    def word_tokenize(self, text: str) -> list[str]:
        t, toks = self._tokens(text)
        return strip_strings([t[idx : idx + n] for idx, n, _ in toks])

    def sent_tokenize(self, text: str) -> list[str]:
        t, spans = self._sentences(text)
        return strip_strings([t[a:b] for a, b in spans])

    def span_tokenize(self, text: str) -> list[tuple[int, int]]:
        return self._sentences(text)[1]
