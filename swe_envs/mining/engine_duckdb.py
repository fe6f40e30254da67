"""The local implementation of the issue–PR miner (``Mining.local``): the local engine's worker
processes + DuckDB.

Input units are parsed through the engine's row map (each unit writes its observations and
parse rejects as Parquet under ``OUT/work``); DuckDB groups observations per entity, runs the
linking SQL and hands pair rows back to the row map for the per-pair rules; near-duplicates are
clustered with ``filters.minhash_clusters.clusters_verified`` in this process.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from core.io import write_jsonl_atomic
from core.local_engine import LocalEngine
from filters.minhash import Signer
from filters.minhash_clusters import clusters_verified
from swe_envs.mining.config import MiningConfig
from swe_envs.mining.decontam import BenchmarkIndex
from swe_envs.mining.link_sql import LINK_REJECTS, PAIRS, VIEWS, render
from swe_envs.mining.observations import ENTITY_KINDS
from swe_envs.mining.stages import (
    DOC_SCHEMA,
    ENTITY_SCHEMA,
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
    to_batch,
)

FLUSH_ROWS = 20_000


def extract_unit(unit: MineUnit, index: int, out: str, cfg: MiningConfig) -> tuple[int, int]:
    """Worker: parse one unit into work/observations/NNNNN.parquet and rejects/parse-NNNNN.parquet."""
    obs_path = Path(out) / "work" / "observations" / f"{index:05d}.parquet"
    rej_path = Path(out) / "rejects" / f"parse-{index:05d}.parquet"
    counts = [0, 0]
    with pq.ParquetWriter(obs_path, OBS_SCHEMA) as ow, pq.ParquetWriter(rej_path, REJECT_SCHEMA) as rw:
        obs, rej = [], []
        for row in safe_extract_rows(unit, cfg):
            (rej if row.get("stage") else obs).append(row)
            if len(obs) >= FLUSH_ROWS:
                ow.write_batch(to_batch(obs, OBS_SCHEMA))
                counts[0] += len(obs)
                obs = []
            if len(rej) >= FLUSH_ROWS:
                rw.write_batch(to_batch(rej, REJECT_SCHEMA))
                counts[1] += len(rej)
                rej = []
        ow.write_batch(to_batch(obs, OBS_SCHEMA))
        rw.write_batch(to_batch(rej, REJECT_SCHEMA))
    return counts[0] + len(obs), counts[1] + len(rej)


def merge_part(work: str, part: int, parts: int) -> int:
    """Worker: merge the entities whose key hashes to ``part`` into work/entities/NNNNN.parquet."""
    obs = f"read_parquet('{work}/observations/*.parquet')"
    kinds = ", ".join(f"'{k}'" for k in ENTITY_KINDS)
    con = duckdb.connect()
    con.execute("SET threads TO 1")  # the pool already spreads the work over the cores
    groups = con.sql(
        f"SELECT kind, key, any_value(repo) AS repo, any_value(number) AS number, list(payload) AS payloads "
        f"FROM {obs} WHERE kind IN ({kinds}) AND hash(key) % {parts} = {part} GROUP BY kind, key"
    ).to_arrow_reader(4096)
    n = 0
    with pq.ParquetWriter(Path(work) / "entities" / f"{part:05d}.parquet", ENTITY_SCHEMA) as w:
        w.write_table(ENTITY_SCHEMA.empty_table())
        for batch in groups:
            rows = list(merge_rows(batch.to_pylist()))
            w.write_batch(to_batch(rows, ENTITY_SCHEMA))
            n += len(rows)
    return n


def _extract_units(rows: Iterable[dict[str, Any]], out: str, cfg: MiningConfig) -> Iterator[dict[str, Any]]:
    """Row-map body: each row names one unit, parsed into files under OUT; yields its counts."""
    for row in rows:
        n_obs, n_rej = extract_unit(row["unit"], row["index"], out, cfg)
        yield {"observations": n_obs, "rejects": n_rej}


def _merge_parts(rows: Iterable[dict[str, Any]], work: str, parts: int) -> Iterator[dict[str, Any]]:
    """Row-map body: each row names one hash part of the entities; yields its entity count."""
    for row in rows:
        yield {"entities": merge_part(work, row["part"], parts)}


def _chunks_by_repo(rows: list[dict[str, Any]], size: int) -> list[list[dict[str, Any]]]:
    """Chunks that keep one repository's pairs together (its clone is opened once)."""
    rows = sorted(
        rows,
        key=lambda r: (
            r["pr_repo"],
            r.get("id") or f"{r['pr_number']}:{r['issue_repo']}#{r['issue_number']}",
        ),
    )
    chunks: list[list[dict[str, Any]]] = []
    for r in rows:
        if chunks and len(chunks[-1]) < size:
            chunks[-1].append(r)
        else:
            chunks.append([r])
    return chunks


def _fetch(con: duckdb.DuckDBPyConnection, sql: str) -> Iterable[dict[str, Any]]:
    reader = con.sql(sql).to_arrow_reader(2048)
    for batch in reader:
        yield from batch.to_pylist()


