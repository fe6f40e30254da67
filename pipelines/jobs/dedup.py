"""MinHash dedup as a job: read → (corpus pass: signatures, bands, connected components) →
drop every cluster member but its smallest id.

    OUT/documents/   kept documents with ``minhash_cluster`` / ``minhash_cluster_size``
    OUT/rejects/     the duplicates (stage ``minhash_dedup``, reason ``near_duplicate``,
                     ``duplicate_of`` in metadata) and unreadable input (stage ``read``)
    OUT/job.json     per-stage counts, clusters, the LSH threshold

The corpus pass (``pipelines.corpus.MinhashClusters``) runs on the engine's side: in this
process locally, mapInArrow + DataFrame connected components with ``--master``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from core.config import StrictModel
from core.engine import Engine
from core.io import atomic_write_text
from core.local_engine import LocalEngineConfig
from core.spark import SparkConfig
from filters.minhash import MinhashConfig
from filters.minhash_clusters import MinhashDuplicates
from pipelines.corpus import MinhashClusters, cluster_summary
from pipelines.inputs import InputSpec, ReadLimits, list_input_files
from pipelines.job import DocJob, JobResult, Layout
from pipelines.phase import DocPhase


class DedupJobConfig(StrictModel):
    minhash: MinhashConfig = MinhashConfig()
    read: ReadLimits = ReadLimits()
    local: LocalEngineConfig = LocalEngineConfig()
    spark: SparkConfig = SparkConfig()


def run(cfg: DedupJobConfig, inputs: list[InputSpec], out: str | Path, engine: Engine,
        resume: bool = False, log=print) -> dict[str, Any]:
    started = time.monotonic()
    out = Path(out)
    list_input_files(inputs)  # missing inputs fail before any work
    log(f"── phase 1: read ({engine.name}) ──")
    read = engine.run(DocPhase(DocJob("dedup-read", inputs, [], cfg.read), Layout.phase(out, 1, "read", False),
                               overwrite=not resume))
    log("── corpus: MinHash signatures, LSH bands, connected components ──")
    assignments = engine.compute(MinhashClusters(cfg.minhash), read.documents_dir)
    clusters = cluster_summary(assignments, cfg.minhash)
    log(f"   {clusters['clusters']} clusters, {clusters['duplicates']} duplicates")
    log(f"── phase 2: dedup ({engine.name}) ──")
    job = DocJob("dedup", [InputSpec(path=str(read.documents_dir), format="documents")],
                 [MinhashDuplicates(assignments)], cfg.read)
    dedup: JobResult = engine.run(DocPhase(job, Layout.phase(out, 2, "dedup", True), overwrite=not resume))
    counts = {"read": read.counts["read"].model_dump(), "minhash_dedup": dedup.counts["minhash_dedup"].model_dump()}
    summary = {"name": "dedup", "engine": engine.name, "stages": list(counts), "counts": counts,
               "corpus": {"minhash": clusters}, "kept": dedup.kept, "seconds": round(time.monotonic() - started, 1),
               "config": cfg.model_dump()}
    atomic_write_text(out / "job.json", json.dumps(summary, indent=2, default=str))
    return summary
