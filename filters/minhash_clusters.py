"""Near-duplicate clusters from MinHash band keys (``filters.minhash``), with one local and one
Spark implementation that give identical clusters.

Documents sharing any band key are candidates. Without a Jaccard check every candidate pair is
linked; with one (``min_jaccard``, what swe-mine uses for issues) only pairs whose signatures
estimate at least that Jaccard similarity are. Clusters are the connected components of the
links; the smallest id of a cluster is kept and every other member is a duplicate *of it*.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa
import xxhash
from datatrove.data import Document
from datatrove.pipeline.filters.base_filter import BaseFilter

from filters.minhash import MinhashConfig, Signer, estimated_jaccard

Assignments = dict[str, tuple[str, int]]  # id -> (representative id, cluster size)


def cluster_id(rep: str) -> int:
    """Stable int64 id of a cluster: a hash of its representative's id."""
    return xxhash.xxh3_64_intdigest(rep.encode("utf-8")) - (1 << 63)


class _Components:
    """Union-find whose roots are the smallest ids: the one cluster rule of both engines."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        parent = self.parent
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(self, x: str, y: str) -> None:
        self.parent.setdefault(x, x)
        self.parent.setdefault(y, y)
        rx, ry = self.find(x), self.find(y)
        if rx != ry:  # the smaller id becomes the root: roots are representatives
            if ry < rx:
                rx, ry = ry, rx
            self.parent[ry] = rx

    def clusters(self) -> dict[str, tuple[str, int]]:
        """id -> (representative id, cluster size) for every member of a cluster of size > 1."""
        members: dict[str, list[str]] = {}
        for x in self.parent:
            members.setdefault(self.find(x), []).append(x)
        return {m: (root, len(ms)) for root, ms in members.items() if len(ms) > 1 for m in ms}


def clusters_local(rows: Iterable[tuple[str, list[int]]]) -> Assignments:
    """id -> (representative id, cluster size) for every document in a cluster of size > 1."""
    comp = _Components()
    first: dict[int, str] = {}
    for doc_id, keys in rows:
        for k in keys:
            other = first.setdefault(k, doc_id)
            if other != doc_id:
                comp.union(doc_id, other)
    return comp.clusters()


def _link_verified(buckets: Iterable[list[tuple[str, np.ndarray]]], min_jaccard: float) -> Assignments:
    """Components of the candidate pairs (members of one bucket) whose estimated Jaccard
    reaches ``min_jaccard``; each pair is checked once however many bands it shares."""
    comp = _Components()
    checked: set[tuple[str, str]] = set()
    for bucket in buckets:
        members = sorted(dict(bucket).items())
        for i, (a, sig_a) in enumerate(members):
            for b, sig_b in members[i + 1 :]:
                if (a, b) not in checked:
                    checked.add((a, b))
                    if estimated_jaccard(sig_a, sig_b) >= min_jaccard:
                        comp.union(a, b)
    return comp.clusters()


def clusters_verified(
    items: Iterable[tuple[str, np.ndarray | None]], signer: Signer, min_jaccard: float
) -> Assignments:
    """``clusters_local`` with a Jaccard check: from (id, signature) rows (None: no words,
    matches nothing), documents sharing a band key are linked only when their signatures
    estimate a Jaccard similarity of at least ``min_jaccard``."""
    sigs: dict[str, np.ndarray] = {}
    buckets: dict[int, list[str]] = defaultdict(list)
    for doc_id, sig in items:
        if sig is not None:
            sigs[doc_id] = sig
            for key in signer.band_keys(sig):
                buckets[key].append(doc_id)
    return _link_verified(([(i, sigs[i]) for i in ids] for ids in buckets.values() if len(ids) > 1), min_jaccard)


def clusters_verified_spark(df, min_jaccard: float) -> Assignments:
    """Same result as ``clusters_verified`` for a DataFrame of ``id``, ``sig`` (the signature's
    bytes, uint32) and ``keys`` (its band keys). Rows are grouped by band key across the
    cluster — the part that grows with the corpus; only buckets holding several documents
    (few: duplicates are rare) travel to the driver, to be checked and joined there."""
    from pyspark.sql import functions as F

    buckets = (
        df.filter(F.col("sig").isNotNull())
        .select("id", "sig", F.explode("keys").alias("band"))
        .groupBy("band")
        .agg(F.collect_list(F.struct("id", "sig")).alias("members"))
        .filter(F.size("members") > 1)
    )
    return _link_verified(
        ([(m["id"], np.frombuffer(m["sig"], dtype=np.uint32)) for m in row["members"]] for row in buckets.collect()),
        min_jaccard,
    )


def _batch_keys(b: pa.RecordBatch, signer: Signer) -> Iterator[tuple[str, list[int]]]:
    """(id, band keys) for every document of an Arrow batch with ``id`` and ``text`` columns."""
    texts = [t or "" for t in b.column("text").to_pylist()]
    return zip(b.column("id").to_pylist(), signer.keys_for_many(texts), strict=True)


def _key_rows(batches: Iterator[pa.RecordBatch], cfg: MinhashConfig) -> Iterator[pa.RecordBatch]:
    signer = Signer(cfg)
    for b in batches:
        ids, keys = [], []
        for doc_id, doc_keys in _batch_keys(b, signer):
            ids.extend([doc_id] * len(doc_keys))
            keys.extend(doc_keys)
        yield pa.RecordBatch.from_pydict({"id": ids, "key": pa.array(keys, pa.int64())})


def clusters_spark(
    df, cfg: MinhashConfig, max_iterations: int = 50, driver_edges: int = 20_000_000
) -> dict[str, tuple[str, int]]:
    """Same result as ``clusters_local``: band keys in ``mapInArrow``; each document linked to
    the smallest id sharing a band key with it (one shuffle, by key); then connected components.

    Components: up to ``driver_edges`` links are collected and joined by the same union-find as
    ``clusters_local`` on the driver. The links number about one per clustered document, and
    the answer (one row per clustered document) is collected to the driver anyway, so this adds
    no new limit — and it replaces a dozen small Spark jobs per round of label propagation,
    which dominated the whole dedup and kept it from scaling with cores. Beyond
    ``driver_edges`` links, min-label propagation with DataFrame joins runs on the cluster."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    keys = df.select("id", "text").mapInArrow(lambda it: _key_rows(it, cfg), "id string, key bigint")
    root = F.min("id").over(Window.partitionBy("key"))
    links = keys.select("id", root.alias("root")).where(F.col("id") != F.col("root")).distinct().cache()
    try:
        if links.count() <= driver_edges:
            comp = _Components()
            for r in links.collect():  # one job over the cached links (not one per partition)
                comp.union(r.id, r.root)
            return comp.clusters()
        return _propagate_labels(links, max_iterations)
    finally:
        links.unpersist()


