"""Fan independent Docker work out over a local thread pool or Spark executors.

A job (``validate``, ``evaluate``, ``terminal check``) describes its work as a ``Work``: items
resolved on the driver (one repo-version group, one terminal task …) and what to do with
one of them where it runs. The fan-out decides where that is, so the job never asks:

- ``LocalPool``: threads on this machine, one shared state (Docker client, image builder,
  sandbox) made once; events reach the driver the moment they happen and files land
  directly in OUT.
- ``SparkPool``: one Spark task per item, each on an executor with its own Docker engine
  (the executor's ``DOCKER_HOST`` or the default socket) and its own state. The task works
  in a scratch directory; the files it wrote there and its events (rows, log lines) come
  back with its result, and the driver writes them into OUT — the same files, the same
  rows as the local pool. The scratch path, where events or files name it, becomes OUT.

Events are ``(kind, value)`` pairs the job's ``on_event`` turns into output rows; ``"log"``
events are log lines. A task that dies on its executor (no Docker engine there, a lost
executor after Spark's retries) becomes ``work.failed(item, reason)``'s events: counted
rows with the reason, never a lost item.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from core.spark import SparkConfig, spark_session, worker_error

Event = tuple[str, Any]
Emit = Callable[[str, Any], None]


class Work(Protocol):
    """One job's unit of work; must pickle (it travels to Spark executors): configs and paths only."""

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


class LocalPool:
    """Threads on this machine; ``workers`` items at once."""

    name = "local"

    def __init__(self, workers: int = 1):
        self.workers = max(1, workers)
        self._conn: Any = None

    def prepare(self, work: Work) -> None:
        """Connect before any output is touched: no engine here = one clear error, OUT intact."""
        self._conn = work.connect()

    def run(self, work: Work, items: list[Any], out: Path, on_event: Emit) -> None:
        lock = threading.Lock()

        def emit(kind: str, value: Any) -> None:
            with lock:  # rows of parallel items never interleave mid-write
                on_event(kind, value)

        conn = self._conn if self._conn is not None else work.connect()
        state = work.start(conn, out, emit)
        stopping = threading.Event()

        def one(item: Any) -> None:
            try:
                work.run(state, item, emit)
            except Exception as err:  # one broken item never takes the batch down
                if stopping.is_set():  # killed by the interruption, not broken: nothing to count
                    return
                for kind, value in work.failed(item, f"internal: {type(err).__name__}: {err}"):
                    emit(kind, value)

        pool = ThreadPoolExecutor(max_workers=self.workers)
        try:
            for fut in [pool.submit(one, item) for item in items]:
                fut.result()
        except BaseException:
            # interrupted: kill the running containers first, so the workers return at once
            stopping.set()
            work.stop(state)
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown()
        work.stop(state)


def _files_under(root: Path) -> list[tuple[str, bytes]]:
    return [(p.relative_to(root).as_posix(), p.read_bytes())
            for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()]


def executor_task(work: Work, item: Any) -> dict[str, Any]:
    """What one Spark task does on its executor: connect, start, run one item, stop, pack up."""
    events: list[Event] = []

    def emit(kind: str, value: Any) -> None:
        events.append((kind, value))

    workdir = Path(tempfile.mkdtemp(prefix="swe-fanout-"))
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


class SparkPool:
    """One Spark job of one task per item, submitted from driver threads so results arrive as
    tasks finish (an interrupted run keeps what finished); at most ``in_flight`` at once
    (default: the cluster's default parallelism, i.e. its executor cores)."""

    def __init__(self, session: Any, in_flight: int = 0):
        self.session = session
        self.name = f"spark {session.sparkContext.master}"
        self.in_flight = in_flight or max(1, session.sparkContext.defaultParallelism)

    @classmethod
    def at(cls, master: str, cfg: SparkConfig | None = None) -> SparkPool:
        cfg = (cfg or SparkConfig()).model_copy(update={"master": master})
        return cls(spark_session(cfg))

    def prepare(self, work: Work) -> None:
        """Nothing on the driver: it may have no Docker engine; each executor connects to its own."""

    def run(self, work: Work, items: list[Any], out: Path, on_event: Emit) -> None:
        sc = self.session.sparkContext
        group = f"swe-fanout-{uuid.uuid4().hex[:12]}"
        lock = threading.Lock()

        def one(item: Any) -> None:
            sc.setJobGroup(group, f"{type(work).__name__} item", interruptOnCancel=True)
            try:
                (res,) = sc.parallelize([item], 1).map(lambda it: executor_task(work, it)).collect()
            except Exception as err:
                if cancelled.is_set():
                    return
                events: Iterable[Event] = work.failed(item, f"executor: {worker_error(err)}")
            else:
                events = self._land(res, out)
            with lock:
                for kind, value in events:
                    on_event(kind, value)

        cancelled = threading.Event()
        pool = ThreadPoolExecutor(max_workers=min(self.in_flight, max(1, len(items))))
        try:
            for fut in [pool.submit(one, item) for item in items]:
                fut.result()
        except BaseException:
            # interrupted: Spark kills the tasks' Python workers; containers they started are
            # swept by the next run on that executor (their owner process is gone)
            cancelled.set()
            sc.cancelJobGroup(group)
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown()

    @staticmethod
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


def make_pool(master: str | None, workers: int, conf: list[str] | None = None) -> LocalPool | SparkPool:
    """``master`` None: the local pool; else a Spark session at that master (``local[2]``,
    ``spark://HOST:PORT``, ``yarn`` …) with ``conf`` settings given as ``KEY=VALUE``."""
    from core.errors import UserError

    if not master:
        if conf:
            raise UserError("--spark-conf needs --master")
        return LocalPool(workers)
    pairs = [c.partition("=") for c in conf or []]
    bad = [k for k, eq, _ in pairs if not eq or not k.strip()]
    if bad:
        raise UserError(f"--spark-conf wants KEY=VALUE, got: {', '.join(bad)}")
    return SparkPool.at(master, SparkConfig(app_name="swe-envs", conf={k.strip(): v for k, _, v in pairs}))
