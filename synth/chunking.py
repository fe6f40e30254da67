"""Meta-chunks: a document cut at line boundaries into pieces of about ``chunk_chars``.

NExtLong splits each document into meta-chunks and inserts retrieved distractors between
them; EntropyLong and the retrieval index use the same pieces as candidate contexts.
Cutting at newlines keeps sentences, code lines and paragraphs whole, so a chunk reads as
a natural unit. The cut is lossless: ``"".join(chunks) == text``.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from core.config import StrictModel


class ChunkConfig(StrictModel):
    # target size of a meta-chunk (NExtLong uses ~2K characters / a few hundred tokens)
    chunk_chars: int = Field(default=2000, gt=0)
    # a chunk smaller than this is merged into its neighbour; a whole document smaller
    # than this is "shorter than a chunk" and is not interleaved
    min_chunk_chars: int = Field(default=200, ge=1)

    @model_validator(mode="after")
    def _min_below_target(self) -> ChunkConfig:
        if self.min_chunk_chars > self.chunk_chars:
            raise ValueError(
                f"min_chunk_chars ({self.min_chunk_chars}) must be <= chunk_chars ({self.chunk_chars})"
            )
        return self


def _hard_split(line: str, size: int) -> list[str]:
    """Split one over-long line near ``size`` characters, preferring whitespace."""
    out = []
    while len(line) > size:
        cut = line.rfind(" ", size // 2, size)
        cut = size if cut <= 0 else cut + 1
        out.append(line[:cut])
        line = line[cut:]
    if line:
        out.append(line)
    return out


def split_meta_chunks(text: str, cfg: ChunkConfig) -> list[str]:
    """Newline-bounded chunks of about ``cfg.chunk_chars``; [] for blank text."""
    if not text.strip():
        return []
    lines: list[str] = []
    for line in text.splitlines(keepends=True):
        lines.extend(_hard_split(line, cfg.chunk_chars) if len(line) > cfg.chunk_chars else [line])
    chunks: list[str] = []
    cur: list[str] = []
    size = 0
    for line in lines:
        if cur and size + len(line) > cfg.chunk_chars:
            chunks.append("".join(cur))
            cur, size = [], 0
        cur.append(line)
        size += len(line)
    if cur:
        tail = "".join(cur)
        # a short tail would be a poor chunk on its own (a heading, a signature): fold it back
        if chunks and len(tail) < cfg.min_chunk_chars:
            chunks[-1] += tail
        else:
            chunks.append(tail)
    return chunks
