"""The Spark engine gives what the local engine gives: fan-out tasks on executors (the same files and
rows; a task dying on its executor is a counted row; an interrupted run cancels its tasks and leaves
the session usable), row maps in ``mapInArrow``, corpus passes on DataFrames."""

from __future__ import annotations

import json
import time
from functools import partial

import pyarrow as pa
import pytest

import tests.core.engine_work as engine_work
from core.local_engine import LocalEngine, LocalEngineConfig
from core.spark import SparkConfig
from core.spark_engine import SparkEngine
from tests.core.engine_work import Echo, RowCount, collect, squares

pytestmark = pytest.mark.spark


@pytest.fixture
def by_value():
    """Executors unpickle the test work by value: a test module need not be importable on them."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(engine_work)
    yield
    cloudpickle.unregister_pickle_by_value(engine_work)


def test_fan_out_on_executors_gives_the_local_engines_files_and_rows(spark, by_value, tmp_path):
    items = ["a", "b", "boom", "c"]
    local_rows, local_logs = collect(LocalEngine(LocalEngineConfig(workers=2)), Echo(), items, tmp_path / "local")
    rows, logs = collect(SparkEngine(spark, SparkConfig()), Echo(), items, tmp_path / "spark")
    # the executor's scratch paths in the rows now name the driver's OUT
    as_local = json.loads(json.dumps(rows).replace(str(tmp_path / "spark"), str(tmp_path / "local")))
    assert {k: v for k, v in as_local.items() if k != "boom"} == {k: v for k, v in local_rows.items() if k != "boom"}
    assert rows["boom"]["error"].startswith("executor: ") and "boom went the item" in rows["boom"]["error"]
    assert logs == local_logs
    for item in ("a", "b", "c"):  # written on the executor, naming where the driver put it
        path = tmp_path / "spark" / "items" / f"{item}.txt"
        assert path.read_text() == f"{item} via engine at {path}\n"
    assert sorted(p.name for p in (tmp_path / "spark").rglob("*") if p.is_file()) == ["a.txt", "b.txt", "c.txt"]


def test_interrupted_fan_out_cancels_its_tasks(spark, by_value, tmp_path):
    engine = SparkEngine(spark, SparkConfig(), in_flight=2)
    seen: list[str] = []

    def on_event(kind, value):
        if kind == "row":
            seen.append(value["item"])
            raise KeyboardInterrupt  # what Ctrl-C / SIGTERM does on the driver

    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        engine.fan_out(Echo(), ["a", "slow"], tmp_path, on_event)
    assert seen == ["a"] and time.monotonic() - t0 < 45  # the 60 s task was cancelled, not waited for
    assert spark.sparkContext.parallelize([1, 2], 2).sum() == 3  # the session still works


def test_map_rows_gives_the_local_engines_rows(spark, by_value):
    fn = partial(squares, offset=10)
    schema = pa.schema([("n", pa.int64()), ("square", pa.int64())])  # pid is dropped: not in the schema
    parts = [[{"n": n} for n in range(i, 40, 3)] for i in range(3)]
    local = LocalEngine(LocalEngineConfig(workers=1)).map_rows(fn, parts, schema)
    df = spark.createDataFrame([(r["n"],) for p in parts for r in p], "n long").repartition(3)
    on_spark = SparkEngine(spark, SparkConfig()).map_rows(fn, df, schema)
    assert sorted(on_spark.columns) == ["n", "square"]
    def key(row):
        return row[0], row[1] is None, row[1] or 0

    assert len(local) == 40 + 20
    assert sorted(((r["n"], r["square"]) for r in local), key=key) == sorted(
        ((r["n"], r["square"]) for r in on_spark.collect()), key=key)


def test_compute_uses_the_spark_implementation(small_job, spark):
    engine = SparkEngine(spark, SparkConfig())
    assert engine.service_host() == "127.0.0.1"  # a local master: the driver's loopback
    assert engine.compute(RowCount(), small_job.documents_dir) == ("spark", small_job.kept)
