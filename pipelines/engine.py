"""Engines for multi-phase jobs: datatrove's local executor or Spark, behind one interface.

A job alternates per-document phases (a ``DocJob`` run into a ``Layout``) with corpus passes
(a quantile, template-line counts, …). Per-document phases run through ``run_local`` /
``run_spark``; for a corpus pass the engine hands the rule either the documents directory
(local implementations, DuckDB/Arrow) or a Spark DataFrame over it (Spark implementations).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pipelines.job import DocJob, JobResult, Layout
from pipelines.local import LocalEngineConfig, run_local
from pipelines.spark import SparkConfig, run_spark, spark_session


@dataclass
class LocalEngine:
    cfg: LocalEngineConfig
    name: str = "local"

    def run(self, job: DocJob, layout: Layout, overwrite: bool = False) -> JobResult:
        return run_local(job, layout, self.cfg, overwrite=overwrite)


@dataclass
class SparkEngine:
    session: object
    cfg: SparkConfig
    name: str = "spark"

    def run(self, job: DocJob, layout: Layout, overwrite: bool = False) -> JobResult:
        return run_spark(job, layout, self.session, self.cfg, overwrite=overwrite)

    def dataframe(self, documents_dir: str | Path):
        return self.session.read.parquet(str(Path(documents_dir).absolute()))


def make_engine(master: str | None, local: LocalEngineConfig, spark: SparkConfig) -> LocalEngine | SparkEngine:
    """``master`` None: datatrove locally; otherwise a Spark session at that master."""
    if master is None:
        return LocalEngine(local)
    cfg = spark.model_copy(update={"master": master})
    return SparkEngine(spark_session(cfg), cfg)
