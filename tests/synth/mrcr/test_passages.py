"""synth.mrcr.passages: a bad documents line is an error naming file and line."""

import pytest

from core.errors import InputError
from synth.mrcr import MrcrConfig, passage_pool


@pytest.mark.parametrize(
    ("line", "message"),
    [("{oops", r"d\.jsonl:2: invalid JSON"), ('{"id": "b"}', r"d\.jsonl:2: expected an object with a string 'text'")],
)
def test_bad_documents_line_names_file_and_line(tmp_path, line, message):
    docs = tmp_path / "d.jsonl"
    docs.write_text('{"id": "a", "text": "fine"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=message):
        passage_pool([docs], MrcrConfig().passages)


def test_a_page_extracted_from_html_yields_passages_of_whole_lines(sample_corpus):
    """trafilatura separates a page's paragraphs by one newline, not a blank line: such a page
    used to be one over-long block, so the demo's documents gave no passage and the long-context
    job's MRCR stage failed with its shipped config."""
    from filters.extract import HtmlToText
    from synth.mrcr.passages import PassageConfig, split_passages

    text = HtmlToText().extract((sample_corpus.html_dir / "c-api" / "structures.html").read_text())
    assert "\n\n" not in text
    cfg = PassageConfig()
    passages = split_passages(text, cfg)
    assert len(passages) >= 5
    lines = {line.strip() for line in text.split("\n")}
    for p in passages:
        assert cfg.min_chars <= len(p) <= cfg.max_chars
        assert set(p.split("\n")) <= lines
