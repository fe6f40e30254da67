"""MinHash signatures (datasketch's scheme, vectorised) and LSH band keys: the one MinHash of
the toolkit (web and dedup jobs, swe-mine's issue dedup and decontamination). Clusters of
band collisions, locally and on Spark, are in ``filters.minhash_clusters``.

Signatures are exactly datasketch ``MinHash(num_perm=bands*rows, seed)`` signatures
(scheme ``affine32``: MurmurHash3 finaliser, then ``a*h + b mod 2^32``) of the document's word
n-gram shingles, where each shingle is hashed by ``shingle_hash32`` — a function of the
shingle's bytes (so datasketch can be given it as ``hashfunc``) that we compute for all
shingles at once from per-word hashes, without building shingle strings. That, and doing the
permutations for all shingles in one numpy pass, is where the speed comes from.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash
from pydantic import Field

from core.config import StrictModel

# RE2 (Arrow): a word is a run of Unicode letters, digits and underscores
_NON_WORD = r"[^\p{L}\p{N}_]+"
_MULT = np.uint64(0x9E3779B97F4A7C15)  # odd 64-bit multiplier for the rolling combination
_MULT_INT, _MASK64 = int(_MULT), (1 << 64) - 1
_FMIX32 = (16, np.uint32(0x85EBCA6B), 13, np.uint32(0xC2B2AE35), 16)
_MAX32 = np.uint32(0xFFFFFFFF)


class MinhashConfig(StrictModel):
    ngram: int = Field(default=5, ge=1)
    bands: int = Field(default=14, gt=0)
    rows: int = Field(default=8, gt=0)  # 14 x 8: a pair collides with probability 1/2 at Jaccard ~0.685
    seed: int = 1
    # shingles permuted per numpy block (bounds memory for very long documents)
    block: int = Field(default=8192, gt=0)

    @property
    def num_perm(self) -> int:
        return self.bands * self.rows

    def threshold(self) -> float:
        """Jaccard at which a pair collides in at least one band with probability 1/2."""
        return (1 - 0.5 ** (1 / self.bands)) ** (1 / self.rows)


# ASCII bytes: word characters map to their lowercase, every other byte to a space
_ASCII_MAP = np.full(256, ord(" "), dtype=np.uint8)
for _c in b"abcdefghijklmnopqrstuvwxyz0123456789_":
    _ASCII_MAP[_c] = _c
for _c in b"ABCDEFGHIJKLMNOPQRSTUVWXYZ":
    _ASCII_MAP[_c] = _c + 32


def _normalise(texts: list[str]) -> pa.LargeStringArray:
    r"""Each text lowercased, with every run of non-word characters replaced by spaces.

    Why not one regex over the batch: RE2's split runs at ~45 MB/s and was two thirds of a
    signature's cost. An ASCII document (most of a web or book corpus) is mapped byte by byte
    through a 256-entry table instead (~1 GB/s); only documents with non-ASCII characters go
    through Unicode lowercasing and the ``\p{L}\p{N}_`` regex. The words are the same."""
    arr = pa.array(texts, pa.large_string())
    if arr.buffers()[2] is None or not len(arr):  # every text empty
        return arr
    offsets = arr.buffers()[1]
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8)
    out = pa.LargeStringArray.from_buffers(len(arr), offsets, pa.py_buffer(_ASCII_MAP[data]))
    is_ascii = pc.string_is_ascii(arr).to_numpy(zero_copy_only=False)
    if is_ascii.all():
        return out
    other = np.flatnonzero(~is_ascii)
    fixed = pc.replace_substring_regex(pc.utf8_lower(arr.take(other)), _NON_WORD, " ")
    pos = np.arange(len(arr))
    pos[other] = len(arr) + np.arange(len(other))  # row i of the batch: its ASCII or its Unicode version
    return pa.concat_arrays([out, fixed]).take(pa.array(pos))


def _split(texts: list[str]) -> pa.ListArray:
    # separators are single spaces now; UTF-8 multibyte sequences never contain an ASCII byte
    return pc.ascii_split_whitespace(_normalise(texts))


def words(text: str) -> list[str]:
    """The words of ``text``, lowercased: maximal runs of Unicode letters, digits and ``_``."""
    return [w for w in _split([text])[0].as_py() if w]


def _tokenize(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Hashes of the words of all texts, concatenated, and each text's word count.

    Lowercasing, splitting and finding the vocabulary run in numpy and Arrow's C++ kernels;
    only the batch's distinct words are hashed in Python. (Tokenising with Python's ``re`` was
    over half the cost of a signature.)"""
    parts = _split(texts)
    enc = pc.dictionary_encode(pc.list_flatten(parts))
    vocab = enc.dictionary.to_pylist()
    idx = enc.indices.to_numpy(zero_copy_only=False)
    per_text = np.diff(parts.offsets.to_numpy())
    table = np.fromiter((xxhash.xxh3_64_intdigest(w.encode("utf-8")) for w in vocab), dtype=np.uint64,
                        count=len(vocab))
    if "" in vocab:  # the split leaves empty strings at the edges and for empty texts
        keep = idx != vocab.index("")
        owner = np.repeat(np.arange(len(texts)), per_text)
        return table[idx[keep]], np.bincount(owner[keep], minlength=len(texts))
    return table[idx], per_text