def _propagate_labels(links, max_iterations: int) -> dict[str, tuple[str, int]]:
    """Connected components on the cluster: every id takes the smallest label among its
    neighbours' until no label changes."""
    from pyspark.sql import functions as F

    edges = links.union(links.select(F.col("root").alias("id"), F.col("id").alias("root"))).distinct().cache()
    labels = edges.select("id").distinct().withColumn("label", F.col("id"))
    for _ in range(max_iterations):
        proposals = edges.join(labels.withColumnRenamed("id", "root").withColumnRenamed("label", "nl"), "root") \
            .groupBy("id").agg(F.min("nl").alias("nl"))
        new = labels.join(proposals, "id", "left").select(
            "id", F.least(F.col("label"), F.coalesce(F.col("nl"), F.col("label"))).alias("label")).cache()
        changed = new.join(labels.withColumnRenamed("label", "old"), "id").where(F.col("label") != F.col("old")).count()
        labels.unpersist()  # `new` is materialised by the count: the previous round can go
        labels = new
        if changed == 0:
            break
    else:
        raise RuntimeError(f"connected components did not converge in {max_iterations} iterations")
    sizes = labels.groupBy("label").count()
    out = labels.join(sizes, "label").collect()
    labels.unpersist()
    edges.unpersist()
    return {r.id: (r.label, int(r["count"])) for r in out}


class MinhashDuplicates(BaseFilter):
    """Per-document step after the corpus pass: drop every cluster member but the
    representative; record cluster id and size (and ``duplicate_of`` on the dropped)."""

    name = "👯 minhash_dedup"
    stage_name = "minhash_dedup"
    promotes = {"minhash_cluster": "int64", "minhash_cluster_size": "int64"}

    def __init__(self, assignments: dict[str, tuple[str, int]]):
        super().__init__()
        self.assignments = assignments
        self.n_clustered = len(assignments)  # (recorded with the job's step settings)

    def filter(self, doc: Document) -> bool | tuple[bool, str]:
        rep, size = self.assignments.get(doc.id, (doc.id, 1))
        doc.metadata["minhash_cluster"] = cluster_id(rep)
        doc.metadata["minhash_cluster_size"] = size
        if rep != doc.id:
            doc.metadata["duplicate_of"] = rep
            return False, "near_duplicate"
        return True


def clusters_from_documents(documents_dir: str, cfg: MinhashConfig) -> dict[str, tuple[str, int]]:
    """``clusters_local`` over a documents dataset, streamed in Arrow batches."""
    from pathlib import Path

    import pyarrow.parquet as pq

    signer = Signer(cfg)

    def rows():
        for path in sorted(Path(documents_dir).glob("*.parquet")):
            for b in pq.ParquetFile(path).iter_batches(columns=["id", "text"], batch_size=512):
                yield from _batch_keys(b, signer)

    return clusters_local(rows())
