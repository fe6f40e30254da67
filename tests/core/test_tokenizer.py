"""core.tokenizer: long texts encoded and counted in bounded pieces, the same counts either way."""

import numpy as np

from core.tokenizer import TokenizerConfig, count_tokens, encode_pieces, text_pieces, train_bpe


def test_long_text_is_encoded_in_bounded_pieces():
    text = ("A line of a long book that goes on.\n" * 5000)[:150_000]
    tok = train_bpe([text[:20_000], "short"], TokenizerConfig(vocab_size=300, min_frequency=1))
    pieces = list(text_pieces(text, 10_000))
    assert "".join(pieces) == text and max(len(p) for p in pieces) <= 10_000
    assert all(p.endswith("\n") for p in pieces[:-1])
    arrays = list(encode_pieces(tok, text, 10_000))
    assert all(a.dtype == np.int32 for a in arrays) and len(arrays) == len(pieces)
    assert count_tokens(tok, [text, "short"], 10_000) == [
        sum(len(a) for a in arrays),
        len(tok.encode("short").ids),
    ]
    assert tok.decode(np.concatenate(arrays).tolist()) == text
