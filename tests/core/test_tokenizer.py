"""core.tokenizer: long texts encoded and counted in bounded pieces, the same counts either way; special
tokens reserved at training time keep their ids, so a later stage that adds the same tokens (the SFT chat
template) changes nothing."""

import numpy as np

from core.tokenizer import TokenizerConfig, count_tokens, encode_pieces, load_or_train, text_pieces, train_bpe


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


def test_reserved_special_tokens_are_in_the_trained_vocabulary(tmp_path):
    from training.chat_template import SPECIAL_TOKENS, add_special_tokens

    texts = ["the quick brown fox jumps over the lazy dog"] * 50
    cfg = TokenizerConfig(vocab_size=300, min_frequency=1, special_tokens=list(SPECIAL_TOKENS))
    tok, info = load_or_train(cfg, texts, tmp_path)
    ids = {t: tok.token_to_id(t) for t in SPECIAL_TOKENS}
    assert all(i is not None for i in ids.values()) and info.vocab_size == tok.get_vocab_size()
    size = tok.get_vocab_size()
    add_special_tokens(tok)
    assert tok.get_vocab_size() == size and {t: tok.token_to_id(t) for t in SPECIAL_TOKENS} == ids
    assert tok.encode("<|user|>hi", add_special_tokens=False).ids[0] == ids["<|user|>"]


def test_a_manifests_tokenizer_is_found_beside_moved_shards_only_with_its_digest(tmp_path):
    """Shards uploaded from a staging directory keep the staging path of their tokenizer; the copy beside
    them is found, and a different tokenizer there is not taken for it."""
    import shutil

    from core.tokenizer import locate_tokenizer

    texts = ["the quick brown fox jumps over the lazy dog"] * 50
    _, info = load_or_train(TokenizerConfig(vocab_size=300, min_frequency=1), texts, tmp_path / "staging" / "tokenizer")
    assert locate_tokenizer(info, tmp_path / "staging" / "shards") == tmp_path / "staging" / "tokenizer" / "tokenizer.json"
    shards = tmp_path / "downloaded" / "shards"
    shards.mkdir(parents=True)
    (tmp_path / "downloaded" / "tokenizer").mkdir()
    shutil.copy(info.path, tmp_path / "downloaded" / "tokenizer" / "tokenizer.json")
    shutil.rmtree(tmp_path / "staging")
    assert locate_tokenizer(info, shards) == tmp_path / "downloaded" / "tokenizer" / "tokenizer.json"
    other_texts = ["completely different words in another corpus altogether"] * 50
    load_or_train(TokenizerConfig(vocab_size=320, min_frequency=1), other_texts, tmp_path / "downloaded" / "tokenizer")
    assert locate_tokenizer(info, shards) is None
    # a manifest recording no tokenizer file (the RL toy vocabulary) has none to find
    assert locate_tokenizer(info.model_copy(update={"path": None}), shards) is None
