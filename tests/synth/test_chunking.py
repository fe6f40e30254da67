import pytest

from core.config import validate_config
from core.errors import ConfigError
from synth.chunking import ChunkConfig, split_meta_chunks


def test_meta_chunks_are_lossless_and_newline_bounded(books):
    text = books[0]["text"][:200_000]
    cfg = ChunkConfig(chunk_chars=2000, min_chunk_chars=200)
    chunks = split_meta_chunks(text, cfg)
    assert "".join(chunks) == text
    assert len(chunks) > 50
    # every cut is right after a newline, and no chunk exceeds the target (novel lines are short)
    assert all(c.endswith("\n") for c in chunks[:-1])
    assert max(len(c) for c in chunks) <= 2000
    assert min(len(c) for c in chunks[:-1]) > 1000  # lines are packed up to the target


def test_over_long_lines_are_split_at_spaces_and_tails_merge():
    words = " ".join(f"word{i}" for i in range(1000))  # one 8.9K-char line
    chunks = split_meta_chunks(words + "\nend\n", ChunkConfig(chunk_chars=1000, min_chunk_chars=100))
    assert "".join(chunks) == words + "\nend\n"
    assert all(len(c) <= 1000 for c in chunks)
    assert all(c.endswith(" ") for c in chunks[:-1])  # cut at whitespace, never inside a word
    assert chunks[-1].endswith("\nend\n")  # the 4-char tail is folded into its neighbour


def test_blank_and_short_documents():
    cfg = ChunkConfig(chunk_chars=500, min_chunk_chars=100)
    assert split_meta_chunks("", cfg) == [] and split_meta_chunks(" \n\n ", cfg) == []
    assert split_meta_chunks("short line\n", cfg) == ["short line\n"]


def test_config_rejects_min_above_target():
    with pytest.raises(ConfigError, match="min_chunk_chars"):
        validate_config(ChunkConfig, {"chunk_chars": 100, "min_chunk_chars": 200})