def run_duckdb(
    units: list[MineUnit],
    out: Path,
    cfg: MiningConfig,
    index: BenchmarkIndex | None,
    engine: LocalEngine,
    chunk_pairs: int,
    progress: bool,
) -> dict[str, Any]:
    """Run every stage and write OUT/documents, OUT/rejects, OUT/instances.jsonl; return stats."""

    def bar(label: str) -> str | None:
        return label if progress else None

    work = out / "work"
    for sub in (work / "observations", out / "rejects", out / "documents"):
        sub.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    t = time.monotonic()
    engine.map_rows(partial(_extract_units, out=str(out), cfg=cfg),
                    [[{"unit": u, "index": i}] for i, u in enumerate(units)], progress=bar("parse"))
    timings["parse_s"] = round(time.monotonic() - t, 3)
    t = time.monotonic()
    (work / "entities").mkdir()
    parts = max(1, engine.cfg.workers)
    engine.map_rows(partial(_merge_parts, work=str(work), parts=parts), [[{"part": i}] for i in range(parts)],
                    progress=bar("merge"))
    con = duckdb.connect()
    obs = f"read_parquet('{work}/observations/*.parquet')"
    kinds = ", ".join(f"'{k}'" for k in ENTITY_KINDS)
    con.execute(f"CREATE VIEW entities AS SELECT * FROM read_parquet('{work}/entities/*.parquet')")
    con.execute(
        f"CREATE VIEW facts AS SELECT kind, repo, number, ref_repo, ref_number, sha FROM {obs} "
        f"WHERE kind NOT IN ({kinds})"
    )
    closing = cfg.link.closing_kinds
    for name, sql in VIEWS:
        con.execute(f"CREATE TEMP TABLE {name} AS {render(sql, 'duckdb', closing)}")
    link_rejects = list(link_reject_rows(_fetch(con, render(LINK_REJECTS, "duckdb", closing)), cfg))
    pair_rows = list(_fetch(con, render(PAIRS, "duckdb", closing)))
    stats = _stats(con, obs)
    stats["pairs"] = len(pair_rows)
    stats["parse_records_kept"] = con.execute(f"SELECT count(DISTINCT record) FROM {obs}").fetchone()[0]
    timings["merge_link_s"] = round(time.monotonic() - t, 3)
    t = time.monotonic()

    filtered = engine.map_rows(partial(filter_pairs, cfg=cfg), _chunks_by_repo(pair_rows, chunk_pairs),
                               PAIR_SCHEMA, bar("filter pairs"))
    kept = [r for r in filtered if r["stage"] is None]
    rejects = [r for r in filtered if r["stage"] is not None]
    timings["filter_s"] = round(time.monotonic() - t, 3)
    t = time.monotonic()
    dup_of = {}
    if cfg.dedup.enabled:
        sigs = ((r["id"], None if r["sig"] is None else np.frombuffer(r["sig"], np.uint32)) for r in kept)
        mh = cfg.dedup.minhash
        dup_of = duplicate_of(clusters_verified(sigs, Signer(mh.signatures()), mh.threshold))
    rejects += dedup_reject_rows(kept, dup_of, cfg)
    kept = [r for r in kept if r["id"] not in dup_of]
    timings["dedup_s"] = round(time.monotonic() - t, 3)
    t = time.monotonic()
    final = engine.map_rows(partial(finish_pairs, cfg=cfg, index=index), _chunks_by_repo(kept, chunk_pairs),
                            FINAL_SCHEMA, bar("relevant files"))
    rejects += [r for r in final if r["stage"] is not None]
    pq.write_table(table(link_rejects, REJECT_SCHEMA), out / "rejects" / "link.parquet")
    pq.write_table(
        table(sorted(rejects, key=lambda r: r["id"]), REJECT_SCHEMA), out / "rejects" / "pairs.parquet"
    )
    docs = sorted((r for r in final if r["stage"] is None), key=lambda r: r["id"])
    pq.write_table(table(docs, DOC_SCHEMA), out / "documents" / "part-00000.parquet")
    # each instance is already JSON with sorted keys: parsed, it dumps back to the same line
    write_jsonl_atomic(
        out / "instances.jsonl", (json.loads(r["instance"]) for r in sorted(docs, key=lambda r: r["instance_id"]))
    )
    timings["finish_write_s"] = round(time.monotonic() - t, 3)
    return stats | {"timings": timings}


def _stats(con: duckdb.DuckDBPyConnection, obs: str) -> dict[str, Any]:
    by_kind = dict(con.execute(f"SELECT kind, count(*) FROM {obs} GROUP BY 1 ORDER BY 1").fetchall())
    ents = dict(con.execute("SELECT kind, count(*) FROM entities GROUP BY 1 ORDER BY 1").fetchall())
    return {"observations": by_kind, "entities": ents}


def table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist([{k: r.get(k) for k in schema.names} for r in rows], schema=schema)
