"""One spaCy word tokenizer shared by all of datatrove's heuristic filters of a worker.

datatrove's ``SpaCyTokenizer`` wraps every call in a spaCy ``memory_zone`` — each call builds
the lexemes of every word it meets and then throws them away, which is most of the cost of
the Gopher/C4/FineWeb filters. This tokenizer keeps one warm vocabulary per worker (reset
every ``reset_every`` calls so it cannot grow without bound) and gives exactly the same
tokens, sentences and spans, so keep decisions do not change. Filters take it through their
``language`` argument, which datatrove resolves with ``load_word_tokenizer`` (a
``WordTokenizer`` instance is used as is) — one instance, shared, tokenises once.
"""

from __future__ import annotations

from datatrove.utils.word_tokenizers import WordTokenizer, strip_strings


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

            self._nlp = spacy.blank(self.language)
            self._nlp.add_pipe("sentencizer")
            self._calls = 0
        self._calls += 1
        return self._nlp

    def _doc(self, text: str):
        nlp = self._pipeline()
        nlp.max_length = len(text) + 10
        # the very call datatrove makes, with its workaround for the string that crashes spaCy
        try:
            return nlp(text, disable=["parser", "tagger", "ner"])
        except Exception:
            if "IS_ALPHA" not in text:
                raise
            return nlp(text.replace("IS_ALPHA", ""), disable=["parser", "tagger", "ner"])

    def word_tokenize(self, text: str) -> list[str]:
        return strip_strings([t.text for t in self._doc(text)])

    def sent_tokenize(self, text: str) -> list[str]:
        return strip_strings([s.text for s in self._doc(text).sents])

    def span_tokenize(self, text: str) -> list[tuple[int, int]]:
        return [(s.start_char, s.end_char) for s in self._doc(text).sents]
