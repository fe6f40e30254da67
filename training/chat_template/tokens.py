"""Tokens: the template's special tokens added to a ``tokenizers`` tokenizer, samples encoded
with per-token loss masks."""

from __future__ import annotations

from training.chat_template.template import SPECIAL_RE, SPECIAL_TOKENS, STOP_TOKENS, Sample


def add_special_tokens(tok):
    """Add the template's special tokens to an HF ``tokenizers.Tokenizer`` (in place; tokens
    it already has keep their ids) and return it."""
    missing = [t for t in SPECIAL_TOKENS if tok.token_to_id(t) is None]
    if missing:
        from tokenizers import AddedToken

        tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in missing])
    return tok


def encode(sample: Sample, tok) -> tuple[list[int], list[int]]:
    """(token ids, per-token loss mask) of a sample. Trained/untrained boundaries sit at
    special tokens, so encoding piece by piece gives exactly ``tok.encode(sample.text)``."""
    ids: list[int] = []
    mask: list[int] = []
    for text, trained in sample.pieces:
        for part in SPECIAL_RE.split(text):
            if not part:
                continue
            special = tok.token_to_id(part) if SPECIAL_RE.fullmatch(part) else None
            if SPECIAL_RE.fullmatch(part) and special is None:
                raise ValueError(f"tokenizer lacks the special token {part} (call add_special_tokens)")
            got = [special] if special is not None else tok.encode(part, add_special_tokens=False).ids
            ids += got
            mask += [int(trained)] * len(got)
    return ids, mask


def stop_token_ids(tok) -> list[int]:
    return [tok.token_to_id(t) for t in STOP_TOKENS if tok.token_to_id(t) is not None]
