"""The ``Engine`` protocol: what a job asks of the machine it runs on, and nothing else.

A job alternates per-document phases (a ``DocJob`` run into a ``Layout``) with corpus passes
(a quantile, template-line counts, MinHash clusters, …). An engine does three things:

- ``run``: a per-document phase (datatrove's local executor, or Spark's ``mapInArrow``);
- ``table``: a written documents directory as the engine's own table (a path for local
  implementations, which read it with DuckDB/Arrow; a DataFrame on Spark);
- ``compute``: a corpus pass — any object with ``local(documents_dir)`` and ``spark(df)``,
  the two implementations of one rule, side by side in the rule's module. The engine picks
  the one that is its own, so a job never asks which engine it has.

Implementations: ``pipelines.local.LocalEngine`` and ``pipelines.spark.SparkEngine``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, TypeVar

from core.spark import SparkConfig, spark_session
from pipelines.job import DocJob, JobResult, Layout
from pipelines.local import LocalEngine, LocalEngineConfig
from pipelines.spark import SparkEngine

T = TypeVar("T", covariant=True)


class CorpusPass(Protocol[T]):
    """One cross-document rule with an implementation per engine that must give the same result."""

    def local(self, documents_dir: str) -> T: ...

    def spark(self, df: Any) -> T: ...


class Engine(Protocol):
    name: str

    def run(self, job: DocJob, layout: Layout, overwrite: bool = False) -> JobResult: ...

    def table(self, documents_dir: str | Path) -> Any: ...

    def compute(self, corpus_pass: CorpusPass[T], documents_dir: str | Path) -> T: ...

    def service_host(self) -> str:
        """The address a service the steps call (e.g. a local LLM server) must bind so that
        the engine's workers can reach it."""
        ...


def make_engine(master: str | None, local: LocalEngineConfig, spark: SparkConfig) -> Engine:
    """``master`` None: datatrove locally; otherwise a Spark session at that master."""
    if master is None:
        return LocalEngine(local)
    cfg = spark.model_copy(update={"master": master})
    return SparkEngine(spark_session(cfg), cfg)
