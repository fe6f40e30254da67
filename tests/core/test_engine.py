"""``make_engine``: the one place a ``--master`` (and ``--spark-conf``) is read."""

from __future__ import annotations

import pytest

from core.engine import make_engine, submitted_master
from core.errors import UserError
from core.local_engine import LocalEngine, LocalEngineConfig
from core.spark import SparkConfig


def test_no_master_is_the_local_engine_with_its_settings(monkeypatch):
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)  # not launched by spark-submit
    assert submitted_master() is None
    engine = make_engine(None, LocalEngineConfig(tasks=3, workers=5), SparkConfig())
    assert isinstance(engine, LocalEngine) and engine.cfg == LocalEngineConfig(tasks=3, workers=5)


def test_spark_conf_is_checked_before_any_session_starts(monkeypatch):
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    with pytest.raises(UserError, match="needs --master"):
        make_engine(None, LocalEngineConfig(), SparkConfig(), ["spark.executor.memory=2g"])
    with pytest.raises(UserError, match="KEY=VALUE"):
        make_engine("local[1]", LocalEngineConfig(), SparkConfig(), ["spark.executor.memory"])


@pytest.mark.spark
def test_a_master_is_the_spark_engine_with_its_settings(spark):
    # the shared local[2] session is running: getOrCreate hands it back, with the settings recorded
    engine = make_engine("local[2]", LocalEngineConfig(), SparkConfig(input_partitions=3),
                         ["spark.sql.shuffle.partitions=4"])
    assert engine.name == "spark" and engine.session is spark
    assert engine.cfg.master == "local[2]" and engine.cfg.input_partitions == 3
    assert engine.cfg.conf == {"spark.sql.shuffle.partitions": "4"}
