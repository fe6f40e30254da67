"""synth.search.corpus: JSONL corpus errors name file and line."""

from __future__ import annotations

import pytest

from synth.search.corpus import load_corpus


def test_corpus_line_without_text_names_file_and_line(tmp_path):
    from core.errors import InputError

    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": 1, "text": "ok"}\n\n{"id": 2, "text": 3}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"c\.jsonl:3: expected an object with 'id' and string 'text'"):
        load_corpus(corpus)
