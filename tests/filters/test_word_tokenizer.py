import copy
import pickle

import trafilatura
from datatrove.data import Document
from datatrove.pipeline.filters import (
    C4QualityFilter,
    FineWebQualityFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
)
from datatrove.utils.word_tokenizers import load_word_tokenizer

from filters.word_tokenizer import SharedSpacyTokenizer
from pipelines.inputs import InputSpec, list_input_files


def texts(sample_corpus, n=25):
    files = list_input_files([InputSpec(path=str(sample_corpus.html_dir), glob="library/*.html", max_files=n)])
    return [t for t in (trafilatura.extract(open(f.path).read()) for f in files) if t]


def test_same_tokens_sentences_and_spans_as_datatrove(sample_corpus):
    ref, ours = load_word_tokenizer("en"), SharedSpacyTokenizer("en", reset_every=7)
    # (not tested: text containing "IS_ALPHA", where datatrove's own output depends on spaCy's
    # memory-zone state — its word and sentence splits of the same text disagree)
    edge = ["", "  \n ", "Mr. Smith went to Washington. He said: 'hi'!", "Hello.  World", " a. b", "...",
            "?! Really?!? Yes.", "e.g. this, i.e. that.", "東京。大阪！ ok", "end.\n\nNext para\n", "\"Quote.\" Then", "a.)b"]
    for t in texts(sample_corpus, 12) + edge:
        assert ours.word_tokenize(t) == ref.word_tokenize(t)
        assert ours.sent_tokenize(t) == ref.sent_tokenize(t)
        assert ours.span_tokenize(t) == ref.span_tokenize(t)
        for line in t.splitlines()[:20]:
            assert ours.sent_tokenize(line) == ref.sent_tokenize(line)
    again = pickle.loads(pickle.dumps(ours))
    assert again._nlp is None and again.word_tokenize("Hello, world.") == ["Hello", ",", "world", "."]


def test_filters_decide_the_same_with_the_shared_tokenizer(sample_corpus):
    def filters(**kw):
        return [GopherRepetitionFilter(**kw), GopherQualityFilter(max_non_alpha_words_ratio=0.5, **kw),
                C4QualityFilter(filter_no_terminal_punct=False, **kw), FineWebQualityFilter(**kw)]

    shared = SharedSpacyTokenizer("en")
    docs = texts(sample_corpus)
    for a, b in zip(filters(), filters(language=shared), strict=True):
        for t in docs:
            da, db = Document(text=t, id="x"), Document(text=copy.copy(t), id="x")
            assert a.filter(da) == b.filter(db)
            assert da.text == db.text  # C4 rewrites text: the same way
