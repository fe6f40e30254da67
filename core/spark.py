"""The one SparkSession factory (and failure message) every Spark entry point shares: pipelines' jobs, the SWE fan-out.

It lives in ``core`` because both ``pipelines/`` and ``swe_envs/`` start sessions and
``swe_envs`` never imports ``pipelines``.
"""

from __future__ import annotations

import os
import sys

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
