"""The Spark implementation of the issue–PR miner (``Mining.spark``): the same step functions
through the Spark engine's row map (``mapInArrow``).

Input units become a DataFrame (one row per event file / API dump / repository); parsing,
entity merging and the per-pair rules run through ``engine.map_rows`` with the functions of
``stages``; linking is the shared SQL of ``link_sql``; near-duplicate clusters
come from ``filters.minhash_clusters.clusters_verified_spark`` (a distributed band self-join
whose few candidate pairs are checked and clustered on the driver). Repositories must be readable at the same path on every executor
(those given as URLs are fetched to the driver's staging directory); event files and API dumps
given as URLs are streamed by the executors, with the driver's ``AWS_*`` settings.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from core.spark import input_partitions
from core.spark_engine import SparkEngine
from core.storage import forward_storage_env, is_url
from filters.minhash_clusters import clusters_verified_spark
from swe_envs.mining.config import MiningConfig
from swe_envs.mining.decontam import BenchmarkIndex
from swe_envs.mining.link_sql import LINK_REJECTS, PAIRS, VIEWS, render
from swe_envs.mining.observations import ENTITY_KINDS
from swe_envs.mining.stages import (
    DOC_SCHEMA,
    ENTITY_SCHEMA,
    EXTRACT_SCHEMA,
    FINAL_SCHEMA,
    OBS_SCHEMA,
    PAIR_SCHEMA,
    REJECT_SCHEMA,
    MineUnit,
    dedup_reject_rows,
    duplicate_of,
    filter_pairs,
    finish_pairs,
    link_reject_rows,
    merge_rows,
    safe_extract_rows,
)


def run_spark_mine(
    units: list[MineUnit], out: Path, cfg: MiningConfig, index: BenchmarkIndex | None, engine: SparkEngine
) -> dict[str, Any]:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    spark, rows_map = engine.session, engine.map_rows
    keep = StorageLevel.MEMORY_AND_DISK
    n_parts = input_partitions(spark, engine.cfg, len(units))
    rows = [(i, u.model_dump_json()) for i, u in enumerate(units)]
    if any(is_url(u.path) for u in units):  # executors stream the objects themselves
        forward_storage_env(spark.sparkContext)
    units_df = spark.createDataFrame(spark.sparkContext.parallelize(rows, n_parts), "idx long, unit string")

    def extract(rows):
        for row in rows:
            yield from safe_extract_rows(MineUnit.model_validate_json(row["unit"]), cfg)

    # Each cached DataFrame is materialised (count) before use: a query that reads one cache
    # from several branches would otherwise compute it once per branch, concurrently.
    timings: dict[str, float] = {}
    t = time.monotonic()
    ex = rows_map(extract, units_df, EXTRACT_SCHEMA).persist(keep)
    ex.count()
    timings["parse_s"] = round(time.monotonic() - t, 3)
    t = time.monotonic()
    obs = ex.filter(F.col("stage").isNull()).select(*OBS_SCHEMA.names)
    parse_rejects = ex.filter(F.col("stage").isNotNull()).select(*REJECT_SCHEMA.names)
    groups = (
        obs.filter(F.col("kind").isin(*ENTITY_KINDS))
        .groupBy("kind", "key")
        .agg(
            F.first("repo").alias("repo"),
            F.first("number").alias("number"),
            F.collect_list("payload").alias("payloads"),
        )
    )
    entities = rows_map(merge_rows, groups, ENTITY_SCHEMA).persist(keep)
    entities.count()
    facts = obs.filter(~F.col("kind").isin(*ENTITY_KINDS)).select(
        "kind", "repo", "number", "ref_repo", "ref_number", "sha"
    )
    entities.createOrReplaceTempView("entities")
    facts.createOrReplaceTempView("facts")
    closing = cfg.link.closing_kinds
    views = []
    for name, sql in VIEWS:
        view = spark.sql(render(sql, "spark", closing))
        if name == "resolved":  # read by both queries below, three times by one of them
            view = view.persist(keep)
            view.count()
            views.append(view)
        view.createOrReplaceTempView(name)
    timings["merge_link_s"] = round(time.monotonic() - t, 3)

    link_rejects = rows_map(lambda rs: link_reject_rows(rs, cfg), spark.sql(render(LINK_REJECTS, "spark", closing)),
                            REJECT_SCHEMA)
    pairs = spark.sql(render(PAIRS, "spark", closing))
    pairs = pairs.repartition(max(1, spark.sparkContext.defaultParallelism), "pr_repo").persist(keep)
    filtered = rows_map(lambda rs: filter_pairs(rs, cfg), pairs, PAIR_SCHEMA).persist(keep)
    t = time.monotonic()
    n_filtered = filtered.count()  # materialises the per-pair filters once
    timings["filter_s"] = round(time.monotonic() - t, 3)
    kept = filtered.filter(F.col("stage").isNull())
    pair_rejects = filtered.filter(F.col("stage").isNotNull()).select(*REJECT_SCHEMA.names)

    rejects = [parse_rejects, link_rejects, pair_rejects]
    t = time.monotonic()
    if cfg.dedup.enabled and n_filtered > 1:
        dup_of = duplicate_of(clusters_verified_spark(kept, cfg.dedup.minhash.threshold))
        if dup_of:
            dup = spark.createDataFrame([(i,) for i in sorted(dup_of)], "id string")

            def dedup_body(rs):
                return dedup_reject_rows(rs, dup_of, cfg)

            dupes = kept.join(F.broadcast(dup), "id")
            rejects.append(rows_map(dedup_body, dupes, REJECT_SCHEMA))
            kept = kept.join(F.broadcast(dup), "id", "left_anti")
    timings["dedup_s"] = round(time.monotonic() - t, 3)
    t = time.monotonic()
    final = rows_map(lambda rs: finish_pairs(rs, cfg, index), kept, FINAL_SCHEMA).persist(keep)
    rejects.append(final.filter(F.col("stage").isNotNull()).select(*REJECT_SCHEMA.names))
    docs = final.filter(F.col("stage").isNull())

    docs.select(*DOC_SCHEMA.names).write.mode("overwrite").parquet(str(out / "documents"))
    all_rejects = rejects[0]
    for r in rejects[1:]:
        all_rejects = all_rejects.unionByName(r)
    all_rejects.write.mode("overwrite").parquet(str(out / "rejects"))
    _write_instances(docs, out)
    timings["finish_write_s"] = round(time.monotonic() - t, 3)

    stats = {
        "observations": {
            r["kind"]: r["count"] for r in obs.groupBy("kind").count().orderBy("kind").collect()
        },
        "entities": {
            r["kind"]: r["count"] for r in entities.groupBy("kind").count().orderBy("kind").collect()
        },
        "pairs": n_filtered,  # one filter outcome per pair
        "parse_records_kept": obs.select("record").distinct().count(),
        "timings": timings,
    }
    for df in (ex, entities, pairs, filtered, final, *views):
        df.unpersist()
    for name, _ in VIEWS:
        spark.catalog.dropTempView(name)
    return stats


def _write_instances(docs, out: Path) -> None:
    """One sorted instances.jsonl: a single task sorts (spilling if needed) and writes it."""
    tmp = out / ".instances-spark"
    (
        docs.select("instance_id", "instance")
        .repartition(1)
        .sortWithinPartitions("instance_id")
        .select("instance")
        .write.mode("overwrite")
        .text(str(tmp))
    )
    parts = sorted(tmp.glob("part-*"))
    target = out / "instances.jsonl"
    with open(target.with_name(".instances.jsonl.tmp"), "wb") as fh:
        for p in parts:
            with open(p, "rb") as src:
                shutil.copyfileobj(src, fh)
    target.with_name(".instances.jsonl.tmp").replace(target)
    shutil.rmtree(tmp, ignore_errors=True)
