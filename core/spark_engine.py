"""The Spark engine: work on a Spark session's executors (``local[N]``, a standalone cluster, YARN …).

What ``core.engine.Engine`` asks, done here:

- ``run``: the Spark implementation of a two-sided piece of work (``work.spark(engine)``);
- ``table`` / ``compute``: a written dataset is a DataFrame, a corpus pass a DataFrame job;
- ``map_rows``: a DataFrame through a row function inside ``mapInArrow`` (rows of each
  partition in, rows of ``schema`` out);
- ``connect`` / ``fan_out``: one Spark task per fan-out item, each on an executor with its own
  Docker engine (the executor's ``DOCKER_HOST`` or the default socket) and its own state. The
  task works in a scratch directory; the files it wrote there and its events come back with its
  result, and the driver writes them into OUT — the same files, the same rows as the local
  engine. The scratch path, where events or files name it, becomes OUT. A task that dies on its
  executor (no Docker engine there, a lost executor after Spark's retries) becomes
  ``work.failed(item, reason)``'s events: counted rows with the reason, never a lost item.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from core.spark import SparkConfig, spark_schema, worker_error
from core.thread_fanout import run_each

BATCH_ROWS = 512
Event = tuple[str, Any]


def _batch(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([{k: r.get(k) for k in schema.names} for r in rows], schema=schema)


def arrow_map(fn: Callable[[Iterable[dict[str, Any]]], Iterable[dict[str, Any]]], schema: pa.Schema):
    """A mapInArrow body: rows of the input batches through ``fn``, re-batched to ``schema``."""

    def body(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        buf: list[dict[str, Any]] = []
        for row in fn(r for b in batches for r in b.to_pylist()):
            buf.append(row)
            if len(buf) >= BATCH_ROWS:
                yield _batch(buf, schema)
                buf = []
        if buf:
            yield _batch(buf, schema)

    return body


def _files_under(root: Path) -> list[tuple[str, bytes]]:
    return [(p.relative_to(root).as_posix(), p.read_bytes())
            for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()]


def executor_task(work: Any, item: Any) -> dict[str, Any]:
    """What one fan-out task does on its executor: connect, start, run one item, stop, pack up."""
    events: list[Event] = []

    def emit(kind: str, value: Any) -> None:
        events.append((kind, value))

    workdir = Path(tempfile.mkdtemp(prefix="glm5-fanout-"))
    try:
        state = work.start(work.connect(), workdir, emit)
        try:
            work.run(state, item, emit)
        finally:
            work.stop(state)
        # JSON on the way back: plain rows, and the scratch path is findable for the rewrite
        return {"workdir": str(workdir), "events": json.dumps(events, default=str),
                "files": _files_under(workdir)}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _land(res: dict[str, Any], out: Path) -> list[Event]:
    """Write a task's files into OUT and point its events and files (a trial's result.json names
    its task dir) at OUT instead of the executor's scratch dir."""
    scratch, here = res["workdir"].encode(), str(out).encode()
    for rel, data in res["files"]:
        dest = out / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data.replace(scratch, here))
        tmp.replace(dest)
    text = res["events"].replace(json.dumps(res["workdir"])[1:-1], json.dumps(str(out))[1:-1])
    return [tuple(e) for e in json.loads(text)]


@dataclass
class SparkEngine:
    session: Any
    cfg: SparkConfig
    name: str = "spark"
    # fan-out tasks in flight at once; 0 = the cluster's default parallelism (its executor cores)
    in_flight: int = 0

    def run(self, work: Any) -> Any:
        return work.spark(self)

    def table(self, path: str | Path):
        return self.session.read.parquet(str(Path(path).absolute()))

    def compute(self, corpus_pass: Any, documents_dir: str | Path) -> Any:
        return corpus_pass.spark(self.table(documents_dir))

    def service_host(self) -> str:
        if self.cfg.master.startswith("local"):
            return "127.0.0.1"
        # executors on other machines call the service: bind the address Spark gave the driver
        return self.session.sparkContext.getConf().get("spark.driver.host", "127.0.0.1")

    def map_rows(self, fn: Callable[[Iterable[dict]], Iterable[dict]], df: Any, schema: pa.Schema,
                 progress: str | None = None):
        """``df`` through ``fn`` in ``mapInArrow``, as a DataFrame of ``schema`` (lazy, like any
        DataFrame; ``progress`` is the local engine's business)."""
        return df.mapInArrow(arrow_map(fn, schema), spark_schema(schema))

    def connect(self, work: Any) -> None:
        """Nothing on the driver: it may have no Docker engine; each executor connects to its own."""

    def fan_out(self, work: Any, items: list[Any], out: Path, on_event: Callable[[str, Any], None]) -> None:
        """One Spark job of one task per item, submitted from driver threads so results arrive as
        tasks finish (an interrupted run keeps what finished)."""
        sc = self.session.sparkContext
        group = f"glm5-fanout-{uuid.uuid4().hex[:12]}"
        lock = threading.Lock()
        cancelled = threading.Event()

        def one(item: Any) -> None:
            sc.setJobGroup(group, f"{type(work).__name__} item", interruptOnCancel=True)
            try:
                (res,) = sc.parallelize([item], 1).map(lambda it: executor_task(work, it)).collect()
            except Exception as err:
                if cancelled.is_set():
                    return
                events: Iterable[Event] = work.failed(item, f"executor: {worker_error(err)}")
            else:
                events = _land(res, out)
            with lock:
                for kind, value in events:
                    on_event(kind, value)

        in_flight = self.in_flight or max(1, sc.defaultParallelism)
        def interrupted() -> None:
            # Spark kills the tasks' Python workers; containers they started are swept by the
            # next run on that executor (their owner process is gone)
            cancelled.set()
            sc.cancelJobGroup(group)

        run_each(items, one, min(in_flight, max(1, len(items))), interrupted)

    def close(self) -> None:
        """The session outlives the engine: tests and a driver's several jobs share it."""

    def __enter__(self) -> SparkEngine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
