"""Dedup quality, measured: plant near-duplicates at known Jaccard similarities into real text,
run the MinHash clustering, report recall per similarity bin and precision.

Each planted pair is a real passage of the sample's novels and a copy in which a number of
word positions were replaced by other real words — bisected so the word-n-gram Jaccard of the
pair lands at a target (0.5 … 0.95); the *measured* Jaccard decides the bin. Every base
passage gets exactly one variant, and unrelated passages are mixed in, so a detected pair is
correct only if it is a planted one:

* recall(bin)  = planted pairs of the bin found in one cluster / planted pairs of the bin
* precision    = planted pairs found / all pairs that ended up in a common cluster

``python -m pipelines dedup-eval`` prints the table (goal: recall ≥ 0.95 for J ≥ 0.8,
precision ≥ 0.99).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

from core.io import iter_jsonl
from filters.minhash import MinhashConfig, Signer, words
from filters.minhash_clusters import clusters_local
from pipelines.jobs.quality_data import passages

BINS = [(0.5, 0.6), (0.6, 0.7), (0.7, 0.8), (0.8, 0.9), (0.9, 0.95), (0.95, 1.0001)]


def jaccard(a: list[str], b: list[str], n: int) -> float:
    sa = {tuple(a[i : i + n]) for i in range(len(a) - n + 1)}
    sb = {tuple(b[i : i + n]) for i in range(len(b) - n + 1)}
    return len(sa & sb) / len(sa | sb) if sa | sb else 1.0


def plant(base: list[str], target: float, vocab: list[str], n: int, rng: random.Random) -> tuple[list[str], float]:
    """A copy of ``base`` with word substitutions bisected to Jaccard ≈ ``target``."""
    positions = rng.sample(range(len(base)), len(base))
    subs = [rng.choice(vocab) for _ in positions]

    def variant(k: int) -> list[str]:
        out = list(base)
        for p, w in zip(positions[:k], subs[:k], strict=True):
            out[p] = w if w != base[p] else w + "x"
        return out

    lo, hi = 0, len(base)
    while lo < hi:  # smallest k with J <= target
        mid = (lo + hi) // 2
        if jaccard(base, variant(mid), n) > target:
            lo = mid + 1
        else:
            hi = mid
    v = variant(lo)
    return v, jaccard(base, v, n)


@dataclass
class EvalResult:
    per_bin: list[tuple[tuple[float, float], int, int]]  # (bin, planted, found)
    found_pairs: int
    planted_found: int

    @property
    def precision(self) -> float:
        return self.planted_found / self.found_pairs if self.found_pairs else 1.0

    def recall_at_least(self, j: float) -> float:
        planted = sum(p for (lo, _), p, _ in self.per_bin if lo >= j)
        found = sum(f for (lo, _), _, f in self.per_bin if lo >= j)
        return found / planted if planted else float("nan")

    def table(self) -> str:
        lines = ["jaccard bin   planted  found  recall"]
        for (lo, hi), planted, found in self.per_bin:
            r = found / planted if planted else float("nan")
            lines.append(f"[{lo:.2f}, {min(hi, 1.0):.2f})  {planted:7d}  {found:5d}  {r:6.3f}")
        lines.append(f"recall for J >= 0.8: {self.recall_at_least(0.8):.3f} (goal >= 0.95)")
        lines.append(f"precision: {self.precision:.4f} ({self.planted_found}/{self.found_pairs} found pairs planted; "
                     f"goal >= 0.99)")
        return "\n".join(lines)


def evaluate(books_jsonl: str | Path, cfg: MinhashConfig, pairs_per_bin: int = 40, unrelated: int = 200,
             passage_words: int = 250, seed: int = 0) -> EvalResult:
    # one copy per title: the sample holds Pride and Prejudice twice (tidytext and janeaustenr),
    # and real duplicates between "unrelated" passages would be counted as false positives
    books = {}
    for rec in iter_jsonl(books_jsonl, "books"):
        books.setdefault(rec.get("title", rec["id"]).lower(), rec["text"])
    texts = list(books.values())
    pool = [words(p) for p in passages(texts, passage_words)]
    pool = [p for p in pool if len(p) >= passage_words]
    rng = random.Random(seed)
    rng.shuffle(pool)
    need = pairs_per_bin * len(BINS) + unrelated
    if len(pool) < need:
        raise ValueError(f"only {len(pool)} passages for {need} needed")
    vocab = [w for p in pool[need:need + 200] for w in p] or [w for p in pool for w in p]
    docs: dict[str, list[str]] = {}
    planted: dict[tuple[str, str], float] = {}
    k = 0
    for lo, hi in BINS:
        target = (lo + min(hi, 1.0)) / 2 if hi <= 1.0 else 0.97
        for _ in range(pairs_per_bin):
            base = pool[k]
            k += 1
            variant, j = plant(base, target, vocab, cfg.ngram, rng)
            a, b = f"b{k:05d}", f"v{k:05d}"
            docs[a], docs[b] = base, variant
            planted[(a, b)] = j
    for i in range(unrelated):
        docs[f"u{i:05d}"] = pool[k + i]
    signer = Signer(cfg)
    keys = signer.keys_for_many([" ".join(ws) for ws in docs.values()])
    assignments = clusters_local(zip(docs, keys, strict=True))
    clusters: dict[str, list[str]] = {}
    for d, (rep, _) in assignments.items():
        clusters.setdefault(rep, []).append(d)
    found = {tuple(sorted(p)) for members in clusters.values() for p in combinations(members, 2)}
    per_bin = []
    for lo, hi in BINS:
        in_bin = [p for p, j in planted.items() if lo <= j < hi]
        per_bin.append(((lo, hi), len(in_bin), sum(1 for p in in_bin if tuple(sorted(p)) in found)))
    planted_found = sum(1 for p in planted if tuple(sorted(p)) in found)
    return EvalResult(per_bin, len(found), planted_found)
