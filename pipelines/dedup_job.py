"""MinHash dedup as a job: read → (corpus pass: signatures, bands, connected components) →
drop every cluster member but its smallest id.

    OUT/documents/   kept documents with ``minhash_cluster`` / ``minhash_cluster_size``
    OUT/rejects/     the duplicates (stage ``minhash_dedup``, reason ``near_duplicate``,
                     ``duplicate_of`` in metadata) and unreadable input (stage ``read``)
    OUT/job.json     per-stage counts, clusters, the LSH threshold

The corpus pass runs on the engine's side: ``clusters_from_documents`` locally,
``clusters_spark`` (mapInArrow + DataFrame connected components) with ``--master``.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from core.config import StrictModel
from core.shards import atomic_write_text
from filters.minhash import MinhashConfig, MinhashDuplicates, clusters_from_documents, clusters_spark
from pipelines.engine import LocalEngine, SparkEngine
from pipelines.job import DocJob, JobResult, Layout
from pipelines.local import LocalEngineConfig
from pipelines.readers import InputSpec, ReadLimits, list_input_files
from pipelines.spark import SparkConfig


class DedupConfig(StrictModel):
    minhash: MinhashConfig = MinhashConfig()
    read: ReadLimits = ReadLimits()
    local: LocalEngineConfig = LocalEngineConfig()
    spark: SparkConfig = SparkConfig()


def find_clusters(engine: LocalEngine | SparkEngine, documents_dir: Path, cfg: MinhashConfig) -> dict:
    if isinstance(engine, SparkEngine):
        return clusters_spark(engine.dataframe(documents_dir), cfg)
    return clusters_from_documents(str(documents_dir), cfg)


def cluster_summary(assignments: dict[str, tuple[str, int]], cfg: MinhashConfig) -> dict[str, Any]:
    sizes = Counter(size for rep, size in {(r, s) for r, s in assignments.values()})
    return {
        "clusters": sum(sizes.values()),
        "duplicates": sum(1 for doc, (rep, _) in assignments.items() if doc != rep),
        "cluster_sizes": dict(sorted(sizes.items())),
        "lsh": f"{cfg.bands} bands x {cfg.rows} rows, word {cfg.ngram}-grams, Jaccard threshold ~{cfg.threshold():.2f}",
    }


def run_dedup(inputs: list[InputSpec], out: str | Path, cfg: DedupConfig, engine: LocalEngine | SparkEngine,
              resume: bool = False, log=print) -> dict[str, Any]:
    started = time.monotonic()
    out = Path(out)
    list_input_files(inputs)  # missing inputs fail before any work
    log(f"── phase 1: read ({engine.name}) ──")
    read = engine.run(DocJob("dedup-read", inputs, [], cfg.read), Layout.phase(out, 1, "read", False),
                      overwrite=not resume)
    log("── corpus: MinHash signatures, LSH bands, connected components ──")
    assignments = find_clusters(engine, read.documents_dir, cfg.minhash)
    clusters = cluster_summary(assignments, cfg.minhash)
    log(f"   {clusters['clusters']} clusters, {clusters['duplicates']} duplicates")
    log(f"── phase 2: dedup ({engine.name}) ──")
    job = DocJob("dedup", [InputSpec(path=str(read.documents_dir), format="documents")],
                 [MinhashDuplicates(assignments)], cfg.read)
    dedup: JobResult = engine.run(job, Layout.phase(out, 2, "dedup", True), overwrite=not resume)
    counts = {"read": read.counts["read"].model_dump(), "minhash_dedup": dedup.counts["minhash_dedup"].model_dump()}
    summary = {"name": "dedup", "engine": engine.name, "stages": list(counts), "counts": counts,
               "corpus": {"minhash": clusters}, "kept": dedup.kept, "seconds": round(time.monotonic() - started, 1),
               "config": cfg.model_dump()}
    atomic_write_text(out / "job.json", json.dumps(summary, indent=2, default=str))
    return summary
