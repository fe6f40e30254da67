"""Tokenizer for packing: a user's ``tokenizer.json`` (e.g. GLM's) or a byte-level BPE
trained here with HF ``tokenizers`` on the job's kept documents (no hub downloads).

The tokenizer id recorded in shard manifests names the file and its content hash, so a
trainer can refuse shards made with a different tokenizer.

Long texts (a 200K-token novel) are encoded and counted in pieces cut at newlines
(``encode_pieces``, ``count_tokens``): bounded tokenizer calls, and the same counts wherever
they are taken — the packer's, and synth's when it sizes samples in tokens.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
from pydantic import Field
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from core.config import StrictModel
from core.errors import ConfigError
from core.io import atomic_write_text
from core.shards import TokenizerInfo

DEFAULT_EOS = "<|endoftext|>"


class TokenizerConfig(StrictModel):
    # an existing tokenizer.json; when unset, a byte-level BPE is trained on the documents
    path: str | None = None
    vocab_size: int = Field(default=8192, ge=300)
    min_frequency: int = Field(default=2, ge=1)
    eos_token: str = DEFAULT_EOS
    # special tokens reserved in a trained BPE (e.g. a chat template's role tokens), so a later
    # stage that needs them (SFT, RL) finds them in the vocabulary the model was trained with
    special_tokens: list[str] = []


def train_bpe(texts: Iterable[str], cfg: TokenizerConfig) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=cfg.vocab_size,
        min_frequency=cfg.min_frequency,
        special_tokens=[cfg.eos_token, *(t for t in cfg.special_tokens if t != cfg.eos_token)],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def tokenizer_info(tok: Tokenizer, path: Path, eos_token: str) -> TokenizerInfo:
    eos_id = tok.token_to_id(eos_token)
    if eos_id is None:
        raise ConfigError(
            f"{path}: tokenizer has no end-of-document token {eos_token!r} (set tokenizer.eos_token)"
        )
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    return TokenizerInfo(
        id=f"{path.stem}-{digest}", vocab_size=tok.get_vocab_size(), eos_id=eos_id, path=str(path)
    )


def locate_tokenizer(info: TokenizerInfo, shards_dir: Path) -> Path | None:
    """The tokenizer file a shard manifest names: its recorded path, else a ``tokenizer.json`` beside the
    shards (``SHARDS/``, ``SHARDS/..``, ``SHARDS/../tokenizer/``) whose digest is the recorded id's.
    Shards copied or downloaded elsewhere (an output uploaded from a staging directory) keep an absolute
    path that no longer exists; the digest makes sure the file found is the one they were encoded with."""
    if not info.path:  # shards of a vocabulary with no tokenizer file (the RL toy tasks)
        return None
    digest = info.id.rsplit("-", 1)[-1]
    recorded = Path(info.path)
    for cand in (recorded, shards_dir / "tokenizer.json", shards_dir.parent / "tokenizer.json",
                 shards_dir.parent / "tokenizer" / "tokenizer.json"):
        if cand.is_file() and (cand == recorded or hashlib.sha256(cand.read_bytes()).hexdigest()[:12] == digest):
            return cand
    return None


def load_or_train(
    cfg: TokenizerConfig, texts: Iterable[str] | None, out_dir: Path
) -> tuple[Tokenizer, TokenizerInfo]:
    """Load ``cfg.path`` or train on ``texts`` and save to ``out_dir/tokenizer.json``."""
    if cfg.path:
        path = Path(cfg.path)
        if not path.is_file():
            raise ConfigError(f"tokenizer.path: {path} does not exist")
        try:
            tok = Tokenizer.from_file(str(path))
        except Exception as err:
            raise ConfigError(f"tokenizer.path: {path} is not a tokenizers JSON file: {err}") from None
        return tok, tokenizer_info(tok, path, cfg.eos_token)
    if texts is None:
        raise ConfigError("no tokenizer.path given and no documents to train a BPE on")
    tok = train_bpe(texts, cfg)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "tokenizer.json"
    atomic_write_text(path, tok.to_str())
    return tok, tokenizer_info(tok, path, cfg.eos_token)


def encode_documents(tok: Tokenizer, texts: list[str]) -> Iterator[list[int]]:
    """Token ids per document, without special tokens (the packer adds the end-of-document)."""
    for enc in tok.encode_batch(texts, add_special_tokens=False):
        yield enc.ids


def text_pieces(text: str, piece_chars: int) -> Iterator[str]:
    """Cut text after a newline near every ``piece_chars`` (bounded tokenizer calls)."""
    start = 0
    while len(text) - start > piece_chars:
        cut = text.rfind("\n", start + piece_chars // 2, start + piece_chars)
        cut = start + piece_chars if cut < 0 else cut + 1
        yield text[start:cut]
        start = cut
    if start < len(text):
        yield text[start:]


def encode_pieces(tok: Tokenizer, text: str, piece_chars: int = 65536) -> Iterator[np.ndarray]:
    for piece in text_pieces(text, piece_chars):
        yield np.asarray(tok.encode(piece, add_special_tokens=False).ids, dtype=np.int32)


def count_tokens(tok: Tokenizer, texts: list[str], piece_chars: int = 65536) -> list[int]:
    """Token counts exactly as ``encode_pieces`` would produce them (no token lists kept)."""
    owners, pieces = [], []
    for i, text in enumerate(texts):
        for p in text_pieces(text, piece_chars):
            owners.append(i)
            pieces.append(p)
    counts = [0] * len(texts)
    for i, enc in zip(owners, tok.encode_batch_fast(pieces, add_special_tokens=False), strict=True):
        counts[i] += len(enc.ids)
    return counts
