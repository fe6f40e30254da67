"""The ``Engine`` protocol: where work runs, and the one place a ``--master`` is read.

Every job takes an engine and never asks which one it has. An engine does six things:

- ``run(work)``: a piece of work with one implementation per engine, side by side in its own
  module (``work.local(engine)`` / ``work.spark(engine)``) — a per-document phase
  (``pipelines.phase.DocPhase``), the issue–PR miner (``swe_envs.mining.mine.Mining``). The
  engine picks the implementation that is its own;
- ``table(path)``: a written dataset as the engine's own table (its path locally, read with
  DuckDB/Arrow; a DataFrame on Spark);
- ``compute(corpus_pass, documents_dir)``: a cross-document rule with ``local(documents_dir)``
  and ``spark(df)`` implementations that must agree (MinHash clusters, template lines, …);
- ``map_rows(fn, table, schema)``: rows through a function in parallel (worker processes over
  lists of rows locally; ``mapInArrow`` over a DataFrame on Spark);
- ``connect(work)`` + ``fan_out(work, items, out, on_event)``: independent tasks (``Work``,
  e.g. one repo-version's Docker validation) on local threads or one Spark task each;
- ``service_host()``: the address a service the workers call (a local LLM server) must bind.

Implementations: ``core.local_engine.LocalEngine`` and ``core.spark_engine.SparkEngine``; they
live in ``core`` because ``pipelines`` and ``swe_envs`` both run on them and ``swe_envs``
never imports ``pipelines``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol, TypeVar

from core.errors import UserError
from core.local_engine import LocalEngine, LocalEngineConfig
from core.spark import SparkConfig, spark_session
from core.spark_engine import SparkEngine

T = TypeVar("T", covariant=True)
Event = tuple[str, Any]
Emit = Callable[[str, Any], None]


class TwoSided(Protocol[T]):
    """Work with one implementation per engine that must give the same result."""

    def local(self, engine: LocalEngine) -> T: ...

    def spark(self, engine: SparkEngine) -> T: ...


class CorpusPass(Protocol[T]):
    """One cross-document rule over a written documents dataset, one implementation per engine."""

    def local(self, documents_dir: str) -> T: ...

    def spark(self, df: Any) -> T: ...


class Work(Protocol):
    """One fan-out job's unit of work; must pickle (it travels to Spark executors): configs and
    paths only. Events are ``(kind, value)`` pairs the job turns into output rows; ``"log"``
    events are log lines."""

    def connect(self) -> Any:
        """Where the work runs, e.g. the Docker engine; a clear ``UserError`` when it cannot."""
        ...

    def start(self, conn: Any, workdir: Path, emit: Emit) -> Any:
        """State shared by the items run here (builder, sandbox); files go under ``workdir``."""
        ...

    def run(self, state: Any, item: Any, emit: Emit) -> None: ...

    def stop(self, state: Any) -> None:
        """Kill what still runs (containers) and release the state; called on interruption too."""
        ...

    def failed(self, item: Any, reason: str) -> list[Event]:
        """The events that count an item whose task died outside ``run``."""
        ...


class Engine(Protocol):
    name: str

    def run(self, work: TwoSided[T]) -> T: ...

    def table(self, path: str | Path) -> Any: ...

    def compute(self, corpus_pass: CorpusPass[T], documents_dir: str | Path) -> T: ...

    def map_rows(self, fn: Callable[[Iterable[dict]], Iterable[dict]], table: Any, schema: Any,
                 progress: str | None = None) -> Any: ...

    def connect(self, work: Work) -> None: ...

    def fan_out(self, work: Work, items: list[Any], out: Path, on_event: Emit) -> None: ...

    def service_host(self) -> str: ...

    def close(self) -> None: ...


def submitted_master() -> str | None:
    """The master ``spark-submit`` was given when it launched this process (it hands the
    Python driver its JVM through ``PYSPARK_GATEWAY_PORT``); None for a plain ``python -m``."""
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):
        return None
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # attach to spark-submit's JVM, whose properties hold its options
    return SparkConf().get("spark.master", None)


def make_engine(master: str | None, local: LocalEngineConfig, spark: SparkConfig,
                conf: list[str] | None = None) -> LocalEngine | SparkEngine:
    """``master`` (``--master``: ``local[2]``, ``spark://HOST:PORT``, ``yarn`` …; under
    spark-submit, its own) picks Spark with ``spark`` settings plus ``conf`` (``--spark-conf``
    ``KEY=VALUE`` pairs); none: the local engine with ``local`` settings."""
    master = master or submitted_master()
    if not master:
        if conf:
            raise UserError("--spark-conf needs --master")
        return LocalEngine(local)
    pairs = [c.partition("=") for c in conf or []]
    bad = [k for k, eq, _ in pairs if not eq or not k.strip()]
    if bad:
        raise UserError(f"--spark-conf wants KEY=VALUE, got: {', '.join(bad)}")
    cfg = spark.model_copy(update={"master": master, "conf": spark.conf | {k.strip(): v for k, _, v in pairs}})
    return SparkEngine(spark_session(cfg), cfg)
