"""Near-duplicate issues: MinHash LSH clusters, the smallest pair id of each cluster is kept.

This is the single-machine implementation; ``pipelines/swe_mine_spark.py`` computes the same
clusters with DataFrame joins. Both follow one definition, so they agree exactly: an edge
joins two ids that share at least one band key and whose estimated Jaccard similarity is at
least the threshold; clusters are the connected components of those edges.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from swe_envs.mining.config import MinhashConfig
from swe_envs.mining.minhash import band_keys, similarity


class UnionFind:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        root = x
        while self.parent.get(root, root) != root:
            root = self.parent[root]
        while self.parent.get(x, x) != root:  # path compression
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:  # the smaller id becomes the root: it is the one kept
            lo, hi = sorted((ra, rb))
            self.parent[hi] = lo


def duplicate_of(items: Iterable[tuple[str, bytes | None]], cfg: MinhashConfig) -> dict[str, str]:
    """{id: kept id} for every id that is a near-duplicate of a smaller one."""
    sigs: dict[str, bytes] = {}
    buckets: dict[str, list[str]] = defaultdict(list)
    for item_id, sig in items:
        if sig is None:
            continue
        sigs[item_id] = sig
        for key in band_keys(sig, cfg):
            buckets[key].append(item_id)
    return cluster(([(i, sigs[i]) for i in ids] for ids in buckets.values() if len(ids) > 1), cfg.threshold)


def cluster(buckets: Iterable[list[tuple[str, bytes]]], threshold: float) -> dict[str, str]:
    """{id: kept id} from LSH buckets of (id, signature): the pairs of a bucket whose estimated
    Jaccard reaches ``threshold`` are joined; each component keeps its smallest id. Both
    engines call this, so they agree exactly."""
    uf = UnionFind()
    checked: set[tuple[str, str]] = set()
    for members in buckets:
        members = sorted(set(members))
        for i, (a, sig_a) in enumerate(members):
            for b, sig_b in members[i + 1 :]:
                if (a, b) in checked:
                    continue
                checked.add((a, b))
                if similarity(sig_a, sig_b) >= threshold:
                    uf.union(a, b)
    return {x: uf.find(x) for x in list(uf.parent) if uf.find(x) != x}