def _combine(wh: np.ndarray, n: int) -> np.ndarray:
    """Hash of each run of n consecutive word hashes: Σ wh[i+j]·M^(n-1-j) (mod 2^64), folded
    to 32 bits."""
    m = len(wh) - n + 1
    acc = np.zeros(m, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(n):
            acc = acc * _MULT + wh[j : j + m]
    return ((acc >> np.uint64(32)) ^ (acc & np.uint64(0xFFFFFFFF))).astype(np.uint32)


def shingle_hashes(text: str, n: int) -> np.ndarray:
    """32-bit hashes of the word n-grams of ``text`` (a document shorter than n words is one
    shingle; an empty one has none)."""
    wh, _ = _tokenize([text])
    if not len(wh):
        return np.empty(0, dtype=np.uint32)
    # repeated shingles are left in: the min is the same and a sort costs more than they do
    return _combine(wh, min(n, len(wh)))


def shingle_hash32(shingle: bytes) -> int:
    """The same hash for one shingle given as bytes (words joined by single spaces): usable as
    datasketch's ``hashfunc``. Plain integers, not numpy: per call that is ~10x faster, and a
    datasketch loop using it is the fair baseline for ``Signer`` (benchmarks/minhash.py)."""
    acc = 0
    for w in shingle.split(b" "):
        acc = (acc * _MULT_INT + xxhash.xxh3_64_intdigest(w)) & _MASK64
    return ((acc >> 32) ^ acc) & 0xFFFFFFFF


def _fmix32(h: np.ndarray) -> np.ndarray:
    s1, m1, s2, m2, s3 = _FMIX32
    with np.errstate(over="ignore"):
        h = h ^ (h >> np.uint32(s1))
        h = h * m1
        h = h ^ (h >> np.uint32(s2))
        h = h * m2
        return h ^ (h >> np.uint32(s3))


class Signer:
    """Computes signatures and band keys; the permutations are datasketch's own."""

    def __init__(self, cfg: MinhashConfig):
        from datasketch import MinHash

        self.cfg = cfg
        # named, not defaulted: datasketch < 2.0 used another scheme (pyproject pins 2.0.x)
        a, b = MinHash(num_perm=cfg.num_perm, seed=cfg.seed, scheme="affine32").permutations
        self.a, self.b = a.astype(np.uint32), b.astype(np.uint32)

    def signature(self, hashes: np.ndarray) -> np.ndarray | None:
        if len(hashes) == 0:
            return None
        sig = np.full(self.cfg.num_perm, _MAX32, dtype=np.uint32)
        mixed = _fmix32(hashes.astype(np.uint32))
        a, b = self.a[:, None], self.b[:, None]
        # (perm, shingle) layout: the min runs along contiguous memory, ~10x faster than
        # the (shingle, perm) layout datasketch uses
        buf = np.empty((self.cfg.num_perm, min(len(mixed), self.cfg.block)), dtype=np.uint32)
        with np.errstate(over="ignore"):
            for i in range(0, len(mixed), self.cfg.block):
                blk = mixed[None, i : i + self.cfg.block]
                out = buf[:, : blk.shape[1]]
                np.multiply(a, blk, out=out)
                np.add(out, b, out=out)
                np.minimum(sig, out.min(axis=1), out=sig)
        return sig

    def signatures(self, texts: list[str]) -> list[np.ndarray | None]:
        """``signature(shingle_hashes(t))`` for every text, computed for the batch at once.

        Short documents are where per-call overhead dominates, so the batch shares one
        tokenisation, one rolling combination over all words (shingles that would straddle
        two documents are dropped), and one permutation pass whose per-document minima come
        from ``np.minimum.reduceat`` over each document's run of columns."""
        n, block = self.cfg.ngram, self.cfg.block
        out: list[np.ndarray | None] = [None] * len(texts)
        if not texts:
            return out
        wh, lens = _tokenize(texts)
        ends = np.cumsum(lens)
        parts, seg_doc, seg_len = [], [], []
        long_docs = np.flatnonzero(lens >= n)
        if len(long_docs):
            combined = _combine(wh, n) if len(wh) >= n else np.empty(0, dtype=np.uint32)
            # shingle p is whole when it ends inside the document it starts in: p + n <= that end
            doc_end = np.repeat(ends, lens)[: len(combined)]
            parts.append(combined[np.arange(len(combined)) + n <= doc_end])
            seg_doc.extend(long_docs.tolist())
            seg_len.extend((lens[long_docs] - n + 1).tolist())
        for i in np.flatnonzero((lens > 0) & (lens < n)).tolist():  # fewer words than n: one shingle
            parts.append(_combine(wh[ends[i] - lens[i] : ends[i]], int(lens[i])))
            seg_doc.append(i)
            seg_len.append(1)
        if not parts:
            return out
        mixed = _fmix32(np.concatenate(parts))
        starts = np.concatenate([[0], np.cumsum(seg_len)])
        sigs = np.full((len(seg_doc), self.cfg.num_perm), _MAX32, dtype=np.uint32)
        buf = np.empty((self.cfg.num_perm, min(len(mixed), block)), dtype=np.uint32)
        a, b = self.a[:, None], self.b[:, None]
        with np.errstate(over="ignore"):
            for lo in range(0, len(mixed), block):
                hi = min(lo + block, len(mixed))
                blk = buf[:, : hi - lo]
                np.multiply(a, mixed[None, lo:hi], out=blk)
                np.add(blk, b, out=blk)
                # the segments (documents) that overlap [lo, hi), each cut to it
                first = int(np.searchsorted(starts, lo, side="right")) - 1
                last = int(np.searchsorted(starts, hi, side="left"))
                cuts = np.maximum(starts[first:last], lo) - lo
                np.minimum(sigs[first:last], np.minimum.reduceat(blk, cuts, axis=1).T, out=sigs[first:last])
        for row, i in enumerate(seg_doc):
            out[i] = sigs[row]
        return out

    def band_keys(self, sig: np.ndarray) -> list[int]:
        r = self.cfg.rows
        # band index in the key: equal rows in different bands are not a match
        return [xxhash.xxh3_64_intdigest(bytes([i]) + sig[i * r : (i + 1) * r].tobytes()) - (1 << 63)
                for i in range(self.cfg.bands)]

    def text_signature(self, text: str) -> np.ndarray | None:
        # one text pays Arrow's regex compilation (~1.5 ms); batches use ``signatures``
        return self.signature(shingle_hashes(text, self.cfg.ngram))

    def keys_for(self, text: str) -> list[int]:
        sig = self.text_signature(text)
        return [] if sig is None else self.band_keys(sig)

    def keys_for_many(self, texts: list[str]) -> list[list[int]]:
        return [[] if sig is None else self.band_keys(sig) for sig in self.signatures(texts)]


def estimated_jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """The Jaccard similarity two signatures estimate: the fraction of equal values."""
    return float(np.mean(a == b))
