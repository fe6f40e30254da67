"""The fan-out itself, with a small real ``Work`` that needs no Docker (files + rows, a failing item):
the local pool and Spark executors give the same files and rows; a task dying on its executor is a
counted row; an interrupted Spark run cancels its tasks and leaves the session usable."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from core.errors import UserError
from swe_envs.fanout import LocalPool, SparkPool, make_pool


class Echo:
    """Writes ``items/<item>.txt`` under its workdir and emits a row naming that file; ``boom`` raises
    inside ``run``, ``slow`` sleeps (to be interrupted)."""

    def __init__(self):
        self.stopped = 0

    def connect(self):
        return "engine"

    def start(self, conn, workdir: Path, emit):
        return {"dir": workdir, "conn": conn}

    def run(self, st, item: str, emit) -> None:
        if item == "boom":
            raise RuntimeError("boom went the item")
        if item == "slow":
            time.sleep(60)
        path = st["dir"] / "items" / f"{item}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{item} via {st['conn']} at {path}\n")
        emit("log", f"did {item}")
        emit("row", {"item": item, "file": str(path), "nested": {"paths": [str(path)]}})

    def stop(self, st) -> None:
        self.stopped += 1

    def failed(self, item: str, reason: str):
        return [("row", {"item": item, "error": reason})]


def _collect(pool, work, items, out: Path) -> tuple[dict, list[str]]:
    rows, logs = {}, []

    def on_event(kind, value):
        if kind == "log":
            logs.append(value)
        else:
            rows[value["item"]] = value

    pool.prepare(work)
    pool.run(work, items, out, on_event)
    return rows, sorted(logs)


def test_local_pool_runs_every_item_and_counts_a_broken_one(tmp_path):
    work = Echo()
    rows, logs = _collect(LocalPool(3), work, ["a", "b", "boom", "c"], tmp_path)
    assert rows["boom"] == {"item": "boom", "error": "internal: RuntimeError: boom went the item"}
    assert rows["a"]["file"] == str(tmp_path / "items" / "a.txt")
    assert (tmp_path / "items" / "c.txt").read_text() == f"c via engine at {tmp_path / 'items' / 'c.txt'}\n"
    assert logs == ["did a", "did b", "did c"] and work.stopped == 1


def test_make_pool_checks_its_options():
    assert isinstance(make_pool(None, 2), LocalPool) and make_pool(None, 2).workers == 2
    with pytest.raises(UserError, match="needs --master"):
        make_pool(None, 1, ["spark.executor.memory=2g"])
    with pytest.raises(UserError, match="KEY=VALUE"):
        make_pool("local[1]", 1, ["spark.executor.memory"])


@pytest.fixture
def by_value():
    """Executors unpickle ``Echo`` by value: a test module need not be importable on them."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


@pytest.mark.spark
def test_spark_executors_give_the_local_pools_files_and_rows(spark, by_value, tmp_path):
    items = ["a", "b", "boom", "c"]
    local_rows, local_logs = _collect(LocalPool(2), Echo(), items, tmp_path / "local")
    rows, logs = _collect(SparkPool(spark), Echo(), items, tmp_path / "spark")
    # the executor's scratch paths in the rows now name the driver's OUT
    as_local = json.loads(json.dumps(rows).replace(str(tmp_path / "spark"), str(tmp_path / "local")))
    assert {k: v for k, v in as_local.items() if k != "boom"} == {k: v for k, v in local_rows.items() if k != "boom"}
    assert rows["boom"]["error"].startswith("executor: ") and "boom went the item" in rows["boom"]["error"]
    assert logs == local_logs
    for item in ("a", "b", "c"):  # written on the executor, naming where the driver put it
        path = tmp_path / "spark" / "items" / f"{item}.txt"
        assert path.read_text() == f"{item} via engine at {path}\n"
    assert sorted(p.name for p in (tmp_path / "spark").rglob("*") if p.is_file()) == ["a.txt", "b.txt", "c.txt"]


@pytest.mark.spark
def test_interrupted_spark_run_cancels_its_tasks(spark, by_value, tmp_path):
    pool = SparkPool(spark, in_flight=2)
    seen: list[str] = []

    def on_event(kind, value):
        if kind == "row":
            seen.append(value["item"])
            raise KeyboardInterrupt  # what Ctrl-C / SIGTERM does on the driver

    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        pool.run(Echo(), ["a", "slow"], tmp_path, on_event)
    assert seen == ["a"] and time.monotonic() - t0 < 45  # the 60 s task was cancelled, not waited for
    assert spark.sparkContext.parallelize([1, 2], 2).sum() == 3  # the session still works
