"""Text to token ids for serving: a word-level vocabulary's unknown words are refused, not
replaced by its unknown token without a word (the toy tasks' tokenizer maps them to <pad>)."""

from __future__ import annotations

import pytest

from core.errors import UserError
from training.policy.codec import Codec
from training.rl.tasks.backends import toy_tokenizer


def test_word_level_text_outside_the_vocabulary_is_refused(tmp_path):
    path = tmp_path / "tok.json"
    toy_tokenizer().save(str(path))
    codec = Codec.load(path)
    ids = codec.encode("copy 1 2")
    assert codec.decode(ids) == "copy 1 2" and 0 not in ids
    assert codec.encode("<pad> copy") == [0, ids[0]]  # the unknown token written out is a word like any
    with pytest.raises(UserError, match=r"2 piece\(s\) outside .*\['12', '\+3='\]"):
        codec.encode("copy 12 +3=")
    with pytest.raises(UserError, match="outside the tokenizer's vocabulary"):
        codec.chat_prompt([{"role": "user", "content": "what is 12 ?"}])


def test_byte_level_bpe_encodes_any_text(rl_assets):
    codec = Codec.load(rl_assets["tokenizer"])
    assert codec.unk_id is None
    text = "ünïcode 12+3= ✓"
    assert codec.decode(codec.encode(text)) == text
