"""The local engine: work on this machine, in worker processes and threads.

What ``core.engine.Engine`` asks, done here:

- ``run``: the local implementation of a two-sided piece of work (``work.local(engine)``);
- ``table`` / ``compute``: a written dataset is its path, a corpus pass reads it in this process;
- ``map_rows``: each part (a list of row dicts) through a function in a forkserver process
  pool of ``workers`` processes (in this process when ``workers`` is 1), the rows it yields
  returned in part order. The pool is made on first use and kept until ``close``: its
  workers import the function's modules once per engine, not once per map;
- ``connect`` / ``fan_out``: fan-out work (``core.engine.Work``) on ``workers`` threads with one
  shared state (Docker client, image builder, sandbox) made once; events reach the caller the
  moment they happen and files land directly in OUT.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field

from core.config import StrictModel
from core.thread_fanout import run_each


class LocalEngineConfig(StrictModel):
    # pieces the input is split into (datatrove tasks); each resumes on its own
    tasks: int = Field(default=4, gt=0)
    # processes (row maps, datatrove) or threads (fan-out) at once
    workers: int = Field(default=2, gt=0)


def _rows_of(fn: Callable[[Iterable[dict]], Iterable[dict]], part: list[dict]) -> list[dict]:
    return list(fn(part))


@dataclass
class LocalEngine:
    cfg: LocalEngineConfig = field(default_factory=LocalEngineConfig)
    name: str = "local"
    _pool: ProcessPoolExecutor | None = field(default=None, init=False, repr=False)
    _connected: tuple[Any, Any] | None = field(default=None, init=False, repr=False)  # (work, its connection)

    def run(self, work: Any) -> Any:
        return work.local(self)

    def table(self, path: str | Path) -> str:
        return str(path)

    def compute(self, corpus_pass: Any, documents_dir: str | Path) -> Any:
        return corpus_pass.local(self.table(documents_dir))

    def service_host(self) -> str:
        return "127.0.0.1"

    # -- row map -----------------------------------------------------------------------------------
    def map_rows(self, fn: Callable[[Iterable[dict]], Iterable[dict]], parts: Iterable[list[dict]],
                 schema: Any = None, progress: str | None = None) -> list[dict]:
        """``fn`` (picklable: a module function or a ``functools.partial`` of one) over each part;
        the rows as ``fn`` yields them (``schema`` is the Spark engine's business). ``progress``:
        the label of a progress bar, None for none."""
        from tqdm import tqdm

        parts = list(parts)
        bar = tqdm(total=len(parts), desc=progress, unit="task", disable=progress is None, leave=False)
        out: list[dict] = []
        try:
            if self.cfg.workers == 1:
                results: Iterable[list[dict]] = (_rows_of(fn, p) for p in parts)
            else:
                if self._pool is None:
                    self._pool = ProcessPoolExecutor(self.cfg.workers,
                                                      mp_context=multiprocessing.get_context("forkserver"))
                results = self._pool.map(_rows_of, [fn] * len(parts), parts) if parts else []
            for rows in results:
                out += rows
                bar.update()
        finally:
            bar.close()
        return out

    # -- fan-out -----------------------------------------------------------------------------------
    def connect(self, work: Any) -> None:
        """Connect before any output is touched: no engine here = one clear error, OUT intact."""
        self._connected = (work, work.connect())

    def fan_out(self, work: Any, items: list[Any], out: Path, on_event: Callable[[str, Any], None]) -> None:
        """``work.run`` for every item on ``workers`` threads; an item that raises is counted
        through ``work.failed``, never lost; an interruption stops the running items first."""
        lock = threading.Lock()

        def emit(kind: str, value: Any) -> None:
            with lock:  # rows of parallel items never interleave mid-write
                on_event(kind, value)

        conn = self._connected[1] if self._connected and self._connected[0] is work else work.connect()
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

        def interrupted() -> None:  # kill the running containers first, so the workers return at once
            stopping.set()
            work.stop(state)

        run_each(items, one, self.cfg.workers, interrupted)
        work.stop(state)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def __enter__(self) -> LocalEngine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
