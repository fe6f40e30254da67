"""Spark plumbing every Spark entry point shares: the one SparkSession factory, the one
Arrow -> Spark schema, the input partition count, and the one-line failure message.

It lives in ``core`` because both ``pipelines/`` and ``swe_envs/`` run on Spark (through
``core.spark_engine``) and ``swe_envs`` never imports ``pipelines``. pyspark is imported
inside the functions: nothing here needs it until a session is asked for.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pyarrow as pa
from pydantic import Field

from core.config import StrictModel


class SparkConfig(StrictModel):
    master: str = "local[2]"
    app_name: str = "glm5-recipe"
    driver_memory: str = "2g"
    shuffle_partitions: int = Field(default=8, gt=0)
    # partitions of the input file list; 0 = Spark's default parallelism
    input_partitions: int = Field(default=0, ge=0)
    log_level: str = "ERROR"
    # any other Spark setting, e.g. {"spark.executor.memory": "8g"}
    conf: dict[str, str] = {}


def spark_session(cfg: SparkConfig):
    """Get (or create) the SparkSession described by ``cfg``."""
    # Executors must run the interpreter that has our packages installed (the venv), not
    # whatever `python3` is first on PATH; users on a cluster set PYSPARK_PYTHON themselves.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(cfg.master)
        .appName(cfg.app_name)
        .config("spark.driver.memory", cfg.driver_memory)
        .config("spark.sql.shuffle.partitions", str(cfg.shuffle_partitions))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    for key, value in cfg.conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(cfg.log_level)
    return session


def worker_error(err: BaseException) -> str:
    """The useful line of a Spark failure: the Python worker's own exception, not the JVM trace."""
    text = str(err)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if "Error:" in ln or "Exception:" in ln:
            return ln
    return lines[0] if lines else type(err).__name__


def spark_schema(schema: pa.Schema):
    """The Spark type of an Arrow schema (a ``mapInArrow`` output type): pyspark's own Arrow
    conversion, every column nullable (as Spark makes a ``mapInArrow`` output's columns anyway)."""
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(f.name, f.dataType, True) for f in from_arrow_schema(schema)])


def input_partitions(session: Any, cfg: SparkConfig, items: int) -> int:
    """Partitions for a list of ``items`` inputs (files, mining units): ``cfg.input_partitions``
    or the cluster's default parallelism, never more than there are items, at least one."""
    return max(1, min(cfg.input_partitions or session.sparkContext.defaultParallelism, items))
