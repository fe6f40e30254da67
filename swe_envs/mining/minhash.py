"""MinHash signatures and LSH band keys shared by duplicate detection and decontamination.

Texts are lower-cased word n-grams; signatures come from datasketch (``num_perm`` =
bands × rows) and are passed around as bytes so both engines can carry them. Two texts are
candidates when they share a band key, and similar when their estimated Jaccard similarity
reaches the threshold. A text with no words has no signature and matches nothing.
"""

from __future__ import annotations

import re

import numpy as np
import xxhash

from swe_envs.mining.config import MinhashConfig

_WORD = re.compile(r"\w+", re.UNICODE)


def shingles(text: str, n: int) -> set[bytes]:
    words = _WORD.findall(text.lower())
    if not words:
        return set()
    if len(words) <= n:
        return {" ".join(words).encode()}
    return {" ".join(words[i : i + n]).encode() for i in range(len(words) - n + 1)}


def signature(text: str, cfg: MinhashConfig) -> bytes | None:
    grams = shingles(text, cfg.ngram)
    if not grams:
        return None
    from datasketch import MinHash  # imports scipy: only workers that hash pay for it

    m = MinHash(num_perm=cfg.num_perm, seed=cfg.seed)
    m.update_batch(sorted(grams))
    return np.asarray(m.hashvalues, dtype=np.uint64).tobytes()


def band_keys(sig: bytes | None, cfg: MinhashConfig) -> list[str]:
    if sig is None:
        return []
    values = np.frombuffer(sig, dtype=np.uint64)
    r = cfg.rows
    return [f"{b}:{xxhash.xxh64_hexdigest(values[b * r : (b + 1) * r].tobytes())}" for b in range(cfg.bands)]


def similarity(a: bytes, b: bytes) -> float:
    va, vb = np.frombuffer(a, dtype=np.uint64), np.frombuffer(b, dtype=np.uint64)
    return float(np.mean(va == vb))
