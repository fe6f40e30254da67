"""A small real byte-level BPE with the GLM-5 template's special tokens added, for the
chat-template, SFT and rollout tests (trained in well under a second)."""

from __future__ import annotations

from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from training.chat_template import add_special_tokens


def chat_tokenizer(corpus: str, vocab_size: int = 300) -> Tokenizer:
    """BPE trained on ``corpus`` (repeated), ``<|endoftext|>`` as its own special token first,
    then the template's special tokens added."""
    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)  # fmt: skip
    t.train_from_iterator([corpus] * 20, trainer=trainer)
    return add_special_tokens(t)
