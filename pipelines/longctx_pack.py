"""Streaming packer for long sequences: one preallocated int32 buffer per source.

Documents arrive as numpy pieces and are copied straight into a ``seq_len`` buffer, so the
memory held is one sequence plus one piece whatever the sequence length (200K tokens =
800 KB), never a Python list of tokens. Two modes:

* ``add_stream`` (natural and regular documents): a document fills the buffer and continues
  in the next sequence; ``doc_lens`` records each piece of it, as the pretraining packer does.
* ``add_whole`` (synthetic samples: interleaved, EntropyLong, MRCR): a sample is never cut —
  its dependencies span all of it — so when it does not fit the rest of the buffer, the
  rest becomes an end-of-document padding segment and the sample starts a new sequence.

Every sample (and padding segment) is logged to ``samples.jsonl`` with the global index of
its first sequence, its offset there and its emitted length, so document masks can be
checked against what was packed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np
from tokenizers import Tokenizer

from core.shards import ShardWriter


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


@dataclass
class Record:
    kind: str
    meta: dict[str, Any]
    offset: int
    seq: int | None = None  # global index of the first sequence, known once it is written
    tokens: int = 0  # tokens of this sample in written sequences
    finished: bool = False
    truncated: bool = False


class StageWriter:
    """A ShardWriter plus the global sequence counter and the samples log of one stage."""

    def __init__(self, writer: ShardWriter, log: IO[str]):
        self.writer, self.log = writer, log
        self.sequences = 0
        self.pad_tokens = 0

    def write(self, tokens: np.ndarray, lens: list[int], source: str) -> int:
        self.writer.add(tokens.copy(), lens, source)  # the buffer is reused: hand over a copy
        self.sequences += 1
        return self.sequences - 1

    def record(self, r: Record) -> None:
        row = {"kind": r.kind, "seq": r.seq, "offset": r.offset, "tokens": r.tokens, **r.meta}
        if r.truncated:
            row["truncated"] = True
        self.log.write(json.dumps(row, ensure_ascii=False) + "\n")


@dataclass
class StreamPacker:
    out: StageWriter
    source: str
    seq_len: int
    eos_id: int
    emitted: int = 0
    buf: np.ndarray = field(init=False)
    fill: int = 0
    # segments of the current buffer: (record, length); the last may still be growing
    _segs: list[list] = field(default_factory=list)
    _open: list[Record] = field(default_factory=list)  # records not yet logged

    def __post_init__(self) -> None:
        self.buf = np.empty(self.seq_len, dtype=np.int32)

    # -- internals ---------------------------------------------------------------------------
    def _copy(self, rec: Record, arr: np.ndarray) -> int:
        """Copy as much of ``arr`` as fits; returns how many tokens were taken."""
        take = min(len(arr), self.seq_len - self.fill)
        self.buf[self.fill : self.fill + take] = arr[:take]
        self.fill += take
        if self._segs and self._segs[-1][0] is rec:
            self._segs[-1][1] += take
        else:
            self._segs.append([rec, take])
        return take

    def _emit(self) -> None:
        seq = self.out.write(self.buf, [n for _, n in self._segs], self.source)
        self.emitted += 1
        for rec, n in self._segs:
            if rec.seq is None:
                rec.seq = seq
            rec.tokens += n
        self._segs, self.fill = [], 0
        self._flush_log()

    def _flush_log(self) -> None:
        pending = {id(r) for r, _ in self._segs}
        keep = []
        for rec in self._open:
            if rec.finished and rec.seq is not None and id(rec) not in pending:
                self.out.record(rec)
            else:
                keep.append(rec)
        self._open = keep

    def _start(self, kind: str, meta: dict) -> Record:
        rec = Record(kind, meta, offset=self.fill)
        self._open.append(rec)
        return rec

    # -- adding --------------------------------------------------------------------------------
    def add_stream(self, pieces: Iterable[np.ndarray], kind: str, meta: dict, budget: int) -> bool:
        """Add a document that may span sequences (+ end-of-document). Returns False once
        ``budget`` sequences are emitted (the rest of the document is not packed)."""
        rec = self._start(kind, meta)
        eos = np.array([self.eos_id], dtype=np.int32)
        for arr in _chain(pieces, eos):
            is_eos = arr is eos
            while len(arr):
                arr = arr[self._copy(rec, arr) :]
                if self.fill == self.seq_len:
                    self._emit()
                    if self.emitted >= budget:
                        rec.finished, rec.truncated = True, not (is_eos and len(arr) == 0)
                        self._flush_log()
                        return False
        rec.finished = True
        self._flush_log()
        return True

    def fits(self, n_tokens: int) -> bool:
        """Whether a sample of ``n_tokens`` (+ end-of-document) fits the current buffer."""
        return self.fill + n_tokens + 1 <= self.seq_len

    def add_whole(self, parts: list[np.ndarray], kind: str, meta: dict) -> None:
        """Add a sample of at most ``seq_len - 1`` tokens (+ end-of-document), uncut."""
        n = sum(len(p) for p in parts) + 1
        if n > self.seq_len:
            raise ValueError(f"a {kind} sample of {n} tokens does not fit seq_len={self.seq_len}")
        if self.fill + n > self.seq_len:
            self.pad()
        rec = self._start(kind, meta)
        for p in (*parts, np.array([self.eos_id], dtype=np.int32)):
            self._copy(rec, p)
        rec.finished = True
        if self.fill == self.seq_len:
            self._emit()
        else:
            self._flush_log()

    def pad(self) -> None:
        """Close the current buffer with an end-of-document padding segment and emit it."""
        if self.fill == 0:
            return
        n = self.seq_len - self.fill
        rec = self._start("pad", {"source": self.source})
        self._copy(rec, np.full(n, self.eos_id, dtype=np.int32))
        rec.finished = True
        self.out.pad_tokens += n
        self._emit()

    def drop_partial(self) -> int:
        """Discard an unfinished buffer (its samples are not logged); returns tokens dropped."""
        n = self.fill
        started_here = {id(r) for r, _ in self._segs}
        for rec in self._open:
            if id(rec) in started_here and rec.seq is not None:
                rec.truncated = True  # it began in a written sequence: log what was written
        self._open = [r for r in self._open if r.seq is not None]
        for r in self._open:
            r.finished = True
        self._segs, self.fill = [], 0
        self._flush_log()
        return n


def _chain(pieces: Iterable[np.ndarray], eos: np.ndarray) -> Iterator[np.ndarray]:
    yield from pieces
    yield eos
