"""Corpus passes the jobs share whose two implementations live in ``filters.minhash_clusters``.

``MinhashClusters`` names MinHash's local and Spark cluster computations as one pass (the
same protocol as ``filters.templates.TemplateLines`` and ``filters.dclm.DclmThreshold``), so
the web and dedup jobs call ``engine.compute(MinhashClusters(cfg), documents)`` and never
ask which engine they have. ``cluster_summary`` is the record both jobs write.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from filters.minhash import MinhashConfig
from filters.minhash_clusters import Assignments, clusters_from_documents, clusters_spark


class MinhashClusters:
    """Corpus pass: document id -> (cluster representative, cluster size); the same on both engines."""

    def __init__(self, cfg: MinhashConfig):
        self.cfg = cfg

    def local(self, documents_dir: str) -> Assignments:
        return clusters_from_documents(documents_dir, self.cfg)

    def spark(self, df) -> Assignments:
        return clusters_spark(df, self.cfg)


def cluster_summary(assignments: Assignments, cfg: MinhashConfig) -> dict[str, Any]:
    sizes = Counter(size for rep, size in {(r, s) for r, s in assignments.values()})
    return {
        "clusters": sum(sizes.values()),
        "duplicates": sum(1 for doc, (rep, _) in assignments.items() if doc != rep),
        "cluster_sizes": dict(sorted(sizes.items())),
        "lsh": f"{cfg.bands} bands x {cfg.rows} rows, word {cfg.ngram}-grams, Jaccard threshold ~{cfg.threshold():.2f}",
    }
