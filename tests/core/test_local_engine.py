"""The local engine: fan-out on threads, row maps in worker processes, corpus passes in this process."""

from __future__ import annotations

import os
from functools import partial

from core.local_engine import LocalEngine, LocalEngineConfig
from tests.core.engine_work import Echo, RowCount, collect, squares


def test_fan_out_runs_every_item_and_counts_a_broken_one(tmp_path):
    work = Echo()
    rows, logs = collect(LocalEngine(LocalEngineConfig(workers=3)), work, ["a", "b", "boom", "c"], tmp_path)
    assert rows["boom"] == {"item": "boom", "error": "internal: RuntimeError: boom went the item"}
    assert rows["a"]["file"] == str(tmp_path / "items" / "a.txt")
    assert (tmp_path / "items" / "c.txt").read_text() == f"c via engine at {tmp_path / 'items' / 'c.txt'}\n"
    assert logs == ["did a", "did b", "did c"] and work.stopped == 1


def test_map_rows_runs_parts_in_worker_processes_and_keeps_their_order():
    parts = [[{"n": 1}, {"n": 2}], [], [{"n": 3}], [{"n": 4}]]
    fn = partial(squares, offset=10)
    with LocalEngine(LocalEngineConfig(workers=2)) as engine:
        rows = engine.map_rows(fn, parts)
        again = engine.map_rows(fn, parts[:1])  # the same pool serves the next map
    assert [(r["n"], r["square"]) for r in rows] == [(1, 11), (1, None), (2, 14), (3, 19), (3, None), (4, 26)]
    assert os.getpid() not in {r["pid"] for r in rows + again}
    one = LocalEngine(LocalEngineConfig(workers=1)).map_rows(fn, parts)  # one worker: in this process
    assert [(r["n"], r["square"]) for r in one] == [(r["n"], r["square"]) for r in rows]
    assert {r["pid"] for r in one} == {os.getpid()}


def test_compute_uses_the_local_implementation(small_job):
    engine = LocalEngine()
    assert engine.name == "local" and engine.service_host() == "127.0.0.1"
    assert engine.table(small_job.documents_dir) == str(small_job.documents_dir)
    assert engine.compute(RowCount(), small_job.documents_dir) == ("local", small_job.kept)
    assert engine.run(_Sided()) == "local side"


class _Sided:
    def local(self, engine):
        return f"{engine.name} side"

    def spark(self, engine):
        return f"{engine.name} side"
